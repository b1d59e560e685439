"""Shared fixtures: an isolated Airflow home and one local cluster per test session."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Airflow reads its configuration at import time: isolate it before anything imports airflow.
_AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="tfjob-test-airflow-"))
os.environ.setdefault("AIRFLOW_HOME", str(_AIRFLOW_HOME))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")


@pytest.fixture(scope="session")
def local_cluster() -> Iterator[Any]:
    """A LocalCluster (API server, controller, runner) shared by the whole session."""
    from airflow_tfjob.local import LocalCluster

    with LocalCluster() as cluster:
        yield cluster


@pytest.fixture
def k8s_conn(local_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """Points Airflow's `kubernetes_default` connection at the local cluster; returns the conn id."""
    extra = {"kube_config_path": str(local_cluster.kubeconfig_path), "namespace": "default"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps({"conn_type": "kubernetes", "extra": extra})
    )
    return "kubernetes_default"
