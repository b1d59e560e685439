"""Stored entries, watch events and watchers: the store fans every change out synchronously to each
registered `Watcher`, which filters by namespace and selectors and queues it for one consumer."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Protocol

from airflow_tfjob.local.model.resources import JsonDict, ResourceType, clone, encode
from airflow_tfjob.local.model.selectors import FieldSelector, LabelSelector, selected

log = logging.getLogger(__name__)


class Entry:
    """One stored version of an object and its lazily computed JSON encoding (shared by all readers)."""

    __slots__ = ("_json", "obj", "rv")

    def __init__(self, obj: JsonDict, rv: int) -> None:
        self.obj = obj
        self.rv = rv
        self._json: bytes | None = None

    @property
    def json(self) -> bytes:
        if self._json is None:
            self._json = encode(self.obj)
        return self._json


class WatchEvent:
    __slots__ = ("entry", "namespace", "prev", "rv", "type")

    def __init__(self, type_: str, entry: Entry, prev: JsonDict | None, namespace: str) -> None:
        self.type = type_
        self.entry = entry
        self.prev = prev
        self.rv = entry.rv
        self.namespace = namespace


class WatchSource(Protocol):
    """What a `Watcher` and `follow_forever` ask of the store that feeds them (core.Store is one). Declared
    here, below the store core, so that this module needs nothing above it: the core registers watchers,
    a watcher only reads the current resourceVersion and unregisters itself."""

    @property
    def resource_version(self) -> int: ...

    def watch(self, rtype: str) -> Watcher: ...

    def unregister(self, watcher: Watcher) -> None: ...


class Watcher:
    """One watch: a queue of (type, Entry) filled synchronously by the store, drained by one consumer.

    As an async iterator it yields (event_type, object copy). The API server uses `next_batch()` instead,
    which hands out the shared entries so each event is encoded once for all watchers.
    """

    MAX_QUEUE = 20_000

    def __init__(
        self,
        store: WatchSource,
        info: ResourceType,
        namespace: str | None,
        labels: LabelSelector | None,
        fields: FieldSelector | None,
    ) -> None:
        self._store = store
        self.info = info
        self.namespace = namespace
        self._labels = labels
        self._fields = fields
        self._queue: deque[tuple[str, Entry]] = deque()
        self._wakeup: asyncio.Future[None] | None = None
        self.closed = False
        # True when the store dropped us because we fell too far behind: the client must re-watch.
        self.overflowed = False
        self.last_rv = 0

    def _offer(self, event: WatchEvent) -> None:
        if self.closed or (self.namespace is not None and event.namespace != self.namespace):
            return
        obj = event.entry.obj
        type_ = event.type
        if self._labels is not None or self._fields is not None:
            now = selected(obj, self._labels, self._fields)
            before = event.prev is not None and selected(event.prev, self._labels, self._fields)
            if type_ == "MODIFIED":
                if now and not before:
                    type_ = "ADDED"
                elif before and not now:
                    type_ = "DELETED"
                elif not now:
                    return
            elif not now:
                return
        self._queue.append((type_, event.entry))
        if len(self._queue) > self.MAX_QUEUE:
            self.overflowed = True
            self.close()
            return
        self._wake()

    def _wake(self) -> None:
        waiter, self._wakeup = self._wakeup, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pending(self) -> bool:
        return bool(self._queue)

    def bookmark_rv(self) -> int:
        """A resourceVersion a client may resume from: everything up to it has been handed out."""
        return self._store.resource_version if not self._queue else self.last_rv

    async def next_batch(self, timeout: float | None = None) -> list[tuple[str, Entry]]:
        """Wait for events (at most `timeout` seconds); [] on timeout or once closed and drained."""
        if not self._queue and not self.closed:
            loop = asyncio.get_running_loop()
            self._wakeup = loop.create_future()
            timer = loop.call_later(timeout, self._wake) if timeout is not None else None
            try:
                await self._wakeup
            finally:
                self._wakeup = None
                if timer is not None:
                    timer.cancel()
        batch = list(self._queue)
        self._queue.clear()
        if batch:
            self.last_rv = batch[-1][1].rv
        return batch

    def __aiter__(self) -> Watcher:
        return self

    async def __anext__(self) -> tuple[str, JsonDict]:
        while True:
            if self._queue:
                type_, entry = self._queue.popleft()
                self.last_rv = entry.rv
                return type_, clone(entry.obj)
            if self.closed:
                raise StopAsyncIteration
            loop = asyncio.get_running_loop()
            self._wakeup = loop.create_future()
            try:
                await self._wakeup
            finally:
                self._wakeup = None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._store.unregister(self)
            self._wake()


async def follow_forever(store: WatchSource, rtype: str, handler: Callable[[str, JsonDict], None], who: str,
                         on_open: Callable[[], None] | None = None) -> None:
    """Hand every event of `rtype` to `handler` until cancelled, re-watching (a full resync: a watch
    without resourceVersion starts with every object as ADDED) when the store drops a slow watcher. A
    handler's exception is logged and the stream goes on. `on_open` runs right after each (re)open, with
    no await in between: the objects it can list are exactly those the watch starts with."""
    while True:
        watcher = store.watch(rtype)
        if on_open is not None:
            on_open()
        try:
            async for etype, obj in watcher:
                try:
                    handler(etype, obj)
                except Exception:
                    log.exception("%s: handling %s %s failed", who, rtype, obj.get("metadata", {}).get("name"))
        finally:
            watcher.close()
        await asyncio.sleep(0.1)
