"""The local cluster's import contracts (`local-*` in pyproject.toml, run by `make lint`) bite: on a scratch
copy of the package with one back-pointing import added, lint-imports reports that very import. The
imports added are the circles and the upward arrow issue 36 removed, so none of them can come back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
LOCAL_CONTRACTS = ("local-layers", "local-acyclic", "local-store", "local-node", "local-controllers",
                   "local-v1-kinds", "local-kueue")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package and the contracts (with the custom contract type they name), importable from
    its own root, so that the tree the other tests run is never touched."""
    root = tmp_path_factory.mktemp("local-walls")
    shutil.copytree(ROOT / "airflow_tfjob", root / "airflow_tfjob", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "house_contracts.py", root / "tests" / "house_contracts.py")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def broken_by(root: Path, module: str, line: str) -> str:
    """lint-imports' report on the local contracts with `line` added to `module` (a path under
    airflow_tfjob/local), which is put back afterwards."""
    path = root / "airflow_tfjob" / "local" / module
    original = path.read_text()
    anchor = "from __future__ import annotations\n"
    assert anchor in original
    path.write_text(original.replace(anchor, anchor + line + "  # noqa\n", 1))
    # A wide terminal, so that no module path in the report is wrapped.
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "400"}
    contracts = [arg for contract in LOCAL_CONTRACTS for arg in ("--contract", contract)]
    try:
        done = subprocess.run([str(LINT_IMPORTS), "--no-cache", *contracts], cwd=root, env=env,
                              capture_output=True, text=True, timeout=300)
    finally:
        path.write_text(original)
    assert done.returncode != 0, done.stdout + done.stderr
    return done.stdout


def test_a_watcher_pointing_back_at_the_store_core_is_a_circle(scratch: Path) -> None:
    report = broken_by(scratch, "store/watchers.py", "from airflow_tfjob.local.store.core import Store")
    assert "No cycles are allowed in airflow_tfjob.local.store" in report
    assert "airflow_tfjob.local.store.watchers -> airflow_tfjob.local.store.core" in report


def test_a_pod_run_pointing_back_at_its_runner_breaks_the_node_order(scratch: Path) -> None:
    report = broken_by(scratch, "node/podrun.py", "from airflow_tfjob.local.node.runner import Runner")
    assert "airflow_tfjob.local.node.podrun -> airflow_tfjob.local.node.runner" in report


def test_the_admission_importing_a_controller_breaks_the_layers(scratch: Path) -> None:
    report = broken_by(scratch, "admission/trainjobs.py",
                       "from airflow_tfjob.local.controllers.trainjob import controller")
    assert "airflow_tfjob.local.admission.trainjobs -> airflow_tfjob.local.controllers.trainjob.controller" in report


def test_one_kind_importing_another_breaks_the_v1_order(scratch: Path) -> None:
    report = broken_by(scratch, "controllers/v1/paddle.py", "from airflow_tfjob.local.controllers.v1 import pytorch")
    assert "airflow_tfjob.local.controllers.v1.paddle -> airflow_tfjob.local.controllers.v1.pytorch" in report


def test_the_store_importing_the_api_server_breaks_the_layers(scratch: Path) -> None:
    report = broken_by(scratch, "store/events.py", "from airflow_tfjob.local.apiserver import request")
    assert "airflow_tfjob.local.store.events -> airflow_tfjob.local.apiserver.request" in report
