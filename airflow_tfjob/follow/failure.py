"""Why a training job failed, as one structured cause: the provider's own diagnosis, told to the retry
policy (``operators/retry_policy.py``) through the one exception a failed job raises.

The follow core gathers the evidence (each failing replica's last pod state, exit code, reason, last log
lines and events: ``diagnostics.ReplicaDiagnosis``); :func:`classify` reads it as the person on call
would, and puts the failure in one of four categories:

- ``infrastructure``: the cluster took the job away (preempted or evicted by Kueue, a node or a
  MultiKueue worker cluster lost, pods
  deleted by someone else, the API unreachable after the hooks' retries, an exit code the replica's
  restart policy calls retryable). Trying again is the fix; ``retry_after`` says how soon.
- ``user``: the job itself is wrong (a Python traceback in a replica, a non-retryable exit code, a spec
  the cluster refused, an image that cannot be pulled). Trying again costs a run and changes nothing.
- ``out_of_memory``: a replica was OOM-killed at its memory limit: the user's to fix, unless the retry
  policy is told to raise the limit.
- ``unknown``: nothing above fits; the task's ordinary retries decide.

Pure apart from :class:`TrainingJobFailed`, which subclasses Airflow's exception so that the task fails
as before (with the same message), and carries the cause for whoever reads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_tfjob.version_compat import AirflowException

INFRASTRUCTURE = "infrastructure"
USER = "user"
OUT_OF_MEMORY = "out_of_memory"
UNKNOWN = "unknown"
CATEGORIES = (INFRASTRUCTURE, USER, OUT_OF_MEMORY, UNKNOWN)

#: Seconds to wait before the next try, by infrastructure reason: a preempted job waits for the queue to
#: move, a lost node for its replacement, an unreachable API server for its recovery.
RETRY_AFTER: dict[str, float] = {
    "Preempted": 60.0,
    "Evicted": 60.0,
    "NodeLost": 30.0,
    "WorkerLost": 30.0,
    "PodDeleted": 10.0,
    "ApiUnavailable": 120.0,
    "RetryableExitCode": 10.0,
}

# Pod conditions and reasons that say the cluster, not the program, ended the pod.
_DISRUPTION_REASONS = {
    "DeletionByTaintManager": "NodeLost",
    "DeletionByPodGC": "NodeLost",
    "TerminationByKubelet": "Evicted",
    "PreemptionByScheduler": "Preempted",
    "PreemptionByKubeScheduler": "Preempted",
    "EvictionByEvictionAPI": "Evicted",
}
_POD_REASONS = {
    "NodeLost": "NodeLost",
    "Evicted": "Evicted",
    "Shutdown": "NodeLost",
    "Terminated": "NodeLost",
}
_IMAGE_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
_TRACEBACK = "Traceback (most recent call last):"
# The last line of a Python traceback: "ValueError: ...", "module.Error: ...", or a bare "KeyError".
_EXCEPTION_LINE = re.compile(
    r"^(?:\[[^\]]*\]\s*)?([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning)\b.*)$"
)


@dataclass(frozen=True)
class FailureCause:
    """One failure's cause; JSON-serialisable through to_dict (it travels in XCom and trigger events)."""

    category: str  # one of CATEGORIES
    reason: str  # Preempted, NodeLost, WorkerLost, PodDeleted, Evicted, ApiUnavailable, RetryableExitCode, ExitCode,
    # Traceback, InvalidSpec, ImagePull, OOMKilled, KueueIgnored, KueueInadmissible, Unknown
    summary: str  # one line naming what happened, to whom
    replica: str | None = None  # "worker-1"
    replica_type: str | None = None  # "Worker", as the job's spec spells it
    exit_code: int | None = None
    memory_limit: str | None = None  # the OOM-killed container's limit, as its spec wrote it
    retry_after: float | None = None  # seconds: how soon trying again makes sense (infrastructure)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def retryable(self) -> bool:
        return self.category == INFRASTRUCTURE

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FailureCause:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in known})


class TrainingJobFailed(AirflowException):
    """A training job (or its submission) failed; ``cause`` says why, as the provider diagnosed it.

    The message is the one users read in the task log; the retry policy reads ``cause``.
    """

    def __init__(self, message: str, cause: FailureCause) -> None:
        super().__init__(message)
        self.cause = cause

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.cause))


def infrastructure(reason: str, summary: str, **details: Any) -> FailureCause:
    return FailureCause(INFRASTRUCTURE, reason, summary, retry_after=RETRY_AFTER.get(reason), details=details)


def user(reason: str, summary: str, **details: Any) -> FailureCause:
    return FailureCause(USER, reason, summary, details=details)


def unknown(summary: str) -> FailureCause:
    return FailureCause(UNKNOWN, "Unknown", summary)


def _exception_line(lines: Sequence[str]) -> str | None:
    """The exception a Python traceback in ``lines`` ended with ("ValueError: bad input"), if any."""
    start = None
    for i, line in enumerate(lines):
        if _TRACEBACK in line:
            start = i
    if start is None:
        return None
    for line in reversed(lines[start + 1 :]):
        text = line.strip()
        match = _EXCEPTION_LINE.match(text)
        if match and not text.startswith("File "):
            return match.group(1)
    return "a Python traceback"


def _restart_policy(replica_specs: Mapping[str, Mapping[str, Any]], rtype: str | None) -> str | None:
    for name, spec in replica_specs.items():
        if rtype is not None and name.lower() == rtype.lower():
            policy = spec.get("restartPolicy")
            return str(policy) if policy else None
    return None


def _spelled(replica_specs: Mapping[str, Mapping[str, Any]], rtype: str | None) -> str | None:
    """The replica type as the job's spec spells it ("Worker" for the pod label's "worker")."""
    for name in replica_specs:
        if rtype is not None and name.lower() == rtype.lower():
            return str(name)
    return rtype


def replica_cause(
    failure: Mapping[str, Any], replica_specs: Mapping[str, Mapping[str, Any]]
) -> FailureCause | None:
    """The cause one failing replica shows (a ``ReplicaDiagnosis.to_dict()``), or None if it shows none."""
    replica = str(failure.get("replica") or "")
    rtype = _spelled(replica_specs, failure.get("replica_type"))
    reason = str(failure.get("reason") or "")
    code = failure.get("exit_code")
    message = str(failure.get("message") or "")
    who: dict[str, Any] = {"replica": replica or None, "replica_type": rtype, "exit_code": code}
    if reason == "OOMKilled":
        limit = failure.get("memory_limit")
        at = f" at its memory limit {limit}" if limit else " (no memory limit is set on it)"
        return FailureCause(
            OUT_OF_MEMORY, "OOMKilled", f"{replica} was killed for running out of memory{at}",
            memory_limit=limit, **who,
        )  # fmt: skip
    disruption = failure.get("disruption")
    if disruption and disruption in _DISRUPTION_REASONS:
        what = _DISRUPTION_REASONS[disruption]
        return _with(infrastructure(what, f"{replica}: {_INFRA_TEXT[what]}{_told(disruption, message)}"), who)
    if reason in _POD_REASONS:
        what = _POD_REASONS[reason]
        return _with(infrastructure(what, f"{replica}: {_INFRA_TEXT[what]}{_told(reason, message)}"), who)
    if reason == "Deleted" or (failure.get("deleted") and code in (137, 143)):
        # Killed by its deletion (SIGTERM, then SIGKILL after the grace), not by its own doing; a pod
        # the controller deleted after it had exited by itself keeps its own exit code's cause.
        return _with(infrastructure("PodDeleted", f"{replica}: its pod was deleted while it ran"), who)
    if reason in _IMAGE_REASONS:
        return _with(user("ImagePull", f"{replica}: its image cannot be pulled{_told(reason, message)}"), who)
    raised = _exception_line([str(line) for line in failure.get("last_lines") or ()])
    if raised is not None:
        return _with(user("Traceback", f"{replica} raised {raised}"), who)
    if isinstance(code, int) and code != 0:
        if _restart_policy(replica_specs, rtype) == "ExitCode":
            if code >= 128:
                return _with(
                    infrastructure(
                        "RetryableExitCode",
                        f"{replica} exited with {code}, retryable under restartPolicy ExitCode",
                    ),
                    who,
                )
            return _with(
                user("ExitCode", f"{replica} exited with {code}, non-retryable under restartPolicy ExitCode"),
                who,
            )
        if code < 128:
            return _with(user("ExitCode", f"{replica} exited with code {code}"), who)
    return None


_INFRA_TEXT = {
    "NodeLost": "its node was lost",
    "Evicted": "its pod was evicted",
    "Preempted": "its pod was preempted",
}


def _told(reason: str, message: str) -> str:
    """ " (reason: message)", as the cluster put it."""
    return f" ({reason}: {message})" if message else f" ({reason})"


def _with(cause: FailureCause, who: Mapping[str, Any]) -> FailureCause:
    return FailureCause(
        cause.category,
        cause.reason,
        cause.summary,
        retry_after=cause.retry_after,
        details=cause.details,
        **who,
    )


# Which replica's cause speaks for the job when several failed: the cluster's doing first (a lost node
# kills every replica on it, and the others' exits are its echo), then out of memory, then the user's.
_RANK = {INFRASTRUCTURE: 0, OUT_OF_MEMORY: 1, USER: 2, UNKNOWN: 3}


def classify(
    event: str,
    failures: Iterable[Mapping[str, Any]] = (),
    replica_specs: Mapping[str, Mapping[str, Any]] | None = None,
    message: str = "",
) -> FailureCause:
    """The cause of a follow that ended with ``event`` ("failed", "preempted", "cannot_start", ...),
    from its failing replicas' diagnoses and the job's replica specs (restart policies)."""
    specs = replica_specs or {}
    if event == "preempted":
        return infrastructure("Preempted", message or "Kueue preempted the job")
    if event == "worker_lost":
        # MultiKueue's worker cluster went while the job ran there: a lost node, a whole cluster of them.
        return infrastructure("WorkerLost", message or "the job's MultiKueue worker cluster was lost")
    if event == "kueue_ignored":
        return user("KueueIgnored", message or "Kueue did not take the job in")
    if event == "kueue_inadmissible":
        # The queue's configuration or the job's request: another try would meet the same answer.
        return user("KueueInadmissible", message or "Kueue says the job can never be admitted")
    causes = [c for c in (replica_cause(f, specs) for f in failures) if c is not None]
    if causes:
        return min(causes, key=lambda c: _RANK[c.category])
    return unknown(message or f"the job ended with {event}")


def api_unavailable(error: BaseException) -> FailureCause:
    """The API server did not answer within the hooks' retry time (``hooks.retry.ApiCallFailed``)."""
    return infrastructure("ApiUnavailable", f"the Kubernetes API was unreachable: {error}")


def refused_spec(status: int | None, message: str) -> FailureCause:
    """The cluster refused the job (422 Invalid, a webhook's denial)."""
    return user("InvalidSpec", f"the cluster refused the job ({status}): {message}", status=status)


__all__ = [
    "CATEGORIES",
    "INFRASTRUCTURE",
    "OUT_OF_MEMORY",
    "UNKNOWN",
    "USER",
    "FailureCause",
    "TrainingJobFailed",
    "api_unavailable",
    "classify",
    "refused_spec",
    "replica_cause",
]
