"""docs/architecture.md is drawn from the code: every module it names exists, and both of its module maps
(the provider's and the local cluster's) have every package and module of their tree."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "airflow_tfjob"
DOC = (ROOT / "docs" / "architecture.md").read_text()


def _section(title: str) -> str:
    start = DOC.index(f"\n## {title}")
    end = DOC.find("\n## ", start + 1)
    return DOC[start : end if end != -1 else len(DOC)]


def _first_block(text: str) -> list[str]:
    start = text.index("```\n") + 4
    return text[start : text.index("```", start)].splitlines()


def _map_paths(lines: list[str], root: Path, indent_unit: int = 2) -> set[Path]:
    """The paths a tree listing names: a line starting with ``name/`` opens a package at its indentation,
    ``a.py`` (or ``a.py, b.py``) names modules in the package above it; wrapped descriptions are skipped."""
    stack: list[tuple[int, Path]] = [(-1, root)]
    named: set[Path] = set()
    for line in lines:
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        listed = re.match(r"[\w.]+(?:\.py|/)(?:,\s*[\w.]+(?:\.py|/))*(?=\s|$)", stripped)
        if listed is None:
            continue
        names = [n.strip() for n in listed.group(0).split(",")]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        for name in names:
            path = parent / name.rstrip("/")
            named.add(path)
            if name.endswith("/"):
                stack.append((indent, path))
    return named


def _tree(root: Path, skip: tuple[str, ...] = ()) -> set[Path]:
    found: set[Path] = set()
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if "__pycache__" in rel.parts or (rel.parts and rel.parts[0] in skip):
            continue
        if path.is_dir() and (path / "__init__.py").exists():
            found.add(path)
        elif path.suffix == ".py" and path.name != "__init__.py":
            found.add(path)
    return found


PROVIDER_MAP = _map_paths(_first_block(_section("Module map"))[1:], PACKAGE)
LOCAL_MAP = _map_paths(_first_block(_section("Local cluster (`airflow_tfjob/local/`)")), PACKAGE / "local")


@pytest.mark.parametrize(("named", "tree"), [(PROVIDER_MAP, _tree(PACKAGE, skip=("local",)) | {PACKAGE / "local"}),
                                             (LOCAL_MAP, _tree(PACKAGE / "local"))],
                         ids=["provider", "local"])  # fmt: skip
def test_the_maps_name_exactly_what_exists(named: set[Path], tree: set[Path]) -> None:
    missing = sorted(str(p.relative_to(ROOT)) for p in tree - named)
    stale = sorted(str(p.relative_to(ROOT)) for p in named - tree if not p.name.endswith("__init__.py"))
    assert not missing, f"on no map: {missing}"
    assert not stale, f"on a map but not in the code: {stale}"


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
