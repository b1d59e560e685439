"""From a job object (TFJob or any kubeflow.org/v1 kind) to one state, the way the training-operator
means its conditions.

Pure: used by the operator, the sensor, the trigger and the retry decision alike, so that every mode
agrees on what a job's status says.

Rules (tfjob-behaviour.md §2): a condition counts only when its status is the string ``"True"``
(``"False"`` is truthy; Running turns False, not absent, after completion); Failed wins over
Succeeded (both can be True after one reconcile pass); position in the list means nothing for
state, only which types are True.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from airflow_tfjob.kinds import TFJOB, TRAINJOB, JobKind, kind_of

_COUNT_KEYS = ("active", "succeeded", "failed")
# "... has failed because 1 Worker replica(s) failed." / "... is failing because "PS" replica(s) failed."
_FAILED_TYPE_RE = re.compile(r'because (?:\d+ )?"?([A-Za-z]+)"? replica\(s\) failed')


class JobState(str, Enum):
    CREATED = "created"
    RUNNING = "running"
    RESTARTING = "restarting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SUSPENDED = "suspended"


# Highest precedence first. Suspended beats Running/Restarting: suspending flips Running to False,
# but a stale Restarting=True can survive next to Suspended=True.
_PRECEDENCE: tuple[tuple[str, JobState], ...] = (
    ("Failed", JobState.FAILED),
    ("Succeeded", JobState.SUCCEEDED),
    ("Suspended", JobState.SUSPENDED),
    ("Restarting", JobState.RESTARTING),
    ("Running", JobState.RUNNING),
    ("Created", JobState.CREATED),
)


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
                str(k): {ck: int(v.get(ck, 0)) for ck in _COUNT_KEYS}
                for k, v in (data.get("replica_statuses") or {}).items()
            },
            failed_replica_types=tuple(data.get("failed_replica_types") or ()),
            start_time=data.get("start_time"),
            completion_time=data.get("completion_time"),
        )


def _count(value: Any) -> int:
    # Zero counts are omitted in the JSON; anything non-numeric is treated as absent.
    if isinstance(value, bool):
        return 0
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return 0


def job_kind(job: Mapping[str, Any]) -> JobKind:
    """The job's kind row; an object of a kind the provider does not know is read as a TFJob."""
    try:
        return kind_of(dict(job))
    except ValueError:
        return TFJOB


def _replica_statuses(job: Mapping[str, Any], kind: JobKind) -> dict[str, dict[str, int]]:
    spec_types = ((job.get("spec") or {}).get(kind.spec_key) or {}).keys()
    raw = (job.get("status") or {}).get("replicaStatuses") or {}
    result: dict[str, dict[str, int]] = {}
    for key in spec_types:
        name = kind.canonical_type(str(key)) or str(key)
        result.setdefault(name, dict.fromkeys(_COUNT_KEYS, 0))
    for key, counts in raw.items():
        name = kind.canonical_type(str(key)) or str(key)
        counts = counts if isinstance(counts, Mapping) else {}
        result[name] = {ck: _count(counts.get(ck)) for ck in _COUNT_KEYS}
    order = kind.replica_types

    def position(name: str) -> tuple[int, str]:
        return (order.index(name) if name in order else len(order), name)

    return {k: result[k] for k in sorted(result, key=position)}


def true_conditions(tfjob: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Condition type -> the last entry of that type whose status is exactly "True"."""
    found: dict[str, Mapping[str, Any]] = {}
    for cond in (tfjob.get("status") or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("status") == "True" and isinstance(cond.get("type"), str):
            found[cond["type"]] = cond
    return found


def interpret(tfjob: Mapping[str, Any]) -> JobStatus:
    """The job's state, with the reason and message of the condition that decided it (any kind: the
    replica specs are read under the kind's spec key, types in its canonical casing and order)."""
    kind = job_kind(tfjob)
    if kind is TRAINJOB:
        from airflow_tfjob.trainjob.status import interpret as interpret_trainjob

        return interpret_trainjob(tfjob)
    status = tfjob.get("status") or {}
    conditions = true_conditions(tfjob)
    state, deciding = JobState.CREATED, None
    for ctype, candidate in _PRECEDENCE:
        if ctype in conditions:
            state, deciding = candidate, conditions[ctype]
            break
    replicas = _replica_statuses(tfjob, kind)
    failed_types = tuple(name for name, counts in replicas.items() if counts["failed"] > 0)
    message = str((deciding or {}).get("message") or "")
    if state is JobState.FAILED and not failed_types:
        # Backoff/deadline failures, and cleanup, can leave no failed count: the message still names the type.
        match = _FAILED_TYPE_RE.search(message)
        if match:
            failed_types = (kind.canonical_type(match.group(1)) or match.group(1),)
    return JobStatus(
        state=state,
        reason=str((deciding or {}).get("reason") or ""),
        message=message,
        replica_statuses=replicas,
        failed_replica_types=failed_types,
        start_time=status.get("startTime"),
        completion_time=status.get("completionTime"),
    )


def summarise(status: JobStatus) -> str:
    """One line for the task log, e.g. ``running (TFJobRunning) | Chief 1 active | Worker 2 active, 1 failed``."""
    head = status.state.value
    if status.reason:
        head += f" ({status.reason})"
    parts = [head]
    for name, counts in status.replica_statuses.items():
        shown = [f"{counts[k]} {k}" for k in _COUNT_KEYS if counts.get(k)]
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
