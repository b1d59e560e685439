"""A retried TFJob task that finds its job through task_state_store (durable identity).

The first try creates the TFJob, records it in task_state_store (as every try does), then "loses its
worker" before following it. To prove that the second try finds the job through the store and not
through the identity labels, the first try also strips the label the label lookup selects on (from
Airflow 3.3, which has the store; before, the labels are what the retry finds the job by). The
second try must reattach to (or report) that same job: one TFJob for the task instance, created by
try 1, and the task succeeds on try 2.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, task

from airflow_tfjob.constants import LABEL_DAG_ID
from airflow_tfjob.operators.tfjob import STATE_KEY, TFJobOperator
from airflow_tfjob.version_compat import AIRFLOW_V_3_3_PLUS, AirflowException

PROGRAM = "import time; time.sleep(4); print('loss=0.5 accuracy=0.75', flush=True)"


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
            hook.patch_tfjob(meta["name"], meta["namespace"], {"metadata": {"labels": {LABEL_DAG_ID: None}}})
        # Logged as one line as well: a release's rich traceback may wrap the exception's message.
        self.log.info("CREATED_THEN_CRASHED %s %s", meta["name"], meta["uid"])
        raise AirflowException(f"CREATED_THEN_CRASHED {meta['name']} {meta['uid']}")


with DAG("tfjob_retry", schedule=None, catchup=False, tags=["test"]):
    train = CrashingFirstTry(
        task_id="train",
        namespace="default",
        worker=1,
        image="local/python",
        command=[sys.executable, "-c", PROGRAM],
        metrics=["accuracy"],
        retries=1,
        retry_delay=timedelta(seconds=0),
    )

    @task
    def check(result: dict[str, Any]) -> None:
        assert result["state"] == "succeeded", result
        print("RETRY_CHECKED", result["name"], result["uid"])

    check(train.output)  # type: ignore[arg-type]
