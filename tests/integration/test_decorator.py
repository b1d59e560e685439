"""@task.tfjob end to end: a function runs as both workers of a TFJob, worker-0's value is the XCom.

The function does a real MultiWorkerMirroredStrategy all-reduce, so the value can only be right if
both replicas ran it together; it runs once inline and once deferred (the value then travels through
the trigger's event).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from airflow_database import migrate

pytestmark = [pytest.mark.dags, pytest.mark.cluster, pytest.mark.tensorflow, pytest.mark.timeout(600)]

AIRFLOW = str(Path(sys.executable).parent / "airflow")
DAG_ID = "tfjob_decorator_allreduce"
DAG_SOURCE = textwrap.dedent(
    '''
    from datetime import datetime

    from airflow.sdk import DAG, task

    with DAG("tfjob_decorator_allreduce", schedule=None, start_date=datetime(2025, 1, 1), catchup=False):

        def allreduce(scale: int, label: str = "") -> dict:
            """Each worker contributes scale * (index + 1); the all-reduced sum needs both workers."""
            import json
            import os

            import tensorflow as tf

            strategy = tf.distribute.MultiWorkerMirroredStrategy()
            me = json.loads(os.environ["TF_CONFIG"])["task"]
            contribution = float(scale * (me["index"] + 1))
            total = strategy.reduce(
                tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(contribution)), axis=None
            )
            print(f"{label} worker-{me['index']} total={float(total)}", flush=True)
            return {"total": float(total), "replicas": strategy.num_replicas_in_sync, "task": me, "label": label}

        inline = task.tfjob(
            task_id="inline", worker=2, env={"TF_CPP_MIN_LOG_LEVEL": "2"}, log_replicas="all"
        )(allreduce)
        deferred = task.tfjob(
            task_id="deferred", worker=2, env={"TF_CPP_MIN_LOG_LEVEL": "2"}, deferrable=True
        )(allreduce)

        @task
        def combine(a: dict, b: dict) -> float:
            return a["total"] + b["total"]

        combine(inline(10, label="inline"), deferred(scale=100, label="deferred"))
    '''
)


@pytest.fixture
def env(local_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    # The local cluster runs in this process and starts replicas through its PATH: the decorator's
    # `python` must be this interpreter, which has TensorFlow.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    monkeypatch.setenv("PATH", path)
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "decorator_dag.py").write_text(DAG_SOURCE)
    extra = {"kube_config_path": str(local_cluster.kubeconfig_path), "namespace": "default"}
    environment = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "home"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps({"conn_type": "kubernetes", "extra": extra}),
        "PATH": path,
    }
    migrate(environment)
    return environment


def _xcom(env: dict[str, str], task_id: str) -> Any:
    with sqlite3.connect(Path(env["AIRFLOW_HOME"]) / "airflow.db") as db:
        row = db.execute(
            "select value from xcom where dag_id = ? and task_id = ? and key = 'return_value'",
            (DAG_ID, task_id),
        ).fetchone()
    assert row is not None, f"no return value for {task_id}"
    raw = row[0]
    value = json.loads(raw) if isinstance(raw, (str, bytes)) else raw
    return json.loads(value) if isinstance(value, str) and value[:1] in "{[" else value


def test_two_workers_return_worker0_value_inline_and_deferred(env: dict[str, str]) -> None:
    done = subprocess.run(
        [AIRFLOW, "dags", "test", DAG_ID], env=env, capture_output=True, text=True, timeout=540
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-8000:]

    inline = _xcom(env, "inline")
    assert inline == {
        "total": 30.0,  # 10 * 1 + 10 * 2: both workers took part
        "replicas": 2,
        "task": {"type": "worker", "index": 0},  # worker-0's value, not worker-1's
        "label": "inline",
    }
    deferred = _xcom(env, "deferred")
    assert deferred["total"] == 300.0 and deferred["task"] == {"type": "worker", "index": 0}
    assert _xcom(env, "combine") == 330.0
    # Both replicas ran the function (their own lines are in the log); the marker line itself is
    # replaced by a short notice (the marker string still appears in the logged manifest's command).
    assert "inline worker-1 total=30.0" in output
    assert "return value received" in output
    assert "] __TFJOB_RETURN__ " not in output
