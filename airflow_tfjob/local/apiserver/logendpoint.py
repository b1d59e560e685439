"""The pods/log endpoint: container selection (and `previous`), tailLines, sinceSeconds/sinceTime,
limitBytes, timestamps, and `follow` streaming until the container's log closes."""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import datetime as dt
import re
import time
from collections.abc import Mapping

from aiohttp import web

from airflow_tfjob.local.apiserver.request import (
    ENDS_EARLY,
    OpenStreams,
    ResourcePath,
    end_stream,
    parse_bool,
    parse_int,
)
from airflow_tfjob.local.model.resources import ApiError, JsonDict, bad_request
from airflow_tfjob.local.node.podlogs import ContainerLog, PodLogs
from airflow_tfjob.local.store.core import Store


def format_log_time(ns: int) -> str:
    """Kubelet log timestamps: RFC3339 with exactly nine fractional digits, UTC."""
    seconds, frac = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{frac:09d}Z"


_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def parse_since_time(value: str) -> int:
    """sinceTime as whole seconds since the epoch (the API server drops the fraction)."""
    m = _RFC3339.match(value)
    if not m:
        raise bad_request(f'parsing time "{value}" as "2006-01-02T15:04:05Z07:00": cannot parse')
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    try:
        when = dt.datetime.fromisoformat(m.group(1) + zone)
    except ValueError:
        raise bad_request(f'parsing time "{value}": out of range') from None
    return int(when.timestamp())


def select_log(podlogs: PodLogs, pod: JsonDict, name: str, query: Mapping[str, str]) -> tuple[str, ContainerLog]:
    spec = pod.get("spec") or {}
    containers = [c.get("name") for c in spec.get("containers") or [] if isinstance(c, dict)]
    init = [c.get("name") for c in spec.get("initContainers") or [] if isinstance(c, dict)]
    container = query.get("container") or ""
    if not container:
        if len(containers) != 1:
            raise bad_request(
                f"a container name must be specified for pod {name}, choose one of: [{' '.join(map(str, containers))}]"
            )
        container = str(containers[0])
    elif container not in containers and container not in init:
        raise bad_request(f"container {container} is not valid for pod {name}")
    namespace = pod["metadata"]["namespace"]
    if parse_bool(query, "previous"):
        previous = podlogs.previous(namespace, name, container)
        if previous is None:
            raise bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
        return container, previous
    current = podlogs.current(namespace, name, container)
    if current is None:
        reason = "ContainerCreating"
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if isinstance(status, dict) and status.get("name") == container:
                reason = (status.get("state") or {}).get("waiting", {}).get("reason") or reason
        if (pod.get("status") or {}).get("phase") == "Pending" and not spec.get("nodeName"):
            reason = "ContainerCreating"
        raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
    return container, current


async def serve_pod_log(
    request: web.Request, p: ResourcePath, store: Store, podlogs: PodLogs, streams: OpenStreams
) -> web.StreamResponse:
    assert p.name is not None
    query = request.query
    pod = store.get_entry("pods", p.namespace, p.name).obj
    _, container_log = select_log(podlogs, pod, p.name, query)
    follow = parse_bool(query, "follow")
    timestamps = parse_bool(query, "timestamps")
    tail = parse_int(query, "tailLines")
    since_seconds = parse_int(query, "sinceSeconds")
    limit_bytes = parse_int(query, "limitBytes")
    since_time = query.get("sinceTime")
    if since_seconds is not None and since_time:
        raise bad_request("at most one of sinceTime or sinceSeconds may be specified")
    if since_seconds is not None and since_seconds < 1:
        raise ApiError(422, "Invalid", f"sinceSeconds: Invalid value: {since_seconds}: must be greater than 0")
    if tail is not None and tail < 0:
        raise ApiError(422, "Invalid", f"tailLines: Invalid value: {tail}: must be greater than or equal to 0")
    if limit_bytes is not None and limit_bytes < 1:
        raise ApiError(422, "Invalid", f"limitBytes: Invalid value: {limit_bytes}: must be greater than 0")
    start = 0
    entries = container_log.entries
    if since_time:
        cutoff = parse_since_time(since_time) * 1_000_000_000
        start = bisect.bisect_left(entries, cutoff, key=lambda e: e[0])
    elif since_seconds is not None:
        cutoff = time.time_ns() - since_seconds * 1_000_000_000
        start = bisect.bisect_left(entries, cutoff, key=lambda e: e[0])
    if tail is not None:
        start = max(start, len(entries) - tail)

    def render(chunk: list[tuple[int, bytes]]) -> bytes:
        if timestamps:
            return b"".join(format_log_time(ts).encode() + b" " + line + b"\n" for ts, line in chunk)
        return b"".join(line + b"\n" for _, line in chunk)

    if not follow:
        body = render(entries[start:])
        if limit_bytes is not None:
            body = body[:limit_bytes]
        return web.Response(body=body, content_type="text/plain", charset="utf-8")
    response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain; charset=utf-8"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    task = asyncio.current_task()
    if task is not None:
        streams.add(task)
    container_log.followers += 1
    sent = 0
    position = start
    loop = asyncio.get_running_loop()
    ends_at = loop.time() + request[ENDS_EARLY] if ENDS_EARLY in request else None
    try:
        while True:
            end = len(container_log.entries)
            if end > position:
                body = render(container_log.entries[position:end])
                position = end
                if limit_bytes is not None:
                    body = body[: max(0, limit_bytes - sent)]
                sent += len(body)
                if body:
                    await response.write(body)
                if limit_bytes is not None and sent >= limit_bytes:
                    break
                continue
            if container_log.closed:
                break
            if ends_at is None:
                await container_log.wait_beyond(position)
                continue
            left = ends_at - loop.time()
            if left <= 0:
                break  # a stream_end fault: ended properly while the container still runs
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(container_log.wait_beyond(position), left)
        await end_stream(request, response)
    except (ConnectionResetError, RuntimeError):
        pass
    finally:
        container_log.followers -= 1
        if task is not None:
            streams.discard(task)
    return response
