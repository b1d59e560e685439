"""The hyperparameter sweep behind Kueue: every trial is submitted at once, Kueue's quota decides how
many train together, and the task log of each trial says when it was queued, admitted and running.

Differences from ``example_tfjob_sweep``: no ``max_active_tis_per_dagrun`` (Kueue rations the
cluster, not Airflow), ``kueue_queue`` names the LocalQueue, and the trials are deferrable, so a trial
waiting in the queue holds no worker slot. ``queue_timeout`` bounds the wait in the queue, apart from
``startup_timeout``, which starts counting when Kueue admits the job; a trial preempted by a
higher-priority job waits to be admitted again and goes on (``on_preemption="wait"``).
``report`` prints how long each trial waited in the queue and how often it was preempted.

On the local cluster (docs/howto/kueue.md)::

    tfjob-local serve --kueue-integrations kubeflow.org/tfjob --kueue-objects example_dags/kueue/queues.yaml
    airflow dags test example_tfjob_sweep_kueue -c '{"learning_rates": [0.003, 0.01, 0.03], "batch_sizes": [16, 64], "epochs": 2}'
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_tfjob.operators.tfjob import TFJobOperator

# As in example_tfjob_sweep: the defaults run the program from this checkout on the local cluster.
PYTHON = os.environ.get("TFJOB_EXAMPLES_PYTHON", "python")
HERE = Path(__file__).resolve().parent
PROGRAM = os.environ.get("TFJOB_EXAMPLES_TRAINING_DIR", str(HERE / "training")) + "/digits_mwms.py"

with DAG(
    dag_id="example_tfjob_sweep_kueue",
    description="Grid search whose trials Kueue admits as its quota allows",
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    tags=["tfjob", "example", "kueue"],
    params={
        "learning_rates": Param([0.003, 0.01, 0.03], type="array", minItems=1),
        "batch_sizes": Param([16, 64], type="array", minItems=1),
        "epochs": Param(2, type="integer", minimum=1),
        "queue": Param("user-queue", type="string", minLength=1),
        "image": os.environ.get("TFJOB_EXAMPLES_IMAGE", "tensorflow/tensorflow:2.21.0"),
    },
) as dag:

    @task
    def grid(params: dict[str, Any] | None = None) -> list[dict[str, str]]:
        """Every (learning rate, batch size) pair, as ``--key=value`` hyperparameters."""
        p = params or {}
        epochs = str(p["epochs"])
        return [
            {"learning_rate": str(lr), "batch_size": str(bs), "epochs": epochs}
            for lr in p["learning_rates"]
            for bs in p["batch_sizes"]
        ]

    train = TFJobOperator.partial(
        task_id="train",
        worker=2,
        image="{{ params.image }}",
        command=[PYTHON, PROGRAM],
        env={"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"},
        container_resources={"cpu": "500m"},  # what Kueue counts against the ClusterQueue's quota
        kueue_queue="{{ params.queue }}",
        queue_timeout=3600,
        startup_timeout=600,
        on_preemption="wait",
        metrics=["test_accuracy"],
        deferrable=True,
    ).expand(hyperparameters=grid())

    @task
    def report(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each trial's accuracy, time in the queue and preemptions (the operator's result)."""
        rows = [
            {
                "job": r["name"],
                "test_accuracy": r["metrics"].get("test_accuracy"),
                "queue_wait_seconds": r.get("queue_wait_seconds"),
                "preemptions": r.get("preemptions"),
            }
            for r in results
        ]
        for row in rows:
            print(row)
        return rows

    report(train.output)
