"""Import-linter contract types for what the built-in ones cannot say: "not imported at module load"
(``load_time``), and "a run module sits below the modules declaring its entry points", both kinds of
module found from the code (``runs_below_declarations``, at the end).

The provider's walls are import-linter contracts (``[tool.importlinter]`` in pyproject.toml, run by
``make lint``). Most are layers and forbidden imports over every import, lazy ones included. Two walls
are about *when* an import runs, not whether it exists:

- the core rooms may reach an optional integration (Kueue) for a job that needs it, but never at load;
- a DAG file's parse imports the operators, sensors and decorators, and must not pay for ``kubernetes``,
  ``kubernetes_asyncio``, ``aiohttp`` or the cncf.kubernetes hooks: those are imported inside the
  functions that talk to a cluster.

``load_time`` contracts follow only the imports that run when a module is imported: statements at module
level or in a class body, outside ``if TYPE_CHECKING:``. An import inside a function runs when the
function is called, and is left to the other contracts. A chain of such imports from a source module to
a forbidden one breaks the contract, and lint-imports prints it with its line numbers.
"""

from __future__ import annotations

import ast
import importlib.util
from collections import deque
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


@cache
def _source(module: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _load_time_statements(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements that run when the module body runs (functions' bodies excluded)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _load_time_statements(node.body)
            yield from _load_time_statements(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _load_time_statements(block)
            for handler in node.handlers:
                yield from _load_time_statements(handler.body)
        elif isinstance(node, ast.With | ast.For | ast.While):
            yield from _load_time_statements(node.body)
        elif isinstance(node, ast.ClassDef):
            yield from _load_time_statements(node.body)


@cache
def _load_time_imports(module: str) -> tuple[tuple[str, str, int], ...]:
    """``(imported module, name taken from it or "", line)`` for each import ``module`` runs at load."""
    path = _source(module)
    if path is None:
        return ()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, str, int]] = []
    for node in _load_time_statements(ast.parse(path.read_text()).body):
        if isinstance(node, ast.Import):
            found.extend((alias.name, "", node.lineno) for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            base = f"{parent}.{base}" if base else parent
        found.extend((base, alias.name, node.lineno) for alias in node.names)
    return tuple(found)


def _matches(module: str, patterns: set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in patterns)


def is_run_module(module: str) -> bool:
    """A run module by its name, as the triggers' loader finds theirs (triggers/loader.py): ``runs`` or
    ``<what>_runs``, each entry point's body, imported at the entry."""
    name = module.rpartition(".")[2]
    return name == "runs" or name.endswith("_runs")


class LoadTimeContract(Contract):
    """Source modules do not import the forbidden modules at load, directly or through other modules.

    Configuration options:
        - source_modules:    modules (and their descendants) whose import must stay light.
        - forbidden_modules: modules or external packages they must not import at load.
        - ignore_modules:    modules (and descendants) the search does not pass through, for a part
                             that is imported only by a call (optional).
        - skip_run_modules:  "true": the run modules among the sources (found by name, ``runs`` or
                             ``<what>_runs``) are not sources, so that a package's new declaring module
                             is a source and its new run module is not, with no list (optional).
        - forbid_run_modules: "true": every run module of the checked packages, found by name, is
                             forbidden too (optional).
    """

    type_name = "load_time"

    source_modules = fields.SetField(subfield=fields.StringField())
    forbidden_modules = fields.SetField(subfield=fields.StringField())
    ignore_modules = fields.SetField(subfield=fields.StringField(), required=False)
    skip_run_modules = fields.BooleanField(required=False, default=False)
    forbid_run_modules = fields.BooleanField(required=False, default=False)

    def _edges(self, graph: ImportGraph, importer: str) -> Iterator[tuple[str, list[int]]]:
        """The modules ``importer`` imports at load, with the lines; read from its source rather than
        from grimp's graph, which keeps an external package only by its top-level name (the cncf
        provider's hooks would be just ``airflow``)."""
        lines: dict[str, list[int]] = {}
        for base, name, line in _load_time_imports(importer):
            submodule = f"{base}.{name}" if name else ""
            imported = submodule if submodule in graph.modules else base
            lines.setdefault(imported, []).append(line)
        yield from lines.items()

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        sources = {str(m) for m in self.source_modules}  # type: ignore[attr-defined]
        forbidden = {str(m) for m in self.forbidden_modules}  # type: ignore[attr-defined]
        ignored = {str(m) for m in (self.ignore_modules or ())}  # type: ignore[attr-defined]
        starts = sorted(
            m for m in graph.modules
            if _matches(m, sources) and not (self.skip_run_modules and is_run_module(m))  # type: ignore[attr-defined]
        )
        roots = {m.partition(".")[0] for m in starts}
        if self.forbid_run_modules:  # type: ignore[attr-defined]
            forbidden |= {m for m in graph.modules if m.partition(".")[0] in roots and is_run_module(m)}
        chains: list[list[dict[str, object]]] = []
        for start in starts:
            # Breadth first from each source: the shortest load-time chain to a forbidden module.
            came_from: dict[str, tuple[str, list[int]] | None] = {start: None}
            queue = deque([start])
            while queue:
                module = queue.popleft()
                if _matches(module, forbidden):
                    chain: list[dict[str, object]] = []
                    step = module
                    while came_from[step] is not None:
                        previous, lines = came_from[step]  # type: ignore[misc]
                        chain.insert(0, {"importer": previous, "imported": step, "line_numbers": lines})
                        step = previous
                    chains.append(chain)
                    break
                if _matches(module, ignored) and module != start:
                    continue
                if module.partition(".")[0] != start.partition(".")[0]:
                    continue  # an external package: where the search ends, never a way through
                for imported, lines in self._edges(graph, module):
                    if imported not in came_from:
                        came_from[imported] = (module, lines)
                        queue.append(imported)
        return ContractCheck(kept=not chains, metadata={"chains": chains})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for chain in check.metadata["chains"]:
            first = chain[0]["importer"]
            last = chain[-1]["imported"]
            output.print_error(f"{first} imports {last} at module load:")
            for link in chain:
                lines = ", ".join(f"l.{n}" for n in sorted(set(link["line_numbers"])))
                output.print_error(f"-   {link['importer']} -> {link['imported']} ({lines})", bold=False)
            output.new_line()


class RunsBelowDeclarationsContract(Contract):
    """A run module never imports, at load or inside a function, a module that declares the entry points
    whose bodies it holds; both found from the code rather than listed.

    In each of ``packages``: the run modules are found by name (:func:`is_run_module`), with
    ``also_sources`` (a loader that imports them). The declaring modules are the package's other modules
    that import one of its run modules (an entry point's import), and those that import a declaring
    module (a facade): found over the imports of every module but the run modules and the extra sources,
    so that a run module's import of a declaring module cannot hide it. No chain of imports may lead
    from a run module or an extra source to a declaring module.

    Configuration options:
        - packages:     the packages whose run modules sit below their declarations.
        - also_sources: modules held to the same rule (optional).
    """

    type_name = "runs_below_declarations"

    packages = fields.SetField(subfield=fields.StringField())
    also_sources = fields.SetField(subfield=fields.StringField(), required=False)

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        extra = {str(m) for m in (self.also_sources or ())}  # type: ignore[attr-defined]
        chains: list[list[str]] = []
        for package in sorted(str(p) for p in self.packages):  # type: ignore[attr-defined]
            inside = {m for m in graph.modules if m.rpartition(".")[0] == package}
            runs = {m for m in inside if is_run_module(m)}
            sources = runs | (extra & inside)
            declaring: set[str] = set()
            grown = True
            while grown:
                grown = False
                for module in sorted(inside - sources - declaring):
                    if graph.find_modules_directly_imported_by(module) & (runs | declaring):
                        declaring.add(module)
                        grown = True
            for source in sorted(sources):
                for declared in sorted(declaring):
                    chain = graph.find_shortest_chain(importer=source, imported=declared)
                    if chain:
                        chains.append(list(chain))
        return ContractCheck(kept=not chains, metadata={"chains": chains})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for chain in check.metadata["chains"]:
            output.print_error(f"{chain[0]} imports {chain[-1]}, which declares its entry points:")
            output.print_error("-   " + " -> ".join(chain), bold=False)
            output.new_line()
