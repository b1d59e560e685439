"""The job's place in Kueue read from its Workload (kueue/workload.py), step by step through §3.2."""

from __future__ import annotations

import kueue_objects as k
import pytest

from airflow_tfjob.hooks.kueue import owned_by
from airflow_tfjob.integrations.kueue.workload import (
    QueueState,
    describe,
    integration_hint,
    never_admitted,
    never_fix,
    position_of,
    preemption_count,
    view,
)
from airflow_tfjob.jobs.kinds import ALL_KINDS, TFJOB
from airflow_tfjob.jobs.status import epoch_seconds, interpret

EXPECTED = {
    "created": QueueState.QUEUED,  # no condition yet: QuotaReserved absent counts as not reserved (§5.2)
    "queued": QueueState.QUEUED,
    "admitted": QueueState.ADMITTED,  # Admitted=True, the job not unsuspended yet
    "running": QueueState.RUNNING,
    "being preempted": QueueState.PREEMPTED,  # Evicted=True while QuotaReserved is still True
    "requeued": QueueState.QUEUED,
    "re-admitted": QueueState.ADMITTED,
    "running again": QueueState.RUNNING,
    "finished": QueueState.FINISHED,
}


@pytest.mark.parametrize(("step", "job", "wl"), k.lifecycle(), ids=[s for s, _, _ in k.lifecycle()])
def test_each_step_of_the_lifecycle_reads_as_its_state(step: str, job: dict, wl: dict) -> None:
    assert view(job, interpret(job), wl).state is EXPECTED[step]


def test_queued_shows_kueue_reason_and_message_verbatim() -> None:
    _, job, wl = k.lifecycle()[1]
    seen = view(job, interpret(job), wl)
    assert (seen.queue, seen.reason, seen.message) == ("user-queue", "Pending", k.PENDING)
    assert seen.cluster_queue is None and seen.waited is None


def test_any_reason_of_quota_reserved_false_is_queued_not_only_pending() -> None:
    # UnadmittedWorkloadsObservability's granular reasons (§3.1) must read the same.
    wl = k.workload(k.cond("QuotaReserved", "False", "WaitingForQuota", "waiting"))
    job = k.job(k.JOB_SUSPENDED, suspend=True)
    seen = view(job, interpret(job), wl)
    assert (seen.state, seen.reason) == (QueueState.QUEUED, "WaitingForQuota")


def test_admission_gives_the_wait_as_kueue_counts_it() -> None:
    _, job, wl = k.lifecycle()[2]
    seen = view(job, interpret(job), wl)
    assert seen.cluster_queue == "cluster-queue"
    assert seen.waited == 42.0  # QuotaReserved's transition minus the Workload's creation


def test_after_a_requeue_the_wait_counts_from_the_requeue() -> None:
    _, job, wl = k.lifecycle()[6]
    seen = view(job, interpret(job), wl)
    assert seen.waited == 10.0  # 10:05:13 - Requeued at 10:05:03
    assert seen.eviction is None  # reset to False ("Previously: ...") by the re-admission


def test_preemption_carries_kueue_message_and_count() -> None:
    _, job, wl = k.lifecycle()[4]
    seen = view(job, interpret(job), wl)
    assert seen.eviction is not None and seen.eviction.reason == "Preempted"
    assert k.PREEMPTOR_JOB_UID in seen.eviction.message
    assert seen.preemptions == 1 == preemption_count(wl)
    # requeued: queued again, the eviction still True until the next admission
    _, job, wl = k.lifecycle()[5]
    seen = view(job, interpret(job), wl)
    assert seen.state is QueueState.QUEUED and seen.eviction is not None and seen.message == k.PREEMPTED


def test_other_evictions_are_not_preemptions() -> None:
    wl = k.workload(
        k.RESERVED, k.ADMITTED,
        k.cond("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout team-a/tfjob-mnist-3f2a1"),
        admitted=True,
    )
    job = k.job(k.JOB_RUNNING, suspend=True)
    seen = view(job, interpret(job), wl)
    assert seen.state is QueueState.PREEMPTED and seen.eviction is not None
    assert seen.eviction.reason == "PodsReadyTimeout" and seen.preemptions == 0


def test_no_workload() -> None:
    job = k.job(k.JOB_CREATED, k.JOB_RUNNING)
    seen = view(job, interpret(job), None)
    assert (seen.state, seen.queue, seen.job_suspended) == (QueueState.NO_WORKLOAD, "user-queue", False)
    job = k.job(k.JOB_SUSPENDED, suspend=True)
    assert view(job, interpret(job), None).job_suspended


def test_ownership_by_label_or_owner_reference() -> None:
    wl = k.workload()
    assert owned_by(wl, k.JOB_UID)
    del wl["metadata"]["labels"]
    assert owned_by(wl, k.JOB_UID)
    assert not owned_by(wl, "another-uid")


def test_position_from_the_pending_workloads_summary() -> None:
    assert position_of(k.pending_summary(2, 5), k.WORKLOAD, k.JOB_UID) == (2, 5)
    assert position_of(k.pending_summary(0, 0, name="other"), k.WORKLOAD, k.JOB_UID) == (0, 0)  # by owner
    assert position_of({"items": []}, k.WORKLOAD, k.JOB_UID) is None
    assert position_of(None, k.WORKLOAD, k.JOB_UID) is None


def test_framework_names_are_kueues() -> None:
    # §9.1: the names in integrations.frameworks
    assert [kind.kueue_framework for kind in ALL_KINDS] == [
        "kubeflow.org/tfjob",
        "kubeflow.org/pytorchjob",
        "kubeflow.org/xgboostjob",
        "kubeflow.org/jaxjob",
        "kubeflow.org/paddlejob",
        "trainer.kubeflow.org/trainjob",
    ]
    assert "kueue-manager-config" in integration_hint(TFJOB) and "kueue-system" in integration_hint(TFJOB)


def test_the_sensors_phrase_for_each_state() -> None:
    phrases = [describe(view(job, interpret(job), wl)) for _, job, wl in k.lifecycle()]
    assert phrases[1] == f"Kueue: queued in LocalQueue user-queue: Pending: {k.PENDING}"
    assert phrases[2] == "Kueue: admitted by ClusterQueue cluster-queue"
    assert phrases[3] == "Kueue: running (admitted by ClusterQueue cluster-queue)"
    assert phrases[4] == f"Kueue: evicted (Preempted): {k.PREEMPTED}"
    assert phrases[5].startswith("Kueue: queued again after an eviction in LocalQueue user-queue: Pending: Preempted")
    assert phrases[8] == "Kueue: finished (Succeeded)"
    _, job, wl = k.lifecycle()[1]
    assert "(1 workload(s) ahead in the LocalQueue, 3 in its ClusterQueue)" in describe(
        view(job, interpret(job), wl), (1, 3)
    )


def test_after_a_pods_ready_timeout_the_queue_clock_starts_at_the_requeue() -> None:
    # Requeued=False while the backoff runs (§6): Kueue's clock reads its transition all the same.
    at = "2026-12-01T10:31:00Z"
    wl = k.workload(
        k.cond("QuotaReserved", "False", "Pending", "Exceeded the PodsReady timeout team-a/tfjob-mnist-3f2a1", at),
        k.cond("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout team-a/tfjob-mnist-3f2a1", at),
        k.cond("Requeued", "False", "PodsReadyTimeout", "Exceeded the PodsReady timeout team-a/tfjob-mnist-3f2a1", at),
    )
    job = k.job(k.JOB_SUSPENDED, suspend=True)
    seen = view(job, interpret(job), wl)
    assert seen.state is QueueState.QUEUED and seen.queued_since == epoch_seconds(at)


# Kueue v0.19.2's own words (workload_controller.go getQueueBlocker, reconcileOn*QueueActiveState;
# flavorassigner.go fitsResourceQuota, findFlavorForPodSetResource; scheduler nominate), §3.1, §3.3, §5.3.
MAX = (
    "insufficient quota for cpu in flavor default, previously considered podsets requests (0) + "
    "current podset request (4) > maximum capacity (2)"
)
NEVER = [
    ("Inadmissible", "LocalQueue team-q doesn't exist"),
    ("Inadmissible", "LocalQueue team-q is inactive"),
    ("Inadmissible", "ClusterQueue cq doesn't exist"),
    ("Inadmissible", "ClusterQueue cq is inactive"),
    ("Inadmissible", "LocalQueue team-q is stopped"),
    ("Inadmissible", "ClusterQueue cq is terminating or missing"),
    ("Misconfigured", "LocalQueue team-q doesn't exist"),  # the granular gate's reasons
    ("Suspended", "ClusterQueue cq is inactive"),
    ("ExceedsMaxQuota", MAX),
    ("NoMatchingFlavor", "couldn't assign flavors to pod set worker: flavor a doesn't match node affinity"),
    ("Pending", f"couldn't assign flavors to pod set worker: {MAX}"),
    ("Pending", f"couldn't assign flavors to pod set ps: {MAX}; couldn't assign flavors to pod set worker: {MAX}"),
    ("Pending", "couldn't assign flavors to pod set worker: resource nvidia.com/gpu unavailable in ClusterQueue"),
    (
        "Pending",
        "couldn't assign flavors to pod set worker: flavor spot doesn't match node affinity, "
        + MAX.replace("default", "on-demand"),
    ),
    ("Pending", "couldn't assign flavors to pod set worker: untolerated taint {gpu true NoSchedule <nil>} in flavor a"),
    ("Pending", "ClusterQueue cq is inactive"),
    ("Pending", "workload namespace doesn't match ClusterQueue selector"),
]
SOME_DAY = [
    ("Pending", k.PENDING),  # insufficient unused quota: others will finish
    ("Pending", f"{k.PENDING}. Pending the preemption of 1 workload(s)"),
    # one flavor is too small, the other is only full: it fits once that one frees up
    ("Pending", f"couldn't assign flavors to pod set worker: {MAX}, " + k.PENDING.split(": ", 1)[1]),
    ("Pending", f"couldn't assign flavors to pod set ps: {MAX}; {k.PENDING}"),  # pod set worker only waits
    ("Pending", k.PREEMPTED),  # the Evicted message of a preempted job, requeued
    ("Pending", "Workload no longer fits after processing another workload"),
    ("WaitingForQuota", "waiting"),
    ("Waiting", "waiting for all admitted workloads to be in PodsReady condition"),
    ("Pending", ""),
]


@pytest.mark.parametrize(("reason", "message"), NEVER)
def test_kueues_words_for_a_job_it_can_never_admit(reason: str, message: str) -> None:
    wl = k.workload(k.cond("QuotaReserved", "False", reason, message))
    job = k.job(k.JOB_SUSPENDED, suspend=True)
    assert never_admitted(view(job, interpret(job), wl))


@pytest.mark.parametrize(("reason", "message"), SOME_DAY)
def test_kueues_words_for_a_job_that_may_still_be_admitted(reason: str, message: str) -> None:
    wl = k.workload(k.cond("QuotaReserved", "False", reason, message))
    job = k.job(k.JOB_SUSPENDED, suspend=True)
    assert not never_admitted(view(job, interpret(job), wl))


def test_only_a_queued_job_is_judged() -> None:
    for _, job, wl in k.lifecycle()[2:]:
        assert not never_admitted(view(job, interpret(job), wl))


#: (reason, message) as Kueue 0.19's default gates and as 0.20 write them for the same case, and the fix told.
FIXES = [
    (("Inadmissible", "Misconfigured"), "LocalQueue lq doesn't exist",
     "create LocalQueue lq in the job's namespace, or set kueue_queue to a LocalQueue that exists"),
    (("Inadmissible", "Misconfigured"), "ClusterQueue cq doesn't exist",
     "create ClusterQueue cq, or point the LocalQueue at a ClusterQueue that exists"),
    (("Pending", "Misconfigured"), "workload namespace doesn't match ClusterQueue selector",
     "add the job's namespace to the ClusterQueue's spec.namespaceSelector, or use a LocalQueue whose "
     "ClusterQueue selects it"),
    (("Inadmissible", "Suspended"), "ClusterQueue cq is inactive",
     "resume ClusterQueue cq (spec.stopPolicy: None; a ClusterQueue is also inactive while a ResourceFlavor it "
     "names is missing)"),
    (("Pending", "ExceedsMaxQuota"),
     "couldn't assign flavors to pod set worker: insufficient quota for cpu in flavor f, previously considered "
     "podsets requests (0) + current podset request (2) > maximum capacity (1)",
     "lower the job's resource requests to what the ClusterQueue can ever give, or raise its nominalQuota"),
    (("Pending", "NoMatchingFlavor"), "couldn't assign flavors to pod set worker: resource cpu unavailable in "
     "ClusterQueue",
     "add the resource to the ClusterQueue's resourceGroups, or match a flavor's node labels and taints"),
]


@pytest.mark.parametrize(("reasons", "message", "fix"), FIXES, ids=[f[0][1] + "-" + str(i) for i, f in enumerate(FIXES)])
def test_the_fix_for_a_job_kueue_can_never_admit_is_the_same_on_0_19_and_0_20(
    reasons: tuple[str, str], message: str, fix: str
) -> None:
    job = k.job(k.JOB_SUSPENDED, suspend=True)
    for reason in reasons:
        current = view(job, interpret(job), k.workload(k.cond("QuotaReserved", "False", reason, message)))
        assert never_admitted(current) and never_fix(current) == fix, reason


def test_a_granular_reason_alone_still_names_its_fix() -> None:
    """Kueue 0.20's reason says the case even when its message is one the provider does not know."""
    job = k.job(k.JOB_SUSPENDED, suspend=True)
    said = {
        reason: never_fix(view(job, interpret(job), k.workload(k.cond("QuotaReserved", "False", reason, "new words"))))
        for reason in ("Suspended", "ExceedsMaxQuota", "Misconfigured", "Inadmissible")
    }
    assert said["Suspended"].startswith("resume the stopped queue")
    assert said["ExceedsMaxQuota"].startswith("lower the job's resource requests")
    assert said["Misconfigured"].startswith("create the missing LocalQueue or ClusterQueue")
    assert said["Inadmissible"] == "fix the queue or the job's resource requests"
