from __future__ import annotations

import itertools
from typing import Any

import pytest

from airflow_tfjob import constants as c
from airflow_tfjob.operators.identity import Decision, decide, is_handled, is_result_reported, job_try_number

CONDITIONS: dict[str, list[dict[str, str]]] = {
    "created": [{"type": "Created", "status": "True"}],
    "running": [{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}],
    "restarting": [{"type": "Created", "status": "True"}, {"type": "Restarting", "status": "True"}],
    "suspended": [{"type": "Created", "status": "True"}, {"type": "Suspended", "status": "True"}],
    "succeeded": [
        {"type": "Created", "status": "True"},
        {"type": "Running", "status": "False"},
        {"type": "Succeeded", "status": "True"},
    ],
    "failed": [
        {"type": "Created", "status": "True"},
        {"type": "Running", "status": "False"},
        {"type": "Failed", "status": "True"},
    ],
}


def job(
    try_number: int, state: str, *, reported: bool = False, handled: bool = False, **meta: Any
) -> dict[str, Any]:
    labels = {c.LABEL_TRY_NUMBER: str(try_number)}
    if handled:
        labels[c.LABEL_HANDLED] = "true"
    annotations = {c.ANNOTATION_RESULT_REPORTED: "true"} if reported else {}
    return {
        "metadata": {
            "name": f"job-t{try_number}",
            "labels": labels,
            "annotations": annotations,
            "creationTimestamp": f"2025-01-01T10:00:0{try_number}Z",
            **meta,
        },
        "status": {"conditions": CONDITIONS[state]},
    }


def test_nothing_found_creates() -> None:
    decision = decide([], 1)
    assert decision == Decision("create", reason=decision.reason)
    assert decision.job is None and decision.job_name is None


@pytest.mark.parametrize("state", ["created", "running", "restarting", "suspended"])
def test_job_in_progress_is_reattached(state: str) -> None:
    decision = decide([job(1, state)], 2)
    assert decision.action == "reattach"
    assert decision.job_name == "job-t1"
    assert decision.mark_handled == () and decision.delete == ()
    assert state in decision.reason


def test_success_not_reported_is_reported_not_retrained() -> None:
    decision = decide([job(1, "succeeded")], 2)
    assert decision.action == "report" and decision.job_name == "job-t1"


@pytest.mark.parametrize(("state", "reported"), [("succeeded", True), ("failed", False), ("failed", True)])
def test_finished_jobs_of_earlier_tries_trigger_a_new_job(state: str, reported: bool) -> None:
    decision = decide([job(1, state, reported=reported)], 2)
    assert decision.action == "create"
    assert decision.job is None
    assert decision.mark_handled == ("job-t1",)
    assert decision.delete == ()
    assert "training again" in decision.reason


def test_unreported_job_of_the_current_try_is_reported_even_if_failed() -> None:
    decision = decide([job(2, "failed")], 2)
    assert decision.action == "report" and decision.job_name == "job-t2"


def test_handled_and_deleting_jobs_are_ignored() -> None:
    found = [job(1, "running", handled=True), job(2, "running", deletionTimestamp="2025-01-01T11:00:00Z")]
    assert decide(found, 3).action == "create"
    assert decide(found, 3).mark_handled == ()


def test_older_failure_beside_a_running_job() -> None:
    decision = decide([job(2, "running"), job(1, "failed")], 3)
    assert decision.action == "reattach" and decision.job_name == "job-t2"
    assert decision.mark_handled == ("job-t1",)
    assert decision.delete == ()


def test_two_running_jobs_keep_newest_and_stop_the_other() -> None:
    decision = decide([job(2, "running"), job(1, "restarting")], 3)
    assert decision.job_name == "job-t2"
    assert decision.mark_handled == ("job-t1",)
    assert decision.delete == ("job-t1",)


def test_newest_unreported_success_is_reported() -> None:
    decision = decide([job(1, "succeeded"), job(2, "succeeded"), job(3, "failed", reported=True)], 4)
    assert decision.action == "report" and decision.job_name == "job-t2"
    assert set(decision.mark_handled) == {"job-t1", "job-t3"}


def test_helpers() -> None:
    j = job(5, "running", reported=True, handled=True)
    assert job_try_number(j) == 5
    assert is_handled(j) and is_result_reported(j)
    assert job_try_number({"metadata": {"labels": {c.LABEL_TRY_NUMBER: "x"}}}) is None


STATES = list(CONDITIONS)
VARIANTS = [(s, r) for s in STATES for r in (False, True)]


@pytest.mark.parametrize("count", [1, 2, 3])
def test_never_two_unhandled_jobs(count: int) -> None:
    """Apply every decision to every combination of earlier jobs: one unhandled job remains."""
    for combo in itertools.product(VARIANTS, repeat=count):
        found = [job(i + 1, state, reported=reported) for i, (state, reported) in enumerate(combo)]
        current_try = count + 1
        decision = decide(found, current_try)
        handled = set(decision.mark_handled)
        assert set(decision.delete) <= handled
        unhandled = [j["metadata"]["name"] for j in found if j["metadata"]["name"] not in handled]
        if decision.action == "create":
            assert unhandled == []
        else:
            assert unhandled == [decision.job_name]
            assert decision.job is not None
        # a job still running is never just abandoned: it is either reattached or deleted
        for j in found:
            name = j["metadata"]["name"]
            if combo[found.index(j)][0] in ("created", "running", "restarting", "suspended"):
                assert name == decision.job_name or name in decision.delete
