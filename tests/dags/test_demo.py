"""The demo's script (`make demo`, the first of the README's two commands) end to end, in the test
environment's venv: it passes and shows what it promises, and it leaves no process behind, whether it
runs to its end or a person presses Ctrl-C while the job trains.

A process is the demo's if its command line or environment names the run's temporary directory: the
cluster, Airflow and the warm-up import inherit the demo's environment, and the replicas' command lines
carry the data directory under it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.dags, pytest.mark.cluster, pytest.mark.tensorflow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
GONE_WITHIN_S = 15.0


# Execs the command given with SIGINT and SIGQUIT at their defaults, as a terminal's foreground command
# has them. A command started in the background of a non-interactive shell (`make test &`, a CI runner's
# script) inherits both ignored, and so did the demo under it: its bash cannot trap an ignored signal,
# Airflow never saw the Ctrl-C while the cluster, which sets its own handler, stopped, and the task
# then waited on a cluster that was gone.
AS_IN_A_TERMINAL = (
    "import os, signal, sys\n"
    "for sig in (signal.SIGINT, signal.SIGQUIT):\n"
    "    signal.signal(sig, signal.SIG_DFL)\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)


@contextlib.contextmanager
def demo(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """The demo's script running; whatever the test's outcome, nothing of it runs on afterwards."""
    # A fresh shell's environment: nothing of the test session's Airflow or cluster settings.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "TFJOB_", "KUBECONFIG"))}
    env.update(VENV=sys.prefix, TMPDIR=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-c", AS_IN_A_TERMINAL, str(ROOT / "scripts" / "demo.sh")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a terminal gives a command
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:  # the test failed: the cluster's watchdog takes the replicas along
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def demo_processes(tmp_path: Path) -> list[str]:
    """The live processes that belong to the demo run in `tmp_path`: "pid: command line"."""
    marker = str(tmp_path).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if state != "Z" and (marker in cmdline or marker in environ):
            command = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{entry.name}: {command[:200]}")
    return found


def assert_nothing_left(tmp_path: Path, output: str) -> None:
    deadline = time.monotonic() + GONE_WITHIN_S
    while (left := demo_processes(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"the demo left processes behind: {left}\n{output[-3000:]}"


def test_the_demo_trains_shows_both_workers_and_leaves_nothing_behind(tmp_path: Path) -> None:
    with demo(tmp_path) as proc:
        output, _ = proc.communicate(timeout=540)
    assert proc.returncode == 0, output[-5000:]
    assert "==> demo passed: test accuracy" in output
    for replica in ("[worker-0]", "[worker-1]"):
        assert f"{replica} epoch=5 " in output, output[-5000:]
    assert "==> final metrics" in output and "test_accuracy" in output
    assert_nothing_left(tmp_path, output)


def test_ctrl_c_while_the_job_trains_stops_everything(tmp_path: Path) -> None:
    with demo(tmp_path) as proc:
        assert proc.stdout is not None
        seen: list[str] = []
        for line in proc.stdout:
            seen.append(line)
            if "replica(s) in sync" in line:  # the job's replicas are up and training
                break
        else:
            pytest.fail("the demo ended before its replicas were in sync:\n" + "".join(seen[-100:]))
        assert demo_processes(tmp_path), "the demo's processes should be running here"
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends: to the whole foreground process group
        rest, _ = proc.communicate(timeout=120)
    output = "".join(seen) + rest
    assert proc.returncode != 0, output[-3000:]
    assert "==> demo finished in" in rest, output[-3000:]
    assert_nothing_left(tmp_path, output)
