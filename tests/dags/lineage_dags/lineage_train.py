"""A training task with lineage: the model as an Asset (outlet), the data it reads as OpenLineage
inputs, a claim its replicas mount; and, beside it in the same DAG, independent of it, a job whose
worker fails, for the failure facets (one `airflow dags test` runs both; a run that needs only the
training marks ``fail`` succeeded without running it: ``--mark-success-pattern fail``)."""

from __future__ import annotations

import sys

from airflow.sdk import DAG, Asset, Param

from airflow_tfjob.operators.tfjob import TFJobOperator

MODEL = Asset("lineage_model", uri="file:///models/lineage")
PROGRAM = "import sys; print(f'accuracy={sys.argv[1]} loss=0.25')"
# Every worker fails: with TFJob's default success policy a job whose worker-0 succeeds has succeeded.
FAILING = "import sys; print('worker failing'); sys.exit(3)"

with DAG(
    "lineage_train",
    schedule=None,
    catchup=False,
    tags=["test"],
    params={"accuracy": Param(0.5, type="number")},
):
    TFJobOperator(
        task_id="train",
        namespace="default",
        worker=2,
        image="local/python",
        command=[sys.executable, "-c", PROGRAM],
        args=["{{ params.accuracy }}"],
        metrics=["accuracy", "loss"],
        pvc="training-data:/data",
        model_asset=MODEL,
        lineage_inputs=["s3://datasets/digits/{{ ds }}"],
        lineage_outputs=["/models/lineage/{{ run_id }}"],
        deferrable=True,
    )
    TFJobOperator(
        task_id="fail",
        namespace="default",
        worker=2,
        image="local/python:3",
        command=[sys.executable, "-c", FAILING],
        model_asset=MODEL,
        lineage_inputs=["s3://datasets/digits"],
        restart_policy="Never",
        deferrable=False,
    )
