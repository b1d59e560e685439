"""MkDocs hook: the tables of the operators' and sensors' parameters (docs/api/parameters.md) and of the job kinds
(docs/howto/other-kinds.md), generated from the code.

The rows come from ``airflow_tfjob.operators.params`` (what each parameter does, which kinds have it,
whether it is templated, what kind of parameter it is) and the types and defaults as
``KubeflowJobOperator.__init__``'s signature writes them out (checked against the rows' defaults by
tests/unit/test_operator_params.py), read by griffe (statically: building the docs imports neither Airflow nor the Kubernetes clients). The
page carries the marker line; the hook replaces it, so the table cannot drift from the code.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path
from typing import Any

import griffe
from markdown.extensions.toc import slugify

from airflow_tfjob.jobs.kinds import KINDS
from airflow_tfjob.operators import params


def _sibling(name: str) -> Any:
    # MkDocs loads this file by its path, not as part of a package: its neighbour is loaded the same way.
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The API pages' Griffe extension: a default naming a module constant is shown as its value there too.
constant_value = _sibling("docs_griffe").constant_value

MARKER = "<!-- parameters-table -->"
KINDS_MARKER = "<!-- kinds-table -->"
SENSOR_MARKER = "<!-- sensor-parameters-table -->"
SENSOR_GUIDE = "howto/sensors.md"
SUCCESS = {
    "tf": "the Chief or Master if there is one, else the Workers as `success_policy` says",
    "master-else-workers": "the Master if there is one, else every Worker",
    "master": "the Master",
    "all-workers": "every Worker",
}
ROLES = {
    "job": "names or finds the job",
    "shortcut": "replica count of one type",
    "manifest": "shapes the manifest",
    "follow": "how the job is followed",
    "own": "the task's behaviour",
    "policy": "which template files may be read",
}


# Where the how-to pages describe the parameters: the TFJobOperator guide's tables (one row per parameter
# or group), then the other how-to pages' tables, then the other kinds' page for the parameters only
# they have. Paths relative to docs/.
GUIDE = "howto/tfjob-operator.md"
OTHER_KINDS = "howto/other-kinds.md"
# The generic operator's names for what TFJobOperator's guide calls otherwise.
GUIDE_NAMES = {"job": "tfjob"}


def described_in(docs_dir: Path) -> dict[str, str]:
    """Parameter name -> the link (relative to docs/) of the how-to section that describes it."""
    links: dict[str, str] = {}
    others = sorted(str(p.relative_to(docs_dir)) for p in (docs_dir / "howto").glob("*.md"))
    for page in [GUIDE, *(p for p in others if p != GUIDE)]:
        section = ""
        for line in (docs_dir / page).read_text().splitlines():
            if heading := re.match(r"#+ (.*)", line):
                section = slugify(heading.group(1), "-")
            elif line.startswith("| `"):
                for name in re.findall(r"`([a-z_]+)`", line.split("|")[1]):
                    links.setdefault(name, f"{page}#{section}")
    other = (docs_dir / OTHER_KINDS).read_text()
    for name in re.findall(r"`([a-z_]+)`", other):
        links.setdefault(name, OTHER_KINDS)
    return links


def _class(path: str) -> Any:
    module, _, name = path.rpartition(".")
    return griffe.load(module, search_paths=["."])[name]


def _signature(cls: Any) -> dict[str, griffe.Parameter]:
    init = cls.members["__init__"]
    signature = {p.name: p for p in init.parameters if p.name not in ("self", "kwargs")}
    for parameter in signature.values():
        value = constant_value(parameter.default, init)
        if value is not None:
            parameter.default = value
    return signature


def _relative(link: str, page_dir: str) -> str:
    return f"{'../' * len(Path(page_dir).parts)}{link}"


def sensor_table(docs_dir: Path, page_dir: str = "api") -> str:
    """KubeflowJobSensor's own parameters; templated ones from its ``template_fields``."""
    cls = _class("airflow_tfjob.sensors.generic.KubeflowJobSensor")
    templated = ast.literal_eval(str(cls.members["template_fields"].value))
    guide = (docs_dir / SENSOR_GUIDE).read_text()
    lines = ["| Parameter | Type | Default | Templated |", "|---|---|---|---|"]
    for name, parameter in _signature(cls).items():
        default = "" if parameter.default is None else str(parameter.default)
        cells = [
            _name(name, _relative(SENSOR_GUIDE, page_dir) if f"`{name}`" in guide else None),
            _cell(parameter.annotation),
            _cell(default),
            "yes" if name in templated else "",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _name(name: str, link: str | None) -> str:
    """The parameter's cell: its name, a link to the how-to section that describes it where there is one
    (a link on the name rather than a column of its own keeps the table narrow enough for a laptop)."""
    return f"[`{name}`]({link})" if link else f"`{name}`"


def _cell(value: object) -> str:
    # A code span keeps its pipes out of the table's cells.
    return f"`{value}`" if value not in (None, "", "None") else ""


def parameters_table(
    docs_dir: Path,
    page_dir: str = "api",
    table: params.ParameterSet = params.GENERIC,
    signature: dict[str, Any] | None = None,
) -> str:
    """The table's Markdown, a line per row of ``table``; links are written relative to ``page_dir``
    (the page's folder in docs/). ``signature``: the written-out parameters by name (annotation and
    default as the source spells them); KubeflowJobOperator.__init__'s by default."""
    if signature is None:
        signature = _signature(_class("airflow_tfjob.operators.generic.KubeflowJobOperator"))
    links = described_in(docs_dir)
    header = [
        "Parameter",
        "What it does",
        "Type",
        "Default",
        "Templated",
        "Role",
        # One column, not one per kind: five more columns would not fit a 1280 px screen.
        "Kinds",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.rows:
        parameter = signature.get(row.name)
        if parameter is None:  # the drift test (tests/unit/test_operator_params.py) reports this first
            raise ValueError(f"{row.name} is in operators/params.py but not in KubeflowJobOperator.__init__")
        kinds = "every kind" if row.kinds is None else ", ".join(k.kind for k in KINDS if k.kind in row.kinds)
        default = str(parameter.default)
        link = links.get(GUIDE_NAMES.get(row.name, row.name))
        cells = [
            _name(row.name, _relative(link, page_dir) if link else None),
            row.doc.replace("|", "\\|"),
            _cell(parameter.annotation),
            _cell(default),
            "yes" if row.templated else "",
            ROLES[row.role],
            kinds,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def kinds_table() -> str:
    """One row per kind from airflow_tfjob.jobs.kinds: what a DAG author needs to shape a job of it."""
    lines = [
        "| Kind | Replica types (shortcuts) | Exactly one | Container | Port | Default restart policy "
        "| Succeeds when | Parameters not every kind has |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind in KINDS:
        # The parameters some kinds lack (the replica shortcuts are in the second column).
        own = [
            row.name
            for row in params.GENERIC.rows
            if row.kinds is not None and kind.kind in row.kinds and row.role != "shortcut"
        ]
        cells = [
            kind.kind,
            ", ".join(f"{t} (`{t.lower()}`)" for t in kind.replica_types),
            ", ".join(kind.single_replica_types) + (" (required)" if kind.required_types else ""),
            f"`{kind.container}`",
            f"{kind.port} (`{kind.port_name}`)",
            kind.restart_policy,
            SUCCESS[kind.success_rule],
            ", ".join(f"`{name}`" for name in own),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, **_: Any) -> str:
    if KINDS_MARKER in markdown:
        markdown = markdown.replace(KINDS_MARKER, kinds_table())
    docs_dir, page_dir = Path(config["docs_dir"]), str(Path(page.file.src_uri).parent)
    if SENSOR_MARKER in markdown:
        markdown = markdown.replace(SENSOR_MARKER, sensor_table(docs_dir, page_dir))
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, parameters_table(docs_dir, page_dir))
    return markdown
