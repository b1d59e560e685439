"""asyncio helpers the watches and the follow core need on every supported Python.

``asyncio.wait_for`` before Python 3.12 loses a cancellation that arrives in the same loop iteration as
the awaited result (CPython gh-86296): the caller gets the result and runs on. In a trigger that means
the triggerer's cancel of a run (a user's kill, a triggerer shutdown) is ignored whenever the watch
delivers a change at that moment, and the follow continues until the job ends.
"""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Whether `event` is set within `timeout` seconds; a cancellation always propagates."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        done, _ = await asyncio.wait({waiter}, timeout=timeout)
    finally:
        waiter.cancel()
    return bool(done)
