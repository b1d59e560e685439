"""The hyperparameter sweep behind Kueue's MultiKueue: each trial is submitted to the manager cluster,
Kueue runs it on one of its worker clusters, and the trial's task log holds its replicas' lines, read on
that worker as they are written, with the worker named (``[multikueue] ... runs on worker cluster
'worker1'``).

Differences from ``example_tfjob_sweep_kueue``: the LocalQueue's ClusterQueue has MultiKueue's admission
check, and ``multikueue_connections`` maps each worker cluster (its MultiKueueCluster's name) to the
Airflow ``kubernetes`` connection its replicas are read through (the job connection's extra may hold the
same map; this one wins per worker). A worker without a connection is named once in the task log, which
then follows the job's status only. A worker lost while a trial runs on it fails the trial after 20
minutes, naming the loss, as an infrastructure failure a retry may fix (docs/howto/kueue.md).

On the local cluster (docs/howto/kueue.md, "MultiKueue")::

    tfjob-local serve --multikueue-workers 2 --kueue-integrations kubeflow.org/tfjob \\
        --kueue-objects example_dags/kueue/multikueue.yaml
    # connections k8s_worker1 and k8s_worker2: the worker kubeconfigs the serve command prints
    airflow dags test example_tfjob_sweep_multikueue -c '{"learning_rates": [0.01, 0.03], "batch_sizes": [16, 64]}'
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
#: The worker clusters (their MultiKueueClusters' names) and the Airflow connections that reach them.
WORKERS = {"worker1": "k8s_worker1", "worker2": "k8s_worker2"}

with DAG(
    dag_id="example_tfjob_sweep_multikueue",
    description="Grid search whose trials Kueue's MultiKueue runs on worker clusters, followed there",
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    tags=["tfjob", "example", "kueue", "multikueue"],
    params={
        "learning_rates": Param([0.01, 0.03], type="array", minItems=1),
        "batch_sizes": Param([16, 64], type="array", minItems=1),
        "epochs": Param(2, type="integer", minimum=1),
        "queue": Param("multikueue-queue", type="string", minLength=1),
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
        container_resources={"cpu": "500m"},  # what Kueue counts, on the manager and on the worker
        kueue_queue="{{ params.queue }}",
        multikueue_connections=WORKERS,
        log_replicas="all",
        queue_timeout=3600,
        startup_timeout=600,
        metrics=["test_accuracy"],
        deferrable=True,
    ).expand(hyperparameters=grid())

    @task
    def report(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each trial's accuracy and time in the queue (the operator's result)."""
        rows = [
            {
                "job": r["name"],
                "test_accuracy": r["metrics"].get("test_accuracy"),
                "queue_wait_seconds": r.get("queue_wait_seconds"),
            }
            for r in results
        ]
        for row in rows:
            print(row)
        return rows

    report(train.output)
