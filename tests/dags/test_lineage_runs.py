"""Lineage in real DAG runs on the local cluster: the OpenLineage provider's events (file transport)
and the model asset's event, which schedules a deployment DAG that reads the training's metrics.

The asset-triggered run is created by Airflow's own scheduler (one loop, ``airflow scheduler -n 1``)
from the asset event the training task emitted under ``airflow dags test``; its task then runs with
``airflow tasks test`` against that run, so what it reads is that run's triggering asset events.

Every Airflow command costs seconds here (6-7 s for a `dags test` on an idle 2-core machine, about three
times that beside the parallel suite), so the runs are shared: the first training's run, one `dags test`
of a DAG whose two independent tasks are the training and a job that fails, gives the OpenLineage events
of both and the deployment's first asset event; the second training marks the failing task succeeded
without running it (``--mark-success-pattern``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_cli import (
    airflow,
    airflow_db,
    dags_test,
    last_asset_event,
    migrated_airflow_env,
    run_asset_triggered,
    xcom_of,
)

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
        # The deployment DAG is unpaused from the start (the others have no schedule): the first
        # training's asset event queues a run of it.
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
    }
    env = migrated_airflow_env(
        home, DAGS, local_cluster.kubeconfig_path, extra, migrate_timeout=300, only_creates_runs=True
    )
    # The deployment DAG must be known (serialized) for an asset event to queue a run of it.
    airflow(env, "dags", "reserialize")
    yield env


@pytest.fixture(scope="module")
def first_run(env: dict[str, str]) -> tuple[str, str]:
    """The first run of lineage_train: its training (accuracy 0.75) succeeded, its asset event queuing the
    deployment, and its failing job failed (so the run failed); (its run id, its output)."""
    output = airflow(env, "dags", "test", "lineage_train", "-c", json.dumps({"accuracy": 0.75}), check=False)
    with airflow_db(env) as db:
        (run_id,) = db.execute(
            "select run_id from dag_run where dag_id = 'lineage_train' order by id desc limit 1"
        ).fetchone()
        states = dict(db.execute(
            "select task_id, state from task_instance where dag_id = 'lineage_train' and run_id = ?", (run_id,)
        ).fetchall())  # fmt: skip
    assert states == {"train": "success", "fail": "failed"}, output[-4000:]
    return str(run_id), output


@pytest.fixture(scope="module")
def first_training(first_run: tuple[str, str]) -> str:
    """The first training's run id."""
    return first_run[0]


def lineage_events(env: dict[str, str], job: str) -> list[dict[str, Any]]:
    path = Path(env["AIRFLOW_HOME"]) / "openlineage.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [event for event in events if event["job"]["name"] == job]


def datasets(event: dict[str, Any], side: str) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in event.get(side, [])]


def test_openlineage_events_of_a_succeeded_and_a_failed_job(
    env: dict[str, str], first_run: tuple[str, str]
) -> None:
    first_training, output = first_run
    events = lineage_events(env, "lineage_train.train")[:3]
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
    result = xcom_of(env, "lineage_train", first_training, "train")
    assert (job["name"], job["uid"], job["state"]) == (result["name"], result["uid"], "succeeded")
    assert job["metrics"] == {"accuracy": 0.75, "loss": 0.25}
    assert "kubeflowJobError" not in complete["run"]["facets"]

    # The failing job ran in the same run, an independent task beside the training.
    (start, fail) = lineage_events(env, "lineage_train.fail")
    assert (start["eventType"], fail["eventType"]) == ("START", "FAIL"), output[-4000:]
    error = fail["run"]["facets"]["kubeflowJobError"]
    assert "TFJobFailed" in error["message"] and "[failing replicas: Worker]" in error["message"]
    assert "exit code 3" in error["stackTrace"] or "exited with code 3" in error["stackTrace"]
    assert fail["run"]["facets"]["kubeflowJob"]["state"] == "failed"
    assert datasets(fail, "inputs") == [("s3://datasets", "digits")]


def deploy(env: dict[str, str], accuracy: float) -> dict[str, Any]:
    """The deployment run the newest asset event (a training of ``accuracy``) scheduled; its decision."""
    event_id, extra, _ = last_asset_event(env)
    assert extra["metrics"]["accuracy"] == accuracy
    with airflow_db(env) as db:
        assert db.execute("select target_dag_id from asset_dag_run_queue").fetchall() == [("lineage_deploy",)]
    run_id = run_asset_triggered(env, "lineage_deploy", "deploy", event_id)
    decision: dict[str, Any] = xcom_of(env, "lineage_deploy", run_id, "deploy")
    return decision


def train_and_deploy(env: dict[str, str], accuracy: float) -> dict[str, Any]:
    """A training of ``accuracy`` (the failing job marked succeeded, not run), then its deployment."""
    args = ("-c", json.dumps({"accuracy": accuracy}), "--mark-success-pattern", "^fail$")
    dags_test(env, "lineage_train", *args, timeout=300)
    return deploy(env, accuracy)


def test_model_asset_events_schedule_the_deployment_which_reads_each_trainings_metrics(
    env: dict[str, str], first_training: str
) -> None:
    first = deploy(env, 0.75)
    assert (first["accuracy"], first["best_before"], first["promote"]) == (0.75, None, True)
    assert first["job"]["kind"] == "TFJob" and first["job"]["uid"]
    # A second training's event schedules a deployment of its own, which reads that training's
    # metrics and the first's through the asset. (That a worse model is kept out is the examples'
    # retraining test, on the example DAGs users copy.)
    better = train_and_deploy(env, 0.9)
    assert (better["accuracy"], better["best_before"], better["promote"]) == (0.9, 0.75, True)
