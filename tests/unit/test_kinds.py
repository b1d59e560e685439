"""The kind table agrees with the reference read from training-operator v1.9.4 (its §5 tables)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from airflow_tfjob.jobs import kinds
from airflow_tfjob.jobs.kinds import KINDS, JobKind, kind_named, kind_of

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "kubeflow-v1-kinds.md"


def _reference_table() -> dict[str, dict[str, object]]:
    text = REFERENCE.read_text()
    section = text[text.index("### 5.1 Kind table") :]
    block = re.search(r"```json\n(.*?)\n```", section, re.S)
    assert block is not None, "the reference lost its machine-readable kind table"
    table: dict[str, dict[str, object]] = json.loads(block.group(1))
    return table


def _comparison_row(label: str) -> list[str]:
    """One row of the reference's §5 comparison table, cells in kind order (TFJob first)."""
    for line in REFERENCE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == label:
            return cells[1:]
    raise AssertionError(f"row {label!r} not in the reference's comparison table")


def test_every_kind_of_the_reference_is_in_the_table_and_nothing_else() -> None:
    assert [k.kind for k in KINDS] == list(_reference_table())


@pytest.mark.parametrize("row", KINDS, ids=lambda k: k.kind)
def test_row_matches_the_reference(row: JobKind) -> None:
    ref = _reference_table()[row.kind]
    assert row.plural == ref["plural"]
    assert row.singular == ref["singular"]
    assert row.spec_key == ref["specKey"]
    assert sorted(row.replica_types) == sorted(ref["replicaTypes"])  # type: ignore[arg-type]
    assert row.container == ref["container"]
    assert row.port_name == ref["portName"]
    assert row.port == ref["port"]
    assert row.restart_policy == ref["restartPolicy"]
    assert row.reason_prefix == ref["reasonPrefix"]
    assert row.controller == ref["controller"]


def test_rules_match_the_reference_comparison_table() -> None:
    order = [k.kind for k in KINDS]
    case = dict(zip(order, _comparison_row("key case at admission"), strict=True))
    scale = dict(zip(order, _comparison_row("scale subresource"), strict=True))
    managed = dict(zip(order, _comparison_row("managedBy checked by webhook / reconciler"), strict=True))
    counts = dict(zip(order, _comparison_row("replica-count rules (webhook)"), strict=True))
    extras = dict(zip(order, _comparison_row("other spec fields"), strict=True))
    for row in KINDS:
        assert row.exact_case_keys == (case[row.kind] == "exact only"), row.kind
        assert (row.scale_type or "no") == scale[row.kind], row.kind
        assert row.checks_managed_by == (not managed[row.kind].startswith("**no")), row.kind
        said = counts[row.kind]
        assert row.single_replica_types == (("Master",) if "explicitly 1" in said else ()), row.kind
        assert row.required_types == (("Master",) if "Master required" in said else ()), row.kind
        assert set(row.extra_spec_fields) == set(re.findall(r"`(\w+)`", extras[row.kind])) - {"runPolicy"}


@pytest.mark.parametrize("name", ["PyTorchJob", "pytorchjob", "pytorchjobs", " PYTORCHJOB "])
def test_kind_named_accepts_kind_singular_and_plural(name: str) -> None:
    assert kind_named(name) is kinds.PYTORCHJOB


def test_unknown_kind_names_the_kinds_there_are_and_refuses_mpijob() -> None:
    with pytest.raises(ValueError, match=r"'MPIJob'.*TFJob, PyTorchJob, XGBoostJob, JAXJob, PaddleJob.*MPIJob v1"):
        kind_named("MPIJob")


def test_kind_of_a_manifest_defaults_to_tfjob() -> None:
    assert kind_of({}) is kinds.TFJOB
    assert kind_of({"kind": "JAXJob"}) is kinds.JAXJOB


def test_canonical_type_matches_without_case() -> None:
    assert kinds.PYTORCHJOB.canonical_type("master") == "Master"
    assert kinds.JAXJOB.canonical_type("Master") is None
