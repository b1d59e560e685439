"""Daily retraining, and a deployment that promotes a new model only if it beats the best so far.

    example_tfjob_retraining:  check_data >> train          (train's outlet: the MODEL asset)
    example_tfjob_deploy:      promote_if_better            (scheduled on MODEL)

* ``check_data`` refuses to train on a data set that is too small, has missing classes or bad values.
* ``train`` is a TFJob (2 workers, MultiWorkerMirroredStrategy) that writes the candidate model and
  its ``metrics.json`` under ``<data_dir>/retraining/candidates/<run>``. Its ``model_asset`` makes
  the model an Airflow Asset: each succeeded job emits an asset event whose ``extra`` holds the
  final metrics and the job's identity (and, with the OpenLineage provider, lineage events name the
  data set as input and the model as output).
* ``example_tfjob_deploy`` runs on each such event: it reads the metrics from the event, checks the
  candidate's ``metrics.json`` agrees, and compares its test accuracy with the best promoted so far,
  kept in the asset's durable state (Airflow 3.3's ``asset_state_store``). Only a candidate better
  by at least ``min_improvement`` is promoted: the ``current`` symlink is repointed atomically (rename
  over the old link, so a reader never sees a missing or half-written model), ``promotions.jsonl``
  gets a line, and the asset's state records the new best.

The models directory must be visible to both the replicas and the Airflow worker: a host path on
the local cluster, a shared volume (``TFJOB_EXAMPLES_PVC``) on a real one.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Asset, Param, task

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

# The models this DAG produces; one event per succeeded training, its extra the final metrics.
MODEL = Asset("example_tfjob_retraining_model", uri=f"file://{DATA_DIR}/retraining/candidates")

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
        model_asset=MODEL,
        lineage_inputs=["sklearn://datasets/digits"],
    )

    check_data() >> train


def candidate_dir(data_dir: str, run_id: str) -> Path:
    """Where the run ``run_id`` of the retraining DAG wrote its model (as CANDIDATE_DIR renders)."""
    return Path(data_dir) / "retraining" / "candidates" / run_id.replace(":", "-").replace("+", "-")


with DAG(
    dag_id="example_tfjob_deploy",
    description="Promotes a newly trained model when it beats the best so far",
    schedule=[MODEL],
    start_date=datetime(2025, 1, 1),
    catchup=False,
    tags=["tfjob", "example"],
    params={"min_improvement": Param(0.0, type="number", minimum=0), "data_dir": DATA_DIR},
) as deploy_dag:

    @task(inlets=[MODEL])
    def promote_if_better(
        triggering_asset_events: Any = None,
        asset_state_store: Any = None,
        params: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The newest model event against the best so far (the asset's state); promote if better."""
        p = params or {}
        event = max(triggering_asset_events[MODEL], key=lambda e: e.timestamp)
        new = float(event.extra["metrics"]["test_accuracy"])
        candidate = candidate_dir(p["data_dir"], event.source_run_id)
        # The file and the event must agree: a mismatch means the model on disk is not the one that ran.
        saved = float(json.loads((candidate / "metrics.json").read_text())["test_accuracy"])
        if abs(saved - new) > 1e-3:
            raise ValueError(f"{candidate}/metrics.json says {saved}, the training reported {new}")
        state = asset_state_store[MODEL]
        best = state.get("best_test_accuracy")
        better = best is None or new >= float(best) + float(p["min_improvement"])
        decision = {"candidate": str(candidate.resolve()), "test_accuracy": new, "previous": best}
        print(f"candidate test_accuracy={new:.4f}, best so far={best}, promote={better}")
        if better:
            promote(Path(p["data_dir"]) / "retraining", decision, event.source_run_id)
            state.set("best_test_accuracy", new)
        return {**decision, "promoted": better, "job": event.extra["job"]}

    promote_if_better()


def promote(root: Path, decision: dict[str, Any], run_id: str) -> None:
    """Atomically points ``current`` at the candidate and records the promotion."""
    link = root / "current"
    staging = root / f".current-{os.getpid()}"
    staging.unlink(missing_ok=True)
    staging.symlink_to(decision["candidate"], target_is_directory=True)
    os.replace(staging, link)
    with (root / "promotions.jsonl").open("a", encoding="utf-8") as log:
        log.write(json.dumps({"run_id": run_id, **decision}) + "\n")
    print(f"promoted {decision['candidate']} (test_accuracy={decision['test_accuracy']:.4f})")
