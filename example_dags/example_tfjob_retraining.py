"""Daily retraining: check the data, train a candidate, promote it only if it beats the current model.

    check_data >> train >> validate >> promote

* ``check_data`` refuses to train on a data set that is too small, has missing classes or bad values.
* ``train`` is a TFJob (2 workers, MultiWorkerMirroredStrategy) that writes the candidate model and
  its ``metrics.json`` under ``<data_dir>/retraining/candidates/<run>``.
* ``validate`` compares the candidate's test accuracy with the current model's (the
  ``metrics.json`` behind ``<data_dir>/retraining/current``) and short-circuits when it is not
  better by at least ``min_improvement``: the current model stays.
* ``promote`` repoints the ``current`` symlink at the candidate atomically (rename over the old link),
  so a reader never sees a missing or half-written model, and appends to ``promotions.jsonl``.

The models directory must be visible to both the replicas and the Airflow worker: a host path on
the local cluster, a shared volume (``TFJOB_EXAMPLES_PVC``) on a real one.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_tfjob.operators.tfjob import TFJobOperator

# Defaults fit the local cluster, whose replicas are processes on this machine: the program is read
# from this checkout and the data directory is a host path. On a real cluster, set these variables on
# the Airflow workers (or override the params per run): an image holding TensorFlow, scikit-learn and
# training/ (e.g. FROM tensorflow/tensorflow:2.21.0, pip install scikit-learn, COPY training/ /opt/training/)
# and a PVC mounted at the data directory in every replica and on the Airflow workers (validate and
# promote read the models back).
IMAGE = os.environ.get("TFJOB_EXAMPLES_IMAGE", "tensorflow/tensorflow:2.21.0")
PYTHON = os.environ.get("TFJOB_EXAMPLES_PYTHON", "python")
TRAINING_DIR = os.environ.get(
    "TFJOB_EXAMPLES_TRAINING_DIR", str(Path(__file__).resolve().parent / "training")
)
DATA_DIR = os.environ.get("TFJOB_EXAMPLES_DATA_DIR", "/tmp/tfjob-examples")
PVC = os.environ.get("TFJOB_EXAMPLES_PVC")  # "claim-name:/mount/path", e.g. "models:/tmp/tfjob-examples"
# Keeps the replicas' logs to the program's own lines.
TRAINING_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0", "PYTHONUNBUFFERED": "1"}

CANDIDATE_DIR = (
    "{{ params.data_dir }}/retraining/candidates/{{ run_id | replace(':', '-') | replace('+', '-') }}"
)

with DAG(
    dag_id="example_tfjob_retraining",
    description="Daily retraining with validation against the current model and conditional promotion",
    schedule="@daily",
    start_date=datetime(2025, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["tfjob", "example"],
    params={
        "epochs": Param(10, type="integer", minimum=1),
        "learning_rate": Param(0.01, type="number", exclusiveMinimum=0),
        "min_samples": Param(1000, type="integer", minimum=1),
        "min_improvement": Param(0.0, type="number", minimum=0),
        "image": IMAGE,
        "python": PYTHON,
        "training_dir": TRAINING_DIR,
        "data_dir": DATA_DIR,
    },
) as dag:

    @task
    def check_data(params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Fails the run before any training when the data set is not fit to learn from."""
        import numpy as np
        from sklearn.datasets import load_digits

        data = load_digits()
        counts = np.bincount(data.target, minlength=10)
        report = {
            "samples": len(data.target),
            "features": int(data.data.shape[1]),
            "smallest_class": int(counts.min()),
        }
        problems = []
        if report["samples"] < int((params or {})["min_samples"]):
            problems.append(f"only {report['samples']} samples")
        if counts.min() == 0:
            problems.append(f"classes without samples: {np.flatnonzero(counts == 0).tolist()}")
        if not np.isfinite(data.data).all() or data.data.min() < 0 or data.data.max() > 16:
            problems.append("pixel values outside 0..16")
        if problems:
            raise ValueError("data check failed: " + "; ".join(problems))
        print(f"data check passed: {report}")
        return report

    train = TFJobOperator(
        task_id="train",
        worker=2,
        image="{{ params.image }}",
        command=["{{ params.python }}", "{{ params.training_dir }}/digits_mwms.py"],
        hyperparameters={
            "epochs": "{{ params.epochs }}",
            "learning_rate": "{{ params.learning_rate }}",
            "model_dir": CANDIDATE_DIR,
            "log_dir": CANDIDATE_DIR + "/logs",
        },
        env=TRAINING_ENV,
        pvc=PVC,
        metrics=["test_accuracy", "accuracy", "loss"],
        clean_pod_policy="Running",
    )

    @task.short_circuit
    def validate(
        candidate_dir: str, metrics: dict[str, Any], params: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """The candidate's accuracy against the current model's; None (skip promotion) if not better."""
        p = params or {}
        candidate = Path(candidate_dir)
        saved = json.loads((candidate / "metrics.json").read_text())
        new = float(saved["test_accuracy"])
        # The file and the log must agree: a mismatch means the model on disk is not the one that ran.
        if abs(new - float(metrics["test_accuracy"])) > 1e-3:
            raise ValueError(f"metrics.json says {new}, the job's log says {metrics['test_accuracy']}")
        current_link = Path(p["data_dir"]) / "retraining" / "current"
        current = None
        if (current_link / "metrics.json").exists():
            current = float(json.loads((current_link / "metrics.json").read_text())["test_accuracy"])
        better = current is None or new >= current + float(p["min_improvement"])
        print(f"candidate test_accuracy={new:.4f}, current={current}, promote={better}")
        if not better:
            return None
        return {"candidate": str(candidate.resolve()), "test_accuracy": new, "previous": current}

    @task
    def promote(
        decision: dict[str, Any], params: dict[str, Any] | None = None, run_id: str | None = None
    ) -> str:
        """Atomically points ``current`` at the candidate and records the promotion."""
        root = Path((params or {})["data_dir"]) / "retraining"
        link = root / "current"
        staging = root / f".current-{os.getpid()}"
        staging.unlink(missing_ok=True)
        staging.symlink_to(decision["candidate"], target_is_directory=True)
        os.replace(staging, link)
        with (root / "promotions.jsonl").open("a", encoding="utf-8") as log:
            log.write(json.dumps({"run_id": run_id, **decision}) + "\n")
        print(f"promoted {decision['candidate']} (test_accuracy={decision['test_accuracy']:.4f})")
        return decision["candidate"]

    decision = validate(CANDIDATE_DIR, train.output["metrics"])
    check_data() >> train
    promote(decision)
