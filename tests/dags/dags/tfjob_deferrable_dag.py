"""Deferrable mode end to end: a job submitted by one task, a deferrable sensor waiting for it, then a
deferrable TFJobOperator training run whose result is checked downstream."""

from __future__ import annotations

import sys
from typing import Any

from airflow.sdk import DAG, task

from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.sensors.tfjob import TFJobSensor

SLOW = "import time; time.sleep(3); print('loss=0.5')"
PROGRAM = "import os; print('chief or worker', os.getpid()); print('loss=0.25')"

with DAG("tfjob_deferrable", schedule=None, catchup=False, tags=["test"]):

    @task
    def submit(run_id: str | None = None) -> str:
        from airflow_tfjob.build.manifest import build_tfjob
        from airflow_tfjob.hooks.tfjob import KubeflowJobHook

        name = "sensed-" + format(abs(hash(run_id)) % 10**10, "010d")
        body = build_tfjob(
            name, "default", replicas={"worker": 1}, image="x", command=[sys.executable, "-c", SLOW]
        )
        KubeflowJobHook().create_tfjob(body, "default")
        return name

    wait = TFJobSensor(
        task_id="wait",
        name="{{ ti.xcom_pull(task_ids='submit') }}",
        namespace="default",
        deferrable=True,
        timeout=300,
    )
    train = TFJobOperator(
        task_id="train",
        namespace="default",
        chief=1,
        worker=1,
        image="local/python",
        command=[sys.executable, "-c", PROGRAM],
        metrics=["loss"],
        deferrable=True,
        on_finish_action="delete_succeeded",
    )

    @task
    def check(result: dict[str, Any]) -> None:
        assert result["state"] == "succeeded", result
        assert float(result["metrics"]["loss"]) == 0.25, result
        print("CHECKED", result["name"], result["state"])

    submit() >> wait >> train
    check(train.output)
