"""Deferrable mode end to end: a job submitted by one task, a deferrable sensor waiting for it, then a
deferrable TFJobOperator training run whose result is checked downstream."""

from __future__ import annotations

import sys
from typing import Any

from airflow.sdk import DAG, task

from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.sensors.tfjob import TFJobSensor

# The sensed job runs 15 s: the sensor's first look comes within seconds of the submission, also on a
# loaded machine, and finds it running, so the sensor defers (a job already finished would not defer it).
# (A job waiting for the sensor's task instance to read `deferred` in the run's SQLite database never saw
# it under `airflow dags test`, which runs a deferred task's trigger inline.)
SLOW = "import time; time.sleep(15); print('loss=0.5')"
PROGRAM = "import os; print('chief or worker', os.getpid()); print('loss=0.25')"

with DAG("tfjob_deferrable", schedule=None, catchup=False, tags=["test"]):

    @task
    def submit(run_id: str | None = None) -> str:
        from airflow_tfjob.build.manifest import build_tfjob
        from airflow_tfjob.hooks.tfjob import KubeflowJobHook

        name = "sensed-" + format(abs(hash(run_id)) % 10**10, "010d")
        command = [sys.executable, "-c", SLOW]
        body = build_tfjob(name, "default", replicas={"worker": 1}, image="x", command=command)
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
