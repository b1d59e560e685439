"""`tfjob-local serve` as a real subprocess: ready line, a working API, clean exit on SIGTERM/SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config


def start(*args: str) -> tuple[subprocess.Popen[str], str, Path]:
    proc = subprocess.Popen([sys.executable, "-m", "airflow_tfjob.local.cli", "serve", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the server is ready (or the process died)
    assert line.startswith("ready "), (line, proc.stderr.read() if proc.stderr else "")
    _, url, kubeconfig = line.split()
    return proc, url, Path(kubeconfig)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_ready_line_and_stops_on_signal(tmp_path: Path, sig: signal.Signals) -> None:
    proc, url, kubeconfig = start("--kubeconfig", str(tmp_path / "kc.yaml"), "--gpus", "0,1")
    try:
        assert kubeconfig == tmp_path / "kc.yaml" and url.startswith("http://127.0.0.1:")
        kc = yaml.safe_load(kubeconfig.read_text())
        assert kc["current-context"] == "tfjob-local"
        assert kc["contexts"][0]["context"]["namespace"] == "default"
        assert kc["clusters"][0]["cluster"]["server"] == url and kc["users"][0]["user"]["token"]
        api = config.new_client_from_config(str(kubeconfig))
        names = {n.metadata.name for n in client.CoreV1Api(api).list_namespace().items}
        assert {"default", "kubeflow"} <= names
        api.close()
    finally:
        proc.send_signal(sig)
        code = proc.wait(timeout=30)
        rest = proc.stdout.read() if proc.stdout else ""
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
    assert code == 0 and rest == ""  # exactly one line on stdout


def test_entry_point_script_exists() -> None:
    scripts = Path(sys.executable).parent
    assert (scripts / "tfjob-local").exists()
    out = subprocess.run([str(scripts / "tfjob-local"), "serve", "--help"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert "--kubeconfig" in out and "--gpus" in out
