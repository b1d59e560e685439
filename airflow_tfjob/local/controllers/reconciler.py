"""The reconcile core every controller of the local cluster runs on (a small controller-runtime): a work
queue of object keys, fed by watches that map each event to the keys it concerns, one reconcile at a time,
a timer per key (`reconcile` returns the seconds until it wants to run again), and retries with exponential
backoff (0.5 s doubling to 60 s, shorter than controller-runtime's 1000 s cap) when a pass raises.

`WorkQueue` is the core; `Reconciler` is the usual controller on it, keyed (namespace, name) by a primary
kind and the kinds it owns (mapped to the owner through the controller ownerReference): batch Jobs,
TrainJobs, and as `HostPortReconciler` (which keeps the host ports of an object's replicas) JobSets and the
v1 kinds' V1JobController (controllers/v1/controller.py). The Kueue manager (kueue/controller.py) keys its
queue by (kind, namespace, name) and runs its scheduling cycle whenever the queue drains (`drained`,
`poke`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import NamedTuple

from airflow_tfjob.local.model.conditions import condition_is_true, find_condition
from airflow_tfjob.local.model.conditions import set_condition as write_condition
from airflow_tfjob.local.model.resources import RESOURCES, ApiError, JsonDict
from airflow_tfjob.local.node.ports import PortMap, host_ports
from airflow_tfjob.local.store.core import Store
from airflow_tfjob.local.store.watchers import follow_forever

log = logging.getLogger(__name__)

_TIMER_SLACK = 0.05

Key = tuple[str, ...]


class Watch(NamedTuple):
    """One watch of a controller: every event of `rtype` goes to `handler` (which enqueues the keys it
    concerns); `on_open` runs right after each (re)open of the watch, before its first event."""

    rtype: str
    handler: Callable[[str, JsonDict], None]
    on_open: Callable[[], None] | None = None


class WorkQueue:
    """One worker over a queue of keys: a key is queued once however often it is enqueued; `reconcile_key`
    returns the seconds until a timer queues the key again (None: no timer); a pass that raises is retried
    after `retry_base` seconds doubling to `retry_max`. `run` opens the `watches` and the worker, and stops
    them (and every timer) when cancelled."""

    kind: str = ""
    retry_base: float = 0.5
    retry_max: float = 60.0

    def __init__(self, store: Store) -> None:
        self.store = store
        self._queue: asyncio.Queue[Key | None] = asyncio.Queue()
        self._queued: set[Key] = set()
        self._poked = False
        self._timers: dict[Key, asyncio.TimerHandle] = {}
        self._retry_timers: dict[Key, asyncio.TimerHandle] = {}
        self._failures: dict[Key, int] = {}

    # ---- what a controller says

    def watches(self) -> list[Watch]:
        raise NotImplementedError

    def reconcile_key(self, key: Key) -> float | None:
        raise NotImplementedError

    def drained(self) -> None:
        """The queue is empty after a pass (or a `poke`): a hook for work done once per burst of changes."""

    def expected_error(self, exc: Exception) -> bool:
        """Errors retried without a traceback in the log (an API error is part of the game)."""
        return isinstance(exc, ApiError)

    # ---- the loop

    async def run(self) -> None:
        tasks = [asyncio.create_task(follow_forever(self.store, w.rtype, w.handler, self.kind, w.on_open),
                                     name=f"{self.kind}-watch-{w.rtype}") for w in self.watches()]
        tasks.append(asyncio.create_task(self._work(), name=f"{self.kind}-work"))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.cancel_timers()

    def enqueue(self, key: Key) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def poke(self) -> None:
        """Wake the worker for a `drained` call even when no key is queued."""
        if not self._poked:
            self._poked = True
            self._queue.put_nowait(None)

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            if key is None:
                self._poked = False
            else:
                self._queued.discard(key)
                self._pass(key)
            if self._queue.empty():
                self.drained()
            await asyncio.sleep(0)

    def _pass(self, key: Key) -> None:
        try:
            after = self.reconcile_key(key)
        except Exception as exc:  # any failure: retry later, as controller-runtime does
            if self.expected_error(exc):
                log.debug("reconcile of %s %s: %s", self.kind, "/".join(key), exc)
            else:
                log.exception("reconcile of %s %s failed", self.kind, "/".join(key))
            self._retry(key)
        else:
            self._failures.pop(key, None)
            self._set_timer(key, after)

    def _retry(self, key: Key) -> None:
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        self._schedule(self._retry_timers, key, min(self.retry_base * 2**n, self.retry_max))

    def _set_timer(self, key: Key, after: float | None) -> None:
        self._schedule(self._timers, key, None if after is None else max(after, 0.0) + _TIMER_SLACK)

    def _schedule(self, timers: dict[Key, asyncio.TimerHandle], key: Key, delay: float | None) -> None:
        old = timers.pop(key, None)
        if old is not None:
            old.cancel()
        if delay is not None:
            timers[key] = asyncio.get_running_loop().call_later(delay, self.enqueue, key)

    def forget(self, key: Key) -> None:
        """The object is gone: no timer or retry for it any more."""
        for timers in (self._timers, self._retry_timers):
            handle = timers.pop(key, None)
            if handle is not None:
                handle.cancel()
        self._failures.pop(key, None)

    def cancel_timers(self) -> None:
        for handle in [*self._timers.values(), *self._retry_timers.values()]:
            handle.cancel()


class Reconciler(WorkQueue):
    """A controller of one primary kind, keyed (namespace, name). Subclasses set `plural` (the primary
    kind) and `owns` (plurals of the objects it creates), and implement `reconcile(namespace, name)`."""

    plural: str = ""
    owns: tuple[str, ...] = ()

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        info = RESOURCES[self.plural]
        self.kind, self.api_version = info.kind, info.api_version

    def reconcile(self, namespace: str, name: str) -> float | None:
        raise NotImplementedError

    def reconcile_key(self, key: Key) -> float | None:
        namespace, name = key
        return self.reconcile(namespace, name)

    def watches(self) -> list[Watch]:
        return [Watch(self.plural, self._on_primary, self.resynced),
                *(Watch(p, self._on_owned) for p in self.owns)]

    def _on_primary(self, etype: str, obj: JsonDict) -> None:
        meta = obj.get("metadata", {})
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if etype == "DELETED":
            self.deleted(obj)
            self.forget(key)
            return
        self.enqueue(key)

    def _on_owned(self, _etype: str, obj: JsonDict) -> None:
        meta = obj.get("metadata", {})
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == self.kind and ref.get("apiVersion") == self.api_version:
                self.enqueue((meta.get("namespace", ""), ref.get("name", "")))

    def deleted(self, obj: JsonDict) -> None:
        """The primary object is gone (garbage collection does the rest); a hook for bookkeeping."""

    def resynced(self) -> None:
        """The primary kind's watch was (re)opened: every existing object comes again as ADDED; a hook
        for bookkeeping of objects deleted while no watch was open."""

    def stopped(self) -> None:
        """The cluster stops (its replicas already killed): a hook for what the controller holds
        beyond its own process's life."""

    # ---- helpers for the passes

    def get(self, rtype: str, namespace: str | None, name: str) -> JsonDict | None:
        try:
            return self.store.get(rtype, namespace, name)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    def owned(self, rtype: str, owner: JsonDict, label_selector: str | None = None) -> list[JsonDict]:
        """The objects of `rtype` in the owner's namespace whose controller reference is `owner`."""
        uid = owner["metadata"]["uid"]
        items, _ = self.store.list(rtype, owner["metadata"].get("namespace"), label_selector=label_selector)
        return [o for o in items if any(r.get("uid") == uid and r.get("controller")
                                        for r in o["metadata"].get("ownerReferences") or [])]

    def write_status(self, rtype: str, obj: JsonDict, status: JsonDict) -> None:
        """Write `status` if it changed (a no-op write would still wake every watcher of the kind)."""
        if obj.get("status") != status and (status or obj.get("status")):  # no empty `status: {}`
            meta = obj["metadata"]
            with contextlib.suppress(ApiError):
                self.store.update_status(rtype, meta.get("namespace"), meta["name"], status)



class HostPortReconciler(Reconciler):
    """A Reconciler whose objects' replicas get host ports (node/ports.py): the v1 kinds' V1JobController and
    the JobSet controller. A port is held for the life of its object, reserved host-wide (one
    `HostPorts` a process), so that no two replicas of the cluster, or of any cluster here, share one."""

    def __init__(self, store: Store, *, port_allocator: Callable[[], int] | None = None) -> None:
        super().__init__(store)
        self.ports = PortMap(port_allocator or host_ports())

    def stopped(self) -> None:
        """The host-wide reservations go with the replicas: the process may start other clusters (a
        test worker does)."""
        self.ports.forget_all()

    def deleted(self, obj: JsonDict) -> None:
        self.ports.forget(obj["metadata"].get("uid", ""))

    def resynced(self) -> None:
        """Release the ports of objects deleted while no watch was open (their DELETED event is lost).

        Called right after the watch is opened, with no await in between: the store cannot change in
        the meantime, so every object that exists here is also one the new watch reports."""
        entries, _ = self.store.list_entries(self.plural)
        existing = {entry.obj["metadata"].get("uid") for entry in entries}
        for uid in self.ports.known_jobs() - existing:
            self.ports.forget(uid)

def owner_reference(owner: JsonDict) -> JsonDict:
    """The controller reference of an object created by `owner`'s controller."""
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def condition(status: JsonDict, type_: str) -> JsonDict | None:
    """A copy of condition `type_`, free to edit."""
    cond = find_condition(status, type_)
    return dict(cond) if cond is not None else None


def is_true(status: JsonDict, type_: str) -> bool:
    return condition_is_true(status, type_)


def set_condition(status: JsonDict, type_: str, value: str, reason: str, message: str, now: str,
                  *, add_false: bool = True) -> None:
    """meta.SetStatusCondition: an existing entry updated in place (model/conditions.py, `merge`).
    `add_false=False`: a False condition is only updated, never added (JobSet's updateCondition)."""
    write_condition(status, type_, value, reason, message, now=now, merge=True, add_false=add_false)
