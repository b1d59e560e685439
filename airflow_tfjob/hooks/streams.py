"""Reading the async hook's streams: followed logs and watches (layer (a) of ``airflow_tfjob.hooks.watching``).

Their requests are described in hooks/calls.py with the plain calls (:func:`~airflow_tfjob.hooks.calls.watch_request`,
:func:`~airflow_tfjob.hooks.calls.pod_log_request`); what is here has no plain twin: an answer read
chunk by chunk for as long as it flows, split into lines of any length, watch events and their errors.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from typing import TYPE_CHECKING

from kubernetes_asyncio.client.exceptions import ApiException as AsyncApiException

from airflow_tfjob.hooks.common import status_of
from airflow_tfjob.hooks.watching import WatchError, WatchExpired

if TYPE_CHECKING:
    import aiohttp


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


#: The most a log stream's reader takes at once: what the client buffered (up to twice its 2 MiB
#: read_bufsize) is handed on in pieces of this size, so the lines split from one piece stay few.
READ_CHUNK = 64 * 1024
#: Watch events handled before the reader lets the loop run other work (a relisting burst).
EVENTS_PER_TURN = 100


async def chunks(resp: aiohttp.ClientResponse) -> AsyncGenerator[bytes, None]:
    """The answer's body as it arrives, in pieces of at most READ_CHUNK bytes; the connection is closed
    when the reader stops (readers hold this generator in ``contextlib.aclosing`` so that stopping
    closes it at once, not when collected)."""
    try:
        async for chunk in resp.content.iter_chunked(READ_CHUNK):
            yield chunk
    finally:
        resp.close()


def _watch_error(code: int, reason: str, message: str) -> WatchError:
    # 410 Gone: the resourceVersion is too old to resume from; the caller lists again.
    return (WatchExpired if code == 410 else WatchError)(code, reason, message)


async def watch_events(
    opening: Awaitable[aiohttp.ClientResponse],
) -> AsyncGenerator[tuple[str, dict], None]:
    """(type, object) of each event of a watch until the server ends it.

    BOOKMARK events are yielded too (their object carries only the resourceVersion to resume from).
    A refused watch, or an ERROR event, raises WatchExpired for 410 (relist) or WatchError otherwise.
    Events are split from raw chunks, so an object of any size passes.
    """
    try:
        resp = await opening
    except AsyncApiException as exc:
        status = status_of(exc)
        raise _watch_error(
            exc.status or 0, status.get("reason", ""), status.get("message", str(exc))
        ) from exc
    try:
        handled = 0
        async for line in iter_lines(resp.content.iter_any()):
            if not line.strip():
                continue
            handled += 1
            if handled % EVENTS_PER_TURN == 0:
                # Events already buffered are handed out without a pause: let other tasks run.
                await asyncio.sleep(0)
            event = json.loads(line)
            obj = event.get("object") or {}
            if event.get("type") == "ERROR":
                code, reason, message = (
                    int(obj.get("code") or 0),
                    obj.get("reason", ""),
                    obj.get("message", ""),
                )
                raise _watch_error(code, str(reason), str(message))
            yield event.get("type", ""), obj
    finally:
        resp.close()
