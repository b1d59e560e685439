"""Admission by the Kueue emulation, through the official client over real HTTP with real replica
processes: queued behind quota then admitted when the first job finishes, priority then creation order,
StrictFIFO against BestEffortFIFO, preemption of a lower-priority running job (its pods gone whatever
its cleanPodPolicy, quota released, requeued, re-admitted), the visibility API's positions, every kind of
the local cluster, and deletion (docs/reference/kueue-behaviour.md §3-§8)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio import config as aconfig
from kueue_support import (
    KUEUE,
    NS,
    V2,
    Kube,
    admitted,
    cond,
    is_true,
    labelled_job,
    suspended,
    wait_then_exit,
)
from waiting import until

from airflow_tfjob.jobs.kinds import KINDS, TFJOB, JobKind
from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.kueue import KUBEFLOW_V1, queue_objects

PRIORITIES = {"high": 1000, "low": 10}


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    objects = [o for o in queue_objects(priorities=PRIORITIES) if o["kind"] == "WorkloadPriorityClass"]
    with LocalCluster(workdir=tmp_path_factory.mktemp("kueue-admission"),
                      kueue={"integrations": KUBEFLOW_V1, "objects": objects}) as cluster:
        yield Kube.on(cluster)


def pending(wl: dict[str, object]) -> bool:
    found = cond(wl, "QuotaReserved")  # type: ignore[arg-type]
    return found is not None and found[0] == "False"


def running(kube: Kube, kind: JobKind, name: str) -> bool:
    return is_true(kube.job(kind, name), "Running")


def cq_status(kube: Kube, name: str) -> dict[str, object]:
    return dict(kube.crd.get_cluster_custom_object(KUEUE, V2, "clusterqueues", name).get("status") or {})


def test_a_job_waits_behind_quota_and_is_admitted_when_the_first_finishes(kube: Kube, tmp_path: Path) -> None:
    q = kube.queue("q-fifo", {"cpu": 1})
    kube.create(labelled_job(TFJOB, "first", q, wait_then_exit(tmp_path / "first")))
    kube.wait_workload(TFJOB, "first", admitted, "admitted")
    until(lambda: running(kube, TFJOB, "first"), "first to run")
    kube.create(labelled_job(TFJOB, "second", q, wait_then_exit(tmp_path / "second")))
    wl = kube.wait_workload(TFJOB, "second", pending, "pending")
    assert cond(wl, "QuotaReserved") == ("False", "Pending", "couldn't assign flavors to pod set worker: insufficient "
                                         "unused quota for cpu in flavor q-fifo-flavor, 1 more needed")
    assert cond(wl, "Admitted") is None and "admission" not in wl["status"]
    assert suspended(kube.job(TFJOB, "second")) and kube.pods("second") == []
    until(lambda: cq_status(kube, q).get("pendingWorkloads") == 1, "the ClusterQueue to count one pending")
    assert cq_status(kube, q)["admittedWorkloads"] == 1
    (tmp_path / "first").touch()
    done = kube.wait_workload(TFJOB, "first", lambda w: is_true(w, "Finished"), "finished")
    assert cond(done, "Finished")[:2] == ("True", "Succeeded")  # type: ignore[index]
    second = kube.wait_workload(TFJOB, "second", admitted, "admitted once the quota is free")
    assert cond(second, "QuotaReserved") == ("True", "QuotaReserved", "Quota reserved in ClusterQueue q-fifo")
    until(lambda: running(kube, TFJOB, "second"), "second to run")
    (tmp_path / "second").touch()


def test_higher_priority_goes_first_and_positions_follow_the_queue_order(kube: Kube, tmp_path: Path) -> None:
    q = kube.queue("q-prio", {"cpu": 1})
    kube.create(labelled_job(TFJOB, "blocker", q, wait_then_exit(tmp_path / "blocker")))
    kube.wait_workload(TFJOB, "blocker", admitted, "admitted")
    kube.create(labelled_job(TFJOB, "low-1", q, wait_then_exit(tmp_path / "low-1"), priority="low"))
    kube.create(labelled_job(TFJOB, "low-2", q, wait_then_exit(tmp_path / "low-2"), priority="low"))
    kube.create(labelled_job(TFJOB, "high", q, wait_then_exit(tmp_path / "high"), priority="high"))
    until(lambda: cq_status(kube, q).get("pendingWorkloads") == 3, "three pending")
    summary = kube.visibility(f"clusterqueues/{q}/pendingworkloads")
    assert summary["kind"] == "PendingWorkloadsSummary"
    assert summary["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta1"
    items = summary["items"]
    assert [i["metadata"]["ownerReferences"][0]["name"] for i in items] == ["high", "low-1", "low-2"]
    assert [(i["priority"], i["positionInClusterQueue"], i["positionInLocalQueue"], i["localQueueName"])
            for i in items] == [(1000, 0, 0, q), (10, 1, 1, q), (10, 2, 2, q)]
    assert items[0]["metadata"]["name"] == kube.workload(TFJOB, "high")["metadata"]["name"]  # type: ignore[index]
    local = kube.visibility(f"namespaces/{NS}/localqueues/{q}/pendingworkloads", "v1beta2")
    assert [i["positionInLocalQueue"] for i in local["items"]] == [0, 1, 2]
    paged = kube.visibility(f"clusterqueues/{q}/pendingworkloads", limit=1, offset=1)
    assert [(i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in paged["items"]] == [(1, 1)]
    (tmp_path / "blocker").touch()
    kube.wait_workload(TFJOB, "high", admitted, "the high-priority job admitted first")
    assert not admitted(kube.workload(TFJOB, "low-1"))  # type: ignore[arg-type]
    (tmp_path / "high").touch()
    kube.wait_workload(TFJOB, "low-1", admitted, "then the older of the low ones")
    assert not admitted(kube.workload(TFJOB, "low-2"))  # type: ignore[arg-type]
    (tmp_path / "low-1").touch()
    (tmp_path / "low-2").touch()


def test_visibility_of_an_unknown_queue_is_404_and_kubernetes_asyncio_reads_it(kube: Kube) -> None:
    for path in ("clusterqueues/nope/pendingworkloads", f"namespaces/{NS}/localqueues/nope/pendingworkloads"):
        with pytest.raises(client.ApiException) as caught:
            kube.visibility(path)
        assert caught.value.status == 404
    kube.queue("q-async", {"cpu": 1})

    async def read() -> dict[str, object]:
        api = await aconfig.new_client_from_config(str(kube.cluster.kubeconfig_path))
        async with api:
            return dict(await aclient.CustomObjectsApi(api).get_cluster_custom_object(
                "visibility.kueue.x-k8s.io", "v1beta2", "clusterqueues", "q-async/pendingworkloads"))

    import asyncio

    summary = asyncio.run(read())
    assert (summary["kind"], summary["items"]) == ("PendingWorkloadsSummary", [])


@pytest.mark.parametrize("strategy", ["StrictFIFO", "BestEffortFIFO"])
def test_strict_fifo_blocks_behind_its_head_best_effort_admits_what_fits(
        kube: Kube, tmp_path: Path, strategy: str) -> None:
    q = kube.queue(f"q-{strategy.lower()}", {"cpu": 2}, strategy=strategy)
    small, big = f"small-{strategy.lower()}", f"big-{strategy.lower()}"
    user = f"user-{strategy.lower()}"
    kube.create(labelled_job(TFJOB, user, q, wait_then_exit(tmp_path / "user")))
    kube.wait_workload(TFJOB, user, admitted, "admitted")
    kube.create(labelled_job(TFJOB, big, q, wait_then_exit(tmp_path / "big"), cpu="2"))
    kube.wait_workload(TFJOB, big, pending, "pending")
    kube.create(labelled_job(TFJOB, small, q, wait_then_exit(tmp_path / "small")))
    if strategy == "StrictFIFO":
        # The cycle that saw both pending ends by counting them: the small one was never tried.
        until(lambda: cq_status(kube, q).get("pendingWorkloads") == 2, "two pending")
        wl = kube.workload(TFJOB, small)
        assert wl is not None and not admitted(wl) and cond(wl, "QuotaReserved") is None
    else:
        kube.wait_workload(TFJOB, small, admitted, "the small job admitted past the big one")
        assert pending(kube.workload(TFJOB, big))  # type: ignore[arg-type]
    for name in ("user", "big", "small"):
        (tmp_path / name).touch()
    kube.wait_workload(TFJOB, big, admitted, "the big job admitted in the end")


def test_preemption_suspends_the_lower_priority_job_deletes_its_pods_and_readmits_it(
        kube: Kube, tmp_path: Path) -> None:
    q = kube.queue("q-preempt", {"cpu": 1}, preemption="LowerPriority")
    kube.create(labelled_job(TFJOB, "victim", q, wait_then_exit(tmp_path / "victim", lines=3), priority="low",
                             cleanPodPolicy="None"))
    kube.wait_workload(TFJOB, "victim", admitted, "admitted")
    until(lambda: running(kube, TFJOB, "victim"), "the victim to run")
    old_pod = kube.pods("victim")[0].metadata.uid
    preemptor = kube.create(labelled_job(TFJOB, "preemptor", q, wait_then_exit(tmp_path / "preemptor"),
                                         priority="high"))
    mine = kube.wait_workload(TFJOB, "preemptor", lambda w: True, "created")
    evicted = kube.wait_workload(TFJOB, "victim", lambda w: is_true(w, "Evicted"), "evicted")
    message = (f"Preempted to accommodate a workload (UID: {mine['metadata']['uid']}, JobUID: "
               f"{preemptor['metadata']['uid']}) due to prioritization in the ClusterQueue; preemptor path: "
               f"/{q}; preemptee path: /{q}")
    assert cond(evicted, "Evicted") == ("True", "Preempted", message)
    assert cond(evicted, "Preempted") == ("True", "InClusterQueue", message)
    until(lambda: suspended(kube.job(TFJOB, "victim")), "the victim suspended again")
    until(lambda: kube.pods("victim") == [], "every pod of the victim deleted, cleanPodPolicy None or not")
    requeued = kube.wait_workload(TFJOB, "victim", lambda w: cond(w, "Requeued") is not None, "requeued")
    assert cond(requeued, "Requeued") == ("True", "Preempted", message)
    assert cond(requeued, "Admitted") == ("False", "NoReservation", "The workload has no reservation")
    assert requeued["status"]["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 1}]
    kube.wait_workload(TFJOB, "preemptor", admitted, "the preemptor admitted")
    until(lambda: running(kube, TFJOB, "preemptor"), "the preemptor to run")
    (tmp_path / "preemptor").touch()
    back = kube.wait_workload(TFJOB, "victim", admitted, "the victim admitted again")
    assert cond(back, "Evicted") == ("False", "QuotaReserved", f"Previously: {message}")
    assert cond(back, "Preempted") == ("False", "QuotaReserved", f"Previously: {message}")
    assert cond(back, "Requeued") == ("True", "Preempted", message)
    until(lambda: running(kube, TFJOB, "victim"), "the same victim job to run again")
    assert kube.pods("victim")[0].metadata.uid != old_pod  # a new pod under the old name
    (tmp_path / "victim").touch()
    done = kube.wait_workload(TFJOB, "victim", lambda w: is_true(w, "Finished"), "finished")
    assert done["status"]["schedulingStats"]["evictions"][0]["count"] == 1


def test_no_preemption_without_a_policy(kube: Kube, tmp_path: Path) -> None:
    q = kube.queue("q-never", {"cpu": 1})
    kube.create(labelled_job(TFJOB, "keeps", q, wait_then_exit(tmp_path / "keeps"), priority="low"))
    kube.wait_workload(TFJOB, "keeps", admitted, "admitted")
    kube.create(labelled_job(TFJOB, "waits", q, wait_then_exit(tmp_path / "waits"), priority="high"))
    wl = kube.wait_workload(TFJOB, "waits", pending, "pending")
    assert "Pending the preemption" not in cond(wl, "QuotaReserved")[2]  # type: ignore[index]
    assert cond(kube.workload(TFJOB, "keeps"), "Evicted") is None  # type: ignore[arg-type]
    (tmp_path / "keeps").touch()
    kube.wait_workload(TFJOB, "waits", admitted, "admitted after the first finished")
    (tmp_path / "waits").touch()


@pytest.mark.parametrize("kind", KINDS, ids=[k.kind for k in KINDS])
def test_every_kind_is_queued_admitted_and_finished(kube: Kube, tmp_path: Path, kind: JobKind) -> None:
    q = kube.queue(f"q-{kind.singular}", {"cpu": 1})
    name = f"{kind.singular}-k"
    kube.create(labelled_job(kind, name, q, wait_then_exit(tmp_path / "go")))
    wl = kube.wait_workload(kind, name, admitted, "admitted")
    assert wl["metadata"]["name"].startswith(f"{kind.kind.lower()}-{name}-")
    assert [p["name"] for p in wl["spec"]["podSets"]] == ["master" if kind.required_types else "worker"]
    until(lambda: running(kube, kind, name), f"the {kind.kind} to run")
    (tmp_path / "go").touch()
    kube.wait_workload(kind, name, lambda w: is_true(w, "Finished"), "finished")


def test_a_missing_local_queue_and_a_missing_priority_class(kube: Kube, tmp_path: Path) -> None:
    kube.create(labelled_job(TFJOB, "lost", "no-such-queue", wait_then_exit(tmp_path / "go")))
    wl = kube.wait_workload(TFJOB, "lost", pending, "inadmissible")
    assert cond(wl, "QuotaReserved") == ("False", "Inadmissible", "LocalQueue no-such-queue doesn't exist")
    q = kube.queue("q-wpc", {"cpu": 1})
    kube.create(labelled_job(TFJOB, "classless", q, wait_then_exit(tmp_path / "go"), priority="later"))
    until(lambda: suspended(kube.job(TFJOB, "classless")), "the job created suspended")
    assert kube.workload(TFJOB, "classless") is None  # no Workload while the class is missing
    kube.apply([{"apiVersion": f"{KUEUE}/{V2}", "kind": "WorkloadPriorityClass", "metadata": {"name": "later"},
                 "value": 5}])
    wl = kube.wait_workload(TFJOB, "classless", admitted, "admitted once the class exists")
    assert wl["spec"]["priority"] == 5
    (tmp_path / "go").touch()


def lq_status(kube: Kube, name: str) -> dict[str, object]:
    return dict(kube.crd.get_namespaced_custom_object(KUEUE, V2, NS, "localqueues", name).get("status") or {})


def stop(kube: Kube, plural: str, name: str, policy: str) -> None:
    patch = {"spec": {"stopPolicy": policy}}
    if plural == "clusterqueues":
        kube.crd.patch_cluster_custom_object(KUEUE, V2, plural, name, patch)
    else:
        kube.crd.patch_namespaced_custom_object(KUEUE, V2, NS, plural, name, patch)


def test_stopped_queues_hold_pending_jobs_and_drain_admitted_ones_in_kueues_words(
    kube: Kube, tmp_path: Path
) -> None:
    """stopPolicy (workload_controller.go getQueueBlocker, reconcileOn*QueueActiveState; §2.2, §2.3):
    Hold keeps what runs and holds what waits (Inadmissible, "... is inactive"); HoldAndDrain also
    evicts what was admitted ("The ClusterQueue is stopped"), which then waits held like the rest."""
    lq = kube.queue("q-held-lq", {"cpu": 1})
    stop(kube, "localqueues", lq, "Hold")
    until(lambda: cond({"status": lq_status(kube, lq)}, "Active") == ("False", "Stopped", "LocalQueue is stopped"),
          "the LocalQueue stopped")
    kube.create(labelled_job(TFJOB, "held-lq", lq, wait_then_exit(tmp_path / "go")))
    wl = kube.wait_workload(TFJOB, "held-lq", pending, "held")
    assert cond(wl, "QuotaReserved") == ("False", "Inadmissible", f"LocalQueue {lq} is inactive")

    cq = kube.queue("q-drained", {"cpu": 1})
    kube.create(labelled_job(TFJOB, "drained", cq, wait_then_exit(tmp_path / "never")))
    kube.wait_workload(TFJOB, "drained", admitted, "admitted")
    until(lambda: running(kube, TFJOB, "drained"), "drained to run")
    stop(kube, "clusterqueues", cq, "HoldAndDrain")
    until(lambda: cond({"status": cq_status(kube, cq)}, "Active") == ("False", "Stopped", "Can't admit new workloads: is stopped."),
          "the ClusterQueue stopped")
    until(lambda: cond({"status": lq_status(kube, cq)}, "Active")
          == ("False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue"),
          "its LocalQueue inactive")
    wl = kube.wait_workload(TFJOB, "drained", lambda w: pending(w) and "admission" not in w["status"], "requeued")
    assert cond(wl, "Evicted") == ("True", "ClusterQueueStopped", "The ClusterQueue is stopped")
    until(lambda: suspended(kube.job(TFJOB, "drained")) and kube.pods("drained") == [], "the job suspended")
    wl = kube.wait_workload(TFJOB, "drained", lambda w: cond(w, "QuotaReserved")[1] == "Inadmissible",  # type: ignore[index]
                            "held")
    assert cond(wl, "QuotaReserved") == ("False", "Inadmissible", f"ClusterQueue {cq} is inactive")
    stop(kube, "clusterqueues", cq, "None")  # started again: the same job is admitted and runs
    kube.wait_workload(TFJOB, "drained", admitted, "admitted again")
    (tmp_path / "never").touch()
    (tmp_path / "go").touch()


def test_deleting_the_job_deletes_its_workload(kube: Kube, tmp_path: Path) -> None:
    q = kube.queue("q-delete", {"cpu": 1})
    kube.create(labelled_job(TFJOB, "doomed", q, wait_then_exit(tmp_path / "go")))
    wl = kube.wait_workload(TFJOB, "doomed", admitted, "admitted")
    kube.crd.delete_namespaced_custom_object("kubeflow.org", "v1", NS, "tfjobs", "doomed",
                                             propagation_policy="Foreground")

    def gone() -> bool:
        try:
            kube.crd.get_namespaced_custom_object(KUEUE, V2, NS, "workloads", wl["metadata"]["name"])
        except client.ApiException as exc:
            return exc.status == 404
        return False

    until(gone, "the Workload garbage-collected")
    until(lambda: not [j for j in kube.crd.list_namespaced_custom_object("kubeflow.org", "v1", NS, "tfjobs")["items"]
                       if j["metadata"]["name"] == "doomed"], "the job gone (foreground deletion completes)")


def test_a_sweep_of_six_on_a_quota_of_two_runs_two_at_a_time(kube: Kube, tmp_path: Path) -> None:
    q = kube.queue("q-sweep", {"cpu": 2})
    names = [f"sweep-{i}" for i in range(6)]
    for name in names:
        kube.create(labelled_job(TFJOB, name, q, wait_then_exit(tmp_path / name)))
    until(lambda: (cq_status(kube, q).get("admittedWorkloads"), cq_status(kube, q).get("pendingWorkloads")) == (2, 4),
          "two admitted, four pending")
    # BestEffortFIFO's equivalence hashing: the first pending one was evaluated, the identical ones
    # behind it were parked with it and carry no QuotaReserved condition.
    pending_conditions = [cond(kube.workload(TFJOB, n), "QuotaReserved") for n in names[2:]]  # type: ignore[arg-type]
    assert pending_conditions[0] is not None and pending_conditions[0][:2] == ("False", "Pending")
    assert pending_conditions[1:] == [None, None, None]
    finished: list[str] = []
    for name in names:
        kube.wait_workload(TFJOB, name, admitted, "admitted in creation order")
        running_now = [n for n in names if admitted(kube.workload(TFJOB, n)) and n not in finished]  # type: ignore[arg-type]
        assert len(running_now) <= 2
        (tmp_path / name).touch()
        kube.wait_workload(TFJOB, name, lambda w: is_true(w, "Finished"), "finished")
        finished.append(name)


def test_a_waiting_job_follows_its_queue_label_and_its_priority_class(kube: Kube, tmp_path: Path) -> None:
    kube.queue("q-full", {"cpu": 0})
    open_queue = kube.queue("q-open", {"cpu": 1})
    kube.create(labelled_job(TFJOB, "mover", "q-full", wait_then_exit(tmp_path / "go"), priority="low"))
    kube.wait_workload(TFJOB, "mover", pending, "pending in the full queue")
    labels = {"kueue.x-k8s.io/priority-class": "high"}
    kube.crd.patch_namespaced_custom_object("kubeflow.org", "v1", NS, "tfjobs", "mover", {"metadata": {"labels": labels}})
    raised = kube.wait_workload(TFJOB, "mover", lambda w: w["spec"]["priority"] == 1000, "the new priority")
    assert raised["spec"]["priorityClassRef"]["name"] == "high"
    labels = {"kueue.x-k8s.io/queue-name": open_queue}
    kube.crd.patch_namespaced_custom_object("kubeflow.org", "v1", NS, "tfjobs", "mover", {"metadata": {"labels": labels}})
    moved = kube.wait_workload(TFJOB, "mover", admitted, "admitted in the queue it moved to")
    assert (moved["spec"]["queueName"], moved["status"]["admission"]["clusterQueue"]) == ("q-open", "q-open")
    (tmp_path / "go").touch()
