"""The documentation site's guards: `make docs` (run by `make test`) must fail on a broken link or anchor,
and its generated parameter table must cover every parameter of the operators.

The whole site is built by `make docs`, not here (once is enough); these tests show that the settings
it builds with do catch what they are meant to, on a two-page site that builds in about a second.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import yaml

from airflow_tfjob.jobs.kinds import KINDS
from airflow_tfjob.operators import params

ROOT = Path(__file__).resolve().parents[2]


def _site_config() -> dict:
    # mkdocs.yml has no custom YAML tags, so plain YAML reads it.
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(
    tmp_path: Path, pages: dict[str, str], nav: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Build a site of ``pages`` with the project's strictness and link validation settings."""
    config = _site_config()
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in pages.items():
        (docs / name).write_text(text)
    site = {
        "site_name": "check",
        "docs_dir": str(docs),
        "site_dir": str(tmp_path / "site"),
        "strict": config["strict"],
        "validation": config["validation"],
        "markdown_extensions": config["markdown_extensions"],
        "nav": [{name.removesuffix(".md"): name} for name in (pages if nav is None else nav)],
    }
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(site))
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-f", str(tmp_path / "mkdocs.yml")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )


def test_the_site_settings_build_a_site_whose_links_resolve(tmp_path: Path) -> None:
    result = _build(
        tmp_path, {"index.md": "# Home\n\n[on](other.md#part)\n", "other.md": "# Other\n\n## Part\n"}
    )
    assert result.returncode == 0, result.stderr


def test_the_site_settings_fail_on_broken_links(tmp_path: Path) -> None:
    # One build for every kind of broken link (each build costs a second or two).
    broken = {
        "[gone](missing.md)": "'missing.md', but the target is not found",
        "[gone](other.md#no-such-part)": "the doc 'other.md' does not contain an anchor '#no-such-part'",
        "[gone](#nowhere)": "there is no such anchor on this page",
        "[gone](../README.md)": "'../README.md', but the target is not found",
    }
    result = _build(
        tmp_path, {"index.md": "# Home\n\n" + "\n\n".join(broken), "other.md": "# Other\n\n## Part\n"}
    )
    assert result.returncode != 0
    for complaint in broken.values():
        assert complaint in result.stderr


def test_a_page_left_out_of_the_nav_fails_the_build(tmp_path: Path) -> None:
    result = _build(tmp_path, {"index.md": "# Home\n", "stray.md": "# Stray\n"}, nav=["index.md"])
    assert result.returncode != 0
    assert "stray.md" in result.stderr


def _parameter(line: str) -> str:
    """The parameter a table line is about: the first cell's code span (linked to its how-to or not)."""
    found = re.match(r"\| \[?`([a-z_]+)`", line)
    assert found, line
    return found.group(1)


def test_the_parameter_table_has_every_parameter_and_kind() -> None:
    table = _script("docs_parameters").parameters_table(ROOT / "docs").splitlines()
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    assert header[-1] == "Kinds"
    names = [_parameter(line) for line in table[2:]]
    assert names == [row.name for row in params.GENERIC.rows]
    by_name = {_parameter(line): line for line in table[2:]}

    def kinds(name: str) -> str:
        return by_name[name].strip().strip("|").split("|")[-1].strip()

    # A replica shortcut names exactly the kinds with that replica type; a parameter of all of them says so.
    assert kinds("ps") == ", ".join(kind.kind for kind in KINDS if "PS" in kind.replica_types)
    assert kinds("master") == ", ".join(kind.kind for kind in KINDS if "Master" in kind.replica_types)
    assert kinds("image") == "every kind"


def test_every_parameter_is_described_in_a_how_to() -> None:
    # A new parameter needs a row in the TFJobOperator guide's tables (or a mention on the other kinds'
    # page when only they have it): the generated table links each parameter to it.
    links = _script("docs_parameters").described_in(ROOT / "docs")
    names = _script("docs_parameters").GUIDE_NAMES
    undescribed = [row.name for row in params.GENERIC.rows if names.get(row.name, row.name) not in links]
    assert undescribed == [], f"parameters no how-to page describes: {undescribed}"


def test_the_hook_fills_only_the_page_with_the_marker() -> None:
    hook = _script("docs_parameters")
    page = SimpleNamespace(file=SimpleNamespace(src_uri="api/parameters.md"))
    config = {"docs_dir": str(ROOT / "docs")}
    assert hook.on_page_markdown("# Other\n", page=page, config=config) == "# Other\n"
    filled = hook.on_page_markdown(f"# Parameters\n\n{hook.MARKER}\n", page=page, config=config)
    assert hook.MARKER not in filled
    assert "| [`worker`](../howto/tfjob-operator.md#replicas) |" in filled


def _anchors(markdown: str) -> set[str]:
    from markdown.extensions.toc import slugify

    text = re.sub(r"(?ms)^```.*?^```", "", markdown)  # a '#' line in a code block is no heading
    return {slugify(title.replace("`", ""), "-") for title in re.findall(r"(?m)^#+ (.*)$", text)}


def test_the_readme_links_resolve() -> None:
    # MkDocs checks the site's links; the README is outside the site, so its links are checked here.
    readme = (ROOT / "README.md").read_text()
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", readme):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        file = ROOT / path if path else ROOT / "README.md"
        if not file.exists() or (anchor and anchor not in _anchors(file.read_text())):
            broken.append(target)
    assert broken == []


def test_the_readme_quick_start_is_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1]
    first_block = re.search(r"(?s)```\n(.*?)```", quick_start)
    assert first_block and first_block.group(1).split("\n")[:-1] == ["make demo", "make test"]


def test_docstring_roles_become_code_spans() -> None:
    plain = _script("docs_griffe").plain
    text = "See :class:`~airflow_tfjob.jobs.kinds.JobKind`, :func:`airflow_tfjob.build.manifest.build_job` and ``x``."
    assert plain(text) == "See `JobKind`, `airflow_tfjob.build.manifest.build_job` and ``x``."


def test_a_docstring_list_under_its_lead_in_becomes_a_list() -> None:
    separate = _script("docs_griffe").separate_lists
    text = "Lifecycle:\n  * one,\n    going on;\n  * two.\nAfter.\n\n```\nx:\n- not a list\n```"
    assert (
        separate(text)
        == "Lifecycle:\n\n  * one,\n    going on;\n  * two.\nAfter.\n\n```\nx:\n- not a list\n```"
    )
    # An item after an item, or after a blank line, needs nothing.
    assert separate("Text.\n\n- a\n- b") == "Text.\n\n- a\n- b"


def test_a_default_naming_a_constant_is_shown_as_its_value() -> None:
    import griffe

    from airflow_tfjob.follow.cleanup import KILL_GRACE_PERIOD
    from airflow_tfjob.hooks.retry import DEFAULT_RETRY_TIMEOUT

    constant_value = _script("docs_griffe").constant_value
    module = griffe.load("airflow_tfjob.operators.generic", search_paths=[str(ROOT)])
    init = module["KubeflowJobOperator"].members["__init__"]
    defaults = {p.name: constant_value(p.default, init) for p in init.parameters}
    assert defaults["api_retry_timeout"] == repr(DEFAULT_RETRY_TIMEOUT)
    assert defaults["kill_grace_period"] == repr(KILL_GRACE_PERIOD)
    assert defaults["kind"] is None  # a literal default needs no resolving


def test_the_sensor_table_marks_the_templated_parameters() -> None:
    from airflow_tfjob.sensors.generic import KubeflowJobSensor

    rows = _script("docs_parameters").sensor_table(ROOT / "docs").splitlines()[2:]
    cells = {_parameter(row): row.strip().strip("|").split("|")[-1].strip() for row in rows}
    assert set(cells) == {
        "kind",
        "name",
        "namespace",
        "target_condition",
        "kubernetes_conn_id",
        "cluster_context",
        "config_file",
        "in_cluster",
        "api_retry_timeout",
        "deferrable",
    }
    assert {name for name, templated in cells.items() if templated == "yes"} == set(
        KubeflowJobSensor.template_fields
    )
