"""`tfjob-local serve` as a real subprocess: ready line, a working API, clean exit on SIGTERM/SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config
from process_support import start_serve, stop_serve


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_ready_line_and_stops_on_signal(tmp_path: Path, sig: signal.Signals) -> None:
    proc, url, kubeconfig = start_serve("--kubeconfig", str(tmp_path / "kc.yaml"), "--gpus", "0,1")
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
        code, rest = stop_serve(proc, sig)
    assert code == 0 and rest == ""  # exactly one line on stdout


def test_entry_point_script_exists() -> None:
    scripts = Path(sys.executable).parent
    assert (scripts / "tfjob-local").exists()
    out = subprocess.run([str(scripts / "tfjob-local"), "serve", "--help"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert "--kubeconfig" in out and "--gpus" in out


def test_serve_apis_trainjob_serves_trainjobs_and_no_tfjobs(tmp_path: Path) -> None:
    proc, _url, kubeconfig = start_serve("--kubeconfig", str(tmp_path / "kc.yaml"), "--apis", "trainjob",
                                         "--feature-gates", "TrainJobStatus=true")
    try:
        api = config.new_client_from_config(str(kubeconfig))
        groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
        assert "trainer.kubeflow.org" in groups and "kubeflow.org" not in groups
        api.close()
    finally:
        code, _ = stop_serve(proc, signal.SIGTERM)
    assert code == 0


@pytest.mark.parametrize(("args", "message"), [
    (["--apis", "tfjob"], "--apis: apis must be a non-empty list of v1, trainjob"),
    (["--feature-gates", "TrainJobStatus=yes"], "expected GATE=true|false with GATE one of TrainJobStatus"),
])
def test_serve_refuses_unknown_apis_and_gates(args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "airflow_tfjob.local.cli", "serve", *args], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr
