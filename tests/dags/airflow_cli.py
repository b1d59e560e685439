"""The real `airflow` CLI for the DAG tests: an AIRFLOW_HOME whose `kubernetes_default` connection is the
local cluster, `airflow dags test` runs in it, and what those runs stored in its SQLite database."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

AIRFLOW = str(Path(sys.executable).parent / "airflow")


def migrated_airflow_env(
    home: Path,
    dags_folder: Path,
    kubeconfig_path: Path | str,
    extra_env: Mapping[str, str] | None = None,
    migrate_timeout: float = 300,
) -> dict[str, str]:
    """The environment of an Airflow with its own home and dags folder, its database migrated."""
    extra = {"kube_config_path": str(kubeconfig_path), "namespace": "default"}
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps({"conn_type": "kubernetes", "extra": extra}),
        **(extra_env or {}),
        # The task processes `airflow dags test` starts must find this virtualenv's executables.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True, timeout=migrate_timeout)
    return env


def dags_test(env: dict[str, str], dag_id: str, *args: str, timeout: float) -> str:
    """Runs `airflow dags test DAG_ID ARGS...`; returns its output (stdout then stderr), failing the
    test with the output's tail if the run failed."""
    done = subprocess.run(
        [AIRFLOW, "dags", "test", dag_id, *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-8000:]
    return output


def airflow_db(env: dict[str, str]) -> sqlite3.Connection:
    return sqlite3.connect(Path(env["AIRFLOW_HOME"]) / "airflow.db")


def xcom_value(raw: Any) -> Any:
    """An XCom column value as the task returned it."""
    # The column holds JSON text, but SQLite's type affinity hands plain numbers back as numbers; a
    # value that is itself JSON text (a serialized dict or list) is decoded once more.
    value = json.loads(raw) if isinstance(raw, (str, bytes)) else raw
    return json.loads(value) if isinstance(value, str) and value[:1] in "{[" else value
