"""A small controller-runtime for the local cluster's Kubernetes-style controllers (batch Jobs, JobSets,
TrainJobs): a work queue of (namespace, name) keys fed by a watch on the primary kind and on the kinds it
owns (mapped to the owner through the controller ownerReference), one reconcile at a time, a timer per
key (`reconcile` returns the seconds until it wants to run again), and retries with exponential backoff
(0.5 s doubling to 60 s) when a pass raises.

The v1 job kinds' controller (jobcontroller.py) runs on the same WorkQueue with watches of its own (it
also keeps the host ports of their replicas)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from airflow_tfjob.local.resources import RESOURCES, ApiError, JsonDict
from airflow_tfjob.local.store import Store

log = logging.getLogger(__name__)

_RETRY_BASE = 0.5
_RETRY_MAX = 60.0
_TIMER_SLACK = 0.05

Key = tuple[str, str]


class WorkQueue:
    """One worker over a queue of (namespace, name) keys: a key is queued once however often it is
    enqueued; `reconcile` returns the seconds until a timer queues the key again (None: no timer); a pass
    that raises is retried after 0.5 s doubling to 60 s. Shared by the v1 job controllers
    (jobcontroller.py) and the Reconcilers below."""

    kind: str = ""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._queued: set[Key] = set()
        self._timers: dict[Key, asyncio.TimerHandle] = {}
        self._retry_timers: dict[Key, asyncio.TimerHandle] = {}
        self._failures: dict[Key, int] = {}

    def reconcile(self, namespace: str, name: str) -> float | None:
        raise NotImplementedError

    def expected_error(self, exc: Exception) -> bool:
        """Errors retried without a traceback in the log (an API error is part of the game)."""
        return isinstance(exc, ApiError)

    def enqueue(self, key: Key) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            try:
                after = self.reconcile(*key)
            except Exception as exc:  # any failure: retry later, as controller-runtime does
                if not self.expected_error(exc):
                    log.exception("reconcile of %s %s/%s failed", self.kind, *key)
                self._retry(key)
            else:
                self._failures.pop(key, None)
                self._set_timer(key, after)
            await asyncio.sleep(0)

    def _retry(self, key: Key) -> None:
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        self._schedule(self._retry_timers, key, min(_RETRY_BASE * 2**n, _RETRY_MAX))

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
    """Subclasses set `plural` (the primary kind) and `owns` (plurals of the objects it creates), and
    implement `reconcile(namespace, name) -> float | None`."""

    plural: str = ""
    owns: tuple[str, ...] = ()

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store
        info = RESOURCES[self.plural]
        self.kind, self.api_version = info.kind, info.api_version

    async def run(self) -> None:
        tasks = [asyncio.create_task(self._watch(self.plural, self._on_primary), name=f"{self.plural}-watch")]
        tasks += [asyncio.create_task(self._watch(p, self._on_owned), name=f"{self.plural}-watch-{p}")
                  for p in self.owns]
        tasks.append(asyncio.create_task(self._work(), name=f"{self.plural}-work"))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.cancel_timers()

    async def _watch(self, rtype: str, handler: Callable[[str, JsonDict], None]) -> None:
        while True:  # a re-watch (after the store dropped a slow watcher) starts with every object: a resync
            watcher = self.store.watch(rtype)
            if rtype == self.plural:
                self.resynced()
            try:
                async for etype, obj in watcher:
                    handler(etype, obj)
            finally:
                watcher.close()
            await asyncio.sleep(0.1)

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


def owner_reference(owner: JsonDict) -> JsonDict:
    """The controller reference of an object created by `owner`'s controller."""
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def condition(status: JsonDict, type_: str) -> JsonDict | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def is_true(status: JsonDict, type_: str) -> bool:
    cond = condition(status, type_)
    return cond is not None and cond.get("status") == "True"


def set_condition(status: JsonDict, type_: str, value: str, reason: str, message: str, now: str,
                  *, add_false: bool = True) -> None:
    """meta.SetStatusCondition: a new type is appended, an existing one updated in place, its
    lastTransitionTime changing only with its status. `add_false=False`: a False condition is only updated,
    never added (JobSet's updateCondition)."""
    conditions = [dict(c) for c in status.get("conditions") or []]
    for cond in conditions:
        if cond.get("type") == type_:
            if cond.get("status") != value:
                cond["lastTransitionTime"] = now
            cond.update(status=value, reason=reason, message=message)
            status["conditions"] = conditions
            return
    if value != "True" and not add_false:
        return
    conditions.append({"type": type_, "status": value, "reason": reason, "message": message,
                       "lastTransitionTime": now})
    status["conditions"] = conditions
