"""Lineage in real DAG runs on the local cluster: the OpenLineage provider's events (file transport)
and the model asset's event, which schedules a deployment DAG that reads the training's metrics.

The asset-triggered run is created by Airflow's own scheduler (one loop, ``airflow scheduler -n 1``)
from the asset event the training task emitted under ``airflow dags test``; its task then runs with
``airflow tasks test`` against that run, so what it reads is that run's triggering asset events.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_cli import AIRFLOW, airflow_db, dags_test, migrated_airflow_env, xcom_value

pytestmark = [pytest.mark.dags, pytest.mark.cluster, pytest.mark.timeout(600)]

DAGS = Path(__file__).parent / "lineage_dags"


@pytest.fixture(scope="module")
def env(local_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    home = tmp_path_factory.mktemp("airflow-home")
    events = home / "openlineage.jsonl"
    transport = {"type": "file", "log_file_path": str(events), "append": True}
    extra = {
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "tfjob-tests",
        # One executor worker: the scheduler loop below only creates the asset-triggered run.
        "AIRFLOW__CORE__PARALLELISM": "1",
    }
    env = migrated_airflow_env(home, DAGS, local_cluster.kubeconfig_path, extra, migrate_timeout=300)
    # The deployment DAG must be known and unpaused for an asset event to queue a run of it.
    airflow(env, "dags", "reserialize")
    airflow(env, "dags", "unpause", "lineage_deploy")
    yield env


def airflow(env: dict[str, str], *args: str, check: bool = True) -> str:
    done = subprocess.run([AIRFLOW, *args], env=env, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0 or not check, output[-8000:]
    return output


def lineage_events(env: dict[str, str], job: str) -> list[dict[str, Any]]:
    path = Path(env["AIRFLOW_HOME"]) / "openlineage.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [event for event in events if event["job"]["name"] == job]


def datasets(event: dict[str, Any], side: str) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in event.get(side, [])]


def test_openlineage_events_of_a_succeeded_and_a_failed_job(env: dict[str, str]) -> None:
    dags_test(env, "lineage_train", "-c", json.dumps({"accuracy": 0.75}), timeout=300)
    events = lineage_events(env, "lineage_train.train")
    # Deferred: the task starts twice (execute, then execute_complete), and completes once.
    assert [e["eventType"] for e in events] == ["START", "START", "COMPLETE"]
    complete = events[-1]
    for event in events:
        assert datasets(event, "inputs")[:2] == [
            ("s3://datasets", f"digits/{event['eventTime'][:10]}"),
            ("kubernetes://default", "pvc/training-data"),
        ]
        assert datasets(event, "outputs")[0] == ("file", "/models/lineage")
        job = event["run"]["facets"]["kubeflowJob"]
        assert (job["kind"], job["namespace"], job["replicas"], job["images"]) == (
            "TFJob",
            "default",
            {"Worker": 2},
            {"Worker": "local/python"},
        )
    job = complete["run"]["facets"]["kubeflowJob"]
    with airflow_db(env) as db:
        (raw,) = db.execute(
            "select value from xcom where dag_id = 'lineage_train' and key = 'return_value'"
        ).fetchone()
    result = xcom_value(raw)
    assert (job["name"], job["uid"], job["state"]) == (result["name"], result["uid"], "succeeded")
    assert job["metrics"] == {"accuracy": 0.75, "loss": 0.25}
    assert "kubeflowJobError" not in complete["run"]["facets"]

    output = airflow(env, "dags", "test", "lineage_fail", check=False)
    (start, fail) = lineage_events(env, "lineage_fail.train")
    assert (start["eventType"], fail["eventType"]) == ("START", "FAIL"), output[-4000:]
    error = fail["run"]["facets"]["kubeflowJobError"]
    assert "TFJobFailed" in error["message"] and "[failing replicas: Worker]" in error["message"]
    assert "exit code 3" in error["stackTrace"] or "exited with code 3" in error["stackTrace"]
    assert fail["run"]["facets"]["kubeflowJob"]["state"] == "failed"
    assert datasets(fail, "inputs") == [("s3://datasets", "digits")]


def deploy_runs(env: dict[str, str]) -> list[str]:
    with airflow_db(env) as db:
        rows = db.execute(
            "select run_id from dag_run where dag_id = 'lineage_deploy' and run_type = 'asset_triggered' order by id"
        ).fetchall()
    return [run_id for (run_id,) in rows]


def train_and_deploy(env: dict[str, str], accuracy: float) -> dict[str, Any]:
    """Trains (the asset event), lets the scheduler create the deployment run, runs its task."""
    before = deploy_runs(env)
    dags_test(env, "lineage_train", "-c", json.dumps({"accuracy": accuracy}), timeout=300)
    with airflow_db(env) as db:
        event_id, extra, source_run = db.execute(
            "select id, extra, source_run_id from asset_event order by id desc limit 1"
        ).fetchone()
        queued = db.execute("select target_dag_id from asset_dag_run_queue").fetchall()
    assert json.loads(extra)["metrics"]["accuracy"] == accuracy
    assert queued == [("lineage_deploy",)]
    airflow(env, "scheduler", "--num-runs", "1")
    (run_id,) = [run for run in deploy_runs(env) if run not in before]
    with airflow_db(env) as db:
        consumed = db.execute(
            "select e.event_id from dagrun_asset_event e join dag_run r on r.id = e.dag_run_id where r.run_id = ?",
            (run_id,),
        ).fetchall()
    assert (event_id,) in consumed, (event_id, consumed, source_run)
    output = airflow(env, "tasks", "test", "lineage_deploy", "deploy", run_id)
    line = next(line for line in output.splitlines() if "DEPLOY DECISION" in line)
    decision: dict[str, Any] = json.loads(line.split("DEPLOY DECISION ", 1)[1])
    return decision


def test_model_asset_event_schedules_the_deployment_which_promotes_only_better_models(
    env: dict[str, str],
) -> None:
    first = train_and_deploy(env, 0.8)
    assert first["accuracy"] == 0.8 and first["promote"] is True
    assert first["job"]["kind"] == "TFJob" and first["job"]["uid"]
    worse = train_and_deploy(env, 0.7)
    assert (worse["accuracy"], worse["best_before"], worse["promote"]) == (0.7, 0.8, False)
    better = train_and_deploy(env, 0.9)
    assert (better["best_before"], better["promote"]) == (0.8, True)
