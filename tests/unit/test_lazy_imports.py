"""The seam between declaring and running, counted over the source (ast): the run modules import what they
need at their top; a declaring module imports a run module only inside an entry point, saying so in a
comment; and the other imports inside functions (issue 36: 155 before the seam) do not come back."""

from __future__ import annotations

import ast
from pathlib import Path

import airflow_tfjob
from airflow_tfjob.triggers.loader import RUN_MODULES as RUN_MODULES_LOADED

PACKAGE = Path(airflow_tfjob.__file__).parent
#: Imports inside functions elsewhere (the loader's and the entries' imports of run modules left out):
#: lower it when one goes; a new one needs a reason the seam cannot give.
MOST_OTHER_LAZY_IMPORTS = 7


def _lazy_imports(path: Path) -> list[tuple[int, list[str]]]:
    """(line, modules named) of every import statement inside a function of the module at ``path``."""
    found: list[tuple[int, list[str]]] = []

    def walk(node: ast.AST, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if inside and isinstance(child, ast.Import):
                found.append((child.lineno, [a.name for a in child.names]))
            elif inside and isinstance(child, ast.ImportFrom):
                found.append((child.lineno, [str(child.module), *(f"{child.module}.{a.name}" for a in child.names)]))
            walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(ast.parse(path.read_text()), False)
    return found


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[1] == "local":
            continue
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_run_module(dotted: str) -> bool:
    name = dotted.rpartition(".")[2]
    return name == "runs" or name.endswith("_runs")


#: The run modules: each entry point's body, imported at the entry (or, for the triggers, by the loader),
#: found by their name as the loader finds the triggers' (triggers/loader.py) and the load_time contracts
#: do (tests/house_contracts.py): the operator's follow too (operators/follow_runs.py).
RUN_MODULES = {m for m in _modules() if _is_run_module(m)}


def test_the_run_modules_are_found_and_the_loader_takes_the_triggers() -> None:
    assert {
        "airflow_tfjob.operators.runs",
        "airflow_tfjob.operators.follow_runs",
        "airflow_tfjob.sensors.runs",
        "airflow_tfjob.sensors.event_runs",
        "airflow_tfjob.triggers.runs",
    } <= RUN_MODULES
    assert set(RUN_MODULES_LOADED) == {m for m in RUN_MODULES if m.startswith("airflow_tfjob.triggers.")}


def test_the_run_modules_import_at_their_top() -> None:
    modules = _modules()
    assert RUN_MODULES <= set(modules)
    assert {m: _lazy_imports(modules[m]) for m in RUN_MODULES if _lazy_imports(modules[m])} == {}


def test_a_run_module_is_imported_inside_an_entry_point_with_a_comment() -> None:
    for module, path in _modules().items():
        lines = path.read_text().splitlines()
        for line, names in _lazy_imports(path):
            if RUN_MODULES & set(names):
                assert "# the run module" in lines[line - 1], f"{module}:{line}: say why it is imported here"


def test_the_other_imports_inside_functions_do_not_grow() -> None:
    other = [
        (module, line)
        for module, path in _modules().items()
        if module != "airflow_tfjob.triggers.loader"
        for line, names in _lazy_imports(path)
        if not RUN_MODULES & set(names)
    ]
    assert len(other) <= MOST_OTHER_LAZY_IMPORTS, f"{len(other)} imports inside functions: {other[-5:]}"
