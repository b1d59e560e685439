"""The async hooks' shared API clients: one per (cluster configuration, running loop), kept authenticated.

A kubernetes_asyncio ApiClient owns an aiohttp session bound to the loop that created it and costs
about 0.8 MB, so hooks with the same configuration share one per running loop. Because it lives long
(a triggerer runs for days), its credentials must not go stale:

- exec-plugin tokens (EKS, GKE, AKS kubeconfigs) are fetched again before they expire:
  kubernetes_asyncio fetches one when the configuration is loaded and never again, so
  :class:`~airflow_tfjob.hooks.exec_auth.ExecTokenRefresher` is installed as the configuration's
  refresh hook;
- token files (in-cluster service accounts) are re-read by the client's own refresh hook;
- a 401 anyway (a token revoked early, a clock skew) retires the client: the next request builds a
  new one from the configuration, and requests already streaming on the old one finish undisturbed.

A loop also bounds its plain (non-streaming) requests in flight (:func:`request_slot`): a triggerer
that starts thousands of triggers at once would otherwise open a connection per request, whose buffers
stay idle in the pool for aiohttp's keep-alive and leave the allocator's arenas fragmented for good.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Hashable

from kubernetes_asyncio import client as async_client

from airflow_tfjob.hooks.waits import shared_task

#: Plain requests one event loop has in flight at most (streams are not counted: each holds its own
#: connection as long as it reads). Enough to keep an API server busy; queued requests wait their turn.
PLAIN_REQUESTS_IN_FLIGHT = 32


class _LoopClients:
    """The shared clients of one event loop, and the task that closes them when the loop shuts down.

    `asyncio.run` (and pytest-asyncio, and the triggerer on exit) cancel the tasks left at the end: the
    keeper task's `finally` then closes the aiohttp sessions inside the loop that owns them.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.clients: dict[Hashable, async_client.ApiClient] = {}
        # Clients replaced after a 401: streams opened on them may still be reading; closed at the end.
        self.retired: list[async_client.ApiClient] = []
        self.locks: dict[Hashable, asyncio.Lock] = {}
        self.plain = asyncio.Semaphore(PLAIN_REQUESTS_IN_FLIGHT)
        self.loop = loop
        self.keeper = shared_task(self._keep(), name="tfjob-hook-client-keeper", loop=loop)

    async def _keep(self) -> None:
        try:
            await asyncio.get_running_loop().create_future()
        finally:
            _SHARED.pop(self.loop, None)
            await self.close_all()

    async def close_all(self) -> None:
        for api in [*self.clients.values(), *self.retired]:
            with contextlib.suppress(Exception):
                await api.close()
        self.clients.clear()
        self.retired.clear()


_SHARED: dict[asyncio.AbstractEventLoop, _LoopClients] = {}


def _entry() -> _LoopClients:
    loop = asyncio.get_running_loop()
    entry = _SHARED.get(loop)
    if entry is None:
        entry = _SHARED[loop] = _LoopClients(loop)
    return entry


async def shared_client(
    key: Hashable, build: Callable[[], Awaitable[async_client.ApiClient]]
) -> async_client.ApiClient:
    """The running loop's client for `key`, built once by `build`; callers never close it."""
    entry = _entry()
    api = entry.clients.get(key)
    if api is not None:
        return api
    async with entry.locks.setdefault(key, asyncio.Lock()):
        api = entry.clients.get(key)
        if api is None:
            api = entry.clients[key] = await build()
    return api


def request_slot() -> asyncio.Semaphore:
    """The running loop's bound on plain requests in flight: hold it from sending to the answer's end."""
    return _entry().plain


async def retire_client(key: Hashable, api: async_client.ApiClient) -> None:
    """Stop handing out `api` for `key` (it met a 401); the next request builds a new client.

    Only the client that failed is retired: when many requests meet the same 401 at once, the first
    one replaces it and the others simply use the replacement.
    """
    entry = _entry()
    async with entry.locks.setdefault(key, asyncio.Lock()):
        if entry.clients.get(key) is api:
            del entry.clients[key]
            entry.retired.append(api)


async def close_shared_clients() -> None:
    """Close the running loop's shared clients now (they are otherwise closed when the loop ends)."""
    entry = _SHARED.pop(asyncio.get_running_loop(), None)
    if entry is None:
        return
    entry.keeper.cancel()
    await entry.close_all()
