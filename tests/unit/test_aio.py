"""A cancellation that arrives as the awaited change does is never lost (asyncio.wait_for before 3.12
loses it: a trigger cancelled by the triggerer would keep following its job)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from airflow_tfjob.hooks.jobwatch import Subscription
from airflow_tfjob.hooks.waits import wait_event


async def cancelled_as_the_change_arrives(wait: Callable[[], Awaitable[Any]], change: Callable[[], None]) -> Any:
    """Cancel a waiter in the very loop iteration in which its change arrives; its outcome."""
    task = asyncio.ensure_future(wait())
    await asyncio.sleep(0)  # the waiter is now blocked on the change
    change()
    task.cancel()
    return (await asyncio.gather(task, return_exceptions=True))[0]


async def test_wait_event_propagates_a_cancellation_that_races_the_event() -> None:
    event = asyncio.Event()
    outcome = await cancelled_as_the_change_arrives(lambda: wait_event(event, 10), event.set)
    assert isinstance(outcome, asyncio.CancelledError)


async def test_subscription_next_propagates_a_cancellation_that_races_a_delivery() -> None:
    sub = Subscription("job")
    outcome = await cancelled_as_the_change_arrives(lambda: sub.next(timeout=10), lambda: sub._deliver({"a": 1}))
    assert isinstance(outcome, asyncio.CancelledError)


async def test_wait_event_reports_whether_the_event_came() -> None:
    event = asyncio.Event()
    assert await wait_event(event, 0.01) is False
    asyncio.get_running_loop().call_soon(event.set)
    assert await wait_event(event, 10) is True
    assert await wait_event(event, 0) is True  # already set


async def test_subscription_next_times_out_as_before() -> None:
    with pytest.raises(asyncio.TimeoutError):
        await Subscription("job").next(timeout=0.01)


def test_a_tasks_async_hook_reads_its_connection_in_the_tasks_own_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sync mode's event loop never reads the connection from a thread of its own (before Airflow
    3.1 a task's channel to its supervisor could not take a request from another thread)."""
    import asyncio
    import threading
    from types import SimpleNamespace

    from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook

    readers: list[str] = []

    def get_connection(conn_id: str) -> SimpleNamespace:
        readers.append(threading.current_thread().name)
        return SimpleNamespace(extra_dejson={"namespace": "team", "in_cluster": False})

    monkeypatch.setattr(AsyncKubeflowJobHook, "get_connection", staticmethod(get_connection))
    hook = AsyncKubeflowJobHook(conn_id="k8s_task").with_connection_read()
    assert readers == [threading.current_thread().name]
    assert asyncio.run(hook.get_conn_extras()) == {"namespace": "team", "in_cluster": False}
    assert asyncio.run(hook.get_namespace_async()) == "team"
    assert readers == [threading.current_thread().name]  # read once, where the task runs
