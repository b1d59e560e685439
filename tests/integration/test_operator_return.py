"""TFJobOperator's side of the ``@task.tfjob`` contract, without TensorFlow: a subclass with a
``return_marker`` gets the master replica's value through ``result_from_outcome``, inline and deferred.

The replicas print the marker as their very last line and exit at once, so the value can only arrive
if the logs are drained after the job's final state (the race of apache/airflow#41867, on the
success side). The decorator's own end-to-end test (real all-reduce) is tests/integration/test_decorator.py.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import pytest
from operator_support import TaskInstance, context_for
from test_operator_deferrable import defer, fire

from airflow_tfjob.build.naming import identity_selector
from airflow_tfjob.constants import ANNOTATION_RESULT_REPORTED
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.version_compat import AirflowException

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240), pytest.mark.usefixtures("k8s_conn")]

MARKER = "__TEST_RETURN__"
# Every replica prints its line; only worker-0 (no chief here) prints the marker, then exits.
PROGRAM = rf"""
import base64, json, os, sys
task = json.loads(os.environ["TF_CONFIG"])["task"]
print(f"worker {{task['index']}} computing", flush=True)
if task["index"] == 0 and os.environ.get("SKIP_MARKER") != "1":
    value = {{"index": task["index"], "answer": 42, "text": "é" * 3}}
    sys.stdout.write("{MARKER} " + base64.b64encode(json.dumps(value).encode()).decode() + "\n")
    sys.stdout.flush()
"""


class ReturningOperator(TFJobOperator):
    return_marker = MARKER

    def result_from_outcome(self, outcome: Any, context: Any) -> Any:
        payload = outcome.part("return_payload")
        if payload is None:
            raise AirflowException("no return value")
        return json.loads(base64.b64decode(payload))


def make(**kwargs: Any) -> ReturningOperator:
    params: dict[str, Any] = {
        "task_id": "returns",
        "image": "local/python",
        "command": [sys.executable, "-c", PROGRAM],
        "namespace": "default",
        "worker": 2,
        "startup_timeout": 60,
        "log_replicas": "all",
    }
    params.update(kwargs)
    return ReturningOperator(**params)


EXPECTED = {"index": 0, "answer": 42, "text": "ééé"}


def test_sync_returns_the_master_replicas_value(capfd: pytest.CaptureFixture[str]) -> None:
    result = make().execute(context_for(TaskInstance()))
    logged = "".join(capfd.readouterr())
    assert result == EXPECTED
    assert "worker 1 computing" in logged
    assert "return value received" in logged
    assert f"] {MARKER}" not in logged, "the marker line itself is not written to the task log"


def test_deferred_returns_the_value_through_the_trigger_event() -> None:
    ti = TaskInstance()
    op = make(deferrable=True)
    event = fire(defer(op, ti))
    assert event["event"] == "succeeded"
    assert event["parts"]["return_payload"], "the value travels in the event payload"
    assert op.execute_complete(context_for(ti), event) == EXPECTED


def test_value_printed_after_the_triggers_last_cursor_is_drained_on_resume() -> None:
    """The trigger's event says succeeded without the value (cut off): execute_complete reads it."""
    ti = TaskInstance()
    op = make(deferrable=True)
    event = fire(defer(op, ti))
    event["parts"]["return_payload"] = None
    event["cursors"] = {}  # as if the trigger had read nothing: the drain re-reads everything
    event["logs_read"] = False
    assert op.execute_complete(context_for(ti), event) == EXPECTED


def test_missing_value_fails_and_leaves_the_job_reportable(hook: Any) -> None:
    ti = TaskInstance()
    with pytest.raises(AirflowException, match="no return value"):
        make(env={"SKIP_MARKER": "1"}).execute(context_for(ti))
    selector = identity_selector(ti.dag_id, ti.task_id, ti.run_id, ti.map_index, include_handled=True)
    (job,) = hook.list_jobs("TFJob", "default", selector)
    # Not marked reported: the result was never produced, so a retry may report the job again.
    assert ANNOTATION_RESULT_REPORTED not in (job["metadata"].get("annotations") or {})


def test_plain_operator_returns_its_usual_result() -> None:
    op = TFJobOperator(
        task_id="plain",
        image="local/python",
        command=[sys.executable, "-c", PROGRAM],
        namespace="default",
        worker=2,
        startup_timeout=60,
    )
    result = op.execute(context_for(TaskInstance()))
    assert result["state"] == "succeeded" and result["name"]
