"""Shared fixtures: an isolated Airflow home and one local cluster per test session."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Each test's CPU time into the JUnit XML (scripts/test_times.py reads it).
pytest_plugins = ["cpu_times"]

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
#: lock and the development environment's distributions, the house's shape read from the source, the same
#: on every release), not the provider on an Airflow release: the
#: compatibility lane (scripts/compat.sh), whose venvs hold a release's pins and no development tools,
#: leaves them to `make test` with `-m "not tooling"`.
TOOLING_MODULES = frozenset(
    {
        "tests/unit/test_docs.py",
        "tests/unit/test_doc_snippets.py",
        "tests/unit/test_param_places.py",
        "tests/unit/test_architecture_doc.py",
        "tests/unit/test_import_contracts.py",
        "tests/unit/test_import_circles.py",
        "tests/unit/test_declared_imports.py",
        "tests/unit/test_lock.py",
        "tests/unit/test_venv_script.py",
        "tests/unit/test_test_times.py",
        "tests/unit/test_test_layout.py",
        "tests/unit/test_house.py",
        "tests/unit/test_lazy_imports.py",
        "tests/unit/test_api_blind_core.py",
    }
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "tooling: checks the repository's tools; `make test` runs it, the compat lane not")


#: Each module's time in a recent main stage (`python scripts/test_times.py weights build/test-times` after a
#: `make test` writes it again). A module it does not know yet is weighed by its markers: a whole DAG run,
#: a deployment or real training per test, a cluster's few seconds per test, a unit test's fraction.
MODULE_TIMES: dict[str, float] = json.loads((Path(__file__).with_name("module_times.json")).read_text())
HEAVY_MARKERS = frozenset({"e2e", "dags", "tensorflow", "pytorch", "xgboost"})
UNKNOWN_SECONDS = ((HEAVY_MARKERS, 60.0), (frozenset({"cluster"}), 3.0), (frozenset(), 0.3))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(str(config.rootpath))
    for item in items:
        if str(Path(str(item.path)).relative_to(root)) in TOOLING_MODULES:
            item.add_marker(pytest.mark.tooling)
    items[:] = longest_modules_first(items, root)


def longest_modules_first(items: list[pytest.Item], root: Path) -> list[pytest.Item]:
    """The items of the modules that took longest first, each module's items together and in their order.

    pytest-xdist's loadfile hands whole modules to its workers in this order (the Makefile turns off its
    own, by number of tests, which put the few-test modules that run whole DAGs, venvs or training
    last): the longest start at once and the short ones fill the end, so no worker is left with a long
    module after the others ran out of work (the main stage's makespan, not its work)."""
    weight: dict[Path, float] = {}
    first: dict[Path, int] = {}
    for index, item in enumerate(items):
        module = Path(str(item.path))
        first.setdefault(module, index)
        known = MODULE_TIMES.get(str(module.relative_to(root)))
        if known is not None:
            weight[module] = known
        else:
            names = {mark.name for mark in item.iter_markers()}
            per_test = next(seconds for markers, seconds in UNKNOWN_SECONDS if not markers or names & markers)
            weight[module] = weight.get(module, 0.0) + per_test
    order = {id(item): index for index, item in enumerate(items)}
    return sorted(
        items,
        key=lambda item: (-weight[Path(str(item.path))], first[Path(str(item.path))], order[id(item)]),
    )
