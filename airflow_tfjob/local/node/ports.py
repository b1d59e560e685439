"""Host ports for replicas: every replica of the local cluster runs on this host without cluster DNS,
so each (job, replica type, index) gets its own 127.0.0.1 port, kept for the life of the job and
re-learnt from the annotation on its objects after a controller restart."""

from __future__ import annotations

import socket
from collections.abc import Callable

ANNOTATION_HOST_PORT = "local.tfjob.dev/host-port"


def free_port() -> int:
    """A port the kernel considers free on 127.0.0.1 right now (the default allocator)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PortMap:
    """Host ports per (job uid, lower type, index), stable for the life of the job."""

    def __init__(self, allocator: Callable[[], int], used: set[int] | None = None) -> None:
        self._allocator = allocator
        self._by_job: dict[str, dict[tuple[str, int], int]] = {}
        # Shared by the controllers of all kinds, so that two kinds' replicas never get one port.
        self._used: set[int] = used if used is not None else set()

    def port(self, job_uid: str, rt: str, index: int) -> int:
        ports = self._by_job.setdefault(job_uid, {})
        port = ports.get((rt, index))
        if port is None:
            port = self._allocate()
            ports[(rt, index)] = port
        return port

    def adopt(self, job_uid: str, rt: str, index: int, port: int) -> None:
        """Re-learn a port recorded on an existing object (after a controller restart)."""
        ports = self._by_job.setdefault(job_uid, {})
        if (rt, index) not in ports:
            ports[(rt, index)] = port
            self._used.add(port)

    def forget(self, job_uid: str) -> None:
        for port in self._by_job.pop(job_uid, {}).values():
            self._used.discard(port)

    def known_jobs(self) -> set[str]:
        return set(self._by_job)

    def _allocate(self) -> int:
        for _ in range(100):
            port = self._allocator()
            if port not in self._used:
                self._used.add(port)
                return port
        raise RuntimeError("port allocator keeps returning ports already in use")
