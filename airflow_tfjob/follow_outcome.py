"""What following a job takes and gives: its options and its outcome, both JSON-serialisable.

Apart from ``follow.py`` so that the operator, the trigger and the decorator can name them without
loading the follow core.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_tfjob.kinds import JobKind, kind_named
from airflow_tfjob.status import JobStatus


@dataclass
class FollowOptions:
    """How to follow a job; JSON-serialisable (it travels in the trigger's kwargs)."""

    log_replicas: str = "master"
    startup_timeout: float | None = 600.0
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

    @property
    def reads_logs(self) -> bool:
        """Whether following reads replica logs at all (to show them, for metrics, progress or a return value)."""
        return self.get_logs or bool(self.metrics) or bool(self.return_marker) or bool(self.progress)

    @property
    def job_kind(self) -> JobKind:
        return kind_named(self.kind)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> FollowOptions:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in (data or {}).items() if k in known})


@dataclass
class FollowOutcome:
    """How following ended; JSON-serialisable through to_dict (the trigger's event payload)."""

    # "succeeded" | "failed" | "timeout" | "startup_timeout" | "error"; Kueue's (kueue/tracker.py):
    # "queue_timeout" | "preempted" | "kueue_ignored"
    event: str
    status: JobStatus | None = None
    message: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    diagnostics: list[str] = field(default_factory=list)
    cursors: dict[str, Any] = field(default_factory=dict)
    return_payload: str | None = None  # text after the return marker on the master's last such line
    progress: dict[str, Any] | None = None  # ProgressTracker.state(): the figures and the timeline
    queue: dict[str, Any] | None = None  # QueueTracker.summary(): Kueue's queue, wait, preemptions

    def to_dict(self) -> dict[str, Any]:
        return {
            "return_payload": self.return_payload,
            "progress": self.progress,
            "queue": self.queue,
            "event": self.event,
            "status": self.status.to_dict() if self.status else None,
            "message": self.message,
            "metrics": self.metrics,
            "diagnostics": list(self.diagnostics),
            "cursors": self.cursors,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FollowOutcome:
        status = data.get("status")
        return cls(
            event=str(data["event"]),
            status=JobStatus.from_dict(status) if status else None,
            message=str(data.get("message") or ""),
            metrics=dict(data.get("metrics") or {}),
            diagnostics=list(data.get("diagnostics") or []),
            cursors=dict(data.get("cursors") or {}),
            return_payload=data.get("return_payload"),
            progress=data.get("progress"),
            queue=data.get("queue"),
        )
