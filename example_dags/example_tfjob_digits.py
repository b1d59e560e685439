"""The demo: distributed training of a digits classifier on 2 workers, checked for accuracy.

``train`` runs ``training/digits_mwms.py`` as a TFJob with two Worker replicas
(MultiWorkerMirroredStrategy), streams both workers' logs into the task log while they train, and
pushes the Katib-format metrics the master replica printed to XCom (key ``metrics``); a
``[progress]`` line (epochs done, pace, time left) shows how far the training is.
``check_accuracy`` fails the run when the test accuracy is below the threshold.

Checkpoints survive retries and preemption (``checkpoint=``): the master writes one after every epoch
into the task instance's ``CHECKPOINT_DIR`` and prints ``checkpoint saved: <path> epoch=<n>``; a retry
(``retries=1``), or the job resumed after a Kueue preemption, starts from the newest one (the task log
says ``resuming from <path> (epoch <n>)``). By default the checkpoints go to a directory beside the
data (right for the local cluster, whose replicas share this machine's disk); on a real cluster set
``TFJOB_EXAMPLES_CHECKPOINT`` (or the ``checkpoint`` param) to ``pvc://<claim>/<path>`` or an
object-storage prefix.

Run it on the local cluster with ``make demo``, or ``airflow dags test example_tfjob_digits``
(``-c '{"epochs": 3}'`` to change a parameter).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_tfjob.operators.tfjob import TFJobOperator

# Defaults fit the local cluster, whose replicas are processes on this machine: the program is read
# from this checkout and the data directory is a host path. On a real cluster, set these variables on
# the Airflow workers (or override the params per run): an image holding TensorFlow, scikit-learn and
# training/ (e.g. FROM tensorflow/tensorflow:2.21.0, pip install scikit-learn, COPY training/ /opt/training/)
# and a PVC mounted at the data directory in every replica.
IMAGE = os.environ.get("TFJOB_EXAMPLES_IMAGE", "tensorflow/tensorflow:2.21.0")
PYTHON = os.environ.get("TFJOB_EXAMPLES_PYTHON", "python")
TRAINING_DIR = os.environ.get(
    "TFJOB_EXAMPLES_TRAINING_DIR", str(Path(__file__).resolve().parent / "training")
)
DATA_DIR = os.environ.get("TFJOB_EXAMPLES_DATA_DIR", "/tmp/tfjob-examples")
# Where checkpoints survive retries and preemption: "pvc://<claim>/<path>", "s3://<bucket>/<prefix>"...;
# empty: a directory under the data directory (file://, for replicas sharing one disk).
CHECKPOINT = os.environ.get("TFJOB_EXAMPLES_CHECKPOINT", "")
PVC = os.environ.get("TFJOB_EXAMPLES_PVC")  # "claim-name:/mount/path", e.g. "models:/tmp/tfjob-examples"
# "1": a TensorBoard on the run's logs while it trains (the task's "TensorBoard" link; the deployment test
# turns it on). Off by default: the demo does not wait for a board's start-up.
TENSORBOARD = os.environ.get("TFJOB_EXAMPLES_TENSORBOARD", "") in ("1", "true", "True")
# Keeps the replicas' logs to the program's own lines: TensorFlow's C++ logging above INFO only, and
# no oneDNN notice (printed before that setting applies; this small model does not need oneDNN).
TRAINING_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0", "PYTHONUNBUFFERED": "1"}

with DAG(
    dag_id="example_tfjob_digits",
    description="Distributed TensorFlow training (2 workers) of a digits classifier",
    schedule=None,
    start_date=datetime(2025, 1, 1),
    catchup=False,
    tags=["tfjob", "example"],
    params={
        "epochs": Param(10, type="integer", minimum=1),
        "batch_size": Param(32, type="integer", minimum=1),
        "learning_rate": Param(0.01, type="number", exclusiveMinimum=0),
        "min_test_accuracy": Param(0.9, type="number", minimum=0, maximum=1),
        "image": IMAGE,
        "python": PYTHON,
        "training_dir": TRAINING_DIR,
        "data_dir": DATA_DIR,
        "checkpoint": CHECKPOINT,
    },
) as dag:
    run_dir = "{{ params.data_dir }}/digits/{{ run_id | replace(':', '-') | replace('+', '-') }}"
    train = TFJobOperator(
        task_id="train",
        worker=2,
        image="{{ params.image }}",
        command=["{{ params.python }}", "{{ params.training_dir }}/digits_mwms.py"],
        hyperparameters={
            "epochs": "{{ params.epochs }}",
            "batch_size": "{{ params.batch_size }}",
            "learning_rate": "{{ params.learning_rate }}",
            "model_dir": run_dir + "/model",
            "log_dir": run_dir + "/logs",
        },
        env=TRAINING_ENV,
        pvc=PVC,
        log_replicas="all",
        tensorboard=TENSORBOARD,
        tensorboard_log_dir=run_dir + "/logs" if TENSORBOARD else None,
        metrics=["test_accuracy", "accuracy", "loss"],
        # A "[progress]" line in the task log as epochs go by (the total is the epochs hyperparameter).
        progress={"metric": "epoch", "total": "epochs"},
        clean_pod_policy="Running",
        # A try that fails (or a job Kueue preempts) goes on from its newest checkpoint.
        checkpoint="{{ params.checkpoint or 'file://' ~ params.data_dir ~ '/checkpoints' }}",
        retries=1,
        retry_delay=timedelta(seconds=10),
    )

    @task
    def check_accuracy(metrics: dict[str, Any], params: dict[str, Any] | None = None) -> float:
        """The gate a real pipeline puts before using a model: fail loudly below the threshold."""
        threshold = float((params or {})["min_test_accuracy"])
        accuracy = metrics.get("test_accuracy")
        if accuracy is None:
            raise ValueError(f"the training printed no test_accuracy (metrics: {metrics})")
        print(f"test_accuracy={accuracy:.4f} (threshold {threshold})")
        if accuracy < threshold:
            raise ValueError(f"test accuracy {accuracy:.4f} is below {threshold}")
        return float(accuracy)

    check_accuracy(train.output["metrics"])
