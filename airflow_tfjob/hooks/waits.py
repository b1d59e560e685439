"""asyncio helpers the watches, the shared tasks and the follow core need on every supported Python.

Shared tasks: Airflow's triggerer writes a log call to the log of the trigger whose task made it (its
``run_trigger`` binds ``trigger_id`` as a structlog context variable, and a task created inside a
trigger's task inherits a copy of that context). Work that serves every trigger of a loop (a
namespace's shared watch, its log position book, the client pool's keeper) must not inherit the
context of whichever trigger happened to start it: its own log lines would land in that trigger's task
log, or, once that trigger has finished, in the triggerer's own log. :func:`shared_task` starts such
work in an empty context, so what it logs goes to the triggerer's log.

``asyncio.wait_for`` before Python 3.12 loses a cancellation that arrives in the same loop iteration as
the awaited result (CPython gh-86296): the caller gets the result and runs on. In a trigger that means
the triggerer's cancel of a run (a user's kill, a triggerer shutdown) is ignored whenever the watch
delivers a change at that moment, and the follow continues until the job ends.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def shared_task(
    coro: Coroutine[Any, Any, T], *, name: str, loop: asyncio.AbstractEventLoop | None = None
) -> asyncio.Task[T]:
    """A task serving every trigger of the loop (default: the running one), in a context of its own
    (see the module's docstring), not in the context of the trigger whose call started it."""
    return (loop or asyncio.get_running_loop()).create_task(coro, name=name, context=contextvars.Context())


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
