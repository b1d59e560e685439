"""The trigger's modules load once per process, off the loop, whoever waits for them and whatever happens
to the waiters (airflow_tfjob.triggers.loader.load_run_modules)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

from airflow_tfjob.triggers import loader


async def test_a_trigger_cancelled_while_the_modules_load_fails_no_other(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen in a deployment: a triggerer whose first trigger was cancelled during the import failed every
    trigger after it with CancelledError ("Trigger exited without sending an event")."""
    gate = threading.Event()

    def slow_import(done: concurrent.futures.Future[None]) -> None:
        gate.wait(30)
        done.set_result(None)

    monkeypatch.setattr(loader, "_loading", None)
    monkeypatch.setattr(loader, "_import_run_modules", slow_import)
    first = asyncio.create_task(loader.load_run_modules())
    second = asyncio.create_task(loader.load_run_modules())
    await asyncio.sleep(0)
    assert not first.done() and not second.done()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    gate.set()
    await asyncio.wait_for(second, 30)
    await asyncio.wait_for(loader.load_run_modules(), 30)  # and a trigger that comes later


async def test_an_import_that_failed_is_tried_again_by_the_next_trigger(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "_loading", None)
    monkeypatch.setattr(loader, "RUN_MODULES", ("airflow_tfjob.no_such_module",))
    with pytest.raises(ModuleNotFoundError):
        await asyncio.wait_for(loader.load_run_modules(), 30)
    monkeypatch.setattr(loader, "RUN_MODULES", ("airflow_tfjob.constants",))
    await asyncio.wait_for(loader.load_run_modules(), 30)


# Full collections counted in the thread that imports (a collection runs in the thread whose allocation
# set it off): the claim is about the imports, and the loop's own allocations around them (asyncio's set
# up and tear-down, the declaring module's import) may set one off or not, by how the threads interleave.
FULL_COLLECTIONS = r"""
import asyncio, gc, threading
import airflow.sdk  # what a triggerer has loaded before its first trigger

full = []
gc.callbacks.append(
    lambda phase, info: phase == "start" and info["generation"] == 2
    and threading.current_thread() is not threading.main_thread() and full.append(1)
)
from airflow_tfjob.triggers.loader import load_run_modules

asyncio.run(load_run_modules())
print(len(full), gc.isenabled(), gc.get_freeze_count() > 0)
"""


def test_the_modules_load_without_a_full_garbage_collection_and_are_frozen_after() -> None:
    """A full collection walks every object of the process holding the GIL (150 ms and more with
    Airflow loaded), so the loop's thread waited through the ones the imports set off (a triggerer's
    watchdog saw 0.6-0.7 s on a busy machine). None runs during the imports, the collector is on again
    after them, and what they loaded is frozen, out of every later full collection's walk."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FULL_COLLECTIONS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-3:] == ["0", "True", "True"], done.stdout[-500:]


async def test_a_loaded_process_awaits_the_run_module_s_follow_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's trigger fires one event; once the run modules are loaded its step is the run module's
    coroutine itself, with no frame of the trigger's own held around it while the job runs (a triggerer
    holds one run per waiting job)."""
    from airflow.triggers.base import TriggerEvent

    from airflow_tfjob.triggers import runs
    from airflow_tfjob.triggers.deferral import KubeflowJobTrigger

    await asyncio.wait_for(loader.load_run_modules(), 60)
    fired = TriggerEvent({"event": "succeeded"})

    async def follow(trigger: KubeflowJobTrigger) -> TriggerEvent:
        return fired

    monkeypatch.setattr(runs, "follow", follow)
    stream = KubeflowJobTrigger(name="j", namespace="ns").run()
    step = stream.__anext__()
    assert getattr(step, "cr_code", None) is follow.__code__
    assert await step is fired
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()
    # Before the run modules are loaded, the first step waits for them, then follows.
    monkeypatch.setattr(loader, "_loading", None)
    assert [event async for event in KubeflowJobTrigger(name="j", namespace="ns").run()] == [fired]
