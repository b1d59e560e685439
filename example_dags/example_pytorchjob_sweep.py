"""A hyperparameter sweep of PyTorchJobs: one job per point of a search space, the best trial wins.

``search_space`` maps each hyperparameter to the values to try (any of ``digits_torch.py``'s
arguments); ``fixed`` holds the ones every trial shares. ``trials`` expands the grid (at most
``max_trials`` points) into a list of hyperparameter sets; ``train`` is expanded over it
with dynamic task mapping, so every trial is its own task instance with its own PyTorchJob (a Master
and ``workers`` Workers training ``training/digits_torch.py`` with DistributedDataParallel over gloo)
and its own retries and logs. ``max_active_tis_per_dagrun`` bounds how many trials train at once.
``pick_best`` reads every trial's ``metrics`` XCom (what the Master printed in Katib's format).

``airflow dags test example_pytorchjob_sweep -c '{"search_space": {"learning_rate": [0.001, 0.01]}, "fixed": {"epochs": 3}}'``
"""

from __future__ import annotations

import itertools
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_tfjob.integrations.sweeps import rank_trials
from airflow_tfjob.operators.pytorchjob import PyTorchJobOperator

# Defaults fit the local cluster, whose replicas are processes on this machine: the program is read
# from this checkout. On a real cluster, set these variables on the Airflow workers (or override the
# params per run): an image holding PyTorch (a CPU build is enough), scikit-learn and training/ (e.g.
# FROM python:3.11-slim, pip install torch scikit-learn --index-url for the CPU wheels, COPY training/ /opt/training/).
IMAGE = os.environ.get("PYTORCHJOB_EXAMPLES_IMAGE", "airflow-tfjob-examples/pytorch-cpu:2.13.0")
PYTHON = os.environ.get("TFJOB_EXAMPLES_PYTHON", "python")
TRAINING_DIR = os.environ.get(
    "TFJOB_EXAMPLES_TRAINING_DIR", str(Path(__file__).resolve().parent / "training")
)

OBJECTIVE = "test_accuracy"

with DAG(
    dag_id="example_pytorchjob_sweep",
    description="Grid search over learning rate x hidden units, one PyTorchJob (DDP, gloo) per trial",
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    tags=["pytorchjob", "example"],
    params={
        "search_space": Param(
            {"learning_rate": [0.001, 0.01, 0.03], "hidden_units": [32, 128]},
            type="object",
            minProperties=1,
            additionalProperties={"type": "array", "minItems": 1},
        ),
        "fixed": Param({"epochs": 5, "batch_size": 32}, type="object"),
        "max_trials": Param(12, type="integer", minimum=1),
        "image": IMAGE,
        "python": PYTHON,
        "training_dir": TRAINING_DIR,
    },
) as dag:

    @task
    def trials(params: dict[str, Any] | None = None) -> list[dict[str, str]]:
        """Every point of the search space (in the order its keys and values are given), merged with
        the fixed values, as ``--key=value`` hyperparameters."""
        p = params or {}
        space: dict[str, list[Any]] = p["search_space"]
        points = itertools.islice(itertools.product(*space.values()), int(p["max_trials"]))
        fixed = {key: str(value) for key, value in p["fixed"].items()}
        return [
            fixed | {key: str(value) for key, value in zip(space, point, strict=True)} for point in points
        ]

    grid = trials()
    train = PyTorchJobOperator.partial(
        task_id="train",
        master=1,
        # A replica count is not templated: the grid's size is what varies per run, not the job's shape.
        worker=int(os.environ.get("PYTORCHJOB_EXAMPLES_WORKERS", "1")),
        image="{{ params.image }}",
        command=["{{ params.python }}", "{{ params.training_dir }}/digits_torch.py"],
        metrics=[OBJECTIVE, "accuracy", "loss"],
        clean_pod_policy="Running",
        max_active_tis_per_dagrun=2,
    ).expand(hyperparameters=grid)

    @task
    def pick_best(hyperparameters: list[dict[str, str]], metrics: list[dict[str, Any]]) -> dict[str, Any]:
        """Ranks the trials by objective, ties broken by the lower final training loss (360 test digits
        make equal accuracies common); trials that printed no objective are listed but not ranked."""
        return rank_trials(hyperparameters, metrics, OBJECTIVE, tie_breakers=[("loss", "min")])

    pick_best(grid, train.output["metrics"])
