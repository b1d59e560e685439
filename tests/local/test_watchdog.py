"""The runner's watchdog on its own: what it kills when its pipe to the cluster closes.

`ProcessGroups.close()` closes the pipe as the kernel does when the cluster process dies, and waits for
the watchdog to exit, which it does once no marked process is left. A killed process still passes
through its exit after its memory (and so its marking environment) is gone, so each check waits a
bounded time for death; it never waits for a process the watchdog spares.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from process_support import alive
from waiting import until

from airflow_tfjob.local.node.watchdog import MARK_VARIABLE, ProcessGroups

# A container's process that starts a child in its group, writes both pids and sleeps.
PARENT = (
    "import os, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'])\n"
    "open(sys.argv[1] + '.tmp', 'w').write(f'{os.getpid()} {child.pid}')\n"
    "os.replace(sys.argv[1] + '.tmp', sys.argv[1])\n"
    "time.sleep(3600)\n"
)


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def start(procs: list[subprocess.Popen[bytes]], pid_file: Path, env: dict[str, str]) -> list[int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(pid_file)], env={**os.environ, **env}, start_new_session=True
    )
    procs.append(proc)
    until(pid_file.exists, "the process and its child", 30)
    return [int(pid) for pid in pid_file.read_text().split()]


def test_a_marked_process_the_watchdog_was_never_told_of_dies_with_the_cluster(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    """The runner registers a group once the process already runs: a cluster killed in between must
    not leave that container's processes behind (test_no_orphans' SIGKILL case failed so, under load)."""
    groups = ProcessGroups()
    mark = groups.arm()
    assert list(mark) == [MARK_VARIABLE]
    registered = start(started, tmp_path / "registered", mark)
    groups.add(registered[0])
    unregistered = start(started, tmp_path / "unregistered", mark)
    # Another cluster's container (another mark) and a process of nobody's: not this watchdog's.
    other = start(started, tmp_path / "other", ProcessGroups().arm())
    unmarked = start(started, tmp_path / "unmarked", {})
    assert all(alive(pid) for pid in [*registered, *unregistered, *other, *unmarked])

    groups.close()
    until(lambda: not [pid for pid in [*registered, *unregistered] if alive(pid)], "the marked processes' death", 10)
    assert all(alive(pid) for pid in [*other, *unmarked])


def test_a_process_that_left_its_group_but_kept_its_environment_is_found(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    """`setsid` takes a process out of the group the watchdog kills; its environment still marks it."""
    groups = ProcessGroups()
    pids = start(started, tmp_path / "pids", groups.arm())
    groups.add(pids[0])
    escaped = tmp_path / "escaped"
    script = f"import os, time; open({str(escaped)!r}, 'w').write(str(os.getpid())); time.sleep(3600)"
    subprocess.Popen(["setsid", sys.executable, "-c", script], env={**os.environ, **groups.arm()})
    until(lambda: escaped.exists() and escaped.read_text(), "the process in a session of its own", 30)
    loner = int(escaped.read_text())
    try:
        assert os.getsid(loner) == loner
        groups.close()
        until(lambda: not alive(loner) and not any(alive(pid) for pid in pids), "the marked processes' death", 10)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(loner, signal.SIGKILL)
