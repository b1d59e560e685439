"""Helpers shared by the operator and sensor integration tests: task-instance contexts and replica programs.

The operators are called the way Airflow's task runner calls them (execute / execute_complete /
resume_execution / on_kill with a context holding ``ti``); the task instance here records XComs.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from airflow_compat import TaskDeferred

# A replica program: fails (exit 1) when its TF_CONFIG task type is FAIL_TYPE, else sleeps SLEEP
# seconds and exits 0. Without TF_CONFIG (single replica) it behaves as the type in TASK_TYPE.
REPLICA_PROGRAM = r"""
import json, os, sys, time
task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {})
kind = task.get("type") or os.environ.get("TASK_TYPE", "worker")
print(f"replica {kind}-{task.get('index', 0)} starting argv={sys.argv[1:]}", flush=True)
pid_dir = os.environ.get("PID_DIR")
if pid_dir:
    open(os.path.join(pid_dir, f"{kind}-{task.get('index', 0)}.pid"), "w").write(str(os.getpid()))
if kind == os.environ.get("FAIL_TYPE"):
    print(f"{kind} is failing on purpose", flush=True)
    sys.exit(1)
marker = os.environ.get("FAIL_ONCE_MARKER")
if marker and not os.path.exists(marker):
    open(marker, "w").write("failed once")
    print("first run fails", flush=True)
    sys.exit(1)
time.sleep(float(os.environ.get(f"SLEEP_{kind.upper()}", os.environ.get("SLEEP", "0"))))
print("loss=0.25 accuracy=0.875", flush=True)
print(f"replica {kind} done", flush=True)
"""


def replica_command() -> list[str]:
    return [sys.executable, "-c", REPLICA_PROGRAM]


@dataclass
class TaskInstance:
    """What the operator reads from ``context["ti"]``, and the XComs it pushes."""

    dag_id: str = "it_dag"
    task_id: str = "train"
    run_id: str = field(default_factory=lambda: f"manual__{uuid.uuid4().hex[:12]}")
    map_index: int = -1
    try_number: int = 1
    xcoms: dict[str, Any] = field(default_factory=dict)

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value

    def get_first_reschedule_date(self, context: Any) -> None:
        return None  # the first poke of a reschedule-mode sensor

    def next_try(self) -> TaskInstance:
        return TaskInstance(self.dag_id, self.task_id, self.run_id, self.map_index, self.try_number + 1)


def context_for(ti: TaskInstance) -> Any:
    return {"ti": ti, "task_instance": ti, "run_id": ti.run_id}


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    """Poll a condition until it holds (returns its value); fail the test with `what` on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


@dataclass
class StateStore:
    """What the operator uses of Airflow 3.3's task_state_store: durable values across tries."""

    values: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value


def defer(op: Any, ti: TaskInstance, context: Any = None) -> TaskDeferred:
    """Run execute until the operator defers; return the deferral."""
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context or context_for(ti))
    return deferred.value


def rebuild_trigger(deferred: TaskDeferred) -> Any:
    """The trigger as the triggerer rebuilds it: from its serialized classpath and kwargs."""
    classpath, kwargs = deferred.trigger.serialize()
    module, _, cls = classpath.rpartition(".")
    return getattr(__import__(module, fromlist=[cls]), cls)(**kwargs)


async def first_event(trigger: Any) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise AssertionError("trigger ended without an event")


def fire(deferred: TaskDeferred) -> dict[str, Any]:
    """Run the trigger as the triggerer would, and take its one event (as `airflow dags test` does)."""
    return asyncio.run(first_event(rebuild_trigger(deferred)))
