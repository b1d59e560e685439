"""A user's kill stops the job within seconds, as Airflow 3.3 delivers it, in either mode.

The triggerer cancels the trigger's run, calls its on_kill, and about a second later cancels on_kill
too (apache/airflow#36090 was about kills that did nothing). Here on_kill is cancelled right after it
starts, and the replicas ignore SIGTERM, so that neither a deletion cut short nor one that waits out
the pods' 30 s grace period can pass. The synchronous task's on_kill is held to the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest
from airflow_compat import TaskDeferred
from operator_support import TaskInstance, context_for, wait_for
from watch_support import wait_until

from airflow_tfjob.constants import KILL_GRACE_PERIOD
from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook, KubeflowJobHook
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.triggers.deferral import KubeflowJobTrigger

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

STUBBORN = r"""
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(os.path.join(sys.argv[1], os.environ["HOSTNAME"] + ".pid"), "w").write(str(os.getpid()))
print("training", flush=True)
time.sleep(600)
"""


def _operator(tmp_path: Path, deferrable: bool) -> TFJobOperator:
    """Two stubborn replicas; kill_grace_period left at its default."""
    return TFJobOperator(
        task_id="killed",
        namespace="default",
        image="local/python",
        worker=2,
        command=[sys.executable, "-c", STUBBORN, str(tmp_path)],
        deferrable=deferrable,
        startup_timeout=60,
    )


def _defer(tmp_path: Path) -> dict[str, Any]:
    """Defer a real TFJobOperator and return its trigger's kwargs."""
    with pytest.raises(TaskDeferred) as deferred:
        _operator(tmp_path, deferrable=True).execute(context_for(TaskInstance()))
    return dict(deferred.value.trigger.serialize()[1])


async def _grace_periods(hook: AsyncKubeflowJobHook, name: str, seen: list[int]) -> None:
    """Every deletionGracePeriodSeconds the job's pods show, in order (from a watch)."""
    _, rv = await hook.list_objects("pods", "default", label_selector=f"training.kubeflow.org/job-name={name}")
    async for _etype, pod in hook.watch_job_pods(name, "default", rv):
        grace = (pod.get("metadata") or {}).get("deletionGracePeriodSeconds")
        if grace is not None:
            seen.append(int(grace))


async def test_kill_while_deferred_finishes_though_the_triggerer_cancels_on_kill(
    k8s_conn: str, tmp_path: Path
) -> None:
    kwargs = _defer(tmp_path)
    assert kwargs["kill_grace_period"] == KILL_GRACE_PERIOD == 1
    name = kwargs["name"]
    hook = AsyncKubeflowJobHook(conn_id=k8s_conn)
    await wait_until(lambda: len(_pids(tmp_path)) == 2, timeout=60)
    pids = _pids(tmp_path)
    graces: list[int] = []
    watching = asyncio.ensure_future(_grace_periods(hook, name, graces))

    trigger = KubeflowJobTrigger(**kwargs)
    run = asyncio.ensure_future(trigger.run().__anext__())
    await wait_until(lambda: trigger._job_read, timeout=30)  # it is following the job
    # The triggerer: cancel the run on the user's action, then on_kill, itself cancelled soon after.
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    killing = asyncio.ensure_future(trigger.on_kill())
    await asyncio.sleep(0)
    killing.cancel()
    await asyncio.gather(killing, return_exceptions=True)
    assert killing.cancelled()

    # Bounds below the pods' default 30 s grace, with room for a starved loop (the compatibility lane
    # runs at nice 19 beside the other stages): the grace the kill gave is asserted below.
    await wait_until(lambda: _gone(hook, name), timeout=25)
    await wait_until(lambda: not any(_running(pid) for pid in pids), timeout=25)
    watching.cancel()
    await asyncio.gather(watching, return_exceptions=True)
    # Garbage collection of the foreground deletion gave the pods their own 30 s; the kill's own
    # deletions shortened it to kill_grace_period.
    assert graces and graces[-1] == KILL_GRACE_PERIOD, graces


async def _gone(hook: AsyncKubeflowJobHook, name: str) -> bool:
    return await hook.find_job("TFJob", name, "default") is None and not await hook.list_job_pods(name, "default")


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _pids(directory: Path) -> list[int]:
    return [int(p.read_text()) for p in directory.glob("*.pid") if p.read_text()]


def test_synchronous_kill_stops_replicas_that_ignore_sigterm_within_seconds(k8s_conn: str, tmp_path: Path) -> None:
    op = _operator(tmp_path, deferrable=False)
    ti = TaskInstance()

    def execute() -> None:
        with contextlib.suppress(Exception):  # it fails once its job is deleted
            op.execute(context_for(ti))

    task = threading.Thread(target=execute, daemon=True)
    task.start()
    wait_for(lambda: len(_pids(tmp_path)) == 2, 60, "both replicas running")
    pids = _pids(tmp_path)
    assert op._job_ref is not None
    name = op._job_ref[0]
    hook = KubeflowJobHook(conn_id=k8s_conn)
    killer = threading.Thread(target=op.on_kill, daemon=True)  # the task runner's SIGTERM handler
    killer.start()

    def gone() -> bool:
        return (
            hook.find_job("TFJob", name, "default") is None
            and not hook.list_job_pods(name, "default")
            and not any(_running(pid) for pid in pids)
        )

    wait_for(gone, 10, "the job, its pods and their processes gone")
    killer.join(30)
    task.join(60)
    assert not task.is_alive()
