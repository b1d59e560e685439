"""A synchronous TFJobOperator: two workers, metrics, cleanPodPolicy All applied after the logs are read."""

from __future__ import annotations

import sys

from airflow.sdk import DAG

from airflow_tfjob.operators.tfjob import TFJobOperator

PROGRAM = (
    "import json, os; t = json.loads(os.environ['TF_CONFIG'])['task']; "
    "print(f\"worker {t['index']} args={os.sys.argv[1:]}\"); print('loss=0.125 accuracy=0.9')"
)

with DAG("tfjob_sync", schedule=None, catchup=False, tags=["test"]):
    TFJobOperator(
        task_id="train",
        namespace="default",
        worker=2,
        image="local/python",
        command=[sys.executable, "-c", PROGRAM],
        args=["--config=conf.yaml", "--run={{ run_id }}"],
        metrics=["loss", "accuracy"],
        clean_pod_policy="All",
        deferrable=False,
    )
