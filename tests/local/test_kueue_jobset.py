"""Kueue's integration for a standalone JobSet (`jobset.x-k8s.io/jobset`, on in a release install) in one
local cluster, through the official client only. Ported from kubernetes-sigs/kueue v0.19.2
test/integration/singlecluster/controller/jobs/jobset/jobset_controller_test.go, whose manager runs
without a scheduler and writes the Workload's admission and the JobSet's Completed condition itself;
here Kueue's scheduler and the JobSet and Job controllers run, so those steps come from the cluster (a
quota that fits, replicas that really run and exit) and the same outcomes are checked."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jobset_support import (
    create_jobset,
    get_jobset,
    jobset_pods,
    jobset_workload,
    make_jobset,
    node_selectors,
)
from kubernetes import client
from kueue_support import KUEUE, NS, V2, Kube, cond, wait_then_exit
from waiting import until

from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.kueue import queue_objects

FLAVOR_LABEL = {"instance-type": "on-demand"}
QUEUES = queue_objects(cluster_queue="cq", local_queue="lq", quota={"cpu": 8}, node_labels=FLAVOR_LABEL)


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """Kueue with the release's integrations (the JobSet one among them) and one queue whose flavor has
    a node label; JobSet served (the `trainjob` API brings it)."""
    with LocalCluster(workdir=tmp_path_factory.mktemp("kueue-jobset"), apis=["trainjob"],
                      kueue={"objects": QUEUES}) as cluster:
        yield Kube.on(cluster)


def _workload_name(name: str, uid: str) -> str:
    """GetWorkloadNameForJobSet: `jobset-<name>-<first 5 hex of sha1(kind, group, name, uid)>`."""
    return f"jobset-{name}-" + hashlib.sha1(f"JobSet\njobset.x-k8s.io\n{name}\n{uid}".encode()).hexdigest()[:5]


def _set_stop_policy(kube: Kube, policy: str) -> None:
    kube.crd.patch_cluster_custom_object(KUEUE, V2, "clusterqueues", "cq", {"spec": {"stopPolicy": policy}})


def test_a_queued_jobset_runs_as_its_workload_is_admitted_evicted_and_finished(kube: Kube, tmp_path: Path) -> None:
    """jobset_controller_test.go "Should reconcile JobSets": created unsuspended, the JobSet is suspended
    by the webhook; its Workload (named as GetWorkloadNameForJobSet names it, controlled by the JobSet)
    has one pod set per replicated job, count = replicas x parallelism; admitted, the JobSet is
    unsuspended with the flavor's node labels on every replicated job's pod template and a `Started`
    event; suspended again when its Workload loses the admission (the queue drained, where upstream edits
    the replicas) with the node labels taken back; admitted again, unsuspended; its Completed condition
    finishes the Workload (Succeeded, the condition's message)."""
    go = tmp_path / "go"
    body = make_jobset("js1", "lq", wait_then_exit(go), [("replicated-job-1", 1, 1), ("replicated-job-2", 2, 2)])
    body["spec"]["suspend"] = False
    created = create_jobset(kube.crd, body)
    assert created["spec"]["suspend"] is True
    assert "managedBy" not in created["spec"]  # no MultiKueue check on this queue

    def workload() -> dict[str, Any]:
        return jobset_workload(kube.crd, created["metadata"]["uid"]) or {}

    until(workload, "the JobSet's Workload")
    wl = workload()
    assert wl["metadata"]["name"] == _workload_name("js1", created["metadata"]["uid"])
    owner = wl["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("JobSet", "js1", True)
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [
        ("replicated-job-1", 1), ("replicated-job-2", 4)]
    assert wl["spec"]["queueName"] == "lq"

    def running() -> bool:
        js = get_jobset(kube.crd, "js1") or {}
        statuses = (js.get("status") or {}).get("replicatedJobsStatus") or []
        return js["spec"]["suspend"] is False and sum(s["active"] for s in statuses) == 3
    until(running, "the JobSet unsuspended, its 3 Jobs active")
    js = get_jobset(kube.crd, "js1")
    assert js is not None and node_selectors(js) == [FLAVOR_LABEL, FLAVOR_LABEL]
    labels = [r["template"]["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/podset"]
              for r in js["spec"]["replicatedJobs"]]
    assert labels == ["replicated-job-1", "replicated-job-2"]
    events = client.CoreV1Api(kube.api).list_namespaced_event(NS).items
    assert any(e.reason == "Started" and e.message == "Admitted by clusterQueue cq"
               and e.involved_object.name == "js1" for e in events)
    until(lambda: len(jobset_pods(kube.api, "js1")) == 5, "the JobSet's 5 pods")

    _set_stop_policy(kube, "HoldAndDrain")
    try:
        until(lambda: (get_jobset(kube.crd, "js1") or {})["spec"]["suspend"] is True, "the JobSet suspended")
        js = get_jobset(kube.crd, "js1")
        assert js is not None and node_selectors(js) == [None, None]
        until(lambda: (cond(workload(), "QuotaReserved") or ("",))[0] == "False",
              "the quota released once no Job is active")
    finally:
        _set_stop_policy(kube, "None")
    until(lambda: (get_jobset(kube.crd, "js1") or {})["spec"]["suspend"] is False, "the JobSet resumed")
    js = get_jobset(kube.crd, "js1")
    assert js is not None and node_selectors(js) == [FLAVOR_LABEL, FLAVOR_LABEL]

    go.touch()
    until(lambda: (cond(workload(), "Finished") or ("",))[0] == "True", "the Workload finished")
    assert cond(workload(), "Finished") == ("True", "Succeeded", "jobset completed successfully")
    assert cond(get_jobset(kube.crd, "js1") or {}, "Completed") == (
        "True", "AllJobsCompleted", "jobset completed successfully")


def test_a_jobset_without_a_queue_is_left_alone(kube: Kube, tmp_path: Path) -> None:
    """jobset_controller_test.go "Should reconcile jobs only when queue is set" (its first step, under
    the default manageJobsWithoutQueueName false): a JobSet without the queue label is not suspended,
    gets no Workload, and runs to its end."""
    go = tmp_path / "go"
    go.touch()
    created = create_jobset(kube.crd, make_jobset("js-free", None, wait_then_exit(go), [("rj", 1, 1)]))
    assert created["spec"].get("suspend") in (None, False)
    until(lambda: cond(get_jobset(kube.crd, "js-free") or {}, "Completed") is not None, "the JobSet completed")
    assert jobset_workload(kube.crd, created["metadata"]["uid"]) is None
