"""The async hook's streams: log reads and follows, and watches (layer (a) of ``airflow_tfjob.watching``).

Methods of :class:`~airflow_tfjob.hooks.aio.AsyncTFJobHook`, written here as functions of the hook and
bound in its class body, so that the hook module stays readable in one sitting.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from kubernetes_asyncio.client.exceptions import ApiException as AsyncApiException

from airflow_tfjob.constants import CONTAINER_NAME
from airflow_tfjob.hooks.common import (
    COLLECTIONS,
    events_field_selector,
    filter_events,
    job_pod_selector,
    status_of,
)
from airflow_tfjob.kinds import TFJOB, JobKind, as_kind
from airflow_tfjob.watching import WatchError, WatchExpired

if TYPE_CHECKING:
    from airflow_tfjob.hooks.aio import AsyncTFJobHook


async def iter_lines(chunks: AsyncIterator[bytes], max_line: int | None = None) -> AsyncIterator[bytes]:
    """Split a byte stream into lines (without the newline) without aiohttp's line-length limit.

    A final fragment without newline is yielded too. With `max_line`, a line longer than that is yielded
    in pieces of `max_line` bytes, so memory stays bounded whatever a replica prints.
    """
    buf = bytearray()
    async for chunk in chunks:
        buf += chunk
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            yield bytes(buf[start:nl])
            start = nl + 1
        if start:
            del buf[:start]
        while max_line is not None and len(buf) > max_line:
            yield bytes(buf[:max_line])
            del buf[:max_line]
    if buf:
        yield bytes(buf)


# -- logs ------------------------------------------------------------------------------------


def _log_path(namespace: str, pod: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{pod}/log"


async def read_pod_log(
    self: AsyncTFJobHook,
    pod: str,
    namespace: str | None = None,
    container: str = CONTAINER_NAME,
    tail_lines: int | None = None,
    previous: bool = False,
) -> str:
    ns = await self._ns(namespace)
    query: list[tuple[str, Any]] = [("container", container)]
    if tail_lines is not None:
        query.append(("tailLines", tail_lines))
    if previous:
        query.append(("previous", "true"))

    async def attempt() -> str:
        resp = await self._request("GET", _log_path(ns, pod), query=query)
        try:
            return (await resp.read()).decode("utf-8", errors="replace")
        finally:
            resp.release()

    return await self.retry_policy.acall(f"read log of pod {ns}/{pod}", "read", attempt, self.log)


async def stream_pod_log(
    self: AsyncTFJobHook,
    pod: str,
    namespace: str | None = None,
    container: str = CONTAINER_NAME,
    since_time: str | None = None,
    timestamps: bool = True,
    previous: bool = False,
    follow: bool = True,
    read_timeout: float | None = 300.0,
) -> AsyncIterator[bytes]:
    """Raw chunks of a container's log, following it (unless `follow=False` or `previous`).

    `since_time` is RFC 3339; the server truncates it to whole seconds, so callers de-duplicate.
    `read_timeout` ends a stream that stays silent that long (a dead peer looks the same as a quiet
    container): callers resume from their cursor, which loses nothing.
    """
    ns = await self._ns(namespace)
    query: list[tuple[str, Any]] = [("container", container)]
    if follow and not previous:
        query.append(("follow", "true"))
    if timestamps:
        query.append(("timestamps", "true"))
    if since_time:
        query.append(("sinceTime", since_time))
    if previous:
        query.append(("previous", "true"))
    resp = await self._request(
        "GET", _log_path(ns, pod), query=query, timeout=self.stream_timeout(read_timeout)
    )
    try:
        async for chunk in resp.content.iter_any():
            yield chunk
    finally:
        resp.close()


# -- watches ---------------------------------------------------------------------------------


async def watch_objects(
    self: AsyncTFJobHook,
    kind: str,
    namespace: str | None,
    resource_version: str | None = None,
    label_selector: str | None = None,
    field_selector: str | None = None,
    timeout_seconds: int = 300,
    allow_bookmarks: bool = True,
) -> AsyncIterator[tuple[str, dict]]:
    """One watch request: yields (type, object) until the server ends the stream.

    BOOKMARK events are yielded too (their object carries only the resourceVersion to resume from).
    An ERROR event raises WatchExpired for 410 (relist) or WatchError otherwise.
    Events are split from raw chunks, so an object of any size passes.
    `namespace` None is the connection's namespace.
    """
    query: list[tuple[str, Any]] = [("watch", "true"), ("timeoutSeconds", timeout_seconds)]
    if resource_version:
        query.append(("resourceVersion", resource_version))
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    if allow_bookmarks:
        query.append(("allowWatchBookmarks", "true"))
    try:
        resp = await self._request(
            "GET",
            COLLECTIONS[kind].format(namespace=await self._ns(namespace)),
            query=query,
            timeout=self.stream_timeout(timeout_seconds + 30),
        )
    except AsyncApiException as exc:
        status = status_of(exc)
        cls = WatchExpired if exc.status == 410 else WatchError
        raise cls(exc.status or 0, status.get("reason", ""), status.get("message", str(exc))) from exc
    try:
        async for line in iter_lines(resp.content.iter_any()):
            if not line.strip():
                continue
            event = json.loads(line)
            etype = event.get("type", "")
            obj = event.get("object") or {}
            if etype == "ERROR":
                code = int(obj.get("code") or 0)
                cls = WatchExpired if code == 410 else WatchError
                raise cls(code, str(obj.get("reason", "")), str(obj.get("message", "")))
            yield etype, obj
    finally:
        resp.close()


# The named watches only choose the collection and selector; watch_objects does the rest (they stay
# lazy: nothing is sent until the caller iterates).


def watch_job(
    self: AsyncTFJobHook,
    kind: JobKind | str,
    name: str,
    namespace: str | None = None,
    resource_version: str | None = None,
    timeout_seconds: int = 300,
) -> AsyncIterator[tuple[str, dict]]:
    return self.watch_objects(
        as_kind(kind).plural,
        namespace,
        resource_version,
        field_selector=f"metadata.name={name}",
        timeout_seconds=timeout_seconds,
    )


def watch_jobs(
    self: AsyncTFJobHook,
    kind: JobKind | str,
    namespace: str | None = None,
    resource_version: str | None = None,
    label_selector: str | None = None,
    timeout_seconds: int = 300,
) -> AsyncIterator[tuple[str, dict]]:
    return self.watch_objects(
        as_kind(kind).plural, namespace, resource_version, label_selector, timeout_seconds=timeout_seconds
    )


def watch_tfjob(
    self: AsyncTFJobHook,
    name: str,
    namespace: str | None = None,
    resource_version: str | None = None,
    timeout_seconds: int = 300,
) -> AsyncIterator[tuple[str, dict]]:
    return watch_job(self, TFJOB, name, namespace, resource_version, timeout_seconds)


def watch_tfjobs(
    self: AsyncTFJobHook,
    namespace: str | None = None,
    resource_version: str | None = None,
    label_selector: str | None = None,
    timeout_seconds: int = 300,
) -> AsyncIterator[tuple[str, dict]]:
    return watch_jobs(self, TFJOB, namespace, resource_version, label_selector, timeout_seconds)


def watch_job_pods(
    self: AsyncTFJobHook,
    name: str,
    namespace: str | None = None,
    resource_version: str | None = None,
    timeout_seconds: int = 300,
    kind: JobKind | str = "TFJob",
) -> AsyncIterator[tuple[str, dict]]:
    return self.watch_objects(
        "pods",
        namespace,
        resource_version,
        label_selector=job_pod_selector(name, kind=as_kind(kind)),
        timeout_seconds=timeout_seconds,
    )


async def watch_events(
    self: AsyncTFJobHook,
    namespace: str | None = None,
    resource_version: str | None = None,
    involved_name: str | None = None,
    timeout_seconds: int = 300,
) -> AsyncIterator[tuple[str, dict]]:
    async for etype, ev in self.watch_objects(
        "events",
        namespace,
        resource_version,
        field_selector=events_field_selector(involved_name, None),
        timeout_seconds=timeout_seconds,
    ):
        if etype == "BOOKMARK" or filter_events([ev], involved_name, None):
            yield etype, ev
