"""The follow core as a pipeline of parts: the core names none, sections travel generically, and the
registry holds every part once (the integration test tests/integration/test_follow_parts.py adds one)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from airflow_tfjob.follow import core
from airflow_tfjob.follow.outcome import FollowOutcome
from airflow_tfjob.follow.parts import FollowPart
from airflow_tfjob.integrations.parts import PARTS

FOLLOW = Path(core.__file__).parent
# What the core may import of its own room: the contract, and what it does itself (logs, diagnosis).
CORE_IMPORTS = {
    "airflow_tfjob.follow",
    "airflow_tfjob.follow.diagnosis",
    "airflow_tfjob.follow.logs_parsing",
    "airflow_tfjob.follow.outcome",
    "airflow_tfjob.follow.parts",
    "airflow_tfjob.follow.replica_logs",
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    found |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    return found


def test_the_core_imports_no_part_and_names_no_integration() -> None:
    ours = {m for m in _imports(FOLLOW / "core.py") if m.startswith("airflow_tfjob.follow")}
    assert ours <= CORE_IMPORTS, ours - CORE_IMPORTS
    assert not any(m.startswith("airflow_tfjob.integrations") for m in _imports(FOLLOW / "core.py"))
    code = _code_words(FOLLOW / "core.py")
    named = {p.__name__ for p in PARTS} | {p.section for p in PARTS if p.section}
    assert not [n for n in named if any(re.search(rf"\b{n}\b", w) for w in code)], "the core names a part"
    assert not [w for w in code if re.search("kueue|queue", w, re.IGNORECASE)]


def _code_words(path: Path) -> list[str]:
    """The names, attributes and strings of a module's code (its docstrings and comments left out: prose
    may say what parts exist)."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
    }
    words = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name)]
    words += [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    words += [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    ]
    return words


def test_the_registry_holds_each_part_once_each_with_its_own_section() -> None:
    assert all(issubclass(p, FollowPart) for p in PARTS)
    assert len(set(PARTS)) == len(PARTS)
    sections = [p.section for p in PARTS if p.section is not None]
    assert len(set(sections)) == len(sections)
    assert {p.__module__ for p in PARTS} >= {"airflow_tfjob.integrations.kueue.part", "airflow_tfjob.follow.metrics"}


def test_a_section_no_one_declared_travels_through_the_outcome_as_is() -> None:
    outcome = FollowOutcome("succeeded", parts={"anything": {"n": [1, 2]}, "metrics": {"loss": 0.5}})
    again = FollowOutcome.from_dict(outcome.to_dict())
    assert again.parts == outcome.parts and again.part("anything") == {"n": [1, 2]}
    assert again.part("missing", {}) == {} and FollowOutcome("error").part("metrics", {}) == {}


def test_the_base_part_does_nothing_in_every_phase() -> None:
    """A part writes only the phases it uses: the base's are no-ops that end nothing and save nothing."""
    part = FollowPart()
    assert (part.wake_in(), part.waiting_for(), part.startup_counts_from(), part.save()) == (None,) * 4
    assert not part.reads_master_lines and not part.sees_every_line and part.capture_prefix is None
