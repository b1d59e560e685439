"""Per-container log buffers: the runner writes lines, the API server's pods/log endpoint reads them.

Each container run (instance) has its own buffer so that `previous=true` can return the run before the
last restart, as the kubelet does. Lines are stored without their newline, stamped with the wall clock
in nanoseconds when the runner read them.
"""

from __future__ import annotations

import asyncio
import time


class ContainerLog:
    """The output of one container run."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, bytes]] = []
        self.closed = False
        # `follow=true` streams reading this run now (the pods/log endpoint counts itself in and out):
        # tests hold a replica until a follow has reached it, as a kubelet's open log streams would show.
        self.followers = 0
        self._changed = asyncio.Event()

    def append(self, line: bytes) -> None:
        self.entries.append((time.time_ns(), line))
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        # Waiters re-check their condition; a fresh Event avoids a lost wake-up between clear and wait.
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_beyond(self, n: int) -> None:
        """Wait until there are more than `n` entries or the run has ended."""
        while len(self.entries) <= n and not self.closed:
            await self._changed.wait()


class PodLogs:
    """Registry of container runs, keyed by (namespace, pod, container)."""

    def __init__(self) -> None:
        self._runs: dict[tuple[str, str, str], list[ContainerLog]] = {}

    def start_instance(self, namespace: str, pod: str, container: str) -> ContainerLog:
        log = ContainerLog()
        runs = self._runs.setdefault((namespace, pod, container), [])
        runs.append(log)
        del runs[:-2]  # the kubelet keeps the current and the previous run only
        return log

    def current(self, namespace: str, pod: str, container: str) -> ContainerLog | None:
        runs = self._runs.get((namespace, pod, container))
        return runs[-1] if runs else None

    def previous(self, namespace: str, pod: str, container: str) -> ContainerLog | None:
        runs = self._runs.get((namespace, pod, container))
        return runs[-2] if runs and len(runs) > 1 else None

    def runs(self) -> list[tuple[str, str, str]]:
        """(namespace, pod, container) of every container with a log kept."""
        return list(self._runs)

    def forget_pod(self, namespace: str, pod: str) -> None:
        for key in [k for k in self._runs if k[0] == namespace and k[1] == pod]:
            del self._runs[key]
