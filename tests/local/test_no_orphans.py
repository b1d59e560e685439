"""No replica process, nor any process a replica started, outlives `tfjob-local serve`, whether it is
stopped (SIGTERM, SIGINT) or killed (SIGKILL: the runner's watchdog kills the process groups)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from process_support import alive
from waiting import until

SERVE = str(Path(sys.executable).with_name("tfjob-local"))


@contextlib.contextmanager
def serve(tmp: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = subprocess.Popen(
        [SERVE, "serve", "--workdir", str(tmp / "cluster")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "tfjob-local serve did not print its ready line"
        line = proc.stdout.readline().split()
        assert line[0] == "ready", line
        yield proc, line[2]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def create_job(kubeconfig: str, name: str, script: str, workers: int, ps: int) -> None:
    from kubernetes import client, config

    api = client.CustomObjectsApi(config.new_client_from_config(config_file=kubeconfig))

    def rep(n: int) -> dict[str, object]:
        container = {"name": "tensorflow", "image": "python:3.11", "command": [sys.executable, "-c", script]}
        return {"replicas": n, "template": {"spec": {"containers": [container]}}}

    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {"tfReplicaSpecs": {"Worker": rep(workers), "PS": rep(ps)}},
    }
    api.create_namespaced_custom_object("kubeflow.org", "v1", "default", "tfjobs", body)


def replica_script(pid_dir: Path, grandchild: bool) -> str:
    spawn = (
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)']).pid"
        if grandchild
        else "None"
    )
    return (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"  # the runner must escalate to SIGKILL
        f"child = {spawn}\n"
        f"pids = [os.getpid()] + ([child] if child else [])\n"
        f"open(os.path.join({str(pid_dir)!r}, os.environ['HOSTNAME']), 'w').write(' '.join(map(str, pids)))\n"
        "time.sleep(3600)\n"
    )


def _pids(pid_dir: Path, expected_files: int) -> list[int]:
    until(lambda: len([p for p in pid_dir.iterdir() if p.read_text()]) == expected_files, "replicas", 60)
    return [int(x) for f in pid_dir.iterdir() for x in f.read_text().split()]


def _cleanup(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_sigint_stops_every_replica_and_its_children(tmp_path: Path, sig: signal.Signals) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    pids: list[int] = []
    try:
        with serve(tmp_path) as (proc, kubeconfig):
            create_job(kubeconfig, "orphans", replica_script(pid_dir, grandchild=True), workers=2, ps=1)
            pids = _pids(pid_dir, 3)
            assert len(pids) == 6 and all(alive(p) for p in pids)
            proc.send_signal(sig)
            assert proc.wait(timeout=60) == 0
        survivors = [p for p in pids if alive(p)]
        assert survivors == []  # checked right after the server exited: nothing waited for them to die
    finally:
        _cleanup(pids)


def test_sigkill_of_the_server_takes_the_replicas_and_their_children_along(tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    pids: list[int] = []
    try:
        with serve(tmp_path) as (proc, kubeconfig):
            create_job(kubeconfig, "killed", replica_script(pid_dir, grandchild=True), workers=2, ps=1)
            pids = _pids(pid_dir, 3)
            assert len(pids) == 6 and all(alive(p) for p in pids)
            proc.kill()
            proc.wait(timeout=30)
        until(lambda: not any(alive(p) for p in pids), "replicas to die with the server", 10)
    finally:
        _cleanup(pids)


def test_leaving_local_cluster_mid_job_stops_every_replica_and_its_children(tmp_path: Path) -> None:
    from airflow_tfjob.local import LocalCluster

    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    pids: list[int] = []
    try:
        with LocalCluster(workdir=tmp_path / "cluster") as cluster:
            script = replica_script(pid_dir, grandchild=True)
            create_job(str(cluster.kubeconfig_path), "in-process", script, workers=2, ps=1)
            pids = _pids(pid_dir, 3)
            assert len(pids) == 6 and all(alive(p) for p in pids)
        survivors = [p for p in pids if alive(p)]
        assert survivors == []  # checked right after the context exited: nothing waited for them to die
    finally:
        _cleanup(pids)
