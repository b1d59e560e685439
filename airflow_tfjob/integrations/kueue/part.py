"""Kueue as a follow part: a job that carries Kueue's queue label has its place in Kueue told and held
to its limits (tracker.py) by the follow core, which knows neither Kueue nor its label.

The tracker is made at the first sight of the label; until then the part costs the follow nothing but
one label lookup per change of the job. A drain (the worker's, after a deferred follow) only reads what
is left of the logs: it has no queue part, and the trigger's summary stands.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_tfjob.constants import KUEUE_QUEUE_LABEL
from airflow_tfjob.follow.outcome import FollowOutcome
from airflow_tfjob.follow.parts import Follow, FollowPart
from airflow_tfjob.integrations.kueue.tracker import KueueOptions, QueueTracker
from airflow_tfjob.jobs.status import JobStatus


class QueuePart(FollowPart):
    """The job's place in Kueue (tracker.QueueTracker) once it shows the queue label."""

    __slots__ = ("follow", "tracker")
    section = "queue"
    options_type = KueueOptions

    def __init__(self, follow: Follow) -> None:
        self.follow = follow
        self.tracker: QueueTracker | None = None

    @classmethod
    def start(cls, follow: Follow) -> QueuePart | None:
        return cls(follow) if follow.earlier is None else None

    async def on_job(self, job: Mapping[str, Any], status: JobStatus) -> FollowOutcome | None:
        if self.tracker is None:
            labels = (job.get("metadata") or {}).get("labels") or {}
            if not labels.get(KUEUE_QUEUE_LABEL):
                return None
            f = self.follow
            self.tracker = QueueTracker(f.hook, f.name, f.namespace, f.options, f.sink)
        admitted = len(self.tracker.admissions)
        verdict = await self.tracker.observe(job, status)
        if self.tracker.evictions and len(self.tracker.admissions) > admitted:
            # Admitted again after a preemption: its pods start over (from the newest checkpoint).
            self.follow.restarted()
        return verdict

    def wake_in(self) -> float | None:
        return self.tracker.wake_in() if self.tracker is not None else None

    def waiting_for(self) -> str | None:
        return self.tracker.waiting_for() if self.tracker is not None else None

    def startup_counts_from(self) -> str | None:
        # The start-up clock restarts while the job is suspended in the queue (the core's rule).
        return "its admission by Kueue" if self.tracker is not None else None

    def save(self) -> dict[str, Any] | None:
        return self.tracker.summary() if self.tracker is not None else None
