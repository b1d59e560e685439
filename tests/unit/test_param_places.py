"""A parameter is declared once: where a knob is named in the provider is its written-out signatures, its
row (operators/params.py) and the code that uses it, and nowhere else, so that a new scattering fails here.

A knob counts as named where the code spells it (a name, an attribute, an argument, a keyword, or a
string constant equal to it), docstrings and comments aside. And a row added to a copy of the table is
enough for it to be stored, templated, checked, handed to the follow core and listed in the reference.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_tfjob.build.validation import JobValidationError
from airflow_tfjob.follow.outcome import FollowOptions
from airflow_tfjob.operators import checks, params

PROVIDER = Path(__file__).parents[2] / "airflow_tfjob"
ROOT = PROVIDER.parent
SIGNATURES = {"operators/generic.py", "operators/tfjob.py"}  # every kind's operators
TRAINJOB = {"operators/trainjob.py"}  # TrainJobOperator's own signature
TABLE = {"operators/params.py"}

# knob -> the files that name it beside the signatures and the table, and why each does.
USERS: dict[str, dict[str, str]] = {
    "queue_timeout": {
        "integrations/kueue/tracker.py": "its KueueOptions field; enforces it, and names the event it ends a follow with",
        "constants.py": "why the operator deletes the job the event ends (KUEUE_FAILURE_EVENTS)",
    },
    "kueue_workload_window": {
        "integrations/kueue/tracker.py": "its KueueOptions field; waits that long for a Workload",
    },
    "startup_timeout": {
        "follow/outcome.py": "its FollowOptions field (and the drain's None)",
        "follow/core.py": "holds the pods to it",
        "triggers/deferral.py": "the previous release's absolute form of the deferral's clock",
        "triggers/runs.py": "the deferral's clock, kept across a triggerer's restart",
        "operators/runs.py": "the task's failure message",
        "operators/outcome.py": "the task's failure message",
    },
    "log_replicas": {
        "follow/outcome.py": "its FollowOptions field, parsed once from text",
        "operators/trainjob_params.py": "TrainJob's own default ('all')",
        "operators/checks.py": "a selection naming replicas the job lacks is refused under its name",
    },
    "backoff_limit": {
        "build/params.py": "its JobParameters field",
        "build/manifest.py": "writes runPolicy.backoffLimit",
        "build/paramtypes.py": "the manifest layer's type of the field (build_tfjob checks it too)",
        "jobs/trainjob/from_tfjob.py": "a TFJob run as a TrainJob cannot keep it",
    },
    "on_kill_action": {
        "operators/runs.py": "the operator's kill",
        "follow/cleanup.py": "the kill itself",
        "triggers/runs.py": "the deferred task's kill (delete_on_kill)",
    },
}
EVERY_KIND = {"queue_timeout", "kueue_workload_window", "startup_timeout", "log_replicas", "on_kill_action"}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _spelt(tree: ast.AST) -> Counter[str]:
    """How many times the tree spells each name, docstrings aside."""
    skip = _docstrings(tree)
    count: Counter[str] = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            count[node.id] += 1
        elif isinstance(node, ast.Attribute):
            count[node.attr] += 1
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg is not None:
            count[node.arg] += 1
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            count[node.value] += 1
    return count


def _names(tree: ast.AST, knob: str) -> int:
    return _spelt(tree)[knob]


@functools.cache
def _spellings(root: Path) -> dict[str, Counter[str]]:
    """Each file's spellings, from one parse of the tree for every knob the tests look up."""
    return {path.relative_to(root).as_posix(): _spelt(ast.parse(path.read_text())) for path in sorted(root.rglob("*.py"))}


def places(knob: str, root: Path = PROVIDER) -> dict[str, int]:
    """The provider's files naming ``knob``, with how many times each does."""
    return {name: count[knob] for name, count in _spellings(root).items() if count[knob]}


@pytest.mark.parametrize("knob", sorted(USERS))
def test_a_knob_is_named_in_its_signatures_its_row_and_its_users_only(knob: str) -> None:
    signatures = SIGNATURES | (TRAINJOB if knob in EVERY_KIND else set())
    assert set(places(knob)) == signatures | TABLE | set(USERS[knob]), places(knob)


def test_the_table_names_a_knob_once() -> None:
    assert {knob: places(knob)["operators/params.py"] for knob in USERS} == dict.fromkeys(USERS, 1)


def test_the_counting_sees_each_way_of_naming() -> None:
    source = 'def f(knob=1):\n    """knob"""\n    g(knob=knob)\n    x.knob\n    return {"knob": 1}  # knob\n'
    assert _names(ast.parse(source), "knob") == 5  # argument, keyword, name, attribute, string; not the docs


# ---- a new knob is one row (and its signature, and the code using it) --------------------------


@dataclass(frozen=True)
class _FakeOptions:
    """A follow part's declaration of the knob (its options_type: the field its code would read)."""

    fake_lines: int = 0


_FAKE = params.Param(
    "fake_lines", "follow", "lines the follow core shows of something new", 7, templated=True,
    check=checks.count("lines"),
)  # fmt: skip


def _with_fake_row() -> params.ParameterSet:
    rows = params.TFJOB_PARAMETERS.rows
    at = rows.index(next(row for row in rows if row.name == "queue_timeout")) + 1
    return params.ParameterSet((*rows[:at], _FAKE, *rows[at:]))


def test_a_new_row_is_stored_templated_checked_followed_and_documented() -> None:
    table = _with_fake_row()
    given = {**table.defaults, "metrics": [], "fake_lines": 12}  # the operator keeps metrics as a list
    operator = SimpleNamespace(hyperparameters=None)
    params.store(operator, given, table)
    assert operator.fake_lines == 12  # storage
    assert "fake_lines" in table.template_fields  # templated
    assert table.defaults["fake_lines"] == 7  # the default the signature writes out
    assert "fake_lines" in table.rules  # checked, by its rule
    with pytest.raises(JobValidationError) as refused:
        checks.check_operator_parameters(
            {**params.values(operator, table.own), "fake_lines": -1}, table.rules
        )
    assert [p.field for p in refused.value.problems] == ["fake_lines"]
    checked = checks.check_operator_parameters(params.values(operator, table.own), table.rules)
    options = FollowOptions.of(**params.follow_options(table, checked, operator))  # what the part reads
    assert options.read(_FakeOptions).fake_lines == 12 and options.to_dict()["fake_lines"] == 12
    assert FollowOptions.from_dict(options.to_dict()).read(_FakeOptions).fake_lines == 12  # the trigger's
    assert "fake_lines" not in table.manifest_params and "fake_lines" not in table.typed


def test_a_new_row_has_its_line_in_the_parameter_reference() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_parameters", ROOT / "scripts" / "docs_parameters.py")
    assert spec is not None and spec.loader is not None
    docs: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(docs)
    table = _with_fake_row()
    signature = {
        row.name: SimpleNamespace(annotation="Any", default=repr(row.default)) for row in table.rows
    } | {"fake_lines": SimpleNamespace(annotation="int", default="7")}
    lines = docs.parameters_table(ROOT / "docs", table=table, signature=signature).splitlines()
    (line,) = [line for line in lines if line.startswith("| `fake_lines` |")]
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells[1:6] == [_FAKE.doc, "`int`", "`7`", "yes", "how the job is followed"]
    # The first cell: the name's code span, linked to its how-to where one describes it.
    names = [re.findall(r"`([a-z_]+)`", line.split("|")[1])[0] for line in lines[2:]]
    assert names == list(table.names)
