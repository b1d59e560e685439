"""No import circle among the provider's modules (the local cluster has its own contract): every import
that runs, lazy ones included, as import-linter's graph has them. An import under ``if TYPE_CHECKING:``
never runs and is left out (two annotations still name a module that imports theirs: build.convert's
JobParameters, jobs.adapter's JobStatus)."""

from __future__ import annotations


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import one another, directly or not (Tarjan's components of two or more)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(edges[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def test_the_search_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_the_provider_has_no_import_circle() -> None:
    import grimp  # import-linter's graph: a development tool, which the compatibility lane's venvs lack

    graph = grimp.build_graph("airflow_tfjob", exclude_type_checking_imports=True, cache_dir=None)
    ours = {m for m in graph.modules if not m.startswith("airflow_tfjob.local")}
    edges = {m: graph.find_modules_directly_imported_by(m) & ours for m in ours}
    assert _circles(edges) == []
