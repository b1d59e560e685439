"""Three frameworks side by side on the same digits data: a TFJob, a PyTorchJob and an XGBoostJob.

``train_tensorflow`` runs ``training/digits_mwms.py`` on two TFJob Workers
(MultiWorkerMirroredStrategy); ``train_pytorch`` runs ``training/digits_torch.py`` on a PyTorchJob's
Master and Worker (DistributedDataParallel over gloo), with the same network and hyperparameters;
``train_xgboost`` runs ``training/digits_xgboost.py`` on an XGBoostJob's Master (which hosts the
tracker) and two Workers, boosted trees for contrast. All print ``test_accuracy`` in Katib's format,
so their ``metrics`` XComs compare directly; none depends on another, so a scheduler with free slots
runs them at the same time. ``compare`` names the winner by test accuracy and fails the run when the
two neural networks (the same model on the same data) disagree by more than ``max_gap``: a large gap
means one of the programs is broken.

``airflow dags test example_kubeflow_compare -c '{"epochs": 5}'``
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_tfjob.operators.pytorchjob import PyTorchJobOperator
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.operators.xgboostjob import XGBoostJobOperator

# Defaults fit the local cluster (replicas are processes on this machine, reading training/ from this
# checkout). On a real cluster, set the images and paths (see example_tfjob_digits.py and
# example_pytorchjob_sweep.py for what each image holds).
TF_IMAGE = os.environ.get("TFJOB_EXAMPLES_IMAGE", "tensorflow/tensorflow:2.21.0")
TORCH_IMAGE = os.environ.get("PYTORCHJOB_EXAMPLES_IMAGE", "airflow-tfjob-examples/pytorch-cpu:2.13.0")
# An image with xgboost-cpu, scikit-learn and training/ (e.g. FROM python:3.11-slim, pip install xgboost-cpu scikit-learn).
XGB_IMAGE = os.environ.get("XGBOOSTJOB_EXAMPLES_IMAGE", "airflow-tfjob-examples/xgboost-cpu:3.2.0")
PYTHON = os.environ.get("TFJOB_EXAMPLES_PYTHON", "python")
TRAINING_DIR = os.environ.get(
    "TFJOB_EXAMPLES_TRAINING_DIR", str(Path(__file__).resolve().parent / "training")
)
METRICS = ["test_accuracy", "accuracy", "loss"]
HYPERPARAMETERS = {
    "epochs": "{{ params.epochs }}",
    "batch_size": "{{ params.batch_size }}",
    "learning_rate": "{{ params.learning_rate }}",
    "hidden_units": "{{ params.hidden_units }}",
}

with DAG(
    dag_id="example_kubeflow_compare",
    description="The same digits classifier trained by a TFJob and a PyTorchJob, metrics compared",
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    tags=["tfjob", "pytorchjob", "example"],
    params={
        "epochs": Param(5, type="integer", minimum=1),
        "batch_size": Param(32, type="integer", minimum=1),
        "learning_rate": Param(0.01, type="number", exclusiveMinimum=0),
        "hidden_units": Param(64, type="integer", minimum=1),
        "num_rounds": Param(30, type="integer", minimum=1),
        "max_gap": Param(0.1, type="number", minimum=0, maximum=1),
        "tf_image": TF_IMAGE,
        "torch_image": TORCH_IMAGE,
        "xgb_image": XGB_IMAGE,
        "python": PYTHON,
        "training_dir": TRAINING_DIR,
    },
) as dag:
    train_tensorflow = TFJobOperator(
        task_id="train_tensorflow",
        worker=2,
        image="{{ params.tf_image }}",
        command=["{{ params.python }}", "{{ params.training_dir }}/digits_mwms.py"],
        hyperparameters=HYPERPARAMETERS,
        env={"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0", "PYTHONUNBUFFERED": "1"},
        metrics=METRICS,
        clean_pod_policy="Running",
    )
    train_pytorch = PyTorchJobOperator(
        task_id="train_pytorch",
        master=1,
        worker=1,
        image="{{ params.torch_image }}",
        command=["{{ params.python }}", "{{ params.training_dir }}/digits_torch.py"],
        hyperparameters=HYPERPARAMETERS,
        metrics=METRICS,
        clean_pod_policy="Running",
    )
    train_xgboost = XGBoostJobOperator(
        task_id="train_xgboost",
        master=1,
        worker=2,
        image="{{ params.xgb_image }}",
        command=["{{ params.python }}", "{{ params.training_dir }}/digits_xgboost.py"],
        hyperparameters={"num_rounds": "{{ params.num_rounds }}", "log_every": "10"},
        metrics=["test_accuracy", "test_mlogloss", "train-merror"],
        clean_pod_policy="Running",
    )

    @task
    def compare(
        tensorflow: dict[str, Any],
        pytorch: dict[str, Any],
        xgboost: dict[str, Any],
        params: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Every framework's test accuracy, the winner, and the gap between the two neural networks."""
        results = {"tensorflow": tensorflow, "pytorch": pytorch, "xgboost": xgboost}
        missing = [name for name, metrics in results.items() if metrics.get("test_accuracy") is None]
        if missing:
            raise ValueError(f"no test_accuracy from {missing}: read those train tasks' logs")
        accuracy = {name: float(metrics["test_accuracy"]) for name, metrics in results.items()}
        for name, metrics in results.items():
            print(f"{name}: " + " ".join(f"{key}={value}" for key, value in sorted(metrics.items())))
        winner = max(accuracy, key=lambda name: accuracy[name])
        gap = abs(accuracy["tensorflow"] - accuracy["pytorch"])
        print(f"winner: {winner} (test_accuracy={accuracy[winner]:.4f}); TensorFlow vs PyTorch gap {gap:.4f}")
        max_gap = float((params or {})["max_gap"])
        if gap > max_gap:
            raise ValueError(
                f"TensorFlow and PyTorch test accuracies differ by {gap:.4f} (> max_gap {max_gap}) "
                f"for the same network: one of the training programs is broken"
            )
        return {"winner": winner, "test_accuracy": accuracy, "nn_gap": gap}

    compare(
        train_tensorflow.output["metrics"], train_pytorch.output["metrics"], train_xgboost.output["metrics"]
    )
