"""What the follow core tells and decides about a queued job (kueue/tracker.py), on the §3.2 lifecycle.

The API is replayed from constructed objects (tests/unit/kueue_objects.py): the tracker reads only
what the hooks' two Kueue calls return. The same code against the local cluster's Kueue emulation:
tests/integration/test_kueue.py.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import kueue_objects as k

from airflow_tfjob.constants import KUEUE_FAILURE_EVENTS
from airflow_tfjob.follow.outcome import FollowOptions, FollowOutcome
from airflow_tfjob.hooks.kueue import owned_by
from airflow_tfjob.integrations.kueue.tracker import QueueTracker
from airflow_tfjob.jobs.status import interpret


class ReplayedKueue:
    """The hooks' Kueue calls answering with the objects a test sets."""

    def __init__(self) -> None:
        self.workloads: list[dict] | None = []
        self.others: list[dict] = [k.preemptor_workload()]  # other jobs' Workloads in the namespace
        self.pending: dict | None = None
        self.pending_calls = 0

    async def list_workloads(self, namespace: str | None, job_uid: str) -> list[dict] | None:
        if self.workloads is None:
            return None
        return [copy.deepcopy(w) for w in [*self.workloads, *self.others] if owned_by(w, job_uid)]

    async def pending_workloads(self, namespace: str | None, local_queue: str) -> dict | None:
        self.pending_calls += 1
        return self.pending


def tracker(api: ReplayedKueue, **options: Any) -> tuple[QueueTracker, list[str]]:
    lines: list[str] = []
    return QueueTracker(api, "mnist", "team-a", FollowOptions.of(**options), lines.append), lines  # type: ignore[arg-type]


def observe(t: QueueTracker, job: dict) -> FollowOutcome | None:
    return asyncio.run(t.observe(job, interpret(job)))


def test_the_lifecycle_is_told_once_per_change() -> None:
    api = ReplayedKueue()
    t, lines = tracker(api)
    for step, job, wl in k.lifecycle():
        api.workloads = [wl]
        api.pending = k.pending_summary(1, 3) if step in ("created", "queued") else k.pending_summary(0, 0, "other")
        for _ in range(3):  # the same objects seen again (ticks) add nothing
            assert observe(t, job) is None
    told = [line.split(":")[0].split(" (")[0] for line in lines]
    assert told == [
        "[kueue] queued in LocalQueue user-queue",  # no condition yet
        "[kueue] queued in LocalQueue user-queue",  # Pending, with Kueue's message
        "[kueue] admitted by ClusterQueue cluster-queue after 42 s in the queue",
        "[kueue] running",
        "[kueue] preempted by TFJob team-a/urgent",  # the preemptor, named from the JobUID in the message
        "[kueue] queued in LocalQueue user-queue",
        "[kueue] resumed",
        "[kueue] running again after a preemption",
    ]
    assert "1 workload(s) ahead in the LocalQueue, 3 in its ClusterQueue" in lines[1]
    assert f"Pending: {k.PENDING}" in lines[1]
    assert k.PREEMPTED in lines[4]
    assert "after 10 s in the queue" in lines[6] and "preemptions so far: 1" in lines[6]
    assert t.summary() == {
        "queue": "user-queue",
        "cluster_queue": "cluster-queue",
        "workload": k.WORKLOAD,
        "wait_seconds": 52.0,
        "preemptions": 1,
    }


def test_a_new_message_or_position_is_told_again() -> None:
    api = ReplayedKueue()
    t, lines = tracker(api)
    _, job, wl = k.lifecycle()[1]
    api.workloads, api.pending = [wl], k.pending_summary(2, 2)
    observe(t, job)
    api.pending = k.pending_summary(1, 1)
    observe(t, k.job(k.JOB_SUSPENDED, suspend=True, version="9"))  # a job change: looked at again
    assert len(lines) == 2 and "1 workload(s) ahead" in lines[1]


def test_no_positions_when_the_visibility_api_gives_none() -> None:
    api = ReplayedKueue()
    t, lines = tracker(api)
    _, job, wl = k.lifecycle()[1]
    api.workloads, api.pending = [wl], None  # 404 or 403: no positions, not an error
    observe(t, job)
    observe(t, k.job(k.JOB_SUSPENDED, suspend=True, version="9"))
    assert api.pending_calls == 1 and "ahead" not in lines[0]


def test_queue_timeout_names_the_queue_the_position_and_kueues_message() -> None:
    api = ReplayedKueue()
    t, _ = tracker(api, queue_timeout=60.0)
    _, job, wl = k.lifecycle()[1]
    wl["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    api.workloads, api.pending = [wl], k.pending_summary(1, 4)
    outcome = observe(t, job)
    assert outcome is not None and outcome.event == "queue_timeout"
    assert "queue_timeout=60 s" in outcome.message and "LocalQueue user-queue" in outcome.message
    assert "1 workload(s) ahead" in outcome.message and k.PENDING in outcome.message


def test_queue_timeout_does_not_fire_once_admitted() -> None:
    api = ReplayedKueue()
    t, _ = tracker(api, queue_timeout=60.0)
    _, job, wl = k.lifecycle()[3]
    wl["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    api.workloads = [wl]
    assert observe(t, job) is None


def test_on_preemption_fail_ends_the_follow_with_kueues_message() -> None:
    api = ReplayedKueue()
    t, _ = tracker(api, on_preemption="fail")
    _, job, wl = k.lifecycle()[4]
    api.workloads = [wl]
    outcome = observe(t, job)
    assert outcome is not None and outcome.event == "preempted" and k.PREEMPTED in outcome.message


def test_a_missing_workload_warns_once_after_the_window_naming_the_framework() -> None:
    api = ReplayedKueue()
    t, lines = tracker(api, kueue_workload_window=30.0)
    job = k.job(k.JOB_CREATED, k.JOB_RUNNING)
    assert observe(t, job) is None and lines == []  # within the window: nothing yet
    t.started_at -= 31.0
    for _ in range(2):
        assert observe(t, job) is None
    assert len(lines) == 1 and lines[0].startswith("[kueue] warning: TFJob team-a/mnist")
    assert '"kubeflow.org/tfjob"' in lines[0] and "integrations.frameworks" in lines[0]
    assert "runs outside Kueue's quota" in lines[0]


def test_a_missing_workload_is_an_error_when_admission_is_required() -> None:
    api = ReplayedKueue()
    t, _ = tracker(api, kueue_workload_window=30.0, kueue_require_admission=True, kind="PyTorchJob")
    job = k.job(k.JOB_SUSPENDED, suspend=True)
    job["kind"] = "PyTorchJob"
    assert observe(t, job) is None
    t.started_at -= 31.0
    outcome = observe(t, job)
    assert outcome is not None and outcome.event == "kueue_ignored"
    assert '"kubeflow.org/pytorchjob"' in outcome.message and "stays suspended" in outcome.message


def test_no_kueue_api_at_all_is_told_at_once() -> None:
    api = ReplayedKueue()
    api.workloads = None  # both versions 404: Kueue is not installed
    t, lines = tracker(api, kueue_require_admission=True)
    outcome = observe(t, k.job(k.JOB_CREATED))
    assert outcome is not None and outcome.event == "kueue_ignored"
    assert "serves no Kueue Workload API" in outcome.message and len(lines) == 1



def test_a_job_kueue_can_never_admit_ends_once_kueues_words_stood_without_queue_timeout() -> None:
    import airflow_tfjob.integrations.kueue.tracker as tracker_module

    api = ReplayedKueue()
    t, _ = tracker(api)  # no queue_timeout at all: it would wait forever
    words = "LocalQueue team-q doesn't exist"
    api.workloads = [k.workload(k.cond("QuotaReserved", "False", "Inadmissible", words))]
    job = k.job(k.JOB_SUSPENDED, suspend=True)
    assert observe(t, job) is None  # first read: Kueue's cache may lag behind a queue just created
    assert t.wake_in() <= tracker_module.NEVER_CONFIRM  # the follow core comes back to confirm
    assert t.never is not None
    t.never = (t.never[0], t.never[1] - tracker_module.NEVER_CONFIRM)  # the words stood that long
    outcome = observe(t, job)
    assert outcome is not None and outcome.event == "kueue_inadmissible"
    assert f"Inadmissible: {words}" in outcome.message and "can never be admitted" in outcome.message
    assert "kueue_inadmissible" in KUEUE_FAILURE_EVENTS  # the operator deletes the job


def test_kueues_never_words_that_change_or_go_away_do_not_end_the_follow() -> None:
    api = ReplayedKueue()
    t, _ = tracker(api)
    job = k.job(k.JOB_SUSPENDED, suspend=True)
    api.workloads = [k.workload(k.cond("QuotaReserved", "False", "Inadmissible", "LocalQueue q doesn't exist"))]
    assert observe(t, job) is None and t.never is not None
    t.never = (t.never[0], t.never[1] - 60)
    # The queue appeared: Kueue now only lacks free quota. That waits (up to a queue_timeout, if set).
    api.workloads = [k.workload(k.cond("QuotaReserved", "False", "Pending", k.PENDING))]
    t.next_look = 0.0
    assert observe(t, job) is None and t.never is None


def test_queue_timeout_already_passed_is_said_before_kueues_never() -> None:
    api = ReplayedKueue()
    t, _ = tracker(api, queue_timeout=2.0)
    wl = k.workload(k.cond("QuotaReserved", "False", "Inadmissible", "ClusterQueue cq is inactive"))
    wl["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    api.workloads = [wl]
    job = k.job(k.JOB_SUSPENDED, suspend=True)
    outcome = observe(t, job)
    assert outcome is not None and outcome.event == "queue_timeout"
    assert "ClusterQueue cq is inactive" in outcome.message
