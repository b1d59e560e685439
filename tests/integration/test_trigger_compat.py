"""A task deferred by the 0.1.0 builds finishes after an upgrade.

Airflow stores a deferred task's trigger as a classpath and kwargs, and the triggerer of the upgraded
deployment rebuilds it from them. ``recorded/triggers_0.1.0_015e832.json`` holds what 0.1.0 (main at
015e832) serialized for a deferred TFJob, PyTorchJob, TFJob-on-Trainer-v2 and a deferred sensor, captured
from the operators themselves. Each case here creates a job of the recorded name with the current
operator, then rebuilds the trigger from the recorded classpath and kwargs exactly as the triggerer does
and runs it to its event, which the current operator's ``execute_complete`` turns into the result.
Only the clock fields move to now: a recorded absolute deadline would have passed long ago.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_compat import TaskDeferred
from operator_support import TaskInstance, context_for, first_event

from airflow_tfjob.operators.pytorchjob import PyTorchJobOperator
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.sensors.tfjob import TFJobSensor

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

RECORDED = json.loads((Path(__file__).parent / "recorded" / "triggers_0.1.0_015e832.json").read_text())
COMMAND = [sys.executable, "-c", "print('loss=0.5'); print('done')"]


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[Any]:
    """This module's own cluster, every API served and the TensorFlow runtimes installed."""
    from airflow_tfjob.jobs.trainjob.runtimes import cluster_hook, install
    from airflow_tfjob.local import LocalCluster

    with LocalCluster() as cluster:
        install(cluster_hook(str(cluster.kubeconfig_path)), log=lambda _: None)
        yield cluster


def rebuilt(case: str) -> Any:
    """The trigger as an upgraded triggerer rebuilds it from 0.1.0's row: import the classpath, call it."""
    classpath, kwargs = RECORDED[case]["classpath"], dict(RECORDED[case]["kwargs"])
    if "deferred_at" in kwargs:
        now = time.time()
        kwargs["startup_deadline"] = now + (kwargs["startup_deadline"] - kwargs["deferred_at"])
        kwargs["deferred_at"] = now
    module, _, name = classpath.rpartition(".")
    return getattr(__import__(module, fromlist=[name]), name)(**kwargs)


def created(op: Any, ti: TaskInstance) -> None:
    """Let the current operator create the job (it defers; its own trigger is not used)."""
    with pytest.raises(TaskDeferred):
        op.execute(context_for(ti))


CASES = {
    "tfjob": lambda name: TFJobOperator(
        task_id="train", name=name, image="local/python", command=COMMAND, namespace="default",
        deferrable=True, chief=1, worker=1, metrics=["loss"], startup_timeout=60, log_replicas="all",
    ),
    "pytorchjob": lambda name: PyTorchJobOperator(
        task_id="train_pt", name=name, image="local/python", command=COMMAND, namespace="default",
        deferrable=True, master=1, worker=1, startup_timeout=60, restart_policy="Never",
    ),
    "tfjob_on_trainjob": lambda name: TFJobOperator(
        task_id="train_tj", name=name, image="local/python", command=COMMAND, namespace="default",
        deferrable=True, worker=2, api="trainjob", startup_timeout=60,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_job_deferred_by_0_1_0_completes(case: str, k8s_conn: str) -> None:
    assert RECORDED[case]["classpath"] == "airflow_tfjob.triggers.tfjob.TFJobTrigger"
    op = CASES[case](RECORDED[case]["kwargs"]["name"])
    ti = TaskInstance(dag_id="compat", task_id=op.task_id)
    created(op, ti)
    event = asyncio.run(first_event(rebuilt(case)))
    assert event["event"] == "succeeded", event
    result = op.execute_complete(context_for(ti), event)
    assert result["state"] == "succeeded"
    assert result["name"] == RECORDED[case]["kwargs"]["name"]
    if case == "tfjob":
        assert float(result["metrics"]["loss"]) == 0.5


def test_a_sensor_deferred_by_0_1_0_completes(k8s_conn: str) -> None:
    recorded = RECORDED["sensor"]
    assert recorded["classpath"] == "airflow_tfjob.triggers.tfjob.TFJobConditionTrigger"
    name = recorded["kwargs"]["name"]
    op = TFJobOperator(
        task_id="sensed", name=name, image="local/python", command=COMMAND, namespace="default", worker=1
    )
    op.execute(context_for(TaskInstance(dag_id="compat", task_id="sensed")))
    event = asyncio.run(first_event(rebuilt("sensor")))
    assert event["event"] == "reached", event
    sensor = TFJobSensor(task_id="wait", name=name, namespace="default", deferrable=True)
    sensor.execute_complete(context_for(TaskInstance(dag_id="compat", task_id="wait")), event)
