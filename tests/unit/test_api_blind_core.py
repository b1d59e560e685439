"""The core is API-blind: no core module imports a job API's own package, names a kind's row or compares
with a kind's or an API's name. What differs between APIs is asked of their adapters (airflow_tfjob/jobs/).

Read from the source (ast), so a lazy import inside a function counts as much as one at the top. Nothing
here lists the core: it is every module of the provider but the packages excluded below, each with its
one reason, and the few modules that say themselves, in a ``# names-job-apis: <why>`` line, that they
name an API. A module added anywhere else is checked from its first line.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import airflow_tfjob
from airflow_tfjob.jobs import adapter, kinds

PACKAGE = Path(airflow_tfjob.__file__).parent
#: The line by which a module outside the excluded packages says it names a job API, and why.
MARKER = re.compile(r"^# names-job-apis: (?P<why>\S.*)$", re.M)


def _api_package(module: str) -> str:
    """The path under airflow_tfjob/ of the API whose adapter is ``module``: the adapter's package when it
    has one of its own (``jobs/trainjob/``), else the adapter module (``jobs/v1.py``)."""
    parts = module.split(".")[1:]
    if parts[-1] == "adapter" and parts[:-1] != ["jobs"]:
        return "/".join(parts[:-1]) + "/"
    return "/".join(parts) + ".py"


#: Each job API's own code, found from the adapter registry, so a new API is excluded as it is registered.
API_CODE = {_api_package(module): api for api, module in adapter.ADAPTER_MODULES.items()}
#: What is not the core (paths under airflow_tfjob/, a package ending in "/"), with the reason, once each.
EXCLUDED = {
    **{path: f"the {api} API's own code (its adapter is in jobs/adapter.py's ADAPTER_MODULES)" for path, api in API_CODE.items()},
    Path(kinds.__file__).relative_to(PACKAGE).as_posix(): "the kind table itself: the rows this check looks for",
    "local/": "the embedded cluster: one controller per kind, as the training-operator has (its own walls: "
    "the local-* contracts)",
}
#: The rows of the kind table by their constant's name (TFJOB, TRAINJOB, PYTORCHJOB...).
KIND_CONSTANTS = frozenset(
    name for name, value in vars(kinds).items() if isinstance(value, kinds.JobKind) and name != "DEFAULT_KIND"
)
#: The words that name a kind or an API: kind, plural, singular, group, API.
API_WORDS = frozenset(
    word
    for kind in kinds.ALL_KINDS
    for word in (
        kind.kind,
        kind.kind.lower(),
        kind.plural,
        kind.singular,
        kind.group,
        kind.api_version,
        kind.api,
    )
) - {kinds.GROUP}  # "kubeflow.org" alone names every v1 kind's group, not one API
#: The modules and packages that are one API's own, by dotted name.
API_PACKAGES = tuple(f"airflow_tfjob.{path.removesuffix('/').removesuffix('.py').replace('/', '.')}" for path in API_CODE)


def _named_for_tfjob(function: str) -> bool:
    """A TFJob-named function (``build_tfjob``): the generic call with TFJob's row,
    which is what it is for, so naming the row there is no knowledge of an API."""
    return "tfjob" in function.lower()


class _Finder(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: list[str] = []
        self.functions: list[str] = []

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.startswith(API_PACKAGES):
                self.found.append(f"line {node.lineno}: imports {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        names = [f"{module}.{alias.name}" for alias in node.names]
        for name in (module, *names):
            if name.startswith(API_PACKAGES) and (name == module or not module.startswith(API_PACKAGES)):
                self.found.append(f"line {node.lineno}: imports {name}")

    def _constant(self, name: str, lineno: int) -> None:
        if name not in KIND_CONSTANTS:
            return
        if name == "TFJOB" and self.functions and _named_for_tfjob(self.functions[-1]):
            return
        self.found.append(f"line {lineno}: names the kind row {name}")

    def visit_Name(self, node: ast.Name) -> None:
        self._constant(node.id, node.lineno)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._constant(node.attr, node.lineno)
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        for side in (node.left, *node.comparators):
            items = side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
            for item in items:
                if isinstance(item, ast.Constant) and item.value in API_WORDS:
                    self.found.append(f"line {node.lineno}: compares with {item.value!r}")
        self.generic_visit(node)


def api_knowledge(source: str) -> list[str]:
    """What in a module's source names a job API: its package imported, a kind's row, a comparison with
    a kind's or an API's name."""
    finder = _Finder()
    finder.visit(ast.parse(source))
    return finder.found


def _modules(root: Path) -> Iterator[str]:
    for path in sorted(root.rglob("*.py")):
        yield path.relative_to(root).as_posix()


def _excluded(module: str) -> bool:
    return any(module == key or (key.endswith("/") and module.startswith(key)) for key in EXCLUDED)


def declared_api_aware(root: Path = PACKAGE) -> dict[str, str]:
    """The modules outside the excluded packages that say they name a job API, with what they say."""
    found = {}
    for module in _modules(root):
        said = MARKER.search((root / module).read_text())
        if said and not _excluded(module):
            found[module] = said["why"]
    return found


def core_modules(root: Path = PACKAGE) -> list[str]:
    """The API-blind core: every module of ``root`` (an airflow_tfjob tree) neither excluded nor declared."""
    declared = declared_api_aware(root)
    return [m for m in _modules(root) if not _excluded(m) and m not in declared]


def core_violations(root: Path = PACKAGE) -> dict[str, list[str]]:
    """Each core module under ``root`` that names a job API, with where."""
    found = {}
    for module in core_modules(root):
        problems = api_knowledge((root / module).read_text())
        if problems:
            found[module] = problems
    return found


def test_no_core_module_names_a_job_api() -> None:
    assert core_violations() == {}, "ask the job's adapter (airflow_tfjob/jobs/adapter.py) instead"


def test_the_core_is_most_of_the_provider_and_each_exclusion_is_real() -> None:
    core = core_modules()
    assert len(core) >= 100 and "follow/core.py" in core and "operators/generic.py" in core
    assert API_CODE["jobs/trainjob/"] == "trainer.kubeflow.org" and API_CODE["jobs/v1.py"] == "kubeflow.org/v1"
    assert all((PACKAGE / key).exists() for key in EXCLUDED), "EXCLUDED names what does not exist"


def test_a_module_that_declares_it_names_an_api_does_and_says_why() -> None:
    declared = declared_api_aware()
    assert "operators/api_choice.py" in declared and len(declared) <= 5, "a handful at most: ask the adapter"
    # A declaration outlives its reason unnoticed otherwise: one that names no API must go.
    assert [m for m in declared if not api_knowledge((PACKAGE / m).read_text())] == []


def test_a_new_module_of_a_core_package_is_checked(tmp_path: Path) -> None:
    (tmp_path / "follow").mkdir()
    (tmp_path / "follow" / "new.py").write_text("def f(kind):\n    return kind is TRAINJOB\n")
    (tmp_path / "jobs" / "trainjob").mkdir(parents=True)
    (tmp_path / "jobs" / "trainjob" / "new.py").write_text("X = TRAINJOB\n")
    (tmp_path / "preflight").mkdir()
    (tmp_path / "preflight" / "said.py").write_text("# names-job-apis: a table by API\nX = TRAINJOB\n")
    assert core_modules(tmp_path) == ["follow/new.py"]
    assert core_violations(tmp_path) == {"follow/new.py": ["line 2: names the kind row TRAINJOB"]}


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("from airflow_tfjob.jobs.trainjob import pods\n", "imports airflow_tfjob.jobs.trainjob"),
        (
            "def f():\n    from airflow_tfjob.jobs.trainjob.status import interpret\n",
            "imports airflow_tfjob.jobs.trainjob",
        ),
        ("from airflow_tfjob.jobs import trainjob\n", "imports airflow_tfjob.jobs.trainjob"),
        ("import airflow_tfjob.jobs.trainjob.pods\n", "imports airflow_tfjob.jobs.trainjob"),
        ("from airflow_tfjob.jobs.v1 import interpret\n", "imports airflow_tfjob.jobs.v1"),
        ("def f(kind):\n    return kind is TRAINJOB\n", "names the kind row TRAINJOB"),
        ("def f(kind):\n    return kinds.PYTORCHJOB\n", "names the kind row PYTORCHJOB"),
        ("def default(kind=TFJOB):\n    return kind\n", "names the kind row TFJOB"),
        ("def f(job):\n    return job.get('kind') == 'TrainJob'\n", "compares with 'TrainJob'"),
        ("def f(api):\n    return api in ('tfjob', 'auto')\n", "compares with 'tfjob'"),
        (
            "def f(kind):\n    return kind.group != 'trainer.kubeflow.org'\n",
            "compares with 'trainer.kubeflow.org'",
        ),
    ],
)
def test_the_check_sees_each_way_of_naming_an_api(source: str, what: str) -> None:
    found = api_knowledge(source)
    assert found and what in found[0]


def test_the_check_lets_the_core_ask_adapters_and_keep_tfjob_aliases() -> None:
    allowed = (
        "from airflow_tfjob.jobs.adapter import adapter_for\n"
        "def f(kind, job):\n    return adapter_for(kind).interpret(job)\n"
        "def create_tfjob(self, body):\n    return self.create_job(TFJOB, body)\n"
        "def list_job_pods(name, kind='TFJob'):\n    return name\n"  # a recorded public default
        "RULES = {'TFJob': (), 'PyTorchJob': ()}\n"  # a table keyed by kind: data
    )
    assert api_knowledge(allowed) == []
