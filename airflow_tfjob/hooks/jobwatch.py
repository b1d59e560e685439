"""One job watch stream per (cluster, namespace, job kind, event loop), fanned out to per-job subscribers.

Why: a triggerer may wait on a thousand TFJobs. One watch per job would hold a thousand connections
and multiply the API server's work; polling would make requests grow with waiting time. Instead,
every waiter of a namespace and kind subscribes to a shared watcher that behaves like a client-go informer:

- an initial LIST fills a cache and gives the resourceVersion to watch from, so a new
  subscriber gets the current state at once, without a request of its own;
- a WATCH with ``allowWatchBookmarks`` resumes from the last resourceVersion after a normal end
  (the server's ``timeoutSeconds``), reconnects with backoff after transport errors, and relists
  on 410 Gone (an HTTP 410 or an ERROR event with code 410), delivering what changed meanwhile
  (``watching.ListWatch`` under ``watching.reconnect_forever``, shared with the pod and event watches);
- an error no retry cures (401, 403, 404: see ``watching.PERMANENT_CODES``) is raised to every
  subscriber as :class:`~airflow_tfjob.hooks.watching.WatchError`;
- values are coalesced per subscriber (newest object wins), so a slow or failed subscriber never
  blocks the stream or the others;
- the stream stops a short ``linger`` after the last subscriber leaves;
- the cache and the subscribers hold each job as its compact JSON (:data:`Encoded`), about a quarter
  of the decoded object's size, decoded afresh for whoever reads it: a triggerer keeps one per
  waiting job for as long as the job runs, and no reader can change what another one sees.

The share is keyed by the running event loop as well, because the API client's connections belong
to the loop that opened them and synchronous mode / ``airflow dags test`` start a fresh loop per task.

The requests go through ``AsyncKubeflowJobHook`` (its shared per-loop client; its watch stream reads raw
chunks and splits lines itself, since aiohttp's line reader has a size limit that a watch event
carrying a large object would exceed).

Usage::

    async with shared_watch(hook, "team-a", kind=PYTORCHJOB).subscribe("my-job") as sub:
        async for obj in sub:       # dict (latest job object) or None (absent / deleted)
            ...
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncIterator, Hashable
from dataclasses import asdict, dataclass
from typing import Any

from airflow_tfjob.hooks.waits import shared_task
from airflow_tfjob.hooks.watching import (
    PERMANENT_CODES,
    ListWatch,
    WatchError,
    as_watch_error,
    is_permanent,
)
from airflow_tfjob.jobs.kinds import JobKind

log = logging.getLogger(__name__)

#: Seconds the stream stays open after its last subscriber left (a following trigger often comes soon).
DEFAULT_LINGER = 5.0
#: Server-side watch timeout, randomised like client-go's reflector so that many processes do not
#: reconnect in step.
DEFAULT_WATCH_TIMEOUT = (240, 330)
#: Status codes that no retry will cure: no rights, or the TFJob resource is not installed.
FATAL_CODES = PERMANENT_CODES

#: A job object as the watch keeps it: compact JSON (equal bytes: nothing changed).
Encoded = bytes


def encode(obj: dict[str, Any]) -> Encoded:
    """The job as the cache keeps it, without its managedFields (the bulk of a real server's objects,
    which nobody here reads)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return json.dumps(obj, separators=(",", ":")).encode()


def decode(raw: Encoded | None) -> dict[str, Any] | None:
    """A fresh decoded copy of a cached job (None stays None: absent)."""
    if raw is None:
        return None
    obj: dict[str, Any] = json.loads(raw)
    return obj


@dataclass
class WatchStats:
    """Counters of one shared watcher; requests do not grow with the number of subscribers."""

    lists: int = 0  # LIST requests (pages included)
    watches: int = 0  # WATCH connections opened
    relists: int = 0  # 410 Gone recoveries
    events: int = 0  # ADDED/MODIFIED/DELETED events received
    bookmarks: int = 0
    errors: int = 0  # transport or server errors retried
    subscribers: int = 0
    connected: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Subscription:
    """One waiter's view of one job: the newest object (or None), coalesced.

    Small on purpose, as a triggerer holds one per waiting job: slots, no asyncio.Event, and no task
    or timer while nobody waits on it; a waiter is a bare future, made when :meth:`next` has to wait
    and resolved by the next delivery (or by its timeout's timer).
    """

    __slots__ = ("_error", "_latest", "_pending", "_synced", "_waiter", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._latest: Encoded | None = None
        self._synced = False
        self._pending = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[bool] | None = None

    @property
    def latest(self) -> dict[str, Any] | None:
        """The last value delivered, decoded afresh (None: absent or not known yet, see ``synced``)."""
        return decode(self._latest)

    @property
    def latest_encoded(self) -> Encoded | None:
        """The last value delivered as the watch keeps it (:func:`decode` reads it)."""
        return self._latest

    @property
    def synced(self) -> bool:
        """Whether a value (from the cache or the stream) has been delivered at least once."""
        return self._synced

    def _wake(self, timed_out: bool = False) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(timed_out)

    def nudge(self) -> None:
        """Wake the waiter as its timeout would: it checks its clocks again without a new value (the
        follow's start-up check, once the pod list it waits for has come back)."""
        self._wake(True)

    def _deliver(self, obj: Encoded | None) -> None:
        self._latest = obj
        self._synced = True
        self._pending = True
        self._wake()

    def _fail(self, error: BaseException) -> None:
        self._error = error
        self._wake()

    async def next(self, timeout: float | None = None) -> dict[str, Any] | None:
        """Wait for the next value (the first one comes at once once the watcher has listed).

        Raises TimeoutError when nothing new came within ``timeout`` seconds (None: no limit). A
        cancellation always propagates: the wait is on a plain future, which a cancel cancels.
        """
        while not self._pending:
            if self._error is not None:
                raise self._error
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            timer = None if timeout is None else loop.call_later(timeout, self._wake, True)
            try:
                timed_out = await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
            if timed_out and not self._pending:
                raise TimeoutError(f"no change of job {self.name} within {timeout} s")
        self._pending = False
        return decode(self._latest)

    def __aiter__(self) -> AsyncIterator[dict[str, Any] | None]:
        return self

    async def __anext__(self) -> dict[str, Any] | None:
        return await self.next()


class _Watcher:
    """The shared stream for one (cluster, namespace, kind, loop). Owned by the module registry."""

    def __init__(
        self,
        key: WatchKey,
        hook: Any,
        namespace: str,
        *,
        kind: JobKind,
        linger: float,
        watch_timeout: tuple[int, int],
    ) -> None:
        self.key = key
        # Any hook of this cluster key will do: they share the loop's API client.
        self.hook = hook
        self.namespace = namespace
        self.kind = kind
        self.linger = linger
        self.watch_timeout = watch_timeout
        self.loop = asyncio.get_running_loop()
        self.cache: dict[str, Encoded] = {}
        # Subscribers by job name: a list, as a job has one waiter nearly always (a set costs 216 bytes).
        self.subs: dict[str, list[Subscription]] = {}
        self._lw: ListWatch | None = None
        self.synced = False
        self.stats = WatchStats()
        self.task: asyncio.Task[None] | None = None
        self._stopper: asyncio.TimerHandle | None = None
        self._closed = False

    # -- subscribers ------------------------------------------------------------------------
    def add(self, sub: Subscription) -> None:
        if self._stopper is not None:
            self._stopper.cancel()
            self._stopper = None
        self.subs.setdefault(sub.name, []).append(sub)
        self.stats.subscribers += 1
        if self.synced:
            sub._deliver(self.cache.get(sub.name))
        if self.task is None:
            self.task = shared_task(
                self._run(), name=f"{self.kind.singular}-watch:{self.namespace}", loop=self.loop
            )

    def remove(self, sub: Subscription) -> None:
        group = self.subs.get(sub.name)
        if group is not None and sub in group:
            group.remove(sub)
            self.stats.subscribers -= 1
            if not group:
                del self.subs[sub.name]
        if not self.subs and not self._closed and self._stopper is None:
            if self.loop.is_closed():
                return
            self._stopper = self.loop.call_later(self.linger, self._stop_if_idle)

    def _stop_if_idle(self) -> None:
        self._stopper = None
        if not self.subs:
            self.close()

    def close(self) -> None:
        """Stop the stream and leave the registry (a later subscribe starts a new watcher)."""
        if self._closed:
            return
        self._closed = True
        if _REGISTRY.get(self.key) is self:
            del _REGISTRY[self.key]
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def _publish(self, name: str, obj: Encoded | None) -> None:
        for sub in self.subs.get(name, ()):
            sub._deliver(obj)

    def _fail_all(self, error: BaseException) -> None:
        for group in self.subs.values():
            for sub in group:
                sub._fail(error)

    # -- the stream ---------------------------------------------------------------------------
    def _list_watch(self) -> ListWatch:
        return ListWatch(
            list_objects=self._list_objects,
            stream_events=self._stream,
            on_list=self._on_list,
            on_event=self._handle,
            on_expired=self._on_expired,
            resource=f"{self.kind.kind}s in {self.namespace}",
        )

    async def _run(self) -> None:
        self._lw = self._list_watch()
        try:
            await self._lw.run_forever(on_error=self._on_error)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not is_permanent(exc):
                # A bug here must not leave subscribers waiting forever.
                log.exception("%s watch of %s crashed", self.kind.kind, self.namespace)
                self._fail_all(WatchError(0, "crashed", f"watch crashed: {exc!r}"))
                raise
            self._fail_all(as_watch_error(exc))
        finally:
            self.stats.connected = False
            self._closed = True
            if _REGISTRY.get(self.key) is self:
                del _REGISTRY[self.key]

    @property
    def resource_version(self) -> str | None:
        return self._lw.resource_version if self._lw is not None else None

    def _on_error(self, exc: BaseException) -> None:
        self.stats.errors += 1

    def _on_expired(self) -> None:
        self.stats.relists += 1

    async def _list_objects(self) -> tuple[list[dict], str]:
        self.stats.lists += 1
        items: list[dict]
        items, rv = await self.hook.list_objects(self.kind.plural, self.namespace)
        return items, rv

    def _on_list(self, listed: list[dict]) -> None:
        items = {obj["metadata"]["name"]: encode(obj) for obj in listed}
        old = self.cache
        self.cache = items
        first = not self.synced
        self.synced = True
        for name, group in list(self.subs.items()):
            new = items.get(name)
            if first or old.get(name) != new:
                for sub in group:
                    sub._deliver(new)
            else:
                for sub in group:
                    if not sub.synced:
                        sub._deliver(new)

    async def _stream(self, resource_version: str) -> AsyncIterator[tuple[str, dict]]:
        """One WATCH request (layer a), counted."""
        self.stats.watches += 1
        self.stats.connected = True
        try:
            async for event in self.hook.watch_jobs(
                self.kind,
                self.namespace,
                resource_version=resource_version,
                timeout_seconds=random.randint(*self.watch_timeout),
            ):
                yield event
        finally:
            self.stats.connected = False

    def _handle(self, etype: str, obj: dict[str, Any]) -> None:
        if etype == "BOOKMARK":
            self.stats.bookmarks += 1
            return
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            return
        self.stats.events += 1
        if etype == "DELETED":
            self.cache.pop(name, None)
            self._publish(name, None)
        else:
            encoded = self.cache[name] = encode(obj)
            self._publish(name, encoded)


# (cluster key, namespace, kind's plural, id of the event loop)
WatchKey = tuple[Hashable, str, str, int]
_REGISTRY: dict[WatchKey, _Watcher] = {}


class SharedWatchHandle:
    """Entry point for one (hook's cluster, namespace, kind); cheap to create, nothing runs until subscribe."""

    __slots__ = ("_watcher", "hook", "kind", "linger", "namespace", "watch_timeout")

    def __init__(
        self,
        hook: Any,
        namespace: str,
        *,
        kind: JobKind,
        linger: float = DEFAULT_LINGER,
        watch_timeout: tuple[int, int] = DEFAULT_WATCH_TIMEOUT,
    ) -> None:
        self.hook = hook
        self.namespace = namespace
        self.kind = kind
        self.linger = linger
        self.watch_timeout = watch_timeout
        self._watcher: _Watcher | None = None

    async def _get_watcher(self) -> _Watcher:
        loop = asyncio.get_running_loop()
        key = (await self.hook.get_cluster_key(), self.namespace, self.kind.plural, id(loop))
        watcher = _REGISTRY.get(key)
        if watcher is not None and (watcher.loop is not loop or watcher._closed):
            watcher = None
        if watcher is None:
            watcher = _Watcher(
                key,
                self.hook,
                self.namespace,
                kind=self.kind,
                linger=self.linger,
                watch_timeout=self.watch_timeout,
            )
            _REGISTRY[key] = watcher
        self._watcher = watcher
        return watcher

    def subscribe(self, name: str) -> _Subscribing:
        """Follow one job by name (``async with``); leaving the block unsubscribes (the stream may linger)."""
        return _Subscribing(self, name)

    async def current(self, name: str, timeout: float | None = None) -> dict[str, Any] | None:
        """The job as the shared watch knows it now (None: it does not exist), without a request of its own.

        The first caller of a namespace and kind starts the watch (its one LIST); every later one reads
        the cache. Raises what the watch raises (:class:`WatchError` for an error no retry cures) and
        TimeoutError if the watch has not listed within ``timeout`` seconds.
        """
        return decode(await self.current_encoded(name, timeout))

    async def current_encoded(self, name: str, timeout: float | None = None) -> Encoded | None:
        """:meth:`current` as the watch keeps it (:func:`decode` reads it)."""
        async with self.subscribe(name) as sub:
            await sub.next(timeout)
            return sub.latest_encoded

    @property
    def stats(self) -> WatchStats | None:
        """Counters of the watcher this handle subscribed to (None before the first subscription)."""
        return self._watcher.stats if self._watcher is not None else None


class _Subscribing:
    """``async with handle.subscribe(name) as sub``: a plain slotted context manager, not an async
    generator's, since a triggerer holds one per waiting job for as long as the job runs."""

    __slots__ = ("_handle", "_name", "_sub", "_watcher")

    def __init__(self, handle: SharedWatchHandle, name: str) -> None:
        self._handle = handle
        self._name = name
        self._watcher: _Watcher | None = None
        self._sub: Subscription | None = None

    async def __aenter__(self) -> Subscription:
        watcher = self._watcher = await self._handle._get_watcher()
        sub = self._sub = Subscription(self._name)
        watcher.add(sub)
        return sub

    async def __aexit__(self, *exc_info: object) -> None:
        if self._watcher is not None and self._sub is not None:
            self._watcher.remove(self._sub)


def shared_watch(
    hook: Any,
    namespace: str,
    *,
    kind: JobKind,
    linger: float = DEFAULT_LINGER,
    watch_timeout: tuple[int, int] = DEFAULT_WATCH_TIMEOUT,
) -> SharedWatchHandle:
    """The shared watch of ``kind``'s jobs in ``namespace`` on the hook's cluster, for the running loop.

    ``linger`` and ``watch_timeout`` apply when this call starts the stream (the first subscriber).
    """
    return SharedWatchHandle(hook, namespace, kind=kind, linger=linger, watch_timeout=watch_timeout)


def active_watchers() -> list[dict[str, Any]]:
    """Counters of every watcher of the running loop (for benchmarks and diagnostics)."""
    loop_id = id(asyncio.get_running_loop())
    return [
        {"namespace": w.namespace, "kind": w.kind.kind, **w.stats.to_dict()}
        for key, w in _REGISTRY.items()
        if key[3] == loop_id
    ]
