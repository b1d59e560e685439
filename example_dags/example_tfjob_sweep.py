"""A hyperparameter sweep: one TFJob per (learning rate, batch size), then the best trial wins.

``trials`` turns the run's params into a list of hyperparameter sets; ``train`` is expanded over it
with dynamic task mapping, so every trial is its own task instance with its own TFJob (the job name
includes the map index) and its own retries and logs. ``max_active_tis_per_dagrun`` bounds how many
trials train at once, whether they run inline or deferred (a pool would bound deferred tasks only if
it has ``include_deferred=True``). ``pick_best`` reads every trial's ``metrics`` XCom.

``airflow dags test example_tfjob_sweep -c '{"learning_rates": [0.003, 0.03], "batch_sizes": [32], "epochs": 3}'``
"""

from __future__ import annotations

import itertools
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_tfjob.integrations.sweeps import rank_trials
from airflow_tfjob.operators.tfjob import TFJobOperator

# Defaults fit the local cluster, whose replicas are processes on this machine: the program is read
# from this checkout. On a real cluster, set these variables on
# the Airflow workers (or override the params per run): an image holding TensorFlow, scikit-learn and
# training/ (e.g. FROM tensorflow/tensorflow:2.21.0, pip install scikit-learn, COPY training/ /opt/training/).
IMAGE = os.environ.get("TFJOB_EXAMPLES_IMAGE", "tensorflow/tensorflow:2.21.0")
PYTHON = os.environ.get("TFJOB_EXAMPLES_PYTHON", "python")
TRAINING_DIR = os.environ.get(
    "TFJOB_EXAMPLES_TRAINING_DIR", str(Path(__file__).resolve().parent / "training")
)
# Keeps the replicas' logs to the program's own lines.
TRAINING_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0", "PYTHONUNBUFFERED": "1"}

OBJECTIVE = "test_accuracy"

with DAG(
    dag_id="example_tfjob_sweep",
    description="Grid search over learning rate x batch size, one TFJob per trial",
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    tags=["tfjob", "example"],
    params={
        "learning_rates": Param([0.001, 0.01, 0.05], type="array", minItems=1),
        "batch_sizes": Param([16, 64], type="array", minItems=1),
        "epochs": Param(5, type="integer", minimum=1),
        "max_trials": Param(12, type="integer", minimum=1),
        "image": IMAGE,
        "python": PYTHON,
        "training_dir": TRAINING_DIR,
    },
) as dag:

    @task
    def trials(params: dict[str, Any] | None = None) -> list[dict[str, str]]:
        """The grid, as the ``--key=value`` hyperparameters of each trial."""
        p = params or {}
        grid = itertools.product(p["learning_rates"], p["batch_sizes"])
        chosen = list(itertools.islice(grid, int(p["max_trials"])))
        return [
            {"learning_rate": str(lr), "batch_size": str(bs), "epochs": str(p["epochs"])} for lr, bs in chosen
        ]

    grid = trials()
    train = TFJobOperator.partial(
        task_id="train",
        worker=2,
        image="{{ params.image }}",
        command=["{{ params.python }}", "{{ params.training_dir }}/digits_mwms.py"],
        env=TRAINING_ENV,
        metrics=[OBJECTIVE, "accuracy", "loss"],
        clean_pod_policy="Running",
        max_active_tis_per_dagrun=2,
    ).expand(hyperparameters=grid)

    @task
    def pick_best(
        hyperparameters: list[dict[str, str]], metrics: list[dict[str, Any]], costs: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The trial with the highest objective; trials that printed no objective do not compete. Each
        trial's line shows what its job cost (GPU-hours, CPU core-hours) beside its objective."""
        return rank_trials(hyperparameters, metrics, OBJECTIVE, costs=costs)

    pick_best(grid, train.output["metrics"], train.output["cost"])
