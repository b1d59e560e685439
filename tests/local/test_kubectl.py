"""kubectl 1.32 against the local cluster: get, get -w, describe, logs and delete of tfjobs and pods."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubectl_support import KUBECTL, needs_kubectl, run_kubectl

from airflow_tfjob.local import LocalCluster

pytestmark = needs_kubectl


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(controller=False, runner=False) as c:
        yield c


def kubectl(cluster: LocalCluster, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return run_kubectl(cluster, *args, timeout=timeout)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def seed_job_and_pod(cluster: LocalCluster, name: str) -> None:
    def seed() -> Any:
        store = cluster.store
        job = store.create("tfjobs", "default", {
            "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": name},
            "spec": {"tfReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [
                {"name": "tensorflow", "image": "tf:2"}]}}}}}})
        store.create("pods", "default", {"metadata": {"name": f"{name}-worker-0", "labels": {"job": name}},
                                         "spec": {"containers": [{"name": "tensorflow", "image": "tf:2"}]}})
        run = cluster.podlogs.start_instance("default", f"{name}-worker-0", "tensorflow")
        run.append(b"epoch 1 loss=0.5")
        run.append(b"epoch 2 loss=0.3")
        return job

    cluster.call(seed)


def test_get_describe_logs_delete(cluster: LocalCluster, tmp_path: Path) -> None:
    name = f"kc-{uuid.uuid4().hex[:6]}"
    seed_job_and_pod(cluster, name)
    jobs = ok(kubectl(cluster, "get", "tfjobs"))
    assert jobs.splitlines()[0].split() == ["NAME", "STATE", "AGE"] and name in jobs
    pods = ok(kubectl(cluster, "get", "pods", "-l", f"job={name}")).splitlines()
    assert pods[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert pods[1].split()[:4] == [f"{name}-worker-0", "0/1", "Pending", "0"]
    assert f'"name": "{name}"' in ok(kubectl(cluster, "get", "tfjob", name, "-o", "json"))
    assert "Pending" in ok(kubectl(cluster, "get", "pod", f"{name}-worker-0", "-o", "jsonpath={.status.phase}"))
    described = ok(kubectl(cluster, "describe", "tfjob", name))
    assert f"Name:         {name}" in described and "Tf Replica Specs" in described
    described = ok(kubectl(cluster, "describe", "pod", f"{name}-worker-0"))
    assert "tensorflow:" in described and "Image:" in described
    assert ok(kubectl(cluster, "logs", f"{name}-worker-0")) == "epoch 1 loss=0.5\nepoch 2 loss=0.3\n"
    assert ok(kubectl(cluster, "logs", f"{name}-worker-0", "-c", "tensorflow", "--tail=1")) == "epoch 2 loss=0.3\n"
    stamped = ok(kubectl(cluster, "logs", f"{name}-worker-0", "--timestamps"))
    assert stamped.splitlines()[0].endswith("Z epoch 1 loss=0.5")
    missing = kubectl(cluster, "logs", "nope")
    assert missing.returncode != 0 and "not found" in missing.stderr
    assert "deleted" in ok(kubectl(cluster, "delete", "pod", f"{name}-worker-0"))
    assert "deleted" in ok(kubectl(cluster, "delete", "tfjob", name))
    gone = kubectl(cluster, "get", "tfjob", name)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


@pytest.mark.parametrize("resource", ["tfjobs", "pods"])
def test_get_watch_prints_changes(cluster: LocalCluster, resource: str) -> None:
    assert KUBECTL is not None
    name = f"kw-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig_path)}
    proc = subprocess.Popen([KUBECTL, "get", resource, "-w", "--output-watch-events", "--request-timeout=20s"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # kubectl lists first, then watches from that list's resourceVersion: wait until it is watching.
        deadline = time.monotonic() + 20
        while cluster.call(lambda: cluster.store.watcher_count(resource)) == 0:
            assert time.monotonic() < deadline, "kubectl never started watching"
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        seed_job_and_pod(cluster, name)
        target = name if resource == "tfjobs" else f"{name}-worker-0"
        assert proc.stdout is not None
        lines = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if target in line:
                break
        assert any(line.startswith("ADDED") and target in line for line in lines), lines
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
