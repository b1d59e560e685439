"""The local cluster's walls: which room may import which (each room's `__init__` states its contract), what
it takes from the provider, and that the provider never imports it. Read from the source, so a forbidden
import fails here before it is ever run."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import airflow_tfjob

PROVIDER = Path(airflow_tfjob.__file__).parent
LOCAL = PROVIDER / "local"
ROOMS = ("model", "store", "admission", "apiserver", "controllers", "node", "kueue")

# room -> the rooms (or single modules of a room, "room.module") it may import besides itself
ALLOWED: dict[str, set[str]] = {
    "model": set(),
    "store": {"model"},
    # Trainer's webhook validates against its runtime framework, as upstream's does (pure functions).
    "admission": {"model", "store", "controllers.trainjob.build"},
    # yamlfile: the loader of --role and --kueue-objects files (the templates' limits, no content quoted).
    "apiserver": {"model", "store", "admission", "node.podlogs", "credential", "yamlfile"},
    # tls: the serving certificates (the API server's, and the Trainer status server's that the TrainJob
    # controller starts) come from one leaf module.
    # The TrainJob controller compares its JobSet with the webhook's defaults applied (a pure function).
    "controllers": {"model", "store", "node", "admission.trainjobs", "tls"},
    "node": {"model", "store"},
    # Kueue's TrainJob integration computes the JobSet a TrainJob becomes, as upstream's does (pure functions).
    # Its CRDs' schemas (kueue/schema.py) are checked by the walk the job kinds' are (admission/schemacheck.py).
    "kueue": {"model", "store", "controllers.reconciler", "controllers.trainjob.build", "apiserver.extensions",
              "apiserver.request", "yamlfile", "admission.schemacheck"},
}
FROM_PROVIDER = {"airflow_tfjob.constants", "airflow_tfjob.jobs.kinds"}


def _imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def _room_of(path: Path) -> str:
    parts = path.relative_to(LOCAL).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def _allowed(room: str, target: list[str]) -> bool:
    """`target` is a local module path split after `airflow_tfjob.local`."""
    if target[0] == room:
        return True
    return any(rule.split(".") == target[: len(rule.split("."))] for rule in ALLOWED[room])


def test_each_room_imports_only_the_rooms_its_contract_names() -> None:
    wrong = []
    for path in sorted(LOCAL.rglob("*.py")):
        room = _room_of(path)
        if room not in ALLOWED:
            continue  # the top: cluster.py assembles the rooms, the entry points use what they need
        for module in _imports(path):
            if module.startswith("airflow_tfjob.local."):
                target = module.split(".")[2:]
                if not _allowed(room, target):
                    wrong.append(f"{path.relative_to(LOCAL)} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_the_local_cluster_takes_only_constants_and_kinds_from_the_provider() -> None:
    taken = {
        module
        for path in LOCAL.rglob("*.py")
        for module in _imports(path)
        if module.startswith("airflow_tfjob") and not module.startswith("airflow_tfjob.local")
    }
    assert {m for m in taken if not any(m == p or m.startswith(p + ".") for p in FROM_PROVIDER)} == set()


def test_no_provider_module_imports_the_local_cluster() -> None:
    importing = [
        str(path.relative_to(PROVIDER))
        for path in PROVIDER.rglob("*.py")
        if LOCAL not in path.parents and any(m.startswith("airflow_tfjob.local") for m in _imports(path))
    ]
    assert importing == []


def test_the_top_holds_the_rooms_and_a_few_entry_modules_each_room_stating_its_contract() -> None:
    top_modules = sorted(p.name for p in LOCAL.glob("*.py"))
    assert len(top_modules) <= 12, top_modules
    packages = sorted(p.name for p in LOCAL.iterdir() if (p / "__init__.py").is_file())
    assert packages == sorted(ROOMS)
    for init in LOCAL.rglob("__init__.py"):
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init.relative_to(LOCAL)} states no contract"
