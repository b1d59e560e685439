"""TFJobOperator in deferrable mode: defer -> the trigger's one event -> execute_complete; and __fail__."""

from __future__ import annotations

import time
from typing import Any

import pytest
from airflow_compat import AirflowException, AirflowTaskTimeout, TaskDeferralTimeout
from operator_support import TaskInstance, context_for, defer, fire, replica_command, wait_for

from airflow_tfjob.build.naming import identity_selector
from airflow_tfjob.operators.tfjob import TRIGGER_TIMEOUT_MARGIN, TFJobOperator

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]


def make_operator(**kwargs: Any) -> TFJobOperator:
    params: dict[str, Any] = {
        "task_id": "train",
        "image": "local/python",
        "command": replica_command(),
        "namespace": "default",
        "deferrable": True,
        "startup_timeout": 60,
    }
    params.update(kwargs)
    return TFJobOperator(**params)


def test_deferred_success_resumes_and_returns_the_result(hook: Any) -> None:
    ti = TaskInstance()
    op = make_operator(chief=1, worker=1, metrics=["loss"], clean_pod_policy="Running")
    deferred = defer(op, ti)
    assert deferred.method_name == "execute_complete"
    event = fire(deferred)
    assert event["event"] == "succeeded"
    result = op.execute_complete(context_for(ti), event)
    assert result["state"] == "succeeded"
    assert float(result["metrics"]["loss"]) == 0.25
    assert ti.xcoms["metrics"] == result["metrics"]
    job = hook.get_job("TFJob", result["name"], "default")
    assert job["metadata"]["annotations"]["tfjob.airflow.apache.org/result-reported"] == "true"


def _server_requests(local_cluster: Any) -> dict[str, int]:
    """Requests the local API server received, by "VERB resource[/subresource]" (its /metrics)."""
    import requests

    from airflow_tfjob.local.apiserver.requestmetrics import REQUESTS, parse_text

    text = requests.get(f"{local_cluster.url}/metrics", verify=False, timeout=10).text
    counts: dict[str, int] = {}
    for name, labels, value in parse_text(text):
        if name == REQUESTS:
            key = f"{labels['verb']} {labels['resource']}" + (f"/{labels['subresource']}" if labels.get("subresource") else "")
            counts[key] = counts.get(key, 0) + int(value)
    return counts


def test_a_trigger_that_read_every_log_to_its_end_leaves_the_worker_nothing_to_drain(
    hook: Any, local_cluster: Any
) -> None:
    """The trigger read each replica's log to its end after the replica exited (its event says so):
    the resumed task reads the job once to report and clean up, and opens no watch and reads no log,
    pod list or event list again, which the drain that continues a trigger's follow otherwise does."""
    ti = TaskInstance()
    op = make_operator(worker=2, metrics=["loss"], clean_pod_policy="All")
    event = fire(defer(op, ti))
    assert event["event"] == "succeeded" and event["logs_read"], event
    before = _server_requests(local_cluster)
    # Resumed by a new operator, as a worker process would: it takes the API (a TFJob, api="auto")
    # from the kind the trigger followed, without asking the cluster again.
    result = make_operator(worker=2, metrics=["loss"], clean_pod_policy="All").execute_complete(
        context_for(ti), event
    )
    after = _server_requests(local_cluster)
    made = {key: n - before.get(key, 0) for key, n in after.items() if n != before.get(key, 0)}
    assert result["state"] == "succeeded" and float(result["metrics"]["loss"]) == 0.25
    # The job read once as it ended (report, cleanup), its pods listed and deleted with their
    # Services, the job marked reported: no discovery, watch, log, pod or event read beyond these.
    assert made == {"GET tfjobs": 1, "LIST pods": 1, "DELETE pods": 2, "DELETE services": 2, "PATCH tfjobs": 1}, made


def test_deferred_failure_fails_the_task_with_the_replica(hook: Any) -> None:
    ti = TaskInstance()
    op = make_operator(
        chief=1, worker=1, env={"FAIL_TYPE": "worker", "SLEEP": "30"}, on_finish_action="delete"
    )
    event = fire(defer(op, ti))
    assert event["event"] == "failed"
    with pytest.raises(AirflowException, match="failing replicas: Worker"):
        op.execute_complete(context_for(ti), event)


def test_apache_airflow_67227_deadline_passed_to_the_trigger_and_job_deleted_on_timeout(hook: Any) -> None:
    """apache/airflow#67227: Airflow 3.3.2 does not apply execution_timeout to a deferred task. The
    operator passes start + execution_timeout to the trigger, which deletes the job at that deadline;
    the task then fails with a timeout."""
    from datetime import timedelta

    ti = TaskInstance()
    op = make_operator(worker=1, env={"SLEEP": "120"}, execution_timeout=timedelta(seconds=4))
    started = time.time()
    deferred = defer(op, ti)
    # Airflow's own trigger timeout is only the backstop beyond the deadline the trigger enforces.
    assert deferred.timeout is not None
    assert deferred.timeout.total_seconds() == pytest.approx(4 + TRIGGER_TIMEOUT_MARGIN, abs=2)
    assert deferred.trigger.deadline == pytest.approx(started + 4, abs=2)
    event = fire(deferred)
    assert event["event"] == "timeout"
    with pytest.raises(AirflowTaskTimeout, match="execution_timeout"):
        op.execute_complete(context_for(ti), event)
    selector = identity_selector(ti.dag_id, ti.task_id, ti.run_id, ti.map_index, include_handled=True)
    wait_for(lambda: not hook.list_jobs("TFJob", "default", selector), 60, "timed-out job deleted")


def test_trigger_failure_resumption_deletes_the_job(hook: Any) -> None:
    ti = TaskInstance()
    op = make_operator(worker=1, env={"SLEEP": "120"})
    defer(op, ti)
    selector = identity_selector(ti.dag_id, ti.task_id, ti.run_id, ti.map_index, include_handled=True)
    assert len(hook.list_jobs("TFJob", "default", selector)) == 1
    # A fresh operator instance, as the worker that resumes the task has (no in-memory job reference).
    resumed = make_operator(worker=1, env={"SLEEP": "120"})
    with pytest.raises(TaskDeferralTimeout):
        resumed.resume_execution("__fail__", {"error": "Trigger timeout"}, context_for(ti))
    wait_for(lambda: not hook.list_jobs("TFJob", "default", selector), 60, "job deleted after __fail__")
