from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_tfjob.jobs.status import JobState, JobStatus, epoch_seconds, interpret, summarise


def cond(ctype: str, status: str = "True", reason: str | None = None, message: str = "") -> dict[str, Any]:
    return {
        "type": ctype,
        "status": status,
        "reason": reason if reason is not None else f"TFJob{ctype}",
        "message": message or f"TFJob ml/mnist {ctype.lower()}",
        "lastUpdateTime": "2025-01-01T10:00:00Z",
        "lastTransitionTime": "2025-01-01T10:00:00Z",
    }


def job(conditions: list[dict[str, Any]] | None, **status: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "mnist", "namespace": "ml"},
        "spec": {"tfReplicaSpecs": {"PS": {"replicas": 1}, "Worker": {"replicas": 2}}},
    }
    if conditions is not None or status:
        body["status"] = dict(status)
        if conditions is not None:
            body["status"]["conditions"] = conditions
    return body


CASES: list[tuple[str, list[dict[str, Any]] | None, JobState, str]] = [
    ("no status at all", None, JobState.CREATED, ""),
    ("empty conditions", [], JobState.CREATED, ""),
    ("created", [cond("Created")], JobState.CREATED, "TFJobCreated"),
    ("running", [cond("Created"), cond("Running")], JobState.RUNNING, "TFJobRunning"),
    (
        "succeeded, Running flipped to False",
        [cond("Created"), cond("Running", "False"), cond("Succeeded")],
        JobState.SUCCEEDED,
        "TFJobSucceeded",
    ),
    (
        "failed with a surviving Restarting",
        [cond("Created"), cond("Restarting"), cond("Running", "False"), cond("Failed")],
        JobState.FAILED,
        "TFJobFailed",
    ),
    (
        "both Succeeded and Failed True: Failed wins",
        [cond("Created"), cond("Running", "False"), cond("Succeeded"), cond("Failed")],
        JobState.FAILED,
        "TFJobFailed",
    ),
    (
        "Failed before Succeeded in the list: Failed still wins",
        [cond("Created"), cond("Failed"), cond("Succeeded")],
        JobState.FAILED,
        "TFJobFailed",
    ),
    (
        "restarting (Running removed)",
        [cond("Created"), cond("Restarting")],
        JobState.RESTARTING,
        "TFJobRestarting",
    ),
    (
        "restarting then running again",
        [cond("Created"), cond("Running")],
        JobState.RUNNING,
        "TFJobRunning",
    ),
    (
        "suspended",
        [cond("Created"), cond("Running", "False", "TFJobSuspended"), cond("Suspended")],
        JobState.SUSPENDED,
        "TFJobSuspended",
    ),
    (
        "resumed, not yet running",
        [
            cond("Created"),
            cond("Running", "False", "TFJobSuspended"),
            cond("Suspended", "False", "TFJobResumed"),
        ],
        JobState.CREATED,
        "TFJobCreated",
    ),
    (
        "resumed and running",
        [
            cond("Created"),
            cond("Suspended", "False", "TFJobResumed"),
            cond("Running"),
        ],
        JobState.RUNNING,
        "TFJobRunning",
    ),
    (
        'status "False" strings never count',
        [cond("Created"), cond("Failed", "False"), cond("Succeeded", "False"), cond("Running")],
        JobState.RUNNING,
        "TFJobRunning",
    ),
    (
        "Unknown status does not count",
        [cond("Created"), cond("Running", "Unknown")],
        JobState.CREATED,
        "TFJobCreated",
    ),
    (
        "boolean true is not the string True",
        [cond("Created"), {"type": "Failed", "status": True}],
        JobState.CREATED,
        "TFJobCreated",
    ),
    ("created condition False", [cond("Created", "False")], JobState.CREATED, ""),
    (
        "garbage entries ignored",
        [None, "x", {"status": "True"}, cond("Running")],  # type: ignore[list-item]
        JobState.RUNNING,
        "TFJobRunning",
    ),
]


@pytest.mark.parametrize(("title", "conditions", "state", "reason"), CASES, ids=[c[0] for c in CASES])
def test_interpret_condition_sequences(
    title: str, conditions: list[dict[str, Any]] | None, state: JobState, reason: str
) -> None:
    status = interpret(job(conditions))
    assert status.state is state
    assert status.reason == reason


def test_happy_path_sequence_step_by_step() -> None:
    steps = [
        ([cond("Created")], JobState.CREATED),
        ([cond("Created"), cond("Running")], JobState.RUNNING),
        ([cond("Created"), cond("Restarting")], JobState.RESTARTING),
        ([cond("Created"), cond("Running")], JobState.RUNNING),
        ([cond("Created"), cond("Running", "False"), cond("Succeeded")], JobState.SUCCEEDED),
    ]
    assert [interpret(job(c)).state for c, _ in steps] == [s for _, s in steps]
    assert not interpret(job(steps[1][0])).finished
    assert interpret(job(steps[-1][0])).finished


def test_message_comes_from_deciding_condition() -> None:
    msg = "TFJob ml/mnist has failed because 1 PS replica(s) failed."
    status = interpret(job([cond("Created"), cond("Running", "False"), cond("Failed", message=msg)]))
    assert status.message == msg


def test_replica_statuses_normalised_and_failed_types() -> None:
    tfjob = job(
        [cond("Created"), cond("Running", "False"), cond("Failed")],
        replicaStatuses={"Worker": {"active": 1, "failed": 1}, "PS": {}, "chief": {"succeeded": "1"}},
        startTime="2025-01-01T10:00:01Z",
        completionTime="2025-01-01T10:30:00Z",
    )
    status = interpret(tfjob)
    assert status.replica_statuses == {
        "Chief": {"active": 0, "succeeded": 1, "failed": 0},
        "PS": {"active": 0, "succeeded": 0, "failed": 0},
        "Worker": {"active": 1, "succeeded": 0, "failed": 1},
    }
    assert status.failed_replica_types == ("Worker",)
    assert status.start_time == "2025-01-01T10:00:01Z"
    assert status.completion_time == "2025-01-01T10:30:00Z"


def test_spec_types_without_status_get_zero_counts() -> None:
    status = interpret(job([cond("Created")]))
    assert status.replica_statuses == {
        "PS": {"active": 0, "succeeded": 0, "failed": 0},
        "Worker": {"active": 0, "succeeded": 0, "failed": 0},
    }
    assert status.failed_replica_types == ()


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ('job "mnist" is failing because "PS" replica(s) failed.', ("PS",)),
        ("TFJob ml/mnist has failed because 2 Worker replica(s) failed.", ("Worker",)),
        ("Job mnist has failed because it was active longer than specified deadline", ()),
    ],
)
def test_failed_types_from_message_when_counts_were_wiped(message: str, expected: tuple[str, ...]) -> None:
    status = interpret(job([cond("Failed", message=message)], replicaStatuses={"Worker": {}}))
    assert status.failed_replica_types == expected


def test_round_trip_json() -> None:
    status = interpret(
        job(
            [cond("Created"), cond("Running", "False"), cond("Succeeded")],
            replicaStatuses={"Worker": {"succeeded": 2}},
            startTime="2025-01-01T10:00:01Z",
        )
    )
    data = json.loads(json.dumps(status.to_dict()))
    assert data["state"] == "succeeded"
    assert JobStatus.from_dict(data) == status


def test_summarise_one_line() -> None:
    status = interpret(
        job(
            [
                cond("Created"),
                cond("Failed", message="TFJob ml/mnist has failed because 1 Worker replica(s) failed."),
            ],
            replicaStatuses={"Worker": {"active": 1, "failed": 1}},
        )
    )
    line = summarise(status)
    assert "\n" not in line
    assert line.startswith("failed (TFJobFailed)")
    assert "Worker 1 active, 1 failed" in line
    assert "PS none counted" in line
    assert line.endswith("1 Worker replica(s) failed.")


@pytest.mark.parametrize(
    ("stamp", "seconds"),
    [
        ("2026-12-01T00:00:00Z", 1796083200.0),
        ("2026-12-01T00:00:00.5Z", 1796083200.5),
        ("2026-12-01T01:00:00+01:00", 1796083200.0),
        ("", None),
        (None, None),
        (1796083200, None),
        ("yesterday", None),
    ],
)
def test_epoch_seconds_reads_the_api_s_stamps_and_none_for_anything_else(stamp: object, seconds: float | None) -> None:
    """The one reader of status stamps (Kueue's waits, cost hours, keep_failed_for's expiry)."""
    assert epoch_seconds(stamp) == seconds
