"""One DAG, four independent task groups, run by one `airflow dags test` (tests/dags/test_dag_runs.py):
each group is what a DAG of its own showed before, and an Airflow command costs seconds to start.

- ``sync``: a synchronous TFJobOperator: two workers, metrics, cleanPodPolicy All applied after the logs
  are read, a templated ``.yaml`` argument that must stay a plain string.
- ``deferrable``: a job submitted by one task, a deferrable sensor waiting for it, then a deferrable
  TFJobOperator whose result is checked downstream.
- ``retry``: a retried TFJob task that finds its job through task_state_store (durable identity). The
  first try creates the TFJob, records it in task_state_store (as every try does), then "loses its worker"
  before following it. To show that the second try finds the job through the store and not through the
  identity labels, the first try also strips the label the label lookup selects on (from Airflow 3.3,
  which has the store; before, the labels are what the retry finds the job by). The second try must
  reattach to that same job: one TFJob for the task instance, created by try 1, and the task succeeds on
  try 2.
- ``secret``: replicas print their secret_env value, and a @task.tfjob secret argument, synchronously and
  deferred; the task log must show them masked.

The groups share nothing but the run: no task of one group depends on another's, so a failure in one
fails only its own test.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, TaskGroup, task

from airflow_tfjob.constants import LABEL_DAG_ID
from airflow_tfjob.operators.tfjob import STATE_KEY, TFJobOperator
from airflow_tfjob.sensors.tfjob import TFJobSensor
from airflow_tfjob.version_compat import AIRFLOW_V_3_3_PLUS, AirflowException

SYNC_PROGRAM = (
    "import json, os; t = json.loads(os.environ['TF_CONFIG'])['task']; "
    "print(f\"worker {t['index']} args={os.sys.argv[1:]}\"); print('loss=0.125 accuracy=0.9')"
)
# The sensed job must still run when the sensor first looks, so that the sensor defers (a job already
# finished would not defer it). A fixed run time (15 s) was not enough on a loaded machine: the sensor's
# task starts seconds after the submission, more under load, and once it found the job finished. The job
# now waits for the sensor's task to begin (its on_execute_callback drops a file the replica waits for),
# then runs a few seconds more, longer than the sensor's one look before it defers. (A job waiting for the
# sensor's task instance to read `deferred` in the run's SQLite database never saw it under
# `airflow dags test`, which runs a deferred task's trigger inline.)
SLOW = (
    "import os, sys, time\n"
    "deadline = time.monotonic() + 300\n"
    "while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:\n"
    "    time.sleep(0.1)\n"
    "time.sleep(5)\n"
    "print('loss=0.5')\n"
)
DEFERRED_PROGRAM = "import os; print('chief or worker', os.getpid()); print('loss=0.25')"
RETRY_PROGRAM = "import time; time.sleep(4); print('loss=0.5 accuracy=0.75', flush=True)"
TOKEN = "dags-test-secret-token-0451"
CALL_TOKEN = "dags-test-call-token-9137"
PRINTS = "import os; print('replica token=' + os.environ['API_TOKEN'], flush=True)"


def sync_group() -> None:
    TFJobOperator(
        task_id="train",
        namespace="default",
        worker=2,
        image="local/python",
        command=[sys.executable, "-c", SYNC_PROGRAM],
        args=["--config=conf.yaml", "--run={{ run_id }}"],
        metrics=["loss", "accuracy"],
        clean_pod_policy="All",
        deferrable=False,
    )


def _sensor_began(name: str) -> str:
    """The file the sensed job waits for: in the run's Airflow home, which the test removes."""
    return str(Path(os.environ["AIRFLOW_HOME"]) / f"{name}.sensor-began")


def deferrable_group() -> None:
    @task
    def submit(run_id: str | None = None) -> str:
        from airflow_tfjob.build.manifest import build_tfjob
        from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook

        name = "sensed-" + format(abs(hash(run_id)) % 10**10, "010d")
        command = [sys.executable, "-c", SLOW, _sensor_began(name)]
        body = build_tfjob(name, "default", replicas={"worker": 1}, image="x", command=command)
        KubeflowJobHook().create_job("TFJob", body, "default")
        return name

    wait = TFJobSensor(
        task_id="wait",
        name="{{ ti.xcom_pull(task_ids='deferrable.submit') }}",
        namespace="default",
        deferrable=True,
        timeout=300,
        on_execute_callback=lambda context: Path(
            _sensor_began(context["ti"].xcom_pull(task_ids="deferrable.submit"))
        ).touch(),
    )
    train = TFJobOperator(
        task_id="train",
        namespace="default",
        chief=1,
        worker=1,
        image="local/python",
        command=[sys.executable, "-c", DEFERRED_PROGRAM],
        metrics=["loss"],
        deferrable=True,
        on_finish_action="delete_succeeded",
    )

    @task
    def check(result: dict[str, Any]) -> None:
        assert result["state"] == "succeeded", result
        assert float(result["metrics"]["loss"]) == 0.25, result
        print("CHECKED", result["name"], result["state"])

    submit() >> wait >> train
    check(train.output)  # type: ignore[arg-type]


class CrashingFirstTry(TFJobOperator):
    def execute(self, context: Any) -> Any:
        if context["ti"].try_number > 1:
            if AIRFLOW_V_3_3_PLUS:
                recorded = context["task_state_store"].get(STATE_KEY)
                self.log.info("RECORDED_JOB %s", recorded)
            else:
                self.log.info("NO_STATE_STORE: the identity labels find the job")
            return super().execute(context)
        hook = self.get_hook()
        job = self.find_or_create(hook, self.build_manifest(context), context)
        meta = job["metadata"]
        if AIRFLOW_V_3_3_PLUS:  # before 3.3 the labels are all a retry has to find its job by
            hook.patch_job("TFJob", meta["name"], meta["namespace"], {"metadata": {"labels": {LABEL_DAG_ID: None}}})
        # Logged as one line as well: a release's rich traceback may wrap the exception's message.
        self.log.info("CREATED_THEN_CRASHED %s %s", meta["name"], meta["uid"])
        raise AirflowException(f"CREATED_THEN_CRASHED {meta['name']} {meta['uid']}")


def retry_group() -> None:
    train = CrashingFirstTry(
        task_id="train",
        namespace="default",
        worker=1,
        image="local/python",
        command=[sys.executable, "-c", RETRY_PROGRAM],
        metrics=["accuracy"],
        retries=1,
        retry_delay=timedelta(seconds=0),
    )

    @task
    def check(result: dict[str, Any]) -> None:
        assert result["state"] == "succeeded", result
        print("RETRY_CHECKED", result["name"], result["uid"])

    check(train.output)  # type: ignore[arg-type]


def secret_group() -> None:
    sync = TFJobOperator(
        task_id="sync",
        namespace="default",
        worker=1,
        image="local/python",
        command=[sys.executable, "-c", PRINTS],
        secret_env={"API_TOKEN": TOKEN},
        deferrable=False,
    )
    deferred = TFJobOperator(
        task_id="deferred",
        namespace="default",
        worker=1,
        image="local/python",
        command=[sys.executable, "-c", PRINTS],
        secret_env={"API_TOKEN": TOKEN},
        deferrable=True,
    )

    @task.tfjob(image="local/python", worker=1, secret_args=["token"])
    def decorated(token: str) -> int:
        print("function token=" + token, flush=True)
        return len(token)

    sync >> deferred >> decorated(CALL_TOKEN)


with DAG("tfjob_runs", schedule=None, catchup=False, tags=["test"]):
    for group_id, build in (
        ("sync", sync_group),
        ("deferrable", deferrable_group),
        ("retry", retry_group),
        ("secret", secret_group),
    ):
        with TaskGroup(group_id):
            build()
