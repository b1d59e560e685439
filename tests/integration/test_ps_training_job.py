"""The ParameterServerStrategy program as a real Chief + PS + Worker TFJob through TFJobOperator.

PS and Worker replicas never exit on their own; the job must still succeed when the chief does, and
cleanPodPolicy Running must stop them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from operator_support import TaskInstance, context_for, wait_for

from airflow_tfjob.operators.tfjob import TFJobOperator

pytestmark = [pytest.mark.cluster, pytest.mark.tensorflow, pytest.mark.timeout(300)]

TRAINING = Path(__file__).resolve().parents[2] / "example_dags" / "training"


def test_parameter_server_job_succeeds_with_the_chief(k8s_conn: str, tmp_path: Path) -> None:
    from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook

    op = TFJobOperator(
        task_id="train_ps",
        namespace="default",
        chief=1,
        ps=1,
        worker=1,
        image="tensorflow/tensorflow:2.21.0",
        command=[sys.executable, str(TRAINING / "digits_ps.py")],
        hyperparameters={"epochs": 8, "model_dir": str(tmp_path / "model")},
        env={"TF_CPP_MIN_LOG_LEVEL": "2"},
        metrics=["test_accuracy", "accuracy", "loss"],
        clean_pod_policy="Running",
        startup_timeout=120,
    )
    ti = TaskInstance(task_id="train_ps")
    result = op.execute(context_for(ti))

    assert result["state"] == "succeeded"
    assert result["replica_statuses"]["Chief"]["succeeded"] == 1
    assert result["metrics"]["test_accuracy"] >= 0.9
    saved = json.loads((tmp_path / "model" / "metrics.json").read_text())
    assert saved["test_accuracy"] == pytest.approx(result["metrics"]["test_accuracy"], abs=1e-4)

    # The servers that never exit were stopped: no PS or Worker pod is left running.
    hook = KubeflowJobHook(conn_id=k8s_conn)

    def servers_stopped() -> bool:
        pods = [p for p in hook.list_job_pods(result["name"], "default") if _type(p) in ("ps", "worker")]
        return all(_phase(p) != "Running" for p in pods)

    wait_for(servers_stopped, 60, "PS and Worker pods to be stopped by cleanPodPolicy Running")
    assert os.path.exists(tmp_path / "model" / "model.keras")


def _type(pod: dict[str, Any]) -> str:
    return str((pod.get("metadata", {}).get("labels") or {}).get("training.kubeflow.org/replica-type", ""))


def _phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase", ""))
