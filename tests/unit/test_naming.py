from __future__ import annotations

import itertools
import re

import pytest

from airflow_tfjob import constants as c
from airflow_tfjob.build.naming import (
    DNS1035_RE,
    LABEL_VALUE_RE,
    canonical_replica_type,
    identity_annotations,
    identity_labels,
    identity_selector,
    job_name,
    label_value,
    matches_identity,
    max_name_length,
    max_replica_suffix,
)

LONG = "a_very_long_dag_identifier_that_goes_on_and_on_" * 4


@pytest.mark.parametrize(
    ("dag", "task", "run"),
    [
        ("train", "fit", "manual__2024-01-01T00:00:00+00:00"),
        (LONG, LONG, LONG),
        ("123_numeric_start", "__", "r"),
        ("ÜNICODE dag", "tâsk", "run"),
        ("", "", ""),
        ("-", "-", "-"),
    ],
)
def test_job_name_is_dns1035_and_leaves_room_for_every_suffix(dag: str, task: str, run: str) -> None:
    name = job_name(dag, task, run, -1, 1)
    assert DNS1035_RE.match(name), name
    for rtype in c.REPLICA_TYPES:
        assert len(f"{name}-{rtype.lower()}-99") <= 63


def test_job_name_is_deterministic_and_unique_per_input() -> None:
    base = ("dag", "task", "scheduled__2024-01-01", 0, 1)
    assert job_name(*base) == job_name(*base)
    variants = {
        job_name(*base),
        job_name("dag2", *base[1:]),
        job_name(base[0], "task2", *base[2:]),
        job_name(*base[:2], "scheduled__2024-01-02", *base[3:]),
        job_name(*base[:3], 1, base[4]),
        job_name(*base[:4], 2),
    }
    assert len(variants) == 6


def test_job_name_unique_even_when_readable_part_is_cut() -> None:
    names = {job_name(LONG + str(i), "t", "r", -1, 1) for i in range(50)}
    assert len(names) == 50
    assert all(n.startswith("a-very-long-dag") for n in names)


def test_job_name_respects_budget_from_manifest() -> None:
    specs = {"Worker": {"replicas": 1000}, "PS": {"replicas": 2}}
    assert max_replica_suffix(specs) == "-worker-999"
    budget = max_name_length(specs)
    assert budget == 63 - len("-worker-999")
    name = job_name(LONG, LONG, "r", 3, 2, max_length=budget)
    assert len(name) == budget
    assert len(f"{name}-worker-999") == 63


def test_max_name_length_accepts_counts_and_defaults() -> None:
    assert max_name_length({"chief": 1, "worker": 3}) == 63 - len("-worker-2")
    assert max_name_length({}) == 63 - len("-evaluator-99")
    assert max_name_length({"Worker": {}}) == 63 - len("-worker-0")  # replicas default to 1


def test_job_name_refuses_impossible_budget() -> None:
    with pytest.raises(ValueError, match="no room"):
        job_name("d", "t", "r", -1, 1, max_length=5)


def test_tiny_budget_still_valid() -> None:
    name = job_name(LONG, "t", "r", -1, 1, max_length=11)
    assert len(name) == 11 and DNS1035_RE.match(name)


@pytest.mark.parametrize(
    "value",
    ["manual__2024-01-01T00:00:00+00:00", "x" * 64, "_leading", "trailing.", "a b", "ok-value", "", "é"],
)
def test_label_value_valid_and_hashed_when_changed(value: str) -> None:
    out = label_value(value)
    assert len(out) <= 63 and LABEL_VALUE_RE.match(out), out
    if LABEL_VALUE_RE.match(value) and len(value) <= 63:
        assert out == value
    else:
        assert re.search(r"[0-9a-f]{8}$", out)


def test_label_value_distinguishes_inputs_that_sanitise_alike() -> None:
    assert label_value("a:b") != label_value("a+b")
    assert label_value("x" * 70) != label_value("x" * 71)


def test_identity_labels_and_annotations() -> None:
    run = "manual__2024-01-01T00:00:00+00:00"
    labels = identity_labels("dag", "task", run, -1, 3)
    assert labels[c.LABEL_MANAGED] == "true"
    assert labels[c.LABEL_MAP_INDEX] == "none"
    assert labels[c.LABEL_TRY_NUMBER] == "3"
    assert all(LABEL_VALUE_RE.match(v) and len(v) <= 63 for v in labels.values())
    ann = identity_annotations("dag", "task", run, -1, 3)
    assert ann[c.ANNOTATION_RUN_ID] == run
    assert ann[c.ANNOTATION_MAP_INDEX] == "-1"
    assert identity_labels("dag", "task", run, 4, 1)[c.LABEL_MAP_INDEX] == "4"


def test_identity_selector_excludes_try_and_handled() -> None:
    sel = identity_selector("dag", "task", "run", 2)
    terms = sel.split(",")
    assert f"{c.LABEL_DAG_ID}=dag" in terms
    assert f"{c.LABEL_MAP_INDEX}=2" in terms
    assert f"!{c.LABEL_HANDLED}" in terms
    assert not any(t.startswith(c.LABEL_TRY_NUMBER) for t in terms)
    assert f"!{c.LABEL_HANDLED}" not in identity_selector("dag", "task", "run", 2, include_handled=True)


def test_matches_identity_uses_full_annotations() -> None:
    job = {"metadata": {"annotations": identity_annotations("d", "t", "r", 0, 1)}}
    assert matches_identity(job, "d", "t", "r", 0)
    assert not matches_identity(job, "d", "t", "r2", 0)
    assert matches_identity({"metadata": {}}, "d", "t", "r", 0)


def test_canonical_replica_type() -> None:
    for key, canon in itertools.product(["worker", "WORKER", "Worker"], ["Worker"]):
        assert canonical_replica_type(key) == canon
    assert canonical_replica_type("ps") == "PS"
    assert canonical_replica_type("Workers") is None
