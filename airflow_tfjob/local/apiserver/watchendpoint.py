"""Watch streams: newline-delimited JSON events from a store watcher, with bookmarks (and the
initial-events-end bookmark of sendInitialEvents), timeoutSeconds, the 410 ERROR event for a
resourceVersion older than the history, and server-side tables for `kubectl get -w`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from aiohttp import web

from airflow_tfjob.local.admission import warnings
from airflow_tfjob.local.apiserver.request import (
    ENDS_EARLY,
    JSON_TYPE,
    OpenStreams,
    ResourcePath,
    end_stream,
    parse_bool,
    parse_int,
    status_body,
)
from airflow_tfjob.local.apiserver.requestmetrics import RequestMetrics
from airflow_tfjob.local.apiserver.tables import to_table, wants_table
from airflow_tfjob.local.model.resources import ApiError, JsonDict
from airflow_tfjob.local.store.core import Store
from airflow_tfjob.local.store.watchers import Entry

DEFAULT_WATCH_TIMEOUT = 1800.0


async def serve_watch(
    request: web.Request,
    p: ResourcePath,
    store: Store,
    metrics: RequestMetrics,
    streams: OpenStreams,
    bookmark_interval: float,
    out: Callable[[JsonDict], JsonDict] | None = None,
) -> web.StreamResponse:
    """`out` converts each object to the version the request named (None: the stored JSON as is)."""
    query = request.query
    timeout = parse_int(query, "timeoutSeconds")
    bookmarks = parse_bool(query, "allowWatchBookmarks")
    initial = parse_bool(query, "sendInitialEvents")
    field_selector = query.get("fieldSelector")
    if p.name is not None:  # /watch/namespaces/ns/pods/name
        field_selector = ",".join(x for x in (field_selector, f"metadata.name={p.name}") if x)
    rv = None if initial else query.get("resourceVersion")
    expired: ApiError | None = None
    watcher = None
    try:
        watcher = store.watch(p.info.plural, p.namespace, rv, label_selector=query.get("labelSelector"),
                                   field_selector=field_selector)
    except ApiError as exc:
        if exc.code != 410:
            raise
        expired = exc
    response = web.StreamResponse(status=200, headers={"Content-Type": JSON_TYPE, "Cache-Control": "no-cache, private"})
    for text in warnings.pending():  # e.g. a deprecated version's warning, before the stream starts
        response.headers.add("Warning", warnings.header_value(text))
    response.enable_chunked_encoding()
    try:
        await response.prepare(request)
    except ConnectionResetError:
        # The client left before the stream started (a cut connection, a cancelled request): nothing to
        # answer, and nothing worth a traceback in the server's log.
        if watcher is not None:
            watcher.close()
        return response
    except BaseException:
        if watcher is not None:
            watcher.close()  # unregister from the store
        raise
    if expired is not None or watcher is None:
        if expired is not None:
            await response.write(b'{"type":"ERROR","object":' + status_body(expired) + b"}\n")
        await response.write_eof()
        return response
    task = asyncio.current_task()
    if task is not None:
        streams.add(task)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (timeout if timeout is not None and timeout > 0 else DEFAULT_WATCH_TIMEOUT)
    if ENDS_EARLY in request:
        deadline = min(deadline, loop.time() + request[ENDS_EARLY])
    next_bookmark = loop.time() + bookmark_interval
    kind, api_version = p.info.kind, f"{p.info.group}/{p.version}" if p.info.group else p.version
    table = wants_table(request)
    include = query.get("includeObject")

    async def write(batch: list[tuple[str, Entry]]) -> None:
        if out is not None and not table and batch:
            await response.write(b"".join(
                json.dumps({"type": t, "object": out(e.obj)}).encode() + b"\n" for t, e in batch))
        elif not table:
            await _write_events(response, batch)
        elif batch:
            await response.write(b"".join(
                json.dumps({"type": t, "object": to_table(p.info, [e.obj], str(e.rv), include)}).encode() + b"\n"
                for t, e in batch
            ))

    metrics.watch_opened(p.info.plural)
    try:
        if initial:
            batch = await watcher.next_batch(0)
            await write(batch)
            await response.write(_bookmark(kind, api_version, watcher.bookmark_rv(), initial_end=True))
        while True:
            now = loop.time()
            if now >= deadline:
                if bookmarks:
                    await response.write(_bookmark(kind, api_version, watcher.bookmark_rv()))
                break
            wait = deadline - now
            if bookmarks:
                wait = min(wait, max(0.0, next_bookmark - now))
            batch = await watcher.next_batch(wait)
            if batch:
                await write(batch)
            elif watcher.closed:
                break
            if bookmarks and loop.time() >= next_bookmark:
                next_bookmark = loop.time() + bookmark_interval
                await response.write(_bookmark(kind, api_version, watcher.bookmark_rv()))
        await end_stream(request, response)
    except (ConnectionResetError, RuntimeError):
        pass  # the client went away
    finally:
        watcher.close()
        metrics.watch_closed(p.info.plural)
        if task is not None:
            streams.discard(task)
    return response


async def _write_events(response: web.StreamResponse, batch: list[tuple[str, Entry]]) -> None:
    if batch:
        await response.write(b"".join(
            b'{"type":"' + t.encode() + b'","object":' + e.json + b"}\n" for t, e in batch
        ))


def _bookmark(kind: str, api_version: str, rv: int, *, initial_end: bool = False) -> bytes:
    meta: JsonDict = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    obj = {"kind": kind, "apiVersion": api_version, "metadata": meta}
    return json.dumps({"type": "BOOKMARK", "object": obj}, separators=(",", ":")).encode() + b"\n"
