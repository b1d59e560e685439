"""The provider behind each Kueue profile of the local cluster (issue 38, item 2): the early verdicts read
Kueue 0.20's granular QuotaReserved reasons as they read 0.19's ``Inadmissible``/``Pending`` words (a queue
that can never admit fails at once, naming Kueue's reason and the fix; a job waiting for quota is told
queued), a TrainJob behind Kueue 0.20 is told running while it runs, sync and deferred, and the hooks read
Workloads at the version each profile serves. test_kueue.py runs whole on both profiles too.

One cluster per profile (``kueue=0.19``, the default, and ``kueue=0.20``), with the queues and helpers of
test_kueue.py: ``one`` (1 cpu), ``two`` (2 cpu), ``none`` (no quota)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_support import TaskInstance, context_for, defer, fire, first_event, rebuild_trigger, wait_for
from test_deferred_parity import TaskLog
from test_kueue import (
    TRAINJOB,
    first,
    job_task,
    kueue_lines,
    operator,
    queued_cluster,
    replica_prefix,
    run_in_thread,
    use_cluster,
)

from airflow_tfjob.version_compat import AirflowException

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

NS = "default"
OLD, NEW = "kueue=0.19", "kueue=0.20"


@pytest.fixture(scope="module", params=[OLD, NEW])
def profile_cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    with queued_cluster(request.param) as cluster:
        yield cluster


@pytest.fixture
def profile(profile_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """The connection to the profile's cluster set; returns the profile's Kueue (``kueue=0.19``)."""
    use_cluster(profile_cluster, monkeypatch)
    return f"kueue={profile_cluster.runtime.profile.kueue.version}"


def run(log: TaskLog, deferrable: bool, **params: Any) -> str:
    """Run the task to its end in the mode asked; the error it raised."""
    ti = TaskInstance(task_id=params["task_id"])
    op = operator(log, deferrable=deferrable, **params)
    with pytest.raises(AirflowException) as raised:
        if deferrable:
            event = fire(defer(op, ti))
            operator(log, deferrable=True, **params).execute_complete(context_for(ti), event)
        else:
            op.execute(context_for(ti))
    return str(raised.value)


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferred"])
def test_a_request_above_the_queues_maximum_fails_at_once_naming_kueues_reason_and_the_fix(
    profile: str, deferrable: bool
) -> None:
    message = run(TaskLog(), deferrable, task_id="too-big", kueue_queue="one", container_resources={"cpu": "2"},
                  queue_timeout=3600)
    reason = "ExceedsMaxQuota" if profile == NEW else "Pending"
    assert "can never be admitted by Kueue" in message
    assert (
        f"{reason}: couldn't assign flavors to pod set worker: insufficient quota for cpu in flavor f-one, "
        "previously considered podsets requests (0) + current podset request (2) > maximum capacity (1)"
    ) in message
    assert "lower the job's resource requests to what the ClusterQueue can ever give, or raise its nominalQuota" in (
        message
    )


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferred"])
def test_a_missing_local_queue_fails_at_once_naming_kueues_reason_and_the_fix(profile: str, deferrable: bool) -> None:
    message = run(TaskLog(), deferrable, task_id="lost", kueue_queue="no-such-queue", queue_timeout=3600)
    reason = "Misconfigured" if profile == NEW else "Inadmissible"
    assert f"{reason}: LocalQueue no-such-queue doesn't exist" in message
    assert "create LocalQueue no-such-queue in the job's namespace, or set kueue_queue to a LocalQueue that exists" in (
        message
    )


def test_a_job_waiting_for_quota_is_told_queued_and_left_to_its_queue_timeout(profile: str, tmp_path: Path) -> None:
    """Behind a job that holds the whole quota: queued with Kueue's words (WaitingForQuota on 0.20), never
    taken for a job that cannot be admitted; its queue_timeout ends it."""
    blocker_log, log = TaskLog(), TaskLog()
    # The holder runs until the job behind it has timed out (its HOLD file), not for a fixed 6 s that a
    # slow start of the job behind once outlasted (it was admitted and succeeded).
    hold = tmp_path / "hold"
    blocker = operator(blocker_log, task_id="holder", kueue_queue="one", env={"LINES": "1", "HOLD": str(hold)})
    thread, held = run_in_thread(blocker, TaskInstance(task_id="holder"))
    wait_for(lambda: any(line.startswith("[kueue] running") for line in blocker_log.lines), 60, "the holder running")
    try:
        message = run(log, False, task_id="behind", kueue_queue="one", queue_timeout=4)
    finally:
        hold.touch()
    thread.join(60)
    assert "result" in held, held.get("error")
    reason = "WaitingForQuota" if profile == NEW else "Pending"
    assert "not admitted within queue_timeout=4 s" in message and "can never be admitted" not in message
    said = f"{reason}: couldn't assign flavors to pod set worker: insufficient unused quota for cpu in flavor f-one"
    assert said in message
    assert any(line.startswith("[kueue] queued in LocalQueue one") and said in line for line in kueue_lines(log))


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferred"])
def test_a_queued_trainjob_is_told_running_while_it_runs(profile: str, deferrable: bool) -> None:
    """A TrainJob queued behind another on the same quota is told queued, admitted, then running before its
    node's last line (a TrainJob has no Running condition: the state comes from jobsStatus and its pods)."""
    first_log, log = TaskLog(), TaskLog()
    blocker = job_task(first_log, TRAINJOB, task_id="ahead", kueue_queue="one", env={"LINES": "30", "STEP": "0.1"})
    thread, ahead = run_in_thread(blocker, TaskInstance(task_id="ahead"))
    wait_for(lambda: any(line.startswith("[kueue] running") for line in first_log.lines), 60, "the first running")
    params: dict[str, Any] = {"task_id": "queued-tj", "kueue_queue": "one", "env": {"LINES": "30", "STEP": "0.1"}}
    ti = TaskInstance(task_id="queued-tj")
    if deferrable:
        trigger = rebuild_trigger(defer(job_task(log, TRAINJOB, deferrable=True, **params), ti))
        log.attach(trigger)
        event = asyncio.run(first_event(trigger))
        result = job_task(log, TRAINJOB, deferrable=True, **params).execute_complete(context_for(ti), event)
    else:
        result = job_task(log, TRAINJOB, **params).execute(context_for(ti))
    thread.join(60)
    assert "result" in ahead, ahead.get("error")
    assert result["state"] == "succeeded"
    lines = kueue_lines(log)
    queued, admitted, running = (first(lines, p) for p in ("[kueue] queued", "[kueue] admitted", "[kueue] running"))
    assert queued < admitted < running
    if profile == NEW:
        assert "WaitingForQuota" in lines[queued]
    # Running was told while the node ran: before its last line reached the log.
    told = log.lines.index(lines[running])
    last = log.lines.index(replica_prefix(TRAINJOB) + "done")
    assert told < last


def test_the_hooks_read_workloads_at_the_version_the_cluster_serves(profile: str) -> None:
    """The Workload version is discovered, v1beta2 preferred (the only one served on 0.20,
    kueue#14558), and a version remembered from before an upgrade (v1beta1) is read where still served
    (0.19, handed on in v1beta2's shape) or discovered again where it answers 404 (0.20); sync and async."""
    from airflow_tfjob.hooks import kueue
    from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook, KubeflowJobHook

    hook = KubeflowJobHook(conn_id="kubernetes_default")
    hook._workload_version = kueue.WorkloadVersion()  # this cluster's fact, not one an earlier module left
    job = operator(TaskLog(), task_id="versioned", kueue_queue="none").build_manifest(
        context_for(TaskInstance(task_id="versioned"))
    )
    uid = hook.create_job("TFJob", job, NS)["metadata"]["uid"]
    try:
        (found,) = wait_for(lambda: hook.list_workloads(NS, uid), 30, "the job's Workload")
        assert (hook._workload_version.served, found["apiVersion"]) == ("v1beta2", "kueue.x-k8s.io/v1beta2")
        ahook = AsyncKubeflowJobHook(conn_id="kubernetes_default")
        ahook._workload_version = kueue.WorkloadVersion(served="v1beta1")  # remembered from an older Kueue
        (afound,) = asyncio.run(ahook.list_workloads(NS, uid))
        # 0.19 still serves v1beta1 (read there); 0.20 answers 404, and v1beta2 is discovered.
        assert ahook._workload_version.served == ("v1beta2" if profile == NEW else "v1beta1")
        assert afound["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        for read in (found, afound):
            read["metadata"].pop("resourceVersion", None), read["metadata"].pop("managedFields", None)
        assert (afound["spec"], afound["metadata"]) == (found["spec"], found["metadata"])
        assert set(afound["status"]) == set(found["status"])
    finally:
        hook.delete_job("TFJob", job["metadata"]["name"], NS)
