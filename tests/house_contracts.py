"""An import-linter contract type for what the built-in ones cannot say: "not imported at module load".

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


class LoadTimeContract(Contract):
    """Source modules do not import the forbidden modules at load, directly or through other modules.

    Configuration options:
        - source_modules:    modules (and their descendants) whose import must stay light.
        - forbidden_modules: modules or external packages they must not import at load.
        - ignore_modules:    modules (and descendants) the search does not pass through, for a part
                             that is imported only by a call (optional).
    """

    type_name = "load_time"

    source_modules = fields.SetField(subfield=fields.StringField())
    forbidden_modules = fields.SetField(subfield=fields.StringField())
    ignore_modules = fields.SetField(subfield=fields.StringField(), required=False)

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
        starts = sorted(m for m in graph.modules if _matches(m, sources))
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
