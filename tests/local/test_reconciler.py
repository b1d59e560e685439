"""The reconcile core (controllers/reconciler.py) on its own: keyed work fed by watches, one pass per key
however often it is enqueued, requeue after a delay, retries of a failing pass, and the hook that runs once
the queue drains (the Kueue manager's scheduling cycle)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from waiting import until_async

from airflow_tfjob.local.controllers.reconciler import Key, Watch, WorkQueue
from airflow_tfjob.local.model.resources import ApiError, JsonDict
from airflow_tfjob.local.store.core import Store


class Recorder(WorkQueue):
    """Keys every ConfigMap event to ("configmap", name); a pass of a name listed in `fail` raises once,
    of one in `again` asks to run again after 0.1 s (once)."""

    kind = "recorder"
    retry_base = retry_max = 0.1

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.passes: list[Key] = []
        self.drains: list[int] = []  # how many passes had run at each drain
        self.fail: set[str] = set()
        self.again: set[str] = set()

    def watches(self) -> list[Watch]:
        return [Watch("configmaps", self._on_configmap)]

    def _on_configmap(self, _etype: str, obj: JsonDict) -> None:
        self.enqueue(("configmap", obj["metadata"]["name"]))

    def reconcile_key(self, key: Key) -> float | None:
        self.passes.append(key)
        name = key[1]
        if name in self.fail:
            self.fail.discard(name)
            raise ApiError(409, "Conflict", "try again")
        if name in self.again:
            self.again.discard(name)
            return 0.1
        return None

    def drained(self) -> None:
        self.drains.append(len(self.passes))


@pytest.fixture
async def running() -> AsyncIterator[tuple[Store, Recorder]]:
    store = Store()
    queue = Recorder(store)
    task = asyncio.create_task(queue.run())
    yield store, queue
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def _configmap(name: str) -> JsonDict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}}


async def test_a_key_enqueued_many_times_before_its_pass_is_reconciled_once(
    running: tuple[Store, Recorder],
) -> None:
    store, queue = running
    for _ in range(3):
        queue.enqueue(("configmap", "same"))
    await until_async(lambda: queue.drains, "a drain")
    assert queue.passes == [("configmap", "same")]
    store.create("configmaps", "default", _configmap("watched"))
    await until_async(lambda: ("configmap", "watched") in queue.passes, "the watched object's pass")


async def test_requeue_after_and_retry_run_the_key_again(running: tuple[Store, Recorder]) -> None:
    _store, queue = running
    queue.again.add("later")
    queue.fail.add("broken")
    queue.enqueue(("configmap", "later"))
    queue.enqueue(("configmap", "broken"))
    await until_async(lambda: queue.passes.count(("configmap", "later")) == 2, "the requeued pass")
    await until_async(lambda: queue.passes.count(("configmap", "broken")) == 2, "the retried pass")
    assert not queue._failures, "a pass that succeeds resets the key's backoff"


async def test_drained_runs_after_a_burst_and_on_a_poke(running: tuple[Store, Recorder]) -> None:
    _store, queue = running
    for name in ("a", "b", "c"):
        queue.enqueue(("configmap", name))
    await until_async(lambda: queue.drains, "a drain")
    assert queue.drains == [3], "the burst is reconciled before the hook runs, once"
    queue.poke()
    queue.poke()
    await until_async(lambda: len(queue.drains) == 2, "the poked drain")
    assert queue.drains == [3, 3] and queue._queue.empty(), "two pokes before the worker woke: one drain"
