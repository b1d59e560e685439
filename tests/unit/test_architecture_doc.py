"""docs/architecture.md is drawn from the code: its module maps and the signatures it shows are generated
(scripts/architecture_map.py, `make arch-map`) and must equal what the code gives now, and every module it
names elsewhere exists."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "airflow_tfjob"
DOC = (ROOT / "docs" / "architecture.md").read_text()
FIX = "run `make arch-map` (python scripts/architecture_map.py) and commit docs/architecture.md"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("architecture_map", ROOT / "scripts" / "architecture_map.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


GEN = _generator()


def test_the_generated_parts_equal_what_the_code_gives() -> None:
    assert GEN.stale_parts(DOC) == [], FIX


def test_both_maps_and_every_marker_are_generated_parts() -> None:
    specs = [" ".join(m["spec"].split()) for m in GEN.PART.finditer(DOC)]
    assert {"map airflow_tfjob", "map airflow_tfjob/local"} <= set(specs)
    # An opening marker without its end would be left alone by the generator: none may be.
    assert DOC.count("<!-- generated:") == len(specs)


def _named_paths(block: str, root: Path) -> set[Path]:
    """The packages and modules a generated map names, by its indentation."""
    stack: list[tuple[int, Path]] = []
    named: set[Path] = set()
    for line in block.splitlines():
        listed = re.match(r"( *)([\w./]+?(?:\.py|/))(?= )", line)
        if listed is None or len(listed[1]) >= GEN.COLUMN:  # a description's wrapped line
            continue
        indent, name = len(listed[1]), listed[2]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = stack[-1][1] / name.rstrip("/") if stack else root
        named.add(path)
        if name.endswith("/"):
            stack.append((indent, path))
    return named


def _tree(root: Path, skip: tuple[str, ...] = ()) -> set[Path]:
    found: set[Path] = {root}
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if "__pycache__" in rel.parts or (rel.parts and rel.parts[0] in skip):
            continue
        if path.is_dir() and (path / "__init__.py").exists():
            found.add(path)
        elif path.suffix == ".py" and path.name != "__init__.py":
            found.add(path)
    return found


@pytest.mark.parametrize(("root", "skip"), [(PACKAGE, ("local",)), (PACKAGE / "local", ())],
                         ids=["provider", "local"])  # fmt: skip
def test_a_map_names_every_package_and_module(root: Path, skip: tuple[str, ...]) -> None:
    block = "\n".join(GEN.module_map(root, summarised=(PACKAGE / "local",) if skip else ()))
    assert _named_paths(block, root) == _tree(root, skip) | ({PACKAGE / "local"} if skip else set())


def test_a_new_module_is_on_the_map_with_its_first_sentence(tmp_path: Path) -> None:
    room = tmp_path / "room"
    (room / "inner").mkdir(parents=True)
    (room / "__init__.py").write_text('"""The room\'s contract. Said once."""\n')
    (room / "inner" / "__init__.py").write_text('"""An inner room (pure). More."""\n')
    (room / "new.py").write_text('"""What the new module holds, e.g. a table.\n\nWhy it is here."""\n')
    assert GEN.module_map(room) == [
        "room/                    The room's contract.",
        "  new.py                 What the new module holds, e.g. a table.",
        "  inner/                 An inner room (pure).",
    ]
    (room / "long.py").write_text(f'"""A long one (see: a.go; b.go): {"many details, " * 20}end."""\n')
    assert GEN.module_map(room)[1] == "  long.py                A long one (see: a.go; b.go)."
    (room / "bare.py").write_text("X = 1\n")
    with pytest.raises(GEN.MapError, match=r"bare\.py has no docstring"):
        GEN.module_map(room)


def test_the_generated_signatures_follow_the_code(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- generated: api follow/tap.py:TapPart -->\nstale\n<!-- end generated -->\n")
    assert GEN.stale_parts(page.read_text()) == ["api follow/tap.py:TapPart"]
    drawn = GEN.regenerate(page.read_text())
    assert "class TapPart(FollowPart):" in drawn and "stale" not in drawn
    assert GEN.stale_parts(drawn) == []
    with pytest.raises(GEN.MapError, match="no top-level Gone"):
        GEN.render("api follow/tap.py:Gone")


def _exists(path: str) -> bool:
    candidates = [ROOT / path, PACKAGE / path, PACKAGE / "local" / path]
    return any(c.exists() for c in candidates)


def test_every_file_the_page_names_exists() -> None:
    named = set(re.findall(r"`([\w./]+\.py)`", DOC)) | set(
        re.findall(r"\b((?:tests|scripts)/[\w/]+\.py)\b", DOC)
    )
    gone = sorted(p for p in named if "/" in p and not _exists(p))
    assert not gone, f"docs/architecture.md names files that do not exist: {gone}"


def test_every_dotted_module_the_page_names_imports() -> None:
    gone = []
    for dotted in sorted(set(re.findall(r"\bairflow_tfjob(?:\.\w+)+", DOC))):
        parts = dotted.split(".")
        # The longest prefix that is a module; what follows must be its attribute (a class, a function).
        for cut in range(len(parts), 0, -1):
            try:
                if importlib.util.find_spec(".".join(parts[:cut])) is not None:
                    break
            except ModuleNotFoundError:  # a prefix that is a module, followed by its attribute
                continue
        module = importlib.import_module(".".join(parts[:cut]))
        target: object = module
        for attr in parts[cut:]:
            target = getattr(target, attr, None)
        if target is None:
            gone.append(dotted)
    assert not gone, f"docs/architecture.md names what the code does not have: {gone}"
