"""Secrets in the task log: replicas print their secret_env value, and a @task.tfjob secret argument,
synchronously and deferred; the task log must show them masked."""

from __future__ import annotations

import sys

from airflow.sdk import DAG, task

from airflow_tfjob.operators.tfjob import TFJobOperator

TOKEN = "dags-test-secret-token-0451"
CALL_TOKEN = "dags-test-call-token-9137"
PRINTS = "import os; print('replica token=' + os.environ['API_TOKEN'], flush=True)"

with DAG("tfjob_secret", schedule=None, catchup=False, tags=["test"]):
    sync = TFJobOperator(
        task_id="sync",
        namespace="default",
        worker=1,
        image="local/python",
        command=[sys.executable, "-c", PRINTS],
        secret_env={"API_TOKEN": TOKEN},
        deferrable=False,
    )
    deferred = TFJobOperator(
        task_id="deferred",
        namespace="default",
        worker=1,
        image="local/python",
        command=[sys.executable, "-c", PRINTS],
        secret_env={"API_TOKEN": TOKEN},
        deferrable=True,
    )

    @task.tfjob(image="local/python", worker=1, secret_args=["token"])
    def decorated(token: str) -> int:
        print("function token=" + token, flush=True)
        return len(token)

    sync >> deferred >> decorated(CALL_TOKEN)
