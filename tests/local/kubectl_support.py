"""Running the kubectl on PATH (1.32 in CI) against a LocalCluster's kubeconfig."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from airflow_tfjob.local import LocalCluster

KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")


def run_kubectl(cluster: LocalCluster, *args: str, timeout: float = 30,
                cache_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`cache_dir`: kubectl's discovery and OpenAPI cache (default ~/.kube/cache, shared by every run)."""
    assert KUBECTL is not None
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig_path)}
    flags = [f"--cache-dir={cache_dir}"] if cache_dir is not None else []
    return subprocess.run([KUBECTL, *flags, *args], env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)
