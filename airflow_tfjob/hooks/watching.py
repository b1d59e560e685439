"""Following a collection of the Kubernetes API: one watch stream, list-then-watch, reconnect forever.

Three small layers, each handling the failures named at its level and passing the rest up:

(a) one HTTP stream of watch events: ``AsyncKubeflowJobHook.watch_objects`` (and the named watches built on
    it). It yields ``(type, object)`` until the server ends the stream and turns a refused request or
    an ERROR event into :class:`WatchError` (410 Gone: :class:`WatchExpired`).
(b) :class:`ListWatch`: LIST, then WATCH from the list's resourceVersion; a normal end of the stream
    resumes from the last resourceVersion seen (bookmarks included), 410 relists. One call of
    :meth:`ListWatch.round` is one LIST (when needed) and one stream.
(c) :func:`reconnect_forever`: repeats an attempt, waiting a jittered, growing delay after a failure;
    it ends when the attempt says so, or on an error that no retry will cure (:func:`is_permanent`),
    which is logged at WARNING with the verb and the resource before it is raised. Log streams are no
    watches, but their reconnect loop is this layer too (``logs_follow.ReplicaFollower``).

The shared TFJob watch (``watch.py``) and the pod and event watches of a followed job
(``follow.reflect``) are (b) under (c).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_tfjob.hooks.common import status_of
from airflow_tfjob.hooks.retry import ApiCallFailed, api_status_code, client_errors

log = logging.getLogger(__name__)

#: Status codes that no retry will cure: no rights (401 once credentials were reloaded, 403), or the
#: resource is not installed (404 on a collection).
PERMANENT_CODES = frozenset({401, 403, 404})


class WatchError(Exception):
    """A watch was refused or its stream reported an error event (other than 410)."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"watch failed: {code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message


class WatchExpired(WatchError):
    """410 Gone: the resourceVersion is older than the server's history; the caller must relist."""


def error_code(exc: BaseException) -> int | None:
    """HTTP status behind a failed list or watch (a WatchError or either client's API error)."""
    if isinstance(exc, WatchError):
        return exc.code
    return api_status_code(exc)


def is_permanent(exc: BaseException) -> bool:
    """Whether no retry will cure this error (see PERMANENT_CODES)."""
    return error_code(exc) in PERMANENT_CODES


def is_transient(exc: BaseException) -> bool:
    """Connection faults, a silent peer, a torn JSON line of a cut stream, or a passing server error.

    A list that kept failing under the hooks' retry policy (ApiCallFailed) is retried too: the watch
    reconnects forever, whatever the time the API server stays away.
    """
    aiohttp, _ = client_errors()
    if isinstance(exc, (OSError, asyncio.TimeoutError, ValueError, aiohttp.ClientError, ApiCallFailed)):
        return True
    code = error_code(exc)
    return code is not None and code not in PERMANENT_CODES


def as_watch_error(exc: BaseException) -> WatchError:
    """The error a watch's consumers see, whichever layer raised it."""
    if isinstance(exc, WatchError):
        return exc
    status = status_of(exc)  # the server's Status, when the error carries one
    reason = status.get("reason") or getattr(exc, "reason", None) or type(exc).__name__
    return WatchError(error_code(exc) or 0, str(reason), str(status.get("message") or exc))


@dataclass
class Backoff:
    """Growing delay between attempts: `start`, doubled after each failure up to `cap`.

    With `jitter`, each delay is drawn from its upper half, so that many clients cut at once (an API
    server restart) do not come back in step.
    """

    start: float = 0.5
    cap: float = 30.0
    jitter: bool = True
    current: float = field(init=False)

    def __post_init__(self) -> None:
        self.current = self.start

    def reset(self) -> None:
        self.current = self.start

    def _spread(self, delay: float) -> float:
        return delay * random.uniform(0.5, 1.0) if self.jitter else delay

    def next(self) -> float:
        """The delay to wait now; the following one is twice as long (up to the cap)."""
        delay = self._spread(self.current)
        self.current = min(self.current * 2, self.cap)
        return delay

    def short(self, longest: float = 1.0) -> float:
        """A delay of at most `longest`, without growing: for a stream that ended normally but empty."""
        return self._spread(min(self.current, longest))


class Next(enum.Enum):
    """What an attempt of :func:`reconnect_forever` asks for next."""

    STOP = "stop"  # done
    AGAIN = "again"  # go again at once, the delay unchanged
    FRESH = "fresh"  # it worked: reset the delay and go again at once
    IDLE = "idle"  # nothing happened (an empty stream): a short pause, the delay unchanged
    BACK_OFF = "back_off"  # it failed: wait the next delay
    RESET_BACK_OFF = "reset_back_off"  # it failed after some progress: wait the first delay again


Pause = Callable[[float], Awaitable[Any]]


async def reconnect_forever(
    attempt: Callable[[], Awaitable[Next]],
    *,
    verb: str,
    resource: str,
    backoff: Backoff,
    pause: Pause = asyncio.sleep,
    on_error: Callable[[BaseException], None] | None = None,
) -> None:
    """Layer (c): run `attempt` until it returns STOP; retry transient errors after a backoff delay.

    A permanent error is logged at WARNING with `verb` and `resource`, then raised; anything neither
    transient nor permanent is a bug and is raised at once. `pause` waits a delay (a caller may wake it
    early, as a log stream does when its pod changes).
    """
    while True:
        try:
            step = await attempt()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if is_permanent(exc):
                log.warning("Kubernetes %s of %s refused, not retrying: %s", verb, resource, exc)
                raise
            if not is_transient(exc):
                raise
            if on_error is not None:
                on_error(exc)
            delay = backoff.next()
            log.warning("Kubernetes %s of %s interrupted (%r); retrying in %.1fs", verb, resource, exc, delay)
            await pause(delay)
            continue
        if step is Next.STOP:
            return
        if step is Next.FRESH:
            backoff.reset()
        elif step is Next.IDLE:
            await pause(backoff.short())
        elif step is Next.BACK_OFF or step is Next.RESET_BACK_OFF:
            if step is Next.RESET_BACK_OFF:
                backoff.reset()
            await pause(backoff.next())


def resource_version_of(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class ListWatch:
    """Layer (b): list, then watch from the list's resourceVersion, resuming where the stream ended.

    `list_objects()` returns (items, resourceVersion) and `stream_events(resource_version)` opens one
    stream (layer a). `on_list(items)` receives every (re)list, `on_event(type, obj)` every event,
    BOOKMARKs included; `on_expired()` is told when a 410 forces a relist.
    """

    def __init__(
        self,
        *,
        list_objects: Callable[[], Awaitable[tuple[list[dict], str]]],
        stream_events: Callable[[str], AsyncIterator[tuple[str, dict]]],
        on_list: Callable[[list[dict]], None],
        on_event: Callable[[str, dict], None],
        on_expired: Callable[[], None] | None = None,
        resource: str = "",
    ) -> None:
        self.list_objects = list_objects
        self.stream_events = stream_events
        self.on_list = on_list
        self.on_event = on_event
        self.on_expired = on_expired
        self.resource = resource
        self.resource_version: str | None = None  # None: list before watching

    async def round(self) -> Next:
        """One LIST (if there is no resourceVersion to resume from) and one WATCH stream to its end."""
        if self.resource_version is None:
            self.resource_version = await self._list()
        got_events = False
        try:
            async for etype, obj in self.stream_events(self.resource_version):
                self.resource_version = resource_version_of(obj) or self.resource_version
                self.on_event(etype, obj)
                got_events = True
        except WatchExpired:
            log.info("Kubernetes watch of %s: resourceVersion expired (410), relisting", self.resource)
            self.resource_version = None
            if self.on_expired is not None:
                self.on_expired()
            return Next.AGAIN
        # A normal end (the server's timeoutSeconds): resume at once, unless the server keeps closing
        # empty streams straight away.
        return Next.FRESH if got_events else Next.IDLE

    async def _list(self) -> str:
        """The LIST, handed to ``on_list``; its resourceVersion. A call of its own, so that the listed
        objects are not held by the round's frame while it watches (up to minutes): the consumer keeps
        what it needs, and a job changed since is not held twice."""
        items, rv = await self.list_objects()
        self.on_list(items)
        return rv

    async def run_forever(self, *, backoff: Backoff | None = None, **kwargs: Any) -> None:
        """(b) under (c): until cancelled or a permanent error."""
        await reconnect_forever(
            self.round, verb="watch", resource=self.resource, backoff=backoff or Backoff(), **kwargs
        )


async def reflect(
    list_fn: Callable[[], Awaitable[tuple[list[dict], str]]],
    watch_fn: Callable[[str], Any],
    on_event: Callable[[str, dict], None],
    on_error: Callable[[BaseException], None] | None = None,
    synced: asyncio.Event | None = None,
    resource: str = "",
    on_synced: Callable[[], None] | None = None,
) -> None:
    """List, then watch from the list's resourceVersion, until cancelled or refused for good.

    ``synced`` is set and ``on_synced`` called after each list has been passed on (a relist too).

    :class:`ListWatch` under :func:`reconnect_forever`, keeping the objects by uid so that a relist
    reports those missing from the new list as DELETED; BOOKMARKs are not passed on. The follow core's
    pod and event watches.
    """
    known: dict[str, dict] = {}

    def on_list(items: list[dict]) -> None:
        names = set()
        for obj in items:
            uid = _uid(obj)
            names.add(uid)
            etype = "MODIFIED" if uid in known else "ADDED"
            known[uid] = obj
            on_event(etype, obj)
        for uid in [u for u in known if u not in names]:
            on_event("DELETED", known.pop(uid))
        if synced is not None:
            synced.set()
        if on_synced is not None:
            on_synced()

    def on_watch_event(etype: str, obj: dict) -> None:
        if etype == "BOOKMARK":
            return
        if etype == "DELETED":
            known.pop(_uid(obj), None)
        else:
            known[_uid(obj)] = obj
        on_event(etype, obj)

    lw = ListWatch(
        list_objects=list_fn,
        stream_events=watch_fn,
        on_list=on_list,
        on_event=on_watch_event,
        resource=resource,
    )
    await lw.run_forever(on_error=on_error)


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")
