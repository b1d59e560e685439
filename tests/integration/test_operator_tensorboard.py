"""TFJobOperator with ``tensorboard=True``: the board starts after the job is created, its URL is
the XCom the UI's TensorBoard link reads, it serves TensorBoard's page while the job runs, and it is
removed with the job unless kept, in both the synchronous and the deferred mode."""

from __future__ import annotations

import json
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from operator_support import TaskInstance, context_for, wait_for
from test_operator_deferrable import defer, fire

from airflow_tfjob.integrations.links import ReplicaLogsLink, TensorBoardLink
from airflow_tfjob.integrations.tensorboard import XCOM_KEY, tensorboard_name
from airflow_tfjob.operators.tfjob import TFJobOperator

pytestmark = [pytest.mark.cluster, pytest.mark.tensorflow, pytest.mark.timeout(300)]

# The training: runs until the test releases it, so the board can be visited while the job runs.
HELD = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.1)\nprint('released')"


@pytest.fixture
def hook(k8s_conn: str, venv_on_path: None) -> Any:
    from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook

    return KubeflowJobHook(conn_id=k8s_conn)


def make(tmp_path: Path, **kwargs: Any) -> TFJobOperator:
    (tmp_path / "tb").mkdir(exist_ok=True)
    params: dict[str, Any] = {
        "task_id": "board",
        "image": "local/python",
        "command": [sys.executable, "-c", HELD, str(tmp_path / "release")],
        "namespace": "default",
        "worker": 1,
        "startup_timeout": 60,
        "tensorboard": True,
        "tensorboard_log_dir": str(tmp_path / "tb"),
    }
    params.update(kwargs)
    return TFJobOperator(**params)


def page(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode("utf-8", "replace"))
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def board_objects(hook: Any, job_name: str) -> list[str]:
    name = tensorboard_name(job_name)
    found = []
    for kind, read in (
        ("pod", hook.core_v1_client.read_namespaced_pod),
        ("service", hook.core_v1_client.read_namespaced_service),
    ):
        try:
            read(name, "default")
            found.append(kind)
        except Exception as error:
            if getattr(error, "status", None) != 404:
                raise
    return found


def test_sync_board_serves_while_the_job_runs_then_goes_with_it(hook: Any, tmp_path: Path) -> None:
    ti = TaskInstance()
    op = make(tmp_path)
    assert any(isinstance(link, TensorBoardLink) for link in op.operator_extra_links)
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(op.execute(context_for(ti))), daemon=True)
    thread.start()
    try:
        url = wait_for(lambda: ti.xcoms.get(XCOM_KEY), 150, "TensorBoard URL pushed to XCom")
        assert url.startswith("http://") and url.endswith(":6006/")
        html = wait_for(lambda: page(url), 120, "TensorBoard answering at the pushed URL")
        assert "TensorBoard" in html or "tensorboard" in html
    finally:
        (tmp_path / "release").write_text("go")
    thread.join(120)
    assert results and results[0]["state"] == "succeeded"
    # Deleted when the task ended (the pod's process then stops gracefully): not kept by the job.
    assert hook.find_job("TFJob", results[0]["name"], "default") is not None
    wait_for(lambda: board_objects(hook, results[0]["name"]) == [], 60, "board removed after the task")
    # What Airflow pushes over the link's XCom as the task ends: nothing, so no link to a deleted board.
    assert TensorBoardLink().get_link(op, ti_key=None) == ""  # type: ignore[arg-type]


def test_deferred_board_is_kept_when_asked_and_goes_with_the_job(hook: Any, tmp_path: Path) -> None:
    ti = TaskInstance()
    op = make(tmp_path, deferrable=True, tensorboard_keep=True)
    deferred = defer(op, ti)  # the board starts before the task defers: the link works meanwhile
    name = deferred.trigger.name
    assert ti.xcoms[XCOM_KEY].startswith("http://")
    assert board_objects(hook, name) == ["pod", "service"]
    (tmp_path / "release").write_text("go")
    result = op.execute_complete(context_for(ti), fire(deferred))
    assert result["state"] == "succeeded"
    assert board_objects(hook, name) == ["pod", "service"], "tensorboard_keep=True leaves it running"
    hook.delete_job("TFJob", name, "default")  # owned by the job: garbage-collected with it
    wait_for(lambda: board_objects(hook, name) == [], 60, "board removed with its TFJob")


def test_deferred_links_are_pushed_before_the_task_defers(
    hook: Any, tmp_path: Path, local_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = {"kube_config_path": str(local_cluster.kubeconfig_path), "namespace": "default",
             "logs_url_template": "https://logs.example/{namespace}/{pod}?container={container}"}
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps({"conn_type": "kubernetes", "extra": extra}))
    ti = TaskInstance()
    op = make(tmp_path, deferrable=True, worker=2)
    deferred = defer(op, ti)
    name = deferred.trigger.name
    pushed = {key: value for key, value in ti.xcoms.items() if key.startswith("replica_logs_url_")}
    assert pushed == {
        f"replica_logs_url_worker-{i}": f"https://logs.example/default/{name}-worker-{i}?container=tensorflow"
        for i in range(2)
    }
    assert ti.xcoms[XCOM_KEY].startswith("http://")
    (tmp_path / "release").write_text("go")
    # The resumed try (a new operator object, as in the worker) rebuilds the same URLs for the push
    # Airflow makes when the task ends.
    resumed = make(tmp_path, deferrable=True, worker=2)
    assert resumed.execute_complete(context_for(ti), fire(deferred))["state"] == "succeeded"
    ti_key: Any = None
    assert {link.xcom_key: link.get_link(resumed, ti_key=ti_key)
            for link in resumed.operator_extra_links if isinstance(link, ReplicaLogsLink)} == pushed
