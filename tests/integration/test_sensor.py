"""TFJobSensor against the local cluster: poke, reschedule and deferrable modes, failure, soft_fail."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import pytest
from airflow_compat import (
    AirflowFailException,
    AirflowRescheduleException,
    AirflowSensorTimeout,
    AirflowSkipException,
    TaskDeferred,
)
from operator_support import TaskInstance, context_for, replica_command, wait_for

from airflow_tfjob.sensors.tfjob import TFJobSensor
from airflow_tfjob.triggers.deferral import KubeflowJobConditionTrigger

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]


def submit(hook: Any, name: str, **params: Any) -> None:
    """Create a TFJob as any other client would (the sensor does not care who made it)."""
    from airflow_tfjob.build.manifest import build_tfjob

    body = build_tfjob(name, "default", image="x", command=replica_command(), **params)
    hook.create_job("TFJob", body, "default")


def sensor(name: str, **kwargs: Any) -> TFJobSensor:
    params: dict[str, Any] = {"task_id": "wait", "name": name, "namespace": "default", "poke_interval": 0.2}
    params.update(kwargs)
    return TFJobSensor(**params)


def unique(prefix: str) -> str:
    return f"{prefix}-{TaskInstance().run_id[-10:]}"


def test_poke_waits_for_a_missing_job_then_succeeds(hook: Any) -> None:
    name = unique("sensed")
    s = sensor(name, timeout=90)
    ctx = context_for(TaskInstance(task_id="wait"))
    assert s.poke(ctx) is False
    submit(hook, name, replicas={"worker": 1}, env={"SLEEP": "1"})
    s.execute(ctx)  # returns once Succeeded
    assert hook.get_job("TFJob", name, "default")["status"]["conditions"][-1]["type"] == "Succeeded"


def test_running_target_is_reached_while_the_job_runs(hook: Any) -> None:
    name = unique("running")
    submit(hook, name, replicas={"worker": 1}, env={"SLEEP": "60"})
    try:
        sensor(name, target_condition="Running", timeout=60).execute(context_for(TaskInstance()))
    finally:
        hook.delete_job("TFJob", name, "default")


def test_failed_job_fails_at_once_naming_the_reason(hook: Any) -> None:
    name = unique("failing")
    submit(hook, name, replicas={"worker": 1}, env={"FAIL_TYPE": "worker"})
    with pytest.raises(AirflowFailException, match=r"TFJobFailed.*failing replicas: Worker"):
        sensor(name, timeout=60).execute(context_for(TaskInstance()))


def test_soft_fail_skips_on_failure_and_on_timeout(hook: Any) -> None:
    name = unique("softfail")
    submit(hook, name, replicas={"worker": 1}, env={"FAIL_TYPE": "worker"})
    with pytest.raises(AirflowSkipException):
        sensor(name, timeout=60, soft_fail=True).execute(context_for(TaskInstance()))
    with pytest.raises(AirflowSkipException):
        sensor(unique("never"), timeout=1, soft_fail=True).execute(context_for(TaskInstance()))
    with pytest.raises(AirflowSensorTimeout):
        sensor(unique("never"), timeout=1).execute(context_for(TaskInstance()))


def test_reschedule_mode_gives_the_slot_back(hook: Any) -> None:
    s = sensor(unique("later"), mode="reschedule", timeout=60)
    with pytest.raises(AirflowRescheduleException):
        s.execute(context_for(TaskInstance()))


def test_deferrable_sensor_waits_in_the_trigger_for_a_job_created_later(hook: Any) -> None:
    name = unique("deferred")
    s = sensor(name, deferrable=True, timeout=120)
    with pytest.raises(TaskDeferred) as deferred:
        s.execute(context_for(TaskInstance()))
    assert deferred.value.timeout == timedelta(seconds=120)
    trigger = deferred.value.trigger
    assert isinstance(trigger, KubeflowJobConditionTrigger)
    rebuilt = KubeflowJobConditionTrigger(**trigger.serialize()[1])

    async def first_event() -> dict[str, Any]:
        async for event in rebuilt.run():
            return dict(event.payload)
        raise AssertionError("no event")

    # The job appears only after the trigger started waiting.
    timer = threading.Timer(1.0, submit, args=(hook, name), kwargs={"replicas": {"worker": 1}})
    timer.start()
    try:
        event = asyncio.run(asyncio.wait_for(first_event(), 90))
    finally:
        timer.join()
    assert event["event"] == "reached"
    s.execute_complete(context_for(TaskInstance()), event)


def test_deferrable_sensor_reports_failure(hook: Any) -> None:
    name = unique("deffail")
    submit(hook, name, replicas={"worker": 1}, env={"FAIL_TYPE": "worker"})
    wait_for(
        lambda: (hook.get_job("TFJob", name, "default").get("status") or {}).get("conditions"),
        30,
        "job status written",
    )
    trigger = KubeflowJobConditionTrigger(name=name, namespace="default")

    async def first_event() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("no event")

    event = asyncio.run(asyncio.wait_for(first_event(), 60))
    assert event["event"] == "failed"
    with pytest.raises(AirflowFailException, match="failing replicas: Worker"):
        sensor(name).execute_complete(context_for(TaskInstance()), event)
