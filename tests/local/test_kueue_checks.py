"""Admission checks gate admission (Kueue v0.19.2 workload_controller.go, admissionchecks.go, evict.go):
a Workload in a ClusterQueue that names a check gets QuotaReserved and a `Pending` state for the check,
is `Admitted` (and its job started) only once the check is `Ready`, and a `Retry` evicts it, resets the
check to `Pending` (retryCount counted) and requeues it. The check here is one no controller drives, so
the test writes its state, as Kueue's integration tests do for checks they stand in for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kueue_support import KUEUE, NS, V2, Kube, cond, labelled_job, suspended, wait_then_exit
from waiting import until

from airflow_tfjob.jobs.kinds import TFJOB
from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.kueue import KUBEFLOW_V1, queue_objects

CHECK = "manual-check"
QUEUES = queue_objects(cluster_queue="cq", local_queue="lq", quota={"cpu": 4}, admission_checks=[CHECK])


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    # `multikueue` serves the AdmissionCheck kind; no workers: nothing drives this check but the test.
    with LocalCluster(workdir=tmp_path_factory.mktemp("checks"),
                      kueue={"integrations": KUBEFLOW_V1, "objects": QUEUES, "multikueue": True}) as cluster:
        kube = Kube.on(cluster)
        kube.crd.create_cluster_custom_object(KUEUE, V2, "admissionchecks", {
            "apiVersion": f"{KUEUE}/{V2}", "kind": "AdmissionCheck", "metadata": {"name": CHECK},
            "spec": {"controllerName": "example.com/manual"}})
        yield kube


def _check(wl: dict[str, Any]) -> dict[str, Any]:
    states = [s for s in (wl.get("status") or {}).get("admissionChecks") or [] if s["name"] == CHECK]
    assert len(states) == 1, wl.get("status")
    return dict(states[0])


def _set_check(kube: Kube, wl: dict[str, Any], state: str, message: str) -> None:
    checks = [{**_check(wl), "state": state, "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    kube.crd.patch_namespaced_custom_object_status(KUEUE, V2, NS, "workloads", wl["metadata"]["name"],
                                                   {"status": {"admissionChecks": checks}})


def test_admitted_only_once_the_check_is_ready_and_evicted_on_retry(kube: Kube, tmp_path: Path) -> None:
    """Kueue v0.19.2 test/integration/multikueue/jobs_test.go, "should assign the multikueue admission check
    even before admitted" (the Pending state), then the scheduler's prepareWorkload and the workload
    controller's SyncAdmittedCondition and reconcileCheckBasedEviction."""
    kube.create(labelled_job(TFJOB, "gated", "lq", wait_then_exit(tmp_path / "go")))
    wl = kube.wait_workload(TFJOB, "gated", lambda w: cond(w, "QuotaReserved") == (
        "True", "QuotaReserved", "Quota reserved in ClusterQueue cq") and "admissionChecks" in w["status"],
        "quota reserved, the check listed")
    assert _check(wl)["state"] == "Pending"
    wl = kube.wait_workload(TFJOB, "gated", lambda w: cond(w, "Admitted") is not None, "an Admitted condition")
    assert cond(wl, "Admitted") == ("False", "UnsatisfiedChecks", "The workload has not all checks ready")
    assert suspended(kube.job(TFJOB, "gated"))

    _set_check(kube, wl, "Ready", "fine")
    wl = kube.wait_workload(TFJOB, "gated", lambda w: cond(w, "Admitted") == (
        "True", "Admitted", "The workload is admitted"), "admitted once the check is Ready")
    until(lambda: not suspended(kube.job(TFJOB, "gated")), "the job started on admission")

    _set_check(kube, wl, "Retry", "try again")
    wl = kube.wait_workload(TFJOB, "gated", lambda w: _check(w).get("retryCount") == 1, "the check reset")
    check = _check(wl)
    assert (check["state"], check["message"]) == ("Pending", "Reset to Pending after eviction. Previously: Retry")
    # Requeued at once (no requeueAfterSeconds) and reserved again (the eviction's condition kept as
    # "Previously"), waiting on the check once more, its job stopped again.
    evicted = f'Evicted due to AdmissionCheck in Retry state: "{CHECK}" (try again)'
    wl = kube.wait_workload(TFJOB, "gated", lambda w: cond(w, "Requeued") == (
        "True", "BackoffFinished", "The workload backoff was finished")
        and cond(w, "Evicted") == ("False", "QuotaReserved", f"Previously: {evicted}")
        and cond(w, "Admitted") == ("False", "UnsatisfiedChecks", "The workload has not all checks ready"),
        "requeued and reserved again")
    assert wl["status"]["schedulingStats"]["evictions"] == [
        {"reason": "AdmissionCheck", "underlyingCause": "", "count": 1}]
    events = client.CoreV1Api(kube.api).list_namespaced_event(NS).items
    assert any(e.reason == "EvictedDueToAdmissionCheck" and e.message == evicted for e in events)
    until(lambda: suspended(kube.job(TFJOB, "gated")), "the job stopped again")
