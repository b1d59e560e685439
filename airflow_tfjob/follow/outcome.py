"""What following a job takes and gives: its options and its outcome, both JSON-serialisable.

Apart from ``follow.py`` so that the operator, the trigger and the decorator can name them without
loading the follow core.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from airflow_tfjob.follow.logs_parsing import LogSelection
from airflow_tfjob.jobs.kinds import JobKind, kind_named
from airflow_tfjob.jobs.status import JobStatus


@functools.lru_cache(maxsize=256)
def _parsed_selection(spec: str) -> LogSelection:
    """One (immutable) LogSelection per spelling: a triggerer's jobs share a few, it holds thousands."""
    return LogSelection.parse(spec)


@dataclass(slots=True)
class FollowOptions:
    """How to follow a job; JSON-serialisable through to_dict (it travels in the trigger's kwargs).

    The fields a DAG author sets are the follow rows of the operators' parameter table
    (operators/params.py: one row each, with its default and check); the others are the task's.
    """

    # Text is parsed here, once (a direct caller's, or the trigger's kwargs); the operator hands on
    # the selection its parameter check parsed.
    log_replicas: LogSelection | str = "master"
    # Seconds, from the follow's start or `startup_from`; one form from the parameter to the check.
    startup_timeout: float | None = 600.0
    # Epoch seconds the start-up clock counts from (a deferred follow's: when the task deferred, so
    # that a triggerer restart does not start it over); None: when the follow starts.
    startup_from: float | None = None
    deadline: float | None = None  # epoch seconds; past it the outcome is "timeout"
    metrics: list[str] = field(default_factory=list)
    metrics_history: bool = False
    log_rate_per_replica: int = 1000
    log_total_cap: int = 1_000_000
    get_logs: bool = True
    log_events: bool = True
    drain_grace: float = 5.0  # seconds after completionTime that still-running containers are read
    diagnostics_tail: int = 20
    return_marker: str | None = None  # master-replica lines starting with it carry a value (@task.tfjob)
    # Off in a trigger whose follow a worker continues (drain_job): the warning would be premature there,
    # as a metric may come in the lines after the trigger's last cursor; the drain reports it once.
    report_missing_metrics: bool = True
    # The job's kind by name (JSON-serialisable): its plural, spec key and container are read from it.
    kind: str = "TFJob"
    # ProgressSpec as a dict (progress.py): progress lines from the master replica's metric, or None.
    progress: dict[str, Any] | None = None
    # Kueue (kueue/tracker.py; only for a job with the queue label): seconds allowed in the queue
    # (None: no limit), whether a preemption fails the follow ("wait" | "fail"), whether a job Kueue
    # ignores fails it, and how long a Workload may take to appear before Kueue counts as ignoring it.
    queue_timeout: float | None = None
    on_preemption: str = "wait"
    kueue_require_admission: bool = False
    kueue_workload_window: float = 30.0
    # checkpoint= (follow/checkpoints.py): read the master's "checkpoint saved:" lines, starting from the
    # newest checkpoint known when the job was created (Checkpoint.to_dict(), None: none).
    checkpoints: bool = False
    resume_from: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.log_replicas, str):
            self.log_replicas = _parsed_selection(self.log_replicas)
        elif not isinstance(self.log_replicas, LogSelection):
            self.log_replicas = LogSelection.parse(self.log_replicas)

    @property
    def selection(self) -> LogSelection:
        """Whose logs reach the task log (``log_replicas``, parsed)."""
        assert isinstance(self.log_replicas, LogSelection)  # __post_init__
        return self.log_replicas

    def for_drain(self) -> FollowOptions:
        """The options of the worker's drain after a deferred follow: the job has ended, so no clock
        holds it, and the metrics the trigger could not see yet are reported from the final view."""
        return replace(self, startup_timeout=None, deadline=None, report_missing_metrics=True)

    @property
    def reads_logs(self) -> bool:
        """Whether following reads replica logs at all (to show them, for metrics, progress or a return value)."""
        return (
            self.get_logs
            or bool(self.metrics)
            or bool(self.return_marker)
            or bool(self.progress)
            or self.checkpoints
        )

    @property
    def job_kind(self) -> JobKind:
        return kind_named(self.kind)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "log_replicas": self.selection.spec}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> FollowOptions:
        """The options ``to_dict`` wrote; keys of another provider version are ignored (an option it
        lacks takes its default)."""
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in (data or {}).items() if k in known})


@dataclass
class FollowOutcome:
    """How following ended; JSON-serialisable through to_dict (the trigger's event payload).

    What the follow's parts saved (metrics, progress, the captured value, Kueue's summary...) is in
    ``parts``, by each part's section name (follow/parts.py): the outcome does not know them.
    """

    # "succeeded" | "failed" | "timeout" | "startup_timeout" | "cannot_start" | "error", or a part's own
    # (Kueue's: "queue_timeout" | "preempted" | "kueue_ignored" | "kueue_inadmissible")
    event: str
    status: JobStatus | None = None
    message: str = ""
    diagnostics: list[str] = field(default_factory=list)
    cursors: dict[str, Any] = field(default_factory=dict)
    # The failing replicas' diagnoses as data (diagnostics.ReplicaDiagnosis.to_dict()): what the
    # failure's cause is read from (follow/failure.py), in both modes.
    failures: list[dict[str, Any]] = field(default_factory=list)
    # Replica lines not shown, by replica and why (JobLogFollower.dropped): XCom log_lines_dropped.
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)
    # Every replica's container had exited and its log was read to the end: a drain of this follow
    # would read nothing (the worker's drain after a deferred follow is then left out).
    logs_read: bool = False
    # Each part's saved section (FollowPart.save), by its section name; JSON.
    parts: dict[str, Any] = field(default_factory=dict)

    def part(self, section: str, default: Any = None) -> Any:
        """What the part of that section saved (``default`` when it saved nothing, or was not made)."""
        value = self.parts.get(section)
        return default if value is None else value

    def to_dict(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "status": self.status.to_dict() if self.status else None,
            "message": self.message,
            "diagnostics": list(self.diagnostics),
            "cursors": self.cursors,
            "failures": list(self.failures),
            "dropped": self.dropped,
            "logs_read": self.logs_read,
            "parts": dict(self.parts),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FollowOutcome:
        status = data.get("status")
        return cls(
            event=str(data["event"]),
            status=JobStatus.from_dict(status) if status else None,
            message=str(data.get("message") or ""),
            diagnostics=list(data.get("diagnostics") or []),
            cursors=dict(data.get("cursors") or {}),
            failures=list(data.get("failures") or []),
            dropped={str(k): dict(v) for k, v in (data.get("dropped") or {}).items()},
            logs_read=bool(data.get("logs_read")),
            parts=dict(data.get("parts") or {}),
        )
