"""Kill every replica process group when the cluster process dies, whatever signal killed it.

The parent-death signal (`setpriv --pdeathsig`) reaches only a replica's own process, not the processes
it started, and a cluster killed with SIGKILL runs no cleanup. So the runner starts one small watchdog
process, in its own session (a Ctrl-C or a signal to the cluster's process group does not reach it),
and tells it over a pipe which process groups it started and ended (``+<pgid>`` / ``-<pgid>`` lines).
The kernel closes the pipe when the cluster process dies, however it dies; the watchdog then sees
end-of-file, sends SIGKILL to each group still listed, and exits.

The runner tells the watchdog about a group only once `asyncio.create_subprocess_exec` has returned,
some event-loop turns after the process began to run: a cluster killed in between left that
container's children running (seen as a rare failure of tests/local/test_no_orphans.py on a loaded
machine). So every container's environment also carries the runner's mark (:data:`MARK_VARIABLE`), set
before the process exists, and the watchdog, after killing the groups, kills every process whose
initial environment (``/proc/<pid>/environ``) holds that mark, until none is left. That also finds a
process that left its group (``setsid``); only one started with an environment of its own (``env -i``)
escapes, as it would escape a real node's container only with a runtime bug.

Started by `ProcessGroups` as a child process running :func:`main`; `ProcessGroups` is the runner's side.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import IO

#: The environment variable that marks a container's processes as this runner's (value: the mark).
MARK_VARIABLE = "TFJOB_LOCAL_RUNNER"
#: How long the watchdog sweeps /proc for marked processes at the most (seconds). It sweeps until none
#: is left, not a number of times: a process dies only once the scheduler runs it after its SIGKILL,
#: and on a loaded machine fifty quick sweeps ended before a killed replica had (test_watchdog, CI).
KILL_WAIT = 10.0


class ProcessGroups:
    """The process groups the runner started and that may still have members, mirrored to the watchdog
    (started on first use, so clusters that run nothing start no watchdog)."""

    def __init__(self) -> None:
        self._groups: set[int] = set()
        self._proc: subprocess.Popen[bytes] | None = None
        self._mark = f"{os.getpid()}-{secrets.token_hex(8)}"

    def arm(self) -> dict[str, str]:
        """The environment entry for a container about to start (MARK_VARIABLE), the watchdog running
        by the time the container does: see the module's doc."""
        self._pipe()
        return {MARK_VARIABLE: self._mark}

    def _pipe(self) -> IO[bytes] | None:
        if self._proc is None:
            self._proc = subprocess.Popen(
                # This file as a script, isolated and without site (-I -S): it needs only the standard
                # library, so it runs within milliseconds. Importing it from the package pulled in the
                # whole local cluster first (aiohttp, the kubernetes client), seconds on a loaded
                # machine during which a SIGKILLed cluster's replicas outlived it. (Not `-m`: the package
                # imports this module, and runpy warns when it runs one twice.)
                [sys.executable, "-I", "-S", os.path.abspath(__file__), self._mark],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True,
            )
        return self._proc.stdin

    def _send(self, line: str) -> None:
        pipe = self._pipe()
        if pipe is not None:
            with contextlib.suppress(BrokenPipeError):  # a dead watchdog must not stop the runner
                pipe.write(line.encode())
                pipe.flush()

    def add(self, pgid: int) -> None:
        self._groups.add(pgid)
        self._send(f"+{pgid}\n")

    def discard(self, pgid: int) -> None:
        if pgid in self._groups:
            self._groups.discard(pgid)
            self._send(f"-{pgid}\n")

    def __iter__(self) -> Iterator[int]:
        return iter(list(self._groups))

    def __len__(self) -> int:
        return len(self._groups)

    def close(self) -> None:
        """Forget every group and let the watchdog exit (it kills any group still listed)."""
        self._groups.clear()
        proc, self._proc = self._proc, None
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=KILL_WAIT + 5)


def marked_processes(mark: str) -> list[int]:
    """The processes whose initial environment holds ``MARK_VARIABLE=mark`` (those this user may read)."""
    entry = f"{MARK_VARIABLE}={mark}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
        except OSError:  # gone, or another user's
            continue
        if entry in environ.split(b"\0"):
            found.append(int(name))
    return found


def kill_marked(mark: str, wait: float = KILL_WAIT) -> None:
    """SIGKILL every marked process, again until a sweep finds none (a zombie's environ reads empty, so
    an exited process no longer counts) or ``wait`` seconds have passed. Again, because a marked process
    may have forked just before its signal arrived."""
    end = time.monotonic() + wait
    while pids := marked_processes(mark):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() >= end:
            return
        time.sleep(0.01)


def main() -> int:
    # Signals meant for the cluster's terminal or process group are not for the watchdog: it ends when
    # the cluster does.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    mark = sys.argv[1] if len(sys.argv) > 1 else None
    groups: set[int] = set()
    for line in sys.stdin.buffer:
        op, value = line[:1], line[1:].strip()
        if not value.isdigit():
            continue
        if op == b"+":
            groups.add(int(value))
        elif op == b"-":
            groups.discard(int(value))
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    if mark:
        kill_marked(mark)
    return 0


if __name__ == "__main__":
    sys.exit(main())
