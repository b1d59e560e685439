"""The kinds' in-memory defaults and environments (docs/reference/kubeflow-v1-kinds.md §§1.3-1.4, 2-4),
read from one reconcile pass's state without running anything."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_tfjob.jobs.kinds import PADDLEJOB, PYTORCHJOB, XGBOOSTJOB
from airflow_tfjob.local.controllers.v1.jobpass import ReconcileError
from airflow_tfjob.local.controllers.v1.kindpass import KindPass
from airflow_tfjob.local.controllers.v1.registry import CONTROLLERS
from airflow_tfjob.local.store.core import Store


def a_pass(kind: str, spec: dict[str, Any]) -> KindPass:
    controller_type = CONTROLLERS[kind]
    store = Store()
    job = store.create(controller_type.job_pass.plural, "default", {
        "apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": "j"}, "spec": spec})
    ports = iter(range(40000, 40100))
    job_pass = controller_type.job_pass(store, controller_type(store, port_allocator=lambda: next(ports)).ports, job)
    assert isinstance(job_pass, KindPass)
    return job_pass


def rep(container: str = "pytorch", **extra: Any) -> dict[str, Any]:
    return {"template": {"spec": {"containers": [{"name": container, "image": "x"}]}}, **extra}


def test_shared_defaults_case_replicas_policy_and_port_on_container0() -> None:
    p = a_pass("PyTorchJob", {"pytorchReplicaSpecs": {"master": rep("sidecar"), "Worker": rep(replicas=3)}})
    assert list(p.replicas) == ["Master", "Worker"]
    master = p.replicas["Master"]
    assert (master["replicas"], master["restartPolicy"]) == (1, "OnFailure")
    assert master["template"]["spec"]["containers"][0]["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456}]
    assert p.run_policy["cleanPodPolicy"] == "None"
    assert p.spec["nprocPerNode"] == "auto"


@pytest.mark.parametrize(("given", "expected"), [
    ({}, (3, 3)), ({"maxReplicas": 5}, (5, 5)), ({"minReplicas": 2}, (2, 2)),
    ({"minReplicas": 1, "maxReplicas": 4}, (1, 4)),
])
@pytest.mark.parametrize("kind", ["PyTorchJob", "PaddleJob"])
def test_elastic_min_max(kind: str, given: dict[str, int], expected: tuple[int, int]) -> None:
    key = "pytorchReplicaSpecs" if kind == "PyTorchJob" else "paddleReplicaSpecs"
    container = "pytorch" if kind == "PyTorchJob" else "paddle"
    p = a_pass(kind, {key: {"Worker": rep(container, replicas=3)}, "elasticPolicy": dict(given)})
    elastic = p.spec["elasticPolicy"]
    assert (elastic["minReplicas"], elastic["maxReplicas"]) == expected
    assert ("nprocPerNode" in p.spec) is (kind == "PyTorchJob")


def test_the_deprecated_elastic_nproc_leaves_nproc_per_node_unset() -> None:
    p = a_pass("PyTorchJob", {"pytorchReplicaSpecs": {"Worker": rep()}, "elasticPolicy": {"nProcPerNode": 2}})
    assert p.spec.get("nprocPerNode") is None
    names = [e["name"] for e in p.pod_env("worker", 0)]
    assert names.count("PET_NPROC_PER_NODE") == 1 and "PET_NNODES" in names


@pytest.mark.parametrize(("nproc", "world"), [("4", "8"), ("auto", "2"), ("gpu", "2")])
def test_world_size_is_nodes_times_an_integer_nproc(nproc: str, world: str) -> None:
    p = a_pass("PyTorchJob", {"pytorchReplicaSpecs": {"Master": rep(replicas=1), "Worker": rep()},
                              "nprocPerNode": nproc})
    env = {e["name"]: e["value"] for e in p.pod_env("worker", 0)}
    assert (env["WORLD_SIZE"], env["RANK"], env["PET_NPROC_PER_NODE"]) == (world, "1", nproc)


def test_kind_defaults_from_the_table() -> None:
    for kind, spec_key in ((XGBOOSTJOB, "xgbReplicaSpecs"), (PADDLEJOB, "paddleReplicaSpecs")):
        p = a_pass(kind.kind, {spec_key: {"Master": rep(kind.container)}})
        rspec = p.replicas["Master"]
        assert rspec["restartPolicy"] == kind.restart_policy
        assert rspec["template"]["spec"]["containers"][0]["ports"] == [{"name": kind.port_name, "containerPort": kind.port}]
    assert PYTORCHJOB.restart_policy == "OnFailure"


def test_xgboost_without_a_master_creates_no_pod() -> None:
    p = a_pass("XGBoostJob", {"xgbReplicaSpecs": {"Worker": rep("xgboost")}})
    with pytest.raises(ReconcileError, match="failed to found the port"):
        p.pod_env("worker", 0)
