"""A migrated Airflow metadata database for a test's AIRFLOW_HOME, copied from one migrated once per run.

`airflow db migrate` costs 15-40 s on this 2-core machine even when there is nothing to migrate, and a
dozen test modules each set up an Airflow home of their own. The first to ask migrates a template (under
an exclusive lock, so that pytest-xdist's workers migrate it once between them); every home then gets a
copy of that file. What `db migrate` writes that depends on a home's settings is set in the copy the way
`db migrate` would have written it: the default pool's slots (``[core] default_pool_task_slot_count``).
The template is keyed on the Airflow release and lives under build/ (a clean clone starts without it).
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path

AIRFLOW = str(Path(sys.executable).parent / "airflow")
TEMPLATES = Path(__file__).resolve().parents[1] / "build" / "test-airflow-db"
DEFAULT_POOL_SLOTS = 128  # Airflow's default for [core] default_pool_task_slot_count


def _template(timeout: float) -> Path:
    directory = TEMPLATES / importlib.metadata.version("apache-airflow")
    directory.mkdir(parents=True, exist_ok=True)
    template = directory / "airflow.db"
    with (directory / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if template.exists():
            return template
        with tempfile.TemporaryDirectory(dir=directory) as home:
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")},
                "AIRFLOW_HOME": home,
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            }
            done = subprocess.run(
                [AIRFLOW, "db", "migrate"], env=env, capture_output=True, text=True, timeout=timeout
            )
            assert done.returncode == 0, f"airflow db migrate (the template):\n{done.stderr[-3000:]}"
            with closing(sqlite3.connect(Path(home) / "airflow.db")) as db:
                db.execute("DELETE FROM log")  # the migrate command's own audit row
                db.commit()
            shutil.copyfile(Path(home) / "airflow.db", directory / "airflow.db.part")
            os.replace(directory / "airflow.db.part", template)
    return template


def migrate(env: Mapping[str, str], timeout: float = 300) -> Path:
    """Give the SQLite database ``env`` points at (its SQL_ALCHEMY_CONN, else AIRFLOW_HOME/airflow.db)
    the state `airflow db migrate` would leave; returns its path."""
    conn = env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")
    if conn is None:
        path = Path(env["AIRFLOW_HOME"]) / "airflow.db"
    else:
        assert conn.startswith("sqlite:///"), f"only SQLite homes are copied from the template: {conn}"
        path = Path(conn.removeprefix("sqlite:///").partition("?")[0])
    assert not path.exists(), f"{path} exists already: a home is migrated once"
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_template(timeout), path)
    slots = int(env.get("AIRFLOW__CORE__DEFAULT_POOL_TASK_SLOT_COUNT", DEFAULT_POOL_SLOTS))
    with closing(sqlite3.connect(path)) as db:
        db.execute("UPDATE slot_pool SET slots = ? WHERE pool = 'default_pool'", (slots,))
        db.commit()
    return path
