"""Whole DAG runs with `airflow dags test` (a real task runner, in-process execution API, inline
triggers) against the local cluster: the synchronous operator, deferrable operator + sensor, a retry that
finds its job again, and secrets masked in the task log.

One DAG (dags/tfjob_runs_dag.py) holds the four as independent task groups and one `airflow dags test`
runs it for the module: an Airflow command costs seconds to start, here and again on every release of the
compatibility lane. Each test reads its own group: its tasks' states and XComs, and the lines logged
between Airflow's "[DAG TEST] starting task_id=..." and "end task" markers of its tasks (every try)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from airflow_cli import airflow, airflow_db, migrated_airflow_env, xcom_value

from airflow_tfjob.version_compat import AIRFLOW_V_3_1_PLUS, AIRFLOW_V_3_3_PLUS

pytestmark = [pytest.mark.dags, pytest.mark.cluster, pytest.mark.timeout(600)]

DAGS = Path(__file__).parent / "dags"
DAG_ID = "tfjob_runs"


@pytest.fixture(scope="module")
def airflow_env(local_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    home = tmp_path_factory.mktemp("airflow-home")
    yield migrated_airflow_env(home, DAGS, local_cluster.kubeconfig_path, migrate_timeout=180)


@pytest.fixture(scope="module")
def output(airflow_env: dict[str, str]) -> str:
    """The run's output. Not checked as a whole: a group that failed fails its own test, with its lines."""
    return airflow(airflow_env, "dags", "test", DAG_ID, check=False, timeout=540)


def task_states(env: dict[str, str], group: str) -> dict[str, str]:
    with airflow_db(env) as db:
        rows = db.execute(
            "select task_id, state from task_instance where dag_id = ? and task_id like ?",
            (DAG_ID, f"{group}.%"),
        ).fetchall()
    return {task_id.removeprefix(f"{group}."): state for task_id, state in rows}


def xcom(env: dict[str, str], task_id: str, key: str = "return_value") -> Any:
    with airflow_db(env) as db:
        row = db.execute(
            "select value from xcom where dag_id = ? and task_id = ? and key = ?", (DAG_ID, task_id, key)
        ).fetchone()
    assert row is not None, f"no XCom {key} for {DAG_ID}.{task_id}"
    return xcom_value(row[0])


#: A log line's timestamp, in each form Airflow 3.0 to 3.3 write in `dags test` output:
#: "2026-12-06T10:34:30.052301Z [info ...", "[2026-12-06T10:52:30.433+0000] {...}", "[2026-12-06 10:52:33,010] {...}".
STAMP = re.compile(r"^\[?(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d[.,]\d+)")


def _stamp(line: str) -> datetime | None:
    found = STAMP.match(line)
    return datetime.fromisoformat(found.group(1).replace(",", ".").replace(" ", "T")) if found else None


def group_lines(output: str, group: str) -> str:
    """The timestamped lines logged while a task of ``group`` ran (every try).

    `dags test` runs one task at a time and logs "[DAG TEST] starting task_id=..." as each begins (its
    "end task" line only on some paths of some releases), so a task ran from its marker's time to the
    next task's. From Airflow 3.1 the markers go to stderr and a task's own lines to stdout, so a task's
    lines are those stamped within its window, not those printed after its marker. A line without a stamp
    continues the stamped line before it: the follow logs the replica lines that arrived together as one
    record, stamped once (the more of them, the busier the machine: a loaded run once had a group's
    replica lines all in continuations, and the group "lost" them). Tests still look for a bare print in
    the whole output, where a task's stdout may put it.
    """
    starts: list[tuple[datetime, str]] = []
    for line in output.splitlines():
        marker = re.search(r"\[DAG TEST\] starting task_id=(\S+)", line)
        stamp = _stamp(line)
        if marker and stamp is not None:
            starts.append((stamp, marker.group(1)))
    starts.sort()
    windows = [
        (began, starts[i + 1][0] if i + 1 < len(starts) else datetime.max)
        for i, (began, task_id) in enumerate(starts)
        if task_id.startswith(f"{group}.")
    ]
    assert windows, f"no task of group {group} ran:\n{output[-8000:]}"
    kept = []
    inside = False
    for line in output.splitlines():
        stamp = _stamp(line)
        if stamp is not None:
            inside = any(began <= stamp < ended for began, ended in windows)
        if inside:
            kept.append(line)
    return "\n".join(kept)


def records(text: str) -> list[str]:
    """The log records in ``text``: each stamped line with the unstamped lines that continue it (a
    record's logger and source file are on its first line or its last, by the release's format)."""
    found: list[str] = []
    for line in text.splitlines():
        if _stamp(line) is not None or not found:
            found.append(line)
        else:
            found[-1] += "\n" + line
    return found


def test_a_groups_lines_include_the_continuations_of_its_records() -> None:
    """The follow logs replica lines that arrive together as one record, stamped on its first line: the
    group's lines and records keep them (under load most of a task's replica lines were continuations)."""
    output = "\n".join([
        "2026-12-06T14:21:07.100000Z [info     ] [DAG TEST] starting task_id=sync.train map_index=-1",
        "2026-12-06T14:21:08.000000Z [info     ] [worker-0] first",
        "[worker-1] args=['--config=conf.yaml'] [airflow.task.operators] loc=logs_parsing.py:429",
        "2026-12-06T14:21:09.000000Z [info     ] [DAG TEST] starting task_id=retry.train map_index=-1",
        "2026-12-06T14:21:10.000000Z [info     ] [worker-0] other group",
        "[worker-1] not sync's",
    ])  # fmt: skip
    sync = group_lines(output, "sync")
    assert "[worker-1] args=['--config=conf.yaml']" in sync and "not sync's" not in sync
    (record,) = [r for r in records(sync) if "args=" in r]
    assert record.startswith("2026-12-06T14:21:08") and record.endswith("loc=logs_parsing.py:429")


def test_sync_operator_dag(airflow_env: dict[str, str], output: str) -> None:
    output = group_lines(output, "sync")
    assert task_states(airflow_env, "sync") == {"train": "success"}, output[-8000:]
    result = xcom(airflow_env, "sync.train")
    assert result["state"] == "succeeded"
    assert result["replica_statuses"]["Worker"]["succeeded"] == 2
    assert float(result["metrics"]["accuracy"]) == 0.9
    # The replica logs reached the task log, and the .yaml argument stayed a plain string.
    assert "args=['--config=conf.yaml', '--run=manual__" in output


def test_deferrable_operator_and_sensor_dag(airflow_env: dict[str, str], output: str) -> None:
    whole, output = output, group_lines(output, "deferrable")
    assert task_states(airflow_env, "deferrable") == {
        "submit": "success",
        "wait": "success",
        "train": "success",
        "check": "success",
    }, output[-8000:]
    # Both deferrable tasks went through the trigger (defer, then resume), not a synchronous wait.
    assert "Waiting in the triggerer for TFJob default/sensed-" in output, output[-8000:]
    assert "Deferring while TFJob default/" in output, output[-8000:]
    result = xcom(airflow_env, "deferrable.train")
    assert result["state"] == "succeeded"
    # check's own print (a bare line on some releases): the line naming this group's job.
    assert f"CHECKED {result['name']} succeeded" in whole, whole[-8000:]


def test_retry_finds_the_job_through_task_state_store(airflow_env: dict[str, str], output: str) -> None:
    """Try 1 creates the job, records it in task_state_store and dies (its job hidden from the label
    lookup); try 2, a real retry by the task runner, finds that same job through the store. Before
    Airflow 3.3 (no store) try 2 finds it through the identity labels."""

    whole, output = output, group_lines(output, "retry")
    assert task_states(airflow_env, "retry") == {"train": "success", "check": "success"}, output[-8000:]
    with airflow_db(airflow_env) as db:
        (try_number,) = db.execute(
            "select try_number from task_instance where dag_id = ? and task_id = 'retry.train'", (DAG_ID,)
        ).fetchone()
    assert try_number == 2
    crashed = re.search(r"CREATED_THEN_CRASHED ([a-z0-9-]+) ([0-9a-f-]{36})", output)
    assert crashed, output[-6000:]
    name, uid = crashed.groups()
    if AIRFLOW_V_3_3_PLUS:
        recorded = next(line for line in output.splitlines() if "RECORDED_JOB" in line)
        assert name in recorded and uid in recorded, recorded
    else:  # no store: the identity labels found it, and the task said which features are off
        assert "NO_STATE_STORE" in output
        assert "lacks 3 feature(s) this provider uses: retry_policy (Airflow 3.3+)" in output
    result = xcom(airflow_env, "retry.train")
    assert (result["name"], result["uid"]) == (name, uid), "try 2 used try 1's job, not a new one"
    assert result["state"] == "succeeded" and float(result["metrics"]["accuracy"]) == 0.75
    assert f"RETRY_CHECKED {name} {uid}" in whole, whole[-8000:]  # check's print, bare on some releases


def test_secrets_printed_by_replicas_are_masked_in_the_task_log(
    airflow_env: dict[str, str], output: str
) -> None:
    token, call_token = "dags-test-secret-token-0451", "dags-test-call-token-9137"  # tfjob_runs_dag.py
    whole = output
    output = group_lines(output, "secret")
    assert task_states(airflow_env, "secret") == {
        "sync": "success",
        "deferred": "success",
        "decorated": "success",
    }, output[-8000:]
    # Each replica printed its secret; the task log shows the line, masked: once from the sync task's
    # follow and once from the trigger's (Airflow before 3.1 echoes a task's lines in two formats, so
    # the lines are told apart by where they were logged, not counted).
    shown = [record for record in records(output) if "replica token=***" in record]
    assert any("logs_parsing.py" in record for record in shown), output[-8000:]  # the sync task's follow
    assert any("logs_parsing.py" not in record for record in shown), output[-8000:]  # the trigger's
    assert "function token=***" in output, output[-8000:]
    # Nowhere in the run's output, not only in this group's lines.
    if not AIRFLOW_V_3_1_PLUS:
        # Airflow 3.0's task SDK writes its own request to the masker at DEBUG level, the value in it
        # ("Sending request ... MaskSecret(value=...)"); `dags test` logs at DEBUG, a deployment's task
        # log at INFO does not. That line is Airflow's, not a replica's or the provider's.
        whole = "\n".join(line for line in whole.splitlines() if "MaskSecret(" not in line)
    assert token not in whole and call_token not in whole, [
        line for line in whole.splitlines() if token in line or call_token in line
    ]
    assert xcom(airflow_env, "secret.decorated") == len(call_token)
    with airflow_db(airflow_env) as db:
        stored = json.dumps(
            db.execute("select value from xcom where dag_id = ?", (DAG_ID,)).fetchall(), default=str
        )
    assert token not in stored and call_token not in stored
    with airflow_db(airflow_env) as db:
        rendered = json.dumps(
            db.execute(
                "select rendered_fields from rendered_task_instance_fields where dag_id = ? and task_id like 'secret.%'",
                (DAG_ID,),
            ).fetchall()
        )
    assert "secret_env" in rendered and "op_args" in rendered  # the fields were stored...
    assert token not in rendered and call_token not in rendered  # ...masked
