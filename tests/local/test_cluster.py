"""The assembly (`LocalCluster`): what its parts share, through the official client over real HTTP."""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from waiting import until, until_async

from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.admission.v1jobs import TFJobAdmission
from airflow_tfjob.local.controllers.jobset import JobSetController
from airflow_tfjob.local.controllers.v1.tfjob import TFJobController
from airflow_tfjob.local.node.ports import ANNOTATION_HOST_PORT, host_ports
from airflow_tfjob.local.store.core import Store

TIMEOUT = 30.0
SLEEP = "import time; time.sleep(3600)"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cluster-workdir")


@pytest.fixture(scope="module")
def cluster(workdir: Path) -> Iterator[LocalCluster]:
    with LocalCluster(workdir=workdir) as c:
        yield c


@pytest.fixture(scope="module")
def api(cluster: LocalCluster) -> client.ApiClient:
    return config.new_client_from_config(str(cluster.kubeconfig_path))


def test_pods_without_working_dir_start_in_the_cluster_workdir(
    cluster: LocalCluster, api: client.ApiClient, workdir: Path
) -> None:
    core = client.CoreV1Api(api)
    body = {"metadata": {"name": "cwd"}, "spec": {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "python:3.11", "command": [sys.executable, "-c", "import os; print(os.getcwd())"]}]}}
    core.create_namespaced_pod("default", body)
    until(lambda: core.read_namespaced_pod("cwd", "default").status.phase == "Succeeded", "pod cwd to succeed")
    # _preload_content=False: the client turns a str response into "b'...'" (its deserializer's bug).
    log = bytes(core.read_namespaced_pod_log("cwd", "default", _preload_content=False).data).decode()
    assert log.strip() == str(workdir.resolve())
    assert cluster.kubeconfig_path.parent == workdir  # the same directory holds the cluster's own files


def test_a_deleted_jobs_ports_are_released(cluster: LocalCluster, api: client.ApiClient) -> None:
    crd, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    container = {"name": "tensorflow", "image": "python:3.11", "command": [sys.executable, "-c", SLEEP]}
    job = crd.create_namespaced_custom_object("kubeflow.org", "v1", "default", "tfjobs", {
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "ports"},
        "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [container]}}}}}})
    uid = job["metadata"]["uid"]
    selector = "training.kubeflow.org/job-name=ports"
    until(lambda: len(core.list_namespaced_pod("default", label_selector=selector).items) == 2, "2 pods")
    ports = {int(p.metadata.annotations[ANNOTATION_HOST_PORT])
             for p in core.list_namespaced_pod("default", label_selector=selector).items}
    controller = cluster.runtime.controllers["TFJob"]
    assert len(ports) == 2 and uid in cluster.call(controller.ports.known_jobs)
    assert ports <= host_ports().held()  # reserved host-wide while the job lives (node/ports.py)

    crd.delete_namespaced_custom_object("kubeflow.org", "v1", "default", "tfjobs", "ports",
                                        propagation_policy="Foreground")
    until(lambda: uid not in cluster.call(controller.ports.known_jobs), "the job's ports to be released")
    assert not ports & host_ports().held()
    until(lambda: not core.list_namespaced_pod("default", label_selector=selector).items, "pods to go")


def test_a_stopped_cluster_releases_the_ports_of_the_jobs_it_still_had(tmp_path: Path) -> None:
    """A test worker starts many clusters in one process: a stopped one's jobs must not keep their
    host-wide port reservations for the rest of that process's life."""
    container = {"name": "tensorflow", "image": "python:3.11", "command": [sys.executable, "-c", SLEEP]}
    with LocalCluster(workdir=tmp_path) as c:
        api = config.new_client_from_config(str(c.kubeconfig_path))
        client.CustomObjectsApi(api).create_namespaced_custom_object("kubeflow.org", "v1", "default", "tfjobs", {
            "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "kept"},
            "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [container]}}}}}})
        core = client.CoreV1Api(api)
        until(lambda: len(core.list_namespaced_pod("default").items) == 2, "2 pods")
        ports = {int(p.metadata.annotations[ANNOTATION_HOST_PORT]) for p in core.list_namespaced_pod("default").items}
        assert len(ports) == 2 and ports <= host_ports().held()
    assert not ports & host_ports().held()


async def test_ports_of_jobs_deleted_while_not_watching_are_released() -> None:
    store = Store(admission=TFJobAdmission())
    controller = TFJobController(store)
    # As if a job had been deleted while the controller's watch was down: it never sees DELETED.
    controller.ports.adopt("uid-of-a-gone-job", "worker", 0, 40000)
    container = {"name": "tensorflow", "image": "python:3.11"}
    job: dict[str, Any] = store.create("tfjobs", "default", {
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "alive"},
        "spec": {"tfReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [container]}}}}}})
    task = asyncio.create_task(controller.run())
    try:
        await until_async(lambda: controller.ports.known_jobs() == {job["metadata"]["uid"]}, "the job's ports")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_the_jobset_controller_releases_the_ports_of_jobsets_deleted_while_not_watching() -> None:
    controller = JobSetController(Store())
    controller.ports.adopt("uid-of-a-gone-jobset", "trainer", 0, 40001)
    task = asyncio.create_task(controller.run())
    try:
        await until_async(lambda: not controller.ports.known_jobs(), "the gone JobSet's ports released")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_local_cluster_takes_the_runtimes_options_as_the_runtime_does() -> None:
    """LocalCluster writes ClusterRuntime's options out again (for IDEs and type checkers) and hands each on
    by name: an option, default or type changed in one signature only fails here."""
    from airflow_tfjob.local.cluster import ClusterRuntime

    def options(cls: type) -> dict[str, tuple[Any, Any]]:
        params = inspect.signature(cls.__init__).parameters.values()  # type: ignore[misc]
        return {p.name: (p.default, p.annotation) for p in params if p.name != "self"}

    # Where to write the kubeconfig is the command line's option (`serve --kubeconfig`); LocalCluster writes
    # it into its workdir.
    runtime = options(ClusterRuntime)
    del runtime["kubeconfig_path"]
    assert options(LocalCluster) == runtime
