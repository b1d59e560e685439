"""Host ports for replicas: every replica of the local cluster runs on this host without cluster DNS,
so each (job, replica type, index) gets its own port, kept for the life of the job and re-learnt from
the annotation on its objects after a controller restart.

A replica binds its port seconds after the port is chosen (its interpreter and TensorFlow or PyTorch
load first). Two things can take the port in between, and both did on a loaded test machine:
- the kernel, as the local end of any outgoing connection (a port from the ephemeral range, which is
  what binding port 0 returns): a parameter server then failed with "Failed to add port to server";
- another local cluster on the host, which chose the same free port before either replica bound it.
So ports come from below the ephemeral range (``net.ipv4.ip_local_port_range``), which the kernel never
hands to a connection, and each is reserved host-wide for as long as it is held: a byte-range lock at
offset ``port`` on one file per user (``fcntl.lockf``), which the kernel drops when the process dies, so
a killed cluster leaks no reservation.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import socket
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

ANNOTATION_HOST_PORT = "local.tfjob.dev/host-port"
#: How many ports below the ephemeral range are used (16,384: 16384-32767 with Linux's default range).
SPAN = 16384
#: The lowest port handed out, whatever the ephemeral range: below it lie well-known services.
FLOOR = 10000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def port_range(ephemeral: tuple[int, int] | None) -> tuple[int, int] | None:
    """The ports to choose from given the kernel's ephemeral range (None: unknown): the SPAN ports just
    below it, or just above it when too little room is left below; None when neither side has room."""
    if ephemeral is None:
        return None
    low, high = ephemeral
    if low - 1 - FLOOR >= 1024:
        return max(FLOOR, low - SPAN), low - 1
    if 65535 - high >= 1024:
        return high + 1, min(65535, high + SPAN)
    return None


def ephemeral_range(path: Path = _EPHEMERAL_RANGE) -> tuple[int, int] | None:
    try:
        low, high = (int(v) for v in path.read_text().split())
    except (OSError, ValueError):
        return None
    return low, high


def bindable(port: int) -> bool:
    """Whether a replica could bind ``port`` on every address now (no listener, no connection, no
    TIME_WAIT on it: without SO_REUSEADDR the kernel refuses all three)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


class HostPorts:
    """Ports reserved host-wide until released (or until this process ends); callable: reserve one.

    Thread-safe: the clusters of one process (a test worker runs several) share the instance from
    :func:`host_ports`, since the kernel's locks do not keep one process's reservations apart."""

    def __init__(self, lock_file: Path | None = None, choose_from: tuple[int, int] | None = None) -> None:
        """``choose_from``: the first and last port (default: from the kernel's ephemeral range, see
        :func:`port_range`); ``lock_file``: where reservations are kept (default: one per user in the
        temporary directory, so every cluster of this user on the host sees them)."""
        self._lock_file = lock_file or Path(tempfile.gettempdir()) / f"tfjob-local-ports-{os.getuid()}.lock"
        self._range = choose_from if choose_from is not None else port_range(ephemeral_range())
        self._held: set[int] = set()
        self._mutex = threading.Lock()
        self._fd: int | None = None
        self._random = random.Random()

    def __call__(self) -> int:
        return self.reserve()

    def reserve(self) -> int:
        with self._mutex:
            if self._range is None:  # no room outside the ephemeral range: what the kernel offers
                return self._kernel_port()
            first, last = self._range
            candidates = range(first, last + 1)
            for port in self._random.sample(candidates, min(len(candidates), 1000)):
                if port not in self._held and self._lock(port):
                    if bindable(port):
                        self._held.add(port)
                        return port
                    self._unlock(port)
        raise RuntimeError(f"no free port among {min(len(candidates), 1000)} tried in {first}-{last}")

    def claim(self, port: int) -> bool:
        """Hold ``port``, already chosen (a job's annotation read after a restart); False if another
        process holds it."""
        with self._mutex:
            if port in self._held:
                return True
            if not self._lock(port):
                return False
            self._held.add(port)
            return True

    def release(self, port: int) -> None:
        with self._mutex:
            if port in self._held:
                self._held.discard(port)
                self._unlock(port)

    def held(self) -> set[int]:
        with self._mutex:
            return set(self._held)

    def _kernel_port(self) -> int:
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", 0))
                port = int(sock.getsockname()[1])
            if port not in self._held:
                self._held.add(port)
                return port

    def _file(self) -> int:
        if self._fd is None:
            self._fd = os.open(self._lock_file, os.O_RDWR | os.O_CREAT, 0o600)
        return self._fd

    def _lock(self, port: int) -> bool:
        try:
            fcntl.lockf(self._file(), fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port)
        except OSError:  # held by another process
            return False
        return True

    def _unlock(self, port: int) -> None:
        if self._range is not None:
            with contextlib.suppress(OSError):
                fcntl.lockf(self._file(), fcntl.LOCK_UN, 1, port)


_HOST_PORTS: HostPorts | None = None
_HOST_PORTS_LOCK = threading.Lock()


def host_ports() -> HostPorts:
    """This process's reservations (one per process: see :class:`HostPorts`)."""
    global _HOST_PORTS
    with _HOST_PORTS_LOCK:
        if _HOST_PORTS is None:
            _HOST_PORTS = HostPorts()
        return _HOST_PORTS


class PortMap:
    """Host ports per (job uid, lower type, index), stable for the life of the job: reserved from
    ``allocator`` (host-wide when it is a :class:`HostPorts`) and released when the job is forgotten."""

    def __init__(self, allocator: Callable[[], int]) -> None:
        self._allocator = allocator
        # Host-wide reservations also keep the controllers of every kind apart (one HostPorts a process).
        self._host = allocator if isinstance(allocator, HostPorts) else None
        self._by_job: dict[str, dict[tuple[str, int], int]] = {}

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
            if self._host is not None:
                # Another process holding it (a second cluster) is not ours to resolve: the replica
                # keeps the port its objects record, as a real controller's would.
                self._host.claim(port)

    def forget(self, job_uid: str) -> None:
        for port in self._by_job.pop(job_uid, {}).values():
            if self._host is not None:
                self._host.release(port)

    def forget_all(self) -> None:
        """Release every job's ports: the cluster stops, and with it the replicas that bound them."""
        for job_uid in list(self._by_job):
            self.forget(job_uid)

    def known_jobs(self) -> set[str]:
        return set(self._by_job)

    def _allocate(self) -> int:
        used = {port for ports in self._by_job.values() for port in ports.values()}
        for _ in range(100):
            port = self._allocator()
            if port not in used:
                return port
        raise RuntimeError("port allocator keeps returning ports already in use")
