"""The TrainJob example, end to end with `airflow dags test` on a local cluster serving Kubeflow
Trainer v2 only: PyTorch DDP with torchrun on Trainer's torch-distributed runtime, 2 nodes, real
training on the digits data set; the metrics node 0 printed in XCom pass the accuracy gate."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_cli import airflow_db, dags_test, migrated_airflow_env, xcom_value

pytestmark = [pytest.mark.dags, pytest.mark.cluster, pytest.mark.pytorch, pytest.mark.timeout(900)]

EXAMPLES = Path(__file__).resolve().parents[2] / "example_dags"
DAG_ID = "example_trainjob_digits_torch"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    from airflow_tfjob.local import LocalCluster

    with LocalCluster(apis=["trainjob"]) as cluster:
        home = tmp_path_factory.mktemp("airflow-home")
        yield migrated_airflow_env(home, EXAMPLES, cluster.kubeconfig_path, migrate_timeout=300)


def test_the_torch_trainjob_example_trains_to_the_accuracy_gate(env: dict[str, str]) -> None:
    output = dags_test(env, DAG_ID, "-c", json.dumps({"epochs": 5}), "-f", str(EXAMPLES / f"{DAG_ID}.py"), timeout=840)
    with airflow_db(env) as db:
        (run_id,) = db.execute("select run_id from dag_run where dag_id = ?", (DAG_ID,)).fetchone()
        states = dict(db.execute("select task_id, state from task_instance where run_id = ?", (run_id,)).fetchall())
        rows = dict(db.execute(
            "select key, value from xcom where run_id = ? and task_id = 'train'", (run_id,)
        ).fetchall())  # fmt: skip
    assert states == {"train": "success", "check_accuracy": "success"}, output[-4000:]
    result: dict[str, Any] = xcom_value(rows["return_value"])
    metrics = xcom_value(rows["metrics"])
    assert result["api"] == "trainjob" and result["reason"] == "AllJobsCompleted"
    assert metrics["test_accuracy"] >= 0.9
    # Both nodes' logs, with their stable names, in the task log.
    assert "[node-0-0] epoch=5 " in output and "[node-0-1] epoch=5 " in output
    assert f"Creating TrainJob default/{result['name']}: 2 node on runtime torch-distributed" in output
