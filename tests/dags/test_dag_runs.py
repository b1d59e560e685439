"""Whole DAG runs with `airflow dags test` (a real task runner, in-process execution API, inline
triggers) against the local cluster: the synchronous operator, and deferrable operator + sensor."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_cli import airflow_db, dags_test, migrated_airflow_env, xcom_value

from airflow_tfjob.version_compat import AIRFLOW_V_3_1_PLUS, AIRFLOW_V_3_3_PLUS

pytestmark = [pytest.mark.dags, pytest.mark.cluster, pytest.mark.timeout(420)]

DAGS = Path(__file__).parent / "dags"


@pytest.fixture(scope="module")
def airflow_env(local_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    home = tmp_path_factory.mktemp("airflow-home")
    yield migrated_airflow_env(home, DAGS, local_cluster.kubeconfig_path, migrate_timeout=180)


def task_states(env: dict[str, str], dag_id: str) -> dict[str, str]:
    with airflow_db(env) as db:
        rows = db.execute("select task_id, state from task_instance where dag_id = ?", (dag_id,)).fetchall()
    return dict(rows)


def xcom(env: dict[str, str], dag_id: str, task_id: str, key: str = "return_value") -> Any:
    with airflow_db(env) as db:
        row = db.execute(
            "select value from xcom where dag_id = ? and task_id = ? and key = ?", (dag_id, task_id, key)
        ).fetchone()
    assert row is not None, f"no XCom {key} for {dag_id}.{task_id}"
    return xcom_value(row[0])


def test_sync_operator_dag(airflow_env: dict[str, str], local_cluster: Any) -> None:
    output = dags_test(airflow_env, "tfjob_sync", timeout=360)
    assert task_states(airflow_env, "tfjob_sync") == {"train": "success"}
    result = xcom(airflow_env, "tfjob_sync", "train")
    assert result["state"] == "succeeded"
    assert result["replica_statuses"]["Worker"]["succeeded"] == 2
    assert float(result["metrics"]["accuracy"]) == 0.9
    # The replica logs reached the task log, and the .yaml argument stayed a plain string.
    assert "args=['--config=conf.yaml', '--run=manual__" in output


def test_deferrable_operator_and_sensor_dag(airflow_env: dict[str, str]) -> None:
    output = dags_test(airflow_env, "tfjob_deferrable", timeout=360)
    assert task_states(airflow_env, "tfjob_deferrable") == {
        "submit": "success",
        "wait": "success",
        "train": "success",
        "check": "success",
    }
    assert "CHECKED" in output
    # Both deferrable tasks went through the trigger (defer, then resume), not a synchronous wait.
    assert "Waiting in the triggerer for TFJob default/sensed-" in output
    assert "Deferring while TFJob default/" in output
    result = xcom(airflow_env, "tfjob_deferrable", "train")
    assert result["state"] == "succeeded"


def test_retry_finds_the_job_through_task_state_store(
    airflow_env: dict[str, str], local_cluster: Any
) -> None:
    """Try 1 creates the job, records it in task_state_store and dies (its job hidden from the label
    lookup); try 2, a real retry by the task runner, finds that same job through the store. Before
    Airflow 3.3 (no store) try 2 finds it through the identity labels."""

    output = dags_test(airflow_env, "tfjob_retry", timeout=360)
    assert task_states(airflow_env, "tfjob_retry") == {"train": "success", "check": "success"}
    with airflow_db(airflow_env) as db:
        (try_number,) = db.execute(
            "select try_number from task_instance where dag_id = 'tfjob_retry' and task_id = 'train'"
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
    result = xcom(airflow_env, "tfjob_retry", "train")
    assert (result["name"], result["uid"]) == (name, uid), "try 2 used try 1's job, not a new one"
    assert result["state"] == "succeeded" and float(result["metrics"]["accuracy"]) == 0.75
    assert f"RETRY_CHECKED {name} {uid}" in output


def test_secrets_printed_by_replicas_are_masked_in_the_task_log(airflow_env: dict[str, str]) -> None:
    token, call_token = "dags-test-secret-token-0451", "dags-test-call-token-9137"  # tfjob_secret_dag.py
    output = dags_test(airflow_env, "tfjob_secret", timeout=360)
    assert task_states(airflow_env, "tfjob_secret") == {
        "sync": "success",
        "deferred": "success",
        "decorated": "success",
    }
    # Each replica printed its secret; the task log shows the line, masked: once from the sync task's
    # follow and once from the trigger's (Airflow before 3.1 echoes a task's lines in two formats, so
    # the lines are told apart by where they were logged, not counted).
    shown = [line for line in output.splitlines() if "replica token=***" in line]
    assert any("logs_parsing.py" in line for line in shown), shown  # the sync task's follow
    assert any("logs_parsing.py" not in line for line in shown), shown  # the trigger's
    assert "function token=***" in output
    if not AIRFLOW_V_3_1_PLUS:
        # Airflow 3.0's task SDK writes its own request to the masker at DEBUG level, the value in it
        # ("Sending request ... MaskSecret(value=...)"); `dags test` logs at DEBUG, a deployment's task
        # log at INFO does not. That line is Airflow's, not a replica's or the provider's.
        output = "\n".join(line for line in output.splitlines() if "MaskSecret(" not in line)
    assert token not in output and call_token not in output
    assert xcom(airflow_env, "tfjob_secret", "decorated") == len(call_token)
    with airflow_db(airflow_env) as db:
        stored = json.dumps(
            db.execute("select value from xcom where dag_id = 'tfjob_secret'").fetchall(), default=str
        )
    assert token not in stored and call_token not in stored
    with airflow_db(airflow_env) as db:
        rendered = json.dumps(
            db.execute(
                "select rendered_fields from rendered_task_instance_fields where dag_id = 'tfjob_secret'"
            ).fetchall()
        )
    assert "secret_env" in rendered and "op_args" in rendered  # the fields were stored...
    assert token not in rendered and call_token not in rendered  # ...masked
