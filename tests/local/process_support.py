"""Process checks shared by the local cluster's tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def alive(pid: int) -> bool:
    """True while `pid` is a live process; a zombie (exited, not yet reaped) counts as dead."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def start_serve(*args: str) -> tuple[subprocess.Popen[str], str, Path]:
    """`tfjob-local serve ARGS` as a subprocess, once it printed its ready line: (process, url, kubeconfig)."""
    proc = subprocess.Popen([sys.executable, "-m", "airflow_tfjob.local.cli", "serve", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the server is ready (or the process died)
    assert line.startswith("ready "), (line, proc.stderr.read() if proc.stderr else "")
    _, url, kubeconfig = line.split()
    return proc, url, Path(kubeconfig)


def stop_serve(proc: subprocess.Popen[str], sig: int) -> tuple[int, str]:
    """Send `sig`, wait for the exit; (exit code, what it printed on stdout after the ready line)."""
    proc.send_signal(sig)
    code = proc.wait(timeout=30)
    rest = proc.stdout.read() if proc.stdout else ""
    for stream in (proc.stdout, proc.stderr):
        if stream:
            stream.close()
    return code, rest
