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
    subprocess.run(
        [AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True, timeout=migrate_timeout
    )
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


def airflow(env: dict[str, str], *args: str, check: bool = True, timeout: float = 300) -> str:
    """Runs `airflow ARGS...`; returns its output, failing the test with its tail if it failed (check)."""
    done = subprocess.run([AIRFLOW, *args], env=env, capture_output=True, text=True, timeout=timeout)
    output = done.stdout + done.stderr
    assert done.returncode == 0 or not check, output[-8000:]
    return output


def asset_triggered_runs(env: dict[str, str], dag_id: str) -> list[str]:
    with airflow_db(env) as db:
        rows = db.execute(
            "select run_id from dag_run where dag_id = ? and run_type = 'asset_triggered' order by id",
            (dag_id,),
        ).fetchall()
    return [run_id for (run_id,) in rows]


def run_asset_triggered(env: dict[str, str], dag_id: str, task_id: str, event_id: int) -> tuple[str, str]:
    """The run Airflow's scheduler creates for `dag_id` from the queued asset events (one scheduler
    loop), checked to have consumed asset event `event_id`; then its task `task_id` runs in that run
    (`airflow tasks test`, which reads the run's triggering asset events). Returns (run_id, output).

    The DAG must be unpaused (`airflow dags unpause`) before the event, or the event queues nothing.
    """
    before = asset_triggered_runs(env, dag_id)
    airflow(env, "scheduler", "--num-runs", "1")
    (run_id,) = [run for run in asset_triggered_runs(env, dag_id) if run not in before]
    with airflow_db(env) as db:
        consumed = db.execute(
            "select e.event_id from dagrun_asset_event e join dag_run r on r.id = e.dag_run_id where r.run_id = ?",
            (run_id,),
        ).fetchall()
    assert (event_id,) in consumed, (event_id, consumed)
    return run_id, airflow(env, "tasks", "test", dag_id, task_id, run_id)


def last_asset_event(env: dict[str, str]) -> tuple[int, dict[str, Any], str]:
    """(id, extra, source_run_id) of the newest asset event."""
    with airflow_db(env) as db:
        event_id, extra, source_run = db.execute(
            "select id, extra, source_run_id from asset_event order by id desc limit 1"
        ).fetchone()
    return event_id, json.loads(extra), source_run
