"""WaitForPodsReady's timeout in the Kueue emulation (docs/reference/kueue-behaviour.md §6): a job
admitted but not running (its pod's init container waits for a file) is evicted with reason
PodsReadyTimeout, suspended, requeued after its backoff (Requeued=True/BackoffFinished) and admitted
again, until its pods get ready; the eviction counter and requeueState keep count. Evictions repeat
every second or so until the test lets the pod start, so only durable facts are asserted."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kueue_support import NS, Kube, admitted, cond, is_true, labelled_job, suspended, wait_then_exit
from waiting import until

from airflow_tfjob.jobs.kinds import TFJOB
from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.kueue import KUBEFLOW_V1, queue_objects


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    objects = queue_objects(local_queue="lq", quota={"cpu": 1})
    with LocalCluster(workdir=tmp_path_factory.mktemp("kueue-podsready"),
                      kueue={"integrations": KUBEFLOW_V1, "objects": objects, "pods_ready_timeout": 1,
                             "backoff_base_seconds": 1}) as cluster:
        yield Kube.on(cluster)


def test_a_job_whose_pods_are_not_ready_in_time_is_evicted_and_requeued_until_they_are(
        kube: Kube, tmp_path: Path) -> None:
    job = labelled_job(TFJOB, "slow", "lq", wait_then_exit(tmp_path / "go"))
    pod_spec = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    pod_spec["initContainers"] = [{"name": "wait", "image": "python:3.11",
                                   "command": [sys.executable, "-c", wait_then_exit(tmp_path / "ready")]}]
    kube.create(job)
    first = kube.wait_workload(TFJOB, "slow", admitted, "admitted")
    name = first["metadata"]["name"]
    message = f"Exceeded the PodsReady timeout {NS}/{name}"
    evicted = kube.wait_workload(TFJOB, "slow", lambda w: is_true(w, "Evicted"), "evicted")
    assert cond(evicted, "Evicted") == ("True", "PodsReadyTimeout", message)

    def stopped() -> bool:
        events = client.CoreV1Api(kube.api).list_namespaced_event(NS, field_selector="involvedObject.name=slow")
        return any((e.reason, e.message) == ("Stopped", message) for e in events.items)

    until(stopped, "the job stopped (suspended) with the eviction's message")
    (tmp_path / "ready").touch()
    done = kube.wait_workload(TFJOB, "slow", lambda w: is_true(w, "PodsReady") and admitted(w),
                              "admitted again with its pods ready")
    assert cond(done, "Evicted") == ("False", "QuotaReserved", f"Previously: {message}")
    assert cond(done, "Requeued") == ("True", "BackoffFinished", "The workload backoff was finished")
    evictions = done["status"]["schedulingStats"]["evictions"]
    assert [(e["reason"], e["underlyingCause"]) for e in evictions] == [("PodsReadyTimeout", "WaitForStart")]
    assert evictions[0]["count"] == done["status"]["requeueState"]["count"] >= 1
    assert "requeueAt" not in done["status"]["requeueState"]
    assert not suspended(kube.job(TFJOB, "slow"))
    (tmp_path / "go").touch()
    kube.wait_workload(TFJOB, "slow", lambda w: is_true(w, "Finished"), "finished")
