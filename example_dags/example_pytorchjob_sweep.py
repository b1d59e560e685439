"""A hyperparameter sweep of PyTorchJobs: one job per (learning rate, hidden units), the best trial wins.

``trials`` turns the run's params into a list of hyperparameter sets; ``train`` is expanded over it
with dynamic task mapping, so every trial is its own task instance with its own PyTorchJob (a Master
and ``workers`` Workers training ``training/digits_torch.py`` with DistributedDataParallel over gloo)
and its own retries and logs. ``max_active_tis_per_dagrun`` bounds how many trials train at once.
``pick_best`` reads every trial's ``metrics`` XCom (what the Master printed in Katib's format).

``airflow dags test example_pytorchjob_sweep -c '{"learning_rates": [0.001, 0.01], "hidden_units": [32], "epochs": 3}'``
"""

from __future__ import annotations

import itertools
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

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
        "learning_rates": Param([0.001, 0.01, 0.03], type="array", minItems=1),
        "hidden_units": Param([32, 128], type="array", minItems=1),
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
        grid = itertools.product(p["learning_rates"], p["hidden_units"])
        chosen = list(itertools.islice(grid, int(p["max_trials"])))
        return [
            {"learning_rate": str(lr), "hidden_units": str(units), "epochs": str(p["epochs"])}
            for lr, units in chosen
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
        trials = [
            {"trial": i, "hyperparameters": hp, OBJECTIVE: m.get(OBJECTIVE), "loss": m.get("loss")}
            for i, (hp, m) in enumerate(zip(hyperparameters, metrics, strict=True))
        ]
        ranked = sorted(
            (t for t in trials if t[OBJECTIVE] is not None),
            key=lambda t: (-t[OBJECTIVE], t["loss"] if t["loss"] is not None else float("inf")),
        )
        if not ranked:
            raise ValueError(f"no trial reported {OBJECTIVE}: read the train tasks' logs")
        for place, t in enumerate(ranked, start=1):
            print(
                f"#{place} trial {t['trial']} {t['hyperparameters']}: {OBJECTIVE}={t[OBJECTIVE]:.4f} loss={t['loss']}"
            )
        return {"best": ranked[0], "ranking": [t["trial"] for t in ranked], "trials": trials}

    pick_best(grid, train.output["metrics"])
