"""The digits classifier trained with PyTorch DDP as a Kubeflow Trainer v2 TrainJob.

``train`` runs ``training/digits_torch.py`` on Trainer's ``torch-distributed`` runtime with 2 nodes:
the command is ``torchrun``, which reads the ``PET_*`` variables the runtime injects (node count,
rank, master address) and gives the program the ``MASTER_ADDR``/``RANK``/``WORLD_SIZE`` it reads. Both
nodes' logs stream into the task log (``[node-0-0]``, ``[node-0-1]``); the metrics node 0 printed go to
XCom; ``check_accuracy`` fails the run below the threshold. Node 0 writes a checkpoint after every
epoch into the task instance's ``CHECKPOINT_DIR`` (``checkpoint=``), and a retry or a resumed job starts
from the newest one (set ``TFJOB_EXAMPLES_CHECKPOINT`` to ``pvc://<claim>/<path>`` or an object-storage
prefix on a real cluster).

Run it on the local cluster (``tfjob-local serve`` serves Trainer v2 with the runtime installed), or
``airflow dags test example_trainjob_digits_torch -c '{"epochs": 3}'``.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_tfjob.operators.trainjob import TrainJobOperator

# On a real cluster: an image holding PyTorch (a CPU build is enough), scikit-learn and training/, and
# the path of digits_torch.py in it (TFJOB_EXAMPLES_TRAINING_DIR). On the local cluster the nodes are
# processes on this machine: the program is read from this checkout, torchrun from this environment.
IMAGE = os.environ.get("PYTORCHJOB_EXAMPLES_IMAGE", "airflow-tfjob-examples/pytorch-cpu:2.13.0")
TRAINING_DIR = os.environ.get(
    "TFJOB_EXAMPLES_TRAINING_DIR", str(Path(__file__).resolve().parent / "training")
)
# The local cluster's nodes share this machine's disk: a host directory serves as the checkpoint store.
CHECKPOINT = os.environ.get("TFJOB_EXAMPLES_CHECKPOINT", "file:///tmp/tfjob-examples/checkpoints")

with DAG(
    dag_id="example_trainjob_digits_torch",
    description="PyTorch DDP (torchrun, 2 nodes) as a Kubeflow Trainer v2 TrainJob on torch-distributed",
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    tags=["trainjob", "example"],
    params={
        "epochs": Param(5, type="integer", minimum=1),
        "learning_rate": Param(0.01, type="number", exclusiveMinimum=0),
        "min_test_accuracy": Param(0.9, type="number", minimum=0, maximum=1),
        "image": IMAGE,
        "training_dir": TRAINING_DIR,
        "checkpoint": CHECKPOINT,
    },
) as dag:
    train = TrainJobOperator(
        task_id="train",
        runtime="torch-distributed",
        image="{{ params.image }}",
        command=["torchrun", "{{ params.training_dir }}/digits_torch.py"],
        hyperparameters={"epochs": "{{ params.epochs }}", "learning_rate": "{{ params.learning_rate }}"},
        env={"PYTHONUNBUFFERED": "1"},
        num_nodes=2,
        metrics=["test_accuracy", "accuracy", "loss"],
        progress={"metric": "epoch", "total": "epochs"},
        checkpoint="{{ params.checkpoint }}",
        retries=1,
        retry_delay=timedelta(seconds=10),
    )

    @task
    def check_accuracy(metrics: dict[str, Any], params: dict[str, Any] | None = None) -> float:
        threshold = float((params or {})["min_test_accuracy"])
        accuracy = metrics.get("test_accuracy")
        if accuracy is None:
            raise ValueError(f"the training printed no test_accuracy (metrics: {metrics})")
        if accuracy < threshold:
            raise ValueError(f"test accuracy {accuracy:.4f} is below {threshold}")
        return float(accuracy)

    check_accuracy(train.output["metrics"])
