"""The local cluster's walls that import-linter's contracts do not hold.

The layers (model < store < admission | node < controllers | apiserver < kueue < the top), the order
inside the store, the node, the controllers, the v1 kinds and Kueue, and the absence of import circles
are contracts (`local-*` in pyproject.toml, run by `make lint`). What stays here: the narrow doors (a
room that may take only some modules of a room below it), what the local cluster takes from the
provider and that the provider never imports it (both fail closed, whatever rooms the provider grows),
the top's size and the rooms' stated contracts, one name per class, and the import graph's circles
counted module by module, the figure issue 36 asks for. Read from the source, so a forbidden import
fails here before it is ever run."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grimp
import tomllib

import airflow_tfjob

PROVIDER = Path(airflow_tfjob.__file__).parent
LOCAL = PROVIDER / "local"
_CONTRACTS = tomllib.loads((PROVIDER.parent / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
#: The rooms: the packages the `local-layers` contract places (it is exhaustive, so a new room is entered
#: there, in its layer, and nowhere else).
ROOMS = tuple(
    name.strip()
    for layer in next(c for c in _CONTRACTS if c["id"] == "local-layers")["layers"]
    for name in layer.replace(":", "|").split("|")
    if (LOCAL / name.strip() / "__init__.py").is_file()
)

# (room, room below it) -> the only modules of the lower room the upper one may import: a plug-in takes
# extension points, not internals.
DOORS: dict[tuple[str, str], set[str]] = {
    # The log endpoint reads the kubelet's log buffers, nothing else of the node.
    ("apiserver", "node"): {"podlogs"},
    # The TrainJob controller compares its JobSet with the webhook's defaults applied (a pure function).
    ("controllers", "admission"): {"trainjobs"},
    # Kueue: a manager on the reconcile core, kinds and views through the API server's extension points,
    # its CRDs' schemas checked by the walk the job kinds' are.
    ("kueue", "controllers"): {"reconciler"},
    ("kueue", "apiserver"): {"extensions", "request"},
    ("kueue", "admission"): {"schemacheck"},
    ("kueue", "node"): set(),
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


def test_a_room_takes_only_the_modules_its_door_names() -> None:
    wrong = []
    for path in sorted(LOCAL.rglob("*.py")):
        room = _room_of(path)
        for module in _imports(path):
            target = module.split(".")[2:] if module.startswith("airflow_tfjob.local.") else []
            door = DOORS.get((room, target[0])) if target else None
            if door is not None and len(target) >= 2 and target[1] not in door:
                wrong.append(f"{path.relative_to(LOCAL)} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_the_local_cluster_has_no_import_circle() -> None:
    """Module by module, every import counted (in functions and under TYPE_CHECKING too): the strongly
    connected components of more than one module (or a module importing itself), none."""
    graph = grimp.build_graph("airflow_tfjob", cache_dir=None)
    modules = {m for m in graph.modules if m.startswith("airflow_tfjob.local")}
    edges = {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}
    assert _circles(edges) == []


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of `edges` that hold a circle, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            successor = next(successors, None)
            if successor is not None:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges[successor]))))
                elif successor in on_stack:
                    low[node] = min(low[node], index[successor])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges[node]:
                    found.append(sorted(component))
    return found


def test_the_circle_count_sees_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}) == [["a", "b", "c"], ["e"]]


def test_no_two_classes_of_the_local_cluster_share_a_name() -> None:
    names = Counter(
        node.name
        for path in LOCAL.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
    )
    assert sorted(name for name, count in names.items() if count > 1) == []


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
