"""Waits on a condition, shared by the local cluster's tests: poll until the predicate holds, fail with
what was awaited once the timeout (a bound for a hung cluster, not a measured expectation) has passed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

POLL = 0.02


def until(predicate: Callable[[], object], what: str = "", timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(POLL)


async def until_async(predicate: Callable[[], object], what: str = "", timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await asyncio.sleep(POLL)


def written(write: Callable[[], object], what: str = "", timeout: float = 30.0) -> None:
    """Repeat a read-modify-write until the API server takes it: a 409 Conflict means a controller wrote
    the object in between (upstream's tests wrap such updates in Eventually for the same reason)."""
    from kubernetes.client.exceptions import ApiException

    def attempt() -> bool:
        try:
            write()
        except ApiException as exc:
            if exc.status != 409:
                raise
            return False
        return True

    until(attempt, what, timeout)
