"""The provider's one status vocabulary (JobState, JobStatus) and the reading of any job object into it.

Pure: used by the operator, the sensor, the trigger and the retry decision alike, so that every mode
agrees on what a job's status says. How an API's conditions map onto the vocabulary is its adapter's
(airflow_tfjob/jobs/: the v1 kinds' condition precedence, Trainer v2's JobSet-derived states);
:func:`interpret` asks the adapter of the object's kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from airflow_tfjob.jobs.adapter import adapter_of
from airflow_tfjob.jobs.kinds import JobKind, read_kind

#: The replica counts every adapter reports per type, in the order the task log shows them.
COUNT_KEYS = ("active", "succeeded", "failed")


class JobState(str, Enum):
    CREATED = "created"
    RUNNING = "running"
    RESTARTING = "restarting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SUSPENDED = "suspended"


@dataclass(frozen=True)
class JobStatus:
    state: JobState
    reason: str = ""
    message: str = ""
    replica_statuses: dict[str, dict[str, int]] = field(default_factory=dict)
    failed_replica_types: tuple[str, ...] = ()
    start_time: str | None = None
    completion_time: str | None = None

    @property
    def finished(self) -> bool:
        return self.state in (JobState.SUCCEEDED, JobState.FAILED)

    @property
    def active(self) -> bool:
        """Not finished: a later try should reattach rather than start another job."""
        return not self.finished

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "reason": self.reason,
            "message": self.message,
            "replica_statuses": {k: dict(v) for k, v in self.replica_statuses.items()},
            "failed_replica_types": list(self.failed_replica_types),
            "start_time": self.start_time,
            "completion_time": self.completion_time,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobStatus:
        return cls(
            state=JobState(data["state"]),
            reason=data.get("reason") or "",
            message=data.get("message") or "",
            replica_statuses={
                str(k): {ck: int(v.get(ck, 0)) for ck in COUNT_KEYS}
                for k, v in (data.get("replica_statuses") or {}).items()
            },
            failed_replica_types=tuple(data.get("failed_replica_types") or ()),
            start_time=data.get("start_time"),
            completion_time=data.get("completion_time"),
        )


def job_kind(job: Mapping[str, Any]) -> JobKind:
    """The job's kind row; an object of a kind the provider does not know is read as the kind table's
    default kind."""
    return read_kind(job)


def epoch_seconds(timestamp: Any) -> float | None:
    """An API timestamp (RFC 3339 as the API server writes it, ``2026-12-01T00:00:00Z``, fractions and
    offsets allowed) as epoch seconds; None for an absent or unreadable one.

    The one reader of the stamps a status carries (start and completion times, conditions'
    lastTransitionTime, creationTimestamp), so that Kueue's waits, cost hours and keep_failed_for's
    expiry agree on what a stamp means. Log lines' nanosecond stamps are follow/logs_parsing.py's.
    """
    if not isinstance(timestamp, str) or not timestamp:
        return None
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def true_conditions(tfjob: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Condition type -> the last entry of that type whose status is exactly "True"."""
    found: dict[str, Mapping[str, Any]] = {}
    for cond in (tfjob.get("status") or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("status") == "True" and isinstance(cond.get("type"), str):
            found[cond["type"]] = cond
    return found


def interpret(job: Mapping[str, Any]) -> JobStatus:
    """The job's state, with the reason and message of the condition that decided it, as its kind's
    adapter reads it."""
    return adapter_of(job).interpret(job)


def summarise(status: JobStatus) -> str:
    """One line for the task log, e.g. ``running (TFJobRunning) | Chief 1 active | Worker 2 active, 1 failed``."""
    head = status.state.value
    if status.reason:
        head += f" ({status.reason})"
    parts = [head]
    for name, counts in status.replica_statuses.items():
        shown = [f"{counts[k]} {k}" for k in COUNT_KEYS if counts.get(k)]
        parts.append(f"{name} {', '.join(shown) if shown else 'none counted'}")
    line = " | ".join(parts)
    if status.message and status.state in (JobState.FAILED, JobState.RESTARTING, JobState.SUSPENDED):
        line += f": {status.message}"
    return line


def as_ended(status: JobStatus | None, latest: Mapping[str, Any] | None) -> JobStatus | None:
    """The job's status as it ended, read after the drain.

    The training-operator writes the terminal condition first and settles the replica counts in a later
    reconcile (a succeeded job's still-active replicas are counted succeeded): the status seen when the
    job first showed as finished may still list a worker as active.
    """
    if status is None or latest is None:
        return status
    final = interpret(latest)
    return final if final.state is status.state else status


#: The conditions a sensor (and its trigger) can wait for.
TARGET_CONDITIONS = ("Succeeded", "Running", "Created")

# A job that has run (or finished) satisfies "Running"; one that merely exists satisfies "Created".
_REACHED: dict[str, frozenset[JobState]] = {
    "Succeeded": frozenset({JobState.SUCCEEDED}),
    "Running": frozenset({JobState.RUNNING, JobState.RESTARTING, JobState.SUCCEEDED}),
    "Created": frozenset(JobState),
}


def condition_reached(status: JobStatus, target_condition: str) -> bool:
    """Whether a (non-failed) job status satisfies the sensor's target."""
    return status.state in _REACHED[target_condition]


def failure_message(name: str, namespace: str, status: JobStatus, kind: str = "TFJob") -> str:
    failing = ", ".join(status.failed_replica_types) or "unknown"
    return (
        f"{kind} {namespace}/{name} failed ({status.reason}): {status.message} [failing replicas: {failing}]"
    )
