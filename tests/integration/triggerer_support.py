"""A real `airflow triggerer` for the integration tests: an Airflow home with a SQLite metadata DB and
one DAG file, migrated and parsed, and the triggerer process started, stopped or killed in it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from airflow_database import migrate

from airflow_tfjob.local.node.ports import host_ports

AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def airflow_home(home: Path, dag_file: str, **settings: str) -> dict[str, str]:
    """The environment of an Airflow whose home is ``home`` and whose one DAG file is ``dag_file``, its
    DB migrated and the DAG parsed; ``settings`` (AIRFLOW__SECTION__KEY=value) add to the defaults."""
    dags = home / "dags"
    dags.mkdir()
    (dags / "dag.py").write_text(dag_file)
    env = dict(os.environ)
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
            # Its log server must not collide with another triggerer on this machine.
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(host_ports().reserve()),
            **settings,
        }
    )
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    migrate(env)
    done = subprocess.run([AIRFLOW, "dags", "reserialize"], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"airflow dags reserialize:\n{done.stderr[-3000:]}"
    return env


def start_triggerer(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("a") as log:
        # A session of its own: a SIGKILL goes to the supervisor and its trigger runner together.
        return subprocess.Popen(
            [AIRFLOW, "triggerer"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop_triggerer(triggerer: subprocess.Popen[bytes]) -> None:
    triggerer.terminate()
    try:
        triggerer.wait(timeout=30)
    except subprocess.TimeoutExpired:
        kill_triggerer(triggerer)


def kill_triggerer(triggerer: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(triggerer.pid, signal.SIGKILL)
    triggerer.wait(timeout=30)
