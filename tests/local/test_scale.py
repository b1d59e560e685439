"""The scale subresource of the job CRDs that declare one (PyTorchJob, JAXJob, PaddleJob), on the store."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_tfjob.local.model.resources import ApiError
from airflow_tfjob.local.store.core import Store


def pytorchjob(replicas: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "s"},
            "spec": {"pytorchReplicaSpecs": replicas}}


def test_get_patch_and_replace_the_worker_replicas() -> None:
    store = Store()
    store.create("pytorchjobs", "default", pytorchjob({"Master": {"replicas": 1}, "Worker": {"replicas": 2}}))
    selector = "training.kubeflow.org/job-name=s,training.kubeflow.org/replica-type=worker"
    store.update_status("pytorchjobs", "default", "s",
                        {"replicaStatuses": {"Worker": {"active": 2, "selector": selector}}})
    scale = store.get_scale("pytorchjobs", "default", "s")
    assert (scale["kind"], scale["apiVersion"]) == ("Scale", "autoscaling/v1")
    assert scale["spec"] == {"replicas": 2} and scale["status"] == {"replicas": 2, "selector": selector}
    patched = store.patch("pytorchjobs", "default", "s", {"spec": {"replicas": 4}}, "merge", "scale")
    assert patched["spec"] == {"replicas": 4}
    job = store.get("pytorchjobs", "default", "s")
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4
    assert job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] == 1
    assert job["metadata"]["generation"] == 2
    stale = {**scale, "spec": {"replicas": 1}}
    with pytest.raises(ApiError) as conflict:
        store.replace("pytorchjobs", "default", "s", stale, "scale")
    assert conflict.value.code == 409
    fresh = store.get_scale("pytorchjobs", "default", "s")
    assert store.replace("pytorchjobs", "default", "s", {**fresh, "spec": {"replicas": 1}}, "scale")["spec"] == {
        "replicas": 1}


def test_a_job_without_workers_cannot_be_scaled() -> None:
    store = Store()
    store.create("pytorchjobs", "default", pytorchjob({"Master": {"replicas": 1}}))
    assert store.get_scale("pytorchjobs", "default", "s")["spec"] == {"replicas": 0}
    with pytest.raises(ApiError) as refused:
        store.patch("pytorchjobs", "default", "s", {"spec": {"replicas": 2}}, "merge", "scale")
    assert refused.value.code == 422 and ".spec.pytorchReplicaSpecs.Worker.replicas" in refused.value.message
