"""The real `airflow` CLI for the DAG tests: an AIRFLOW_HOME whose `kubernetes_default` connection is the
local cluster, `airflow dags test` runs in it, and what those runs stored in its SQLite database."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import warm_airflow
from airflow_database import migrate

AIRFLOW = str(Path(sys.executable).parent / "airflow")


def migrated_airflow_env(
    home: Path,
    dags_folder: Path,
    kubeconfig_path: Path | str,
    extra_env: Mapping[str, str] | None = None,
    migrate_timeout: float = 300,
    only_creates_runs: bool = False,
) -> dict[str, str]:
    """The environment of an Airflow with its own home and dags folder, its database migrated.

    ``only_creates_runs``: the default pool gets no slot, so that a scheduler run in it (to create
    asset-triggered runs) queues no task to its executor: that executor would run it against an
    execution API at the default address (localhost:8080), whatever listens there, retry for about
    12 s when nothing does, and leave the task queued for the next scheduler to reset and queue again.
    `airflow dags test` and `tasks test` run tasks without the pool. Its parallelism is 1 as well: the
    LocalExecutor forks that many workers when the scheduler starts and joins them all when it stops,
    32 copies of the scheduler by default, for an executor that never gets a task here.
    """
    extra = {"kube_config_path": str(kubeconfig_path), "namespace": "default"}
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps({"conn_type": "kubernetes", "extra": extra}),
        **(
            {"AIRFLOW__CORE__DEFAULT_POOL_TASK_SLOT_COUNT": "0", "AIRFLOW__CORE__PARALLELISM": "1"}
            if only_creates_runs
            else {}
        ),
        **(extra_env or {}),
        # The task processes `airflow dags test` starts must find this virtualenv's executables.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    migrate(env, migrate_timeout)
    return env


def dags_test(env: dict[str, str], dag_id: str, *args: str, timeout: float) -> str:
    """Runs `airflow dags test DAG_ID ARGS...`; returns its output (stdout then stderr), failing the
    test with the output's tail if the run failed."""
    returncode, output = run_cli([AIRFLOW, "dags", "test", dag_id, *args], env, timeout)
    assert returncode == 0, output[-8000:]
    return output


def run_cli(argv: list[str], env: Mapping[str, str], timeout: float) -> tuple[int, str]:
    """Runs an Airflow command in a process group of its own; (exit code, stdout then stderr).
    The process is a fork of a warm interpreter started with the same environment
    (tests/warm_airflow.py; `TFJOB_TEST_COLD_AIRFLOW=1`: a new process each time).

    A command still running after ``timeout`` seconds fails the test with every Python process of its
    group's stacks (SIGABRT with faulthandler on: each prints its threads' tracebacks to the shared
    stderr), so that a hang says where each process waited, then the group is SIGKILLed: no process of
    it outlives the test.
    """
    # Forked from a warm interpreter with the same environment (tests/warm_airflow.py): the command's own
    # session and streams, without Airflow's seconds of start-up each time.
    proc = warm_airflow.popen(argv, {**env, "PYTHONFAULTHANDLER": "1"})
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _signal_group(proc.pid, signal.SIGABRT)
        try:
            stdout, stderr = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
        _signal_group(proc.pid, signal.SIGKILL)
        raise AssertionError(
            f"`{' '.join(argv[1:3])}` ran past {timeout:.0f} s; its processes' stacks follow\n"
            f"{stdout[-4000:]}\n{stderr[-20000:]}"
        ) from None
    _signal_group(proc.pid, signal.SIGKILL)  # a child the command left behind (it exited already)
    return proc.returncode, stdout + stderr


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


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
    returncode, output = run_cli([AIRFLOW, *args], env, timeout)
    assert returncode == 0 or not check, output[-8000:]
    return output


def asset_triggered_runs(env: dict[str, str], dag_id: str) -> list[str]:
    with airflow_db(env) as db:
        rows = db.execute(
            "select run_id from dag_run where dag_id = ? and run_type = 'asset_triggered' order by id",
            (dag_id,),
        ).fetchall()
    return [run_id for (run_id,) in rows]


def run_asset_triggered(env: dict[str, str], dag_id: str, task_id: str, event_id: int) -> str:
    """The run Airflow's scheduler creates for `dag_id` from the queued asset events (one scheduler
    loop), checked to have consumed asset event `event_id`; then its task `task_id` runs in that run
    (`airflow tasks test`, which reads the run's triggering asset events). Returns the run's id; what
    the task returned is its XCom (`xcom_of`), not its printed output, which other threads' log lines
    may split.

    The DAG must be unpaused (`airflow dags unpause`) before the event, or the event queues nothing;
    the environment's default pool must have no slot (`migrated_airflow_env(only_creates_runs=True)`),
    so that the scheduler queues no task to an executor of its own.
    """
    before = asset_triggered_runs(env, dag_id)
    # One loop takes seconds; the bound is for a stall, which then fails with every process's stacks.
    airflow(env, "scheduler", "--num-runs", "1", "--skip-serve-logs", timeout=120)
    (run_id,) = [run for run in asset_triggered_runs(env, dag_id) if run not in before]
    with airflow_db(env) as db:
        consumed = db.execute(
            "select e.event_id from dagrun_asset_event e join dag_run r on r.id = e.dag_run_id where r.run_id = ?",
            (run_id,),
        ).fetchall()
        (queued,) = db.execute(
            "select count(*) from task_instance where run_id = ? and state = 'queued'", (run_id,)
        ).fetchone()
    assert (event_id,) in consumed, (event_id, consumed)
    assert queued == 0, "the scheduler queued a task: the default pool must have no slot"
    airflow(env, "tasks", "test", dag_id, task_id, run_id)
    return run_id


def xcom_of(env: dict[str, str], dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
    with airflow_db(env) as db:
        (raw,) = db.execute(
            "select value from xcom where dag_id = ? and run_id = ? and task_id = ? and key = ? and map_index = -1",
            (dag_id, run_id, task_id, key),
        ).fetchone()
    return xcom_value(raw)


def dag_test_run(env: dict[str, str], dag_id: str, task_id: str) -> tuple[dict[tuple[str, int], str], Any]:
    """After `airflow dags test` of ``dag_id`` (its one run): every task instance's state by (task id,
    map index), and what ``task_id`` returned."""
    with airflow_db(env) as db:
        states = db.execute("select task_id, map_index, state from task_instance where dag_id = ?", (dag_id,))
        by_task = {(task, index): state for task, index, state in states.fetchall()}
        (raw,) = db.execute(
            "select value from xcom where dag_id = ? and task_id = ? and key = 'return_value'", (dag_id, task_id)
        ).fetchone()
    return by_task, xcom_value(raw)


def last_asset_event(env: dict[str, str]) -> tuple[int, dict[str, Any], str]:
    """(id, extra, source_run_id) of the newest asset event."""
    with airflow_db(env) as db:
        event_id, extra, source_run = db.execute(
            "select id, extra, source_run_id from asset_event order by id desc limit 1"
        ).fetchone()
    return event_id, json.loads(extra), source_run
