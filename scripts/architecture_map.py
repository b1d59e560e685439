"""The generated parts of docs/architecture.md: its two module maps and the signatures it shows, drawn
from the code so that a new module, or a changed signature, costs no hand-kept list.

Each generated part sits between two marker comments in the page::

    <!-- generated: map airflow_tfjob -->             a tree: each package and module with the first
    ...                                               sentence of its docstring (a package's: its
    <!-- end generated -->                            __init__, the room's contract), a long one cut
                                                      to its head

    <!-- generated: api follow/parts.py:FollowPart,Follow follow/core.py:follow_job -->
    ...                                               the named classes (``Class.method``: with the
    <!-- end generated -->                            methods named alone) and functions of each
                                                      module: signatures and their docstrings' first
                                                      sentences

A module without a docstring stops the generator (its first sentence is its line on the map), as does
a part naming what the code no longer has. ``python scripts/architecture_map.py`` (``make arch-map``)
rewrites every part from the code; ``--check`` only says which parts differ
(tests/unit/test_architecture_doc.py runs the same comparison). The code is read with
``ast``, never imported: the map costs no import of Airflow or the Kubernetes clients, and a module that
does not import yet (a merge in progress) still has its line.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "airflow_tfjob"
PAGE = ROOT / "docs" / "architecture.md"
#: The page's width (the repository's line length), and the column where a map's descriptions start.
WIDTH = 110
COLUMN = 25
#: A first sentence longer than this is cut to its head on a map (about three lines of it).
LONG = 240
#: A part: its opening marker's arguments, its text, its closing marker.
PART = re.compile(r"(?P<open><!-- generated:(?P<spec>[^>]*?)-->\n)(?P<body>.*?)<!-- end generated -->", re.S)
#: The end of a docstring's first sentence: a full stop before a space and a capital, a backquote or a
#: parenthesis (``e.g. a`` does not end one), or at the end of the first paragraph.
SENTENCE_END = re.compile(r"\.(?=\s+[A-Z`(\"'])|\.$")


class MapError(Exception):
    """A module the generator cannot describe (no docstring, or a marker naming what does not exist)."""


def first_sentence(docstring: str | None, where: str) -> str:
    """The first sentence of a docstring, on one line: what a map and a signature list show of it."""
    if not docstring or not docstring.strip():
        raise MapError(f"{where} has no docstring: its first sentence is its line on the architecture page")
    paragraph = " ".join(docstring.strip().split("\n\n", 1)[0].split())
    end = SENTENCE_END.search(paragraph)
    sentence = paragraph[: end.end()] if end else paragraph
    # A paragraph that opens a list ends with a colon: on its own line it ends there.
    return sentence[:-1] + "." if sentence.endswith(":") else sentence


def _head(sentence: str) -> str:
    """A long first sentence's head: up to its first colon or semicolon outside brackets and quotes (a
    map line says what a module is; the details it lists are the module's to tell)."""
    depth, tick = 0, False
    for i, char in enumerate(sentence):
        if char == "`":
            tick = not tick
        elif not tick and char in "([{":
            depth += 1
        elif not tick and char in ")]}":
            depth -= 1
        elif not tick and depth == 0 and char in ":;" and sentence[i + 1 : i + 2] == " " and i >= 20:
            return sentence[:i] + "."
    return sentence


def map_line(docstring: str | None, where: str) -> str:
    """What a map says of a module or package: its docstring's first sentence, or that sentence's head
    when it runs past LONG characters."""
    sentence = first_sentence(docstring, where)
    return _head(sentence) if len(sentence) > LONG else sentence


def _docstring(path: Path) -> str | None:
    return ast.get_docstring(ast.parse(path.read_text(), filename=str(path)))


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix() if path.is_relative_to(PACKAGE) else path.as_posix()


def _entries(package: Path) -> tuple[list[Path], list[Path]]:
    """A package's modules (``__init__.py`` aside) and its subpackages, each sorted by name."""
    modules = sorted(p for p in package.glob("*.py") if p.name != "__init__.py")
    packages = sorted(p for p in package.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
    return modules, packages


def _wrap(text: str, width: int) -> list[str]:
    # Paths and URLs stay whole: a map line may run past the width rather than break one.
    return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False) or [""]


def _line(indent: int, name: str, description: str) -> list[str]:
    """``name`` at ``indent``, its description from COLUMN (or one space after a longer name), wrapped
    under that column."""
    head = " " * indent + name
    head = head.ljust(COLUMN) if len(head) < COLUMN else head + " "
    first = _wrap(description, WIDTH - len(head))[0]
    rest = _wrap(description[len(first) :].strip(), WIDTH - COLUMN) if len(first) < len(description) else []
    return [head + first, *(" " * COLUMN + line for line in rest)]


def module_map(root: Path, *, summarised: tuple[Path, ...] = ()) -> list[str]:
    """The tree of ``root``'s packages and modules, each with its docstring's first sentence. A package in
    ``summarised`` is one line (its own map is elsewhere)."""
    lines: list[str] = []

    def package(path: Path, indent: int, label: str) -> None:
        description = map_line(_docstring(path / "__init__.py"), f"{_rel(path)}/__init__.py")
        if path in summarised:
            lines.extend(_line(indent, label, f"{description} Its own map is below."))
            return
        lines.extend(_line(indent, label, description))
        modules, packages = _entries(path)
        for module in modules:
            lines.extend(_line(indent + 2, module.name, map_line(_docstring(module), _rel(module))))
        for sub in packages:
            package(sub, indent + 2, f"{sub.name}/")

    package(root, 0, f"{root.relative_to(ROOT).as_posix() if root.is_relative_to(ROOT) else root.name}/")
    return lines


@dataclass(frozen=True)
class _Source:
    rel: str
    tree: ast.Module


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef, indent: int, *, method: bool) -> list[str]:
    """A function's decorators that change how it is called, and its signature (``self``/``cls`` left
    out), wrapped under its opening parenthesis when longer than the page."""
    args = node.args
    if method and not any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list):
        # self or cls: what every reader knows is there.
        if args.posonlyargs:
            args = ast.arguments(**{**vars(args), "posonlyargs": args.posonlyargs[1:]})
        elif args.args:
            args = ast.arguments(**{**vars(args), "args": args.args[1:]})
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    shown = [ast.unparse(d) for d in node.decorator_list]
    lines = [" " * indent + f"@{d}" for d in shown if d in ("classmethod", "staticmethod", "property")]
    head = " " * indent + f"{prefix} {node.name}("
    pieces = _parameters(ast.unparse(args))
    pieces[-1 if pieces else 0 :] = [f"{pieces[-1] if pieces else ''}){returns}"]
    line = head
    for i, piece in enumerate(pieces):
        piece += ", " if i < len(pieces) - 1 else ""
        if len(line) + len(piece.rstrip()) > WIDTH and line.strip() != head.strip():
            lines.append(line.rstrip())
            line = " " * len(head)
        line += piece
    lines.append(line.rstrip())
    return lines


def _parameters(unparsed: str) -> list[str]:
    """The parameters of an unparsed argument list, split at the commas outside brackets and quotes."""
    pieces, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(unparsed):
        if quote:
            quote = "" if char == quote and unparsed[i - 1] != "\\" else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            pieces.append(unparsed[start:i].strip())
            start = i + 1
    tail = unparsed[start:].strip()
    return [*pieces, tail] if tail else pieces


def _comment(text: str, indent: int) -> list[str]:
    return [" " * indent + "# " + line for line in _wrap(text, WIDTH - indent - 2)]


def _documented(node: ast.AST, where: str) -> str | None:
    docstring = ast.get_docstring(node)  # type: ignore[arg-type]
    return first_sentence(docstring, where) if docstring else None


def _class(node: ast.ClassDef, where: str, only: tuple[str, ...] = ()) -> list[str]:
    """A class: its header, its docstring's first sentence, its public fields and methods (``only``: those
    methods alone, in the class's order)."""
    bases = ", ".join(ast.unparse(b) for b in (*node.bases, *node.keywords))
    lines = [f"class {node.name}({bases}):" if bases else f"class {node.name}:"]
    said = _documented(node, where)
    lines.extend(_comment(said, 4) if said else [])
    members = [i for i in node.body if not only or getattr(i, "name", None) in only]
    missing = set(only) - {getattr(i, "name", None) for i in members}
    if missing:
        raise MapError(f"{where} has no method {sorted(missing)} (named by a generated part of {PAGE.name})")
    for item in members:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and not item.target.id.startswith("_"):
            value = f" = {ast.unparse(item.value)}" if item.value is not None else ""
            lines.append(f"    {item.target.id}: {ast.unparse(item.annotation)}{value}")
        elif isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and (
            not item.name.startswith("_") or item.name == "__init__"
        ):
            lines.extend(_signature(item, 4, method=True))
            said = _documented(item, f"{where}.{item.name}")
            lines.extend(_comment(said, 8) if said else [])
    return lines


def _named(source: _Source, name: str, only: tuple[str, ...] = ()) -> list[str]:
    """What a part shows of one name: a class (``only``: with those methods alone), a function, or a
    constant."""
    where = f"{source.rel}:{name}"
    for node in source.tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return _class(node, where, only)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            said = _documented(node, where)
            return [*_signature(node, 0, method=False), *(_comment(said, 4) if said else [])]
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
                return [f"{name} = {ast.unparse(node.value)}"]
    raise MapError(f"{source.rel} has no top-level {name} (named by a generated part of {PAGE.name})")


def api(spec: list[str]) -> list[str]:
    """The signatures a part names, ``module.py:Name,Other`` per module (paths under airflow_tfjob/)."""
    lines = ["```python"]
    for item in spec:
        rel, _, names = item.partition(":")
        path = PACKAGE / rel
        if not path.is_file() or not names:
            raise MapError(f"{item!r}: name a module under airflow_tfjob/ and its classes or functions")
        source = _Source(rel, ast.parse(path.read_text(), filename=str(path)))
        lines.append(f"# {rel}")
        # Class.method names: the class once, with the methods named (in the order the names first come).
        wanted: dict[str, list[str]] = {}
        for dotted in names.split(","):
            name, _, method = dotted.partition(".")
            wanted.setdefault(name, []).extend([method] if method else [])
        for name, methods in wanted.items():
            lines.extend(_named(source, name, tuple(methods)))
    lines.append("```")
    return lines


def render(spec: str) -> str:
    """A part's text from its marker's arguments."""
    kind, *args = spec.split()
    if kind == "map" and len(args) == 1:
        root = ROOT / args[0]
        summarised = (PACKAGE / "local",) if root == PACKAGE else ()
        return "\n".join(["```", *module_map(root, summarised=summarised), "```"]) + "\n"
    if kind == "api" and args:
        return "\n".join(api(args)) + "\n"
    raise MapError(f"unknown generated part {spec!r}: `map <package path>` or `api <module.py:Name,...>...`")


def regenerate(text: str) -> str:
    """The page with every generated part drawn again from the code."""
    return PART.sub(lambda m: f"{m['open']}{render(m['spec'])}<!-- end generated -->", text)


def stale_parts(text: str) -> list[str]:
    """The markers of the parts that differ from what the code gives now."""
    return [" ".join(m["spec"].split()) for m in PART.finditer(text) if m["body"] != render(m["spec"])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="only say which parts differ from the code")
    args = parser.parse_args(argv)
    text = PAGE.read_text()
    try:
        if args.check:
            stale = stale_parts(text)
            for spec in stale:
                print(f"{PAGE.relative_to(ROOT)}: generated part `{spec}` differs from the code", file=sys.stderr)
            return 1 if stale else 0
        new = regenerate(text)
    except MapError as error:
        print(f"architecture_map: {error}", file=sys.stderr)
        return 2
    if new != text:
        PAGE.write_text(new)
        print(f"rewrote the generated parts of {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
