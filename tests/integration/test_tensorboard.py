"""TensorBoard for a running TFJob on the local cluster: real pod, real Service, real HTTP.

The same objects and the same URL logic are what a real cluster gets: the local cluster runs the
board's pod as a process bound to its own loopback pod IP and publishes that IP as the
LoadBalancer ingress.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_support import wait_for

from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook
from airflow_tfjob.integrations.tensorboard import TensorBoard, TensorBoardSpec, tensorboard_name

pytestmark = [pytest.mark.cluster, pytest.mark.tensorflow]

NAMESPACE = "default"
# The "training": writes one scalar where TensorBoard reads, then keeps running until deleted.
PROGRAM = r"""
import os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
writer = tf.summary.create_file_writer(sys.argv[1])
with writer.as_default():
    for step in range(3):
        tf.summary.scalar("written_by_job", 0.5 * step, step=step)
writer.close()
print("summaries written", flush=True)
time.sleep(600)
"""


def http_get(url: str) -> tuple[int, str] | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


@pytest.fixture
def apis(local_cluster: Any) -> Iterator[tuple[Any, Any]]:
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=str(local_cluster.kubeconfig_path))
    try:
        yield client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
    finally:
        api_client.close()


@pytest.fixture
def running_job(apis: tuple[Any, Any], tmp_path: Path, venv_on_path: None) -> Iterator[dict[str, Any]]:
    _, custom = apis
    name = f"tb-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "Running"},
            "tfReplicaSpecs": {
                "Worker": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "tensorflow",
                                    "image": "tensorflow/tensorflow:2.21.0",
                                    "command": [sys.executable, "-c", PROGRAM, str(tmp_path / "logs")],
                                }
                            ]
                        }
                    },
                }
            },
        },
    }
    job = custom.create_namespaced_custom_object("kubeflow.org", "v1", NAMESPACE, "tfjobs", body)
    try:
        yield job
    finally:
        try:
            custom.delete_namespaced_custom_object("kubeflow.org", "v1", NAMESPACE, "tfjobs", name)
        except Exception:
            pass


def _job_pod_phase(core: Any, job_name: str) -> str | None:
    pods = core.list_namespaced_pod(
        NAMESPACE, label_selector=f"training.kubeflow.org/job-name={job_name}"
    ).items
    return pods[0].status.phase if pods else None


def _exists(read: Callable[..., Any], name: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        read(name, NAMESPACE)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def test_link_serves_tensorboard_while_the_job_runs(
    apis: tuple[Any, Any], running_job: dict[str, Any], tmp_path: Path, hook: KubeflowJobHook
) -> None:
    core, _ = apis
    job_name = running_job["metadata"]["name"]
    wait_for(lambda: _job_pod_phase(core, job_name) == "Running", 60, "the job's pod to run")
    board = TensorBoard(hook, TensorBoardSpec(log_dir=str(tmp_path / "logs"), ready_timeout=60), running_job)
    board.start()
    board.start()  # a retried try finds the objects already there: no error, nothing duplicated
    url = board.wait_url()
    assert url.startswith("http://127.") and url.endswith(":6006/")

    status, page = wait_for(lambda: http_get(url), 90, f"TensorBoard at {url}", interval=0.5)
    assert status == 200
    assert "<title>TensorBoard</title>" in page
    # Still the job's lifetime: the link was served while training ran.
    assert _job_pod_phase(core, job_name) == "Running"

    def tags() -> dict[str, Any] | None:
        got = http_get(url + "data/plugin/scalars/tags")
        return json.loads(got[1]) if got and got[0] == 200 and "written_by_job" in got[1] else None

    # TensorBoard reads what the job wrote: the link is about this job, not an empty board.
    assert "written_by_job" in wait_for(tags, 60, "the job's scalars in TensorBoard", interval=1.0)["."]

    assert board.stop() is True
    name = tensorboard_name(job_name)
    wait_for(lambda: not _exists(core.read_namespaced_pod, name), 60, "the board's pod to go")
    assert not _exists(core.read_namespaced_service, name)
    wait_for(lambda: http_get(url) is None, 30, "the board to stop serving")


def test_board_goes_with_its_job(
    apis: tuple[Any, Any], running_job: dict[str, Any], tmp_path: Path, hook: KubeflowJobHook
) -> None:
    core, custom = apis
    job_name = running_job["metadata"]["name"]
    board = TensorBoard(hook, TensorBoardSpec(log_dir=str(tmp_path / "logs"), keep=True), running_job)
    board.start()
    assert board.stop() is False  # keep=True: the task leaves it running
    name = tensorboard_name(job_name)
    assert _exists(core.read_namespaced_service, name)
    custom.delete_namespaced_custom_object(
        "kubeflow.org", "v1", NAMESPACE, "tfjobs", job_name, propagation_policy="Foreground"
    )
    wait_for(lambda: not _exists(core.read_namespaced_pod, name), 60, "the board's pod to be collected")
    wait_for(
        lambda: not _exists(core.read_namespaced_service, name), 30, "the board's Service to be collected"
    )
