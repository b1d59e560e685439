"""Regression tests named after the Airflow bugs users met in the Kubernetes operators (see
/work/shared/reference/airflow-notes.md): each runs TFJobOperator against the local cluster the
way the task runner does, and checks the outcome the bug got wrong.

Related tests elsewhere, named after the same bugs: test_trigger.py (trigger on_kill and deadline),
test_triggerer_process.py (a user's kill under a real triggerer), test_operator_deferrable.py
(execution_timeout while deferred).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from operator_support import TaskInstance, context_for, wait_for
from test_operator import make_operator as make
from test_operator_deferrable import defer, fire

from airflow_tfjob.build.naming import identity_selector
from airflow_tfjob.build.validation import JobValidationError
from airflow_tfjob.constants import LABEL_HANDLED
from airflow_tfjob.operators import submit
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.triggers.deferral import KubeflowJobTrigger
from airflow_tfjob.version_compat import AirflowException, AirflowTaskTimeout

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

# Prints its last line and fails at once: the exit races the log stream's end.
FAIL_RIGHT_AFTER_LAST_LINE = "import sys; print('last line before the crash', flush=True); sys.exit(3)"
SLEEPER = "import time; print('sleeping', flush=True); time.sleep(600)"


def jobs_of(hook: Any, ti: TaskInstance) -> list[dict[str, Any]]:
    selector = identity_selector(ti.dag_id, ti.task_id, ti.run_id, ti.map_index, include_handled=True)
    return list(hook.list_jobs("TFJob", "default", selector))


def name_of(op: TFJobOperator, ti: TaskInstance) -> str:
    """The job name the operator gives this try (no API call)."""
    return str(op.build_manifest(context_for(ti))["metadata"]["name"])


def nothing_left(hook: Any, ti: TaskInstance, name: str) -> bool:
    """No TFJob of the task instance, and no pod or service of its job."""
    if jobs_of(hook, ti) or hook.list_job_pods(name, "default"):
        return False
    services = hook.core_v1_client.list_namespaced_service(
        "default", label_selector=f"training.kubeflow.org/job-name={name}"
    )
    return not services.items


# --------------------------------------------------------------------------- #36090 / #62398


def test_apache_airflow_36090_62398_kill_while_deferred_deletes_job_and_pods(hook: Any) -> None:
    """apache/airflow#36090, #62398: a user's kill/mark-failed of a deferred task left the workload
    running. The trigger the operator defers with (rebuilt from its serialized kwargs, as the triggerer
    does) deletes the TFJob and its pods in on_kill; a cancellation alone (triggerer restart) does not."""
    ti = TaskInstance()
    op = make(worker=2, command=[sys.executable, "-c", SLEEPER], deferrable=True)
    deferred = defer(op, ti)
    _, kwargs = deferred.trigger.serialize()
    assert kwargs["delete_on_kill"] is True
    (job,) = jobs_of(hook, ti)
    name = job["metadata"]["name"]
    wait_for(lambda: len(hook.list_job_pods(name, "default")) == 2, 60, "both replicas created")

    async def run_then_kill() -> None:
        trigger = KubeflowJobTrigger(**kwargs)
        run = asyncio.ensure_future(trigger.run().__anext__())
        await asyncio.sleep(1.0)
        assert not run.done(), "a running job must not fire the trigger"
        run.cancel()  # what the triggerer does first, on a restart as on a kill
        await asyncio.gather(run, return_exceptions=True)
        await trigger.cleanup()
        assert hook.find_job("TFJob", name, "default") is not None, "a triggerer restart is not a kill"
        await KubeflowJobTrigger(**kwargs).on_kill()  # the user's action

    asyncio.run(run_then_kill())
    assert hook.find_job("TFJob", name, "default") is None
    wait_for(lambda: nothing_left(hook, ti, name), 60, "job and pods deleted by on_kill")


def test_apache_airflow_36090_on_kill_action_keep_is_honoured_while_deferred(hook: Any) -> None:
    """The same kill with on_kill_action='keep' leaves the job (the user asked for it)."""
    ti = TaskInstance()
    op = make(worker=1, command=[sys.executable, "-c", SLEEPER], deferrable=True, on_kill_action="keep")
    _, kwargs = defer(op, ti).trigger.serialize()
    assert kwargs["delete_on_kill"] is False
    asyncio.run(KubeflowJobTrigger(**kwargs).on_kill())
    (job,) = jobs_of(hook, ti)
    hook.delete_job("TFJob", job["metadata"]["name"], "default")


# --------------------------------------------------------------------------- #41867

RACE_RUNS = 5


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferred"])
def test_apache_airflow_41867_failed_job_never_ends_in_success(hook: Any, deferrable: bool) -> None:
    """apache/airflow#41867: a race between the pod's exit and log following marked a failed task
    SUCCESS. The outcome comes from the TFJob's conditions after the logs are drained, never from the
    end of a log stream: a replica that fails right after its last line fails the task, every time."""
    for attempt in range(RACE_RUNS):
        ti = TaskInstance()
        op = make(
            worker=2,
            command=[sys.executable, "-c", FAIL_RIGHT_AFTER_LAST_LINE],
            log_replicas="all",
            deferrable=deferrable,
            on_finish_action="delete",
        )
        with pytest.raises(AirflowException) as raised:
            if deferrable:
                event = fire(defer(op, ti))
                assert event["event"] == "failed", (attempt, event)
                op.execute_complete(context_for(ti), event)
            else:
                op.execute(context_for(ti))
        assert "TFJobFailed" in str(raised.value), (attempt, str(raised.value))
        assert "failing replicas: Worker" in str(raised.value)


# --------------------------------------------------------------------------- #16290 / #35395


def test_apache_airflow_16290_35395_rerun_of_the_same_try_gets_no_409(hook: Any) -> None:
    """apache/airflow#16290, #35395: rerunning a task whose job exists failed with 409 AlreadyExists.
    The same try run again (e.g. `airflow tasks test` twice) replaces its own reported job."""
    ti = TaskInstance()
    first = make(worker=1).execute(context_for(ti))
    second = make(worker=1).execute(context_for(ti))
    assert first["name"] == second["name"]
    assert first["uid"] != second["uid"], "the rerun trained again with a new job"
    assert [j["metadata"]["uid"] for j in jobs_of(hook, ti)] == [second["uid"]]


def test_apache_airflow_16290_35395_retry_with_a_fixed_name_gets_no_409(hook: Any) -> None:
    """A user-chosen `name` is the same for every try: the failed, reported job makes way."""
    ti = TaskInstance()
    name = f"fixed-{ti.run_id[-12:]}"
    with pytest.raises(AirflowException, match="TFJobFailed"):
        make(worker=1, name=name, env={"FAIL_TYPE": "worker"}).execute(context_for(ti))
    result = make(worker=1, name=name).execute(context_for(ti.next_try()))
    assert result["name"] == name and result["state"] == "succeeded"
    (job,) = jobs_of(hook, ti)
    assert job["metadata"]["uid"] == result["uid"]


# --------------------------------------------------------------------------- #10544 / #12111


def test_apache_airflow_10544_12111_retry_never_reattaches_to_a_failed_job(hook: Any) -> None:
    """apache/airflow#12111: a retry reattached to the failed pods of the previous try. Here the
    first try's worker dies after its job failed, before reporting it; the retry trains again."""
    ti = TaskInstance()
    op = make(worker=1, env={"FAIL_TYPE": "worker"})
    context = context_for(ti)
    created = op.find_or_create(hook, op.build_manifest(context), context)  # then the worker dies
    name = created["metadata"]["name"]
    wait_for(
        lambda: any(
            c["type"] == "Failed" and c["status"] == "True"
            for c in (hook.get_job("TFJob", name, "default").get("status") or {}).get("conditions") or []
        ),
        60,
        "first try's job failed",
    )
    result = make(worker=1).execute(context_for(ti.next_try()))
    assert result["name"] != name and result["state"] == "succeeded"
    old = hook.get_job("TFJob", name, "default")
    assert old["metadata"]["labels"][LABEL_HANDLED] == "true"


def test_apache_airflow_10544_two_unhandled_jobs_of_one_task_instance_are_resolved(hook: Any) -> None:
    """apache/airflow#10544: "more than one pod with these labels" stopped the task. Two running,
    unhandled jobs of one task instance (two tries whose workers both died) leave exactly one: the
    newest try's is reattached, the older one is stopped and marked handled."""
    ti = TaskInstance()
    sleeper = {"worker": 1, "env": {"SLEEP": "3"}}
    names = []
    for current in (ti, ti.next_try()):
        # Submitted directly, bypassing the retry decision: the state two crashed tries can leave.
        op = make(**sleeper)
        context = context_for(current)
        manifest = op.build_manifest(context)
        created = submit.create(hook, manifest, context, log=op.log, on_submit=lambda name, namespace: None)
        names.append(created["metadata"]["name"])
    older, newer = names
    assert len(jobs_of(hook, ti)) == 2
    third = ti.next_try().next_try()
    result = make(**sleeper).execute(context_for(third))
    assert result["name"] == newer and result["state"] == "succeeded"
    old = hook.find_job("TFJob", older, "default")
    assert old is None or old["metadata"]["labels"].get(LABEL_HANDLED) == "true"


# --------------------------------------------------------------------------- #49466 / #59083


def test_apache_airflow_49466_59083_nothing_left_after_startup_timeout(hook: Any) -> None:
    """apache/airflow#49466, #59083: pods left running or pending after the task failed."""
    ti = TaskInstance()
    op = make(worker=2, gpus=64, startup_timeout=3)
    name = name_of(op, ti)
    with pytest.raises(AirflowException, match="startup_timeout"):
        op.execute(context_for(ti))
    wait_for(lambda: nothing_left(hook, ti, name), 60, "unschedulable job and its pending pods deleted")


def test_apache_airflow_49466_59083_nothing_left_after_execution_deadline(hook: Any) -> None:
    from datetime import timedelta

    ti = TaskInstance()
    op = make(worker=2, command=[sys.executable, "-c", SLEEPER], execution_timeout=timedelta(seconds=3))
    name = name_of(op, ti)
    with pytest.raises(AirflowTaskTimeout, match="execution_timeout"):
        op.execute(context_for(ti))
    wait_for(lambda: nothing_left(hook, ti, name), 60, "timed-out job and its pods deleted")


def test_apache_airflow_49466_59083_nothing_created_on_validation_errors(hook: Any) -> None:
    ti = TaskInstance()
    # A bad manifest value and a bad operator parameter (rendered at run time): both refused before
    # any API call, so there is nothing to clean up.
    with pytest.raises(JobValidationError, match="replicas"):
        make(worker=-1).execute(context_for(ti))
    op = make(worker=1, log_replicas="{{ params.which }}")
    op.render_template_fields({"params": {"which": "workers"}, "run_id": ti.run_id})
    with pytest.raises(JobValidationError, match="log_replicas"):
        op.execute(context_for(ti))
    assert jobs_of(hook, ti) == []
