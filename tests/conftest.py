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


#: Modules that check the repository and its development tools (the docs site, the import contracts, the
#: lock and the development environment's distributions), not the provider on an Airflow release: the
#: compatibility lane (scripts/compat.sh), whose venvs hold a release's pins and no development tools,
#: leaves them to `make test` with `-m "not tooling"`.
TOOLING_MODULES = frozenset(
    {
        "tests/unit/test_docs.py",
        "tests/unit/test_doc_snippets.py",
        "tests/unit/test_param_places.py",
        "tests/unit/test_architecture_doc.py",
        "tests/unit/test_import_contracts.py",
        "tests/unit/test_declared_imports.py",
        "tests/unit/test_lock.py",
        "tests/unit/test_venv_script.py",
        "tests/unit/test_test_times.py",
        "tests/unit/test_test_layout.py",
    }
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "tooling: checks the repository's tools; `make test` runs it, the compat lane not")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(str(config.rootpath))
    for item in items:
        if str(Path(str(item.path)).relative_to(root)) in TOOLING_MODULES:
            item.add_marker(pytest.mark.tooling)
