"""The digits example (the demo's DAG), unchanged, on both APIs: TFJob (a cluster serving kubeflow.org/v1) and Kubeflow
Trainer v2 (a cluster started in TrainJob-only mode, the provider's TensorFlow runtimes installed).
TFJobOperator's default ``api="auto"`` chooses by API discovery; both runs train for real (TensorFlow
MultiWorkerMirroredStrategy, 2 workers), reach test_accuracy >= 0.9 in XCom with the same metrics
keys and result keys, and their task logs have the same line shapes. Each run trains the demo's 5 epochs
(the DAG's default is 10): they reach the gate as 10 do (0.958 against 0.956) in half the training.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_cli import airflow_db, dags_test, migrated_airflow_env, xcom_value

pytestmark = [pytest.mark.dags, pytest.mark.cluster, pytest.mark.tensorflow, pytest.mark.timeout(1200)]

EXAMPLES = Path(__file__).resolve().parents[2] / "example_dags"
DAG_ID = "example_tfjob_digits"
# The demo's epochs (scripts/demo.sh): the accuracy gate is met at 5 as at 10.
EPOCHS = 5


@pytest.fixture(scope="module")
def trainjob_cluster() -> Iterator[Any]:
    from airflow_tfjob.jobs.trainjob.runtimes import cluster_hook, install
    from airflow_tfjob.local import LocalCluster

    with LocalCluster(apis=["trainjob"]) as cluster:
        install(cluster_hook(str(cluster.kubeconfig_path)), log=lambda _: None)
        yield cluster


@pytest.fixture(scope="module")
def env(local_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    examples_env = {
        "TFJOB_EXAMPLES_PYTHON": sys.executable,
        "TFJOB_EXAMPLES_DATA_DIR": str(tmp_path_factory.mktemp("examples-data")),
    }
    home = tmp_path_factory.mktemp("airflow-home")
    yield migrated_airflow_env(home, EXAMPLES, local_cluster.kubeconfig_path, examples_env, migrate_timeout=300)


def on_cluster(env: dict[str, str], kubeconfig: Path | str) -> dict[str, str]:
    extra = {"kube_config_path": str(kubeconfig), "namespace": "default"}
    return {**env, "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps({"conn_type": "kubernetes", "extra": extra})}


def run(env: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any], str]:
    """One run of the example, unchanged: (train's result, its metrics XCom, the run's output), with what
    the demo promises checked on the way: both tasks succeeded, the accuracy gate passed on the metrics
    train reported, and the master replica exported the model with those metrics."""
    output = dags_test(env, DAG_ID, "-c", json.dumps({"epochs": EPOCHS}), "-f", str(EXAMPLES / f"{DAG_ID}.py"), timeout=1000)
    with airflow_db(env) as db:
        (run_id,) = db.execute(
            "select run_id from dag_run where dag_id = ? order by id desc limit 1", (DAG_ID,)
        ).fetchone()
        rows = dict(db.execute(
            "select key, value from xcom where dag_id = ? and run_id = ? and task_id = 'train'", (DAG_ID, run_id)
        ).fetchall())  # fmt: skip
        (gate,) = db.execute(
            "select value from xcom where dag_id = ? and run_id = ? and task_id = 'check_accuracy'", (DAG_ID, run_id)
        ).fetchone()  # fmt: skip
        states = dict(db.execute(
            "select task_id, state from task_instance where dag_id = ? and run_id = ?", (DAG_ID, run_id)
        ).fetchall())  # fmt: skip
    assert states == {"train": "success", "check_accuracy": "success"}, output[-4000:]
    metrics = xcom_value(rows["metrics"])
    assert xcom_value(gate) == pytest.approx(metrics["test_accuracy"])
    run_dir = Path(env["TFJOB_EXAMPLES_DATA_DIR"]) / "digits" / run_id.replace(":", "-").replace("+", "-")
    saved = json.loads((run_dir / "model" / "metrics.json").read_text())
    assert saved["test_accuracy"] == pytest.approx(metrics["test_accuracy"], abs=1e-4)
    assert (run_dir / "model" / "model.keras").stat().st_size > 0
    assert any((run_dir / "logs").glob("events.out.tfevents.*"))
    return xcom_value(rows["return_value"]), metrics, output


# What differs between the APIs by nature, not by the provider's making: the controllers' own events
# (training-operator's vs JobSet's and the Job controller's) and the job's condition reason.
API_SPECIFIC = ("[events] ",)
_HEADER = re.compile(r"^\d{4}-\d\d-\d\dT[\d:.]+Z \[\w+\s*\] ")
_LOGGER = re.compile(r" \[airflow\.task\.operators\.[\w.]+\] loc=\S+.*$")
_REPLICA = re.compile(r"^\[(?:worker-\d+|node-0-\d+)\] ")
_JOB = re.compile(r"\b(?:TFJob|TrainJob) default/[-a-z0-9]+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e-?\d+)?")


def shapes(output: str) -> set[str]:
    """The train task's log lines (from the job's one-line summary to its outcome) as shapes: the
    record header and logger dropped, the replica prefix, the job's kind and name, its layout and
    condition reason, every number and duration abstracted."""
    created = re.search(r"\] Creating (?:TFJob|TrainJob) ", output)
    assert created is not None, output[-4000:]
    start = output.rfind("\n", 0, created.start()) + 1
    end = output.index("\n", output.index(" succeeded: succeeded (", start))
    found = set()
    for raw in output[start:end].splitlines():
        line = _LOGGER.sub("", _HEADER.sub("", raw)).strip()
        if not line or line.startswith(API_SPECIFIC):
            continue
        line = _JOB.sub("JOB", _REPLICA.sub("[REPLICA] ", line))
        # A checkpoint's place holds the run id, whose hashed tail differs between the two runs.
        line = re.sub(r"file://[^;\s]+", "PLACE", line)
        line = re.sub(r"^Creating JOB: .*?; image ", "Creating JOB: LAYOUT; image ", line)
        line = re.sub(r"succeeded: succeeded \(\w+\)", "succeeded: succeeded (REASON)", line)
        # Durations (a time left) and the pace take a shape of their own whatever their size.
        line = re.sub(r"N h N min|N min N s|N s\b", "DURATION", _NUMBER.sub("N", line))
        found.add(re.sub(r"DURATION per epoch|N epochs?/s", "PACE", line))
    return found


def test_the_digits_example_trains_alike_on_the_tfjob_and_the_trainjob_api(
    env: dict[str, str], local_cluster: Any, trainjob_cluster: Any, tmp_path: Path
) -> None:
    tfjob_result, tfjob_metrics, tfjob_log = run(on_cluster(env, local_cluster.kubeconfig_path))
    trainjob_result, trainjob_metrics, trainjob_log = run(on_cluster(env, trainjob_cluster.kubeconfig_path))
    (tmp_path / "tfjob.log").write_text(tfjob_log)
    (tmp_path / "trainjob.log").write_text(trainjob_log)
    assert (tfjob_result["api"], trainjob_result["api"]) == ("tfjob", "trainjob")
    for metrics in (tfjob_metrics, trainjob_metrics):
        assert metrics["test_accuracy"] >= 0.9 and metrics["accuracy"] >= 0.9 and 0 < metrics["loss"] < 1
    assert set(tfjob_metrics) == set(trainjob_metrics)
    # The same training (same seed, same data, same strategy): the same metrics, up to float noise.
    assert trainjob_metrics["test_accuracy"] == pytest.approx(tfjob_metrics["test_accuracy"], abs=0.02)
    assert list(tfjob_result) == list(trainjob_result)  # name, namespace, uid, api, state, ... the same keys
    assert tfjob_result["state"] == trainjob_result["state"] == "succeeded"
    # Both workers' epochs reached the task log on both APIs, and the same progress.
    for log, result in ((tfjob_log, tfjob_result), (trainjob_log, trainjob_result)):
        assert log.count(f"epoch={EPOCHS} loss=") >= 2
        assert f"[progress] progress: epoch {EPOCHS}/{EPOCHS} (100%)" in log
        assert [value for _, value in result["progress"]["timeline"]] == [float(n) for n in range(1, EPOCHS + 1)]
        # What a person reads: no TensorFlow start-up notice nor coordination error from the replicas.
        for noise in ("oneDNN", "absl::InitializeLog", "coordination service"):
            assert noise not in log, noise
    # The job in one line (the layout is the API's: TrainJob nodes run the TFJob's two workers).
    assert f"Creating TFJob default/{tfjob_result['name']}: 2 Worker; image " in tfjob_log
    # The XCom result's per-replica statuses read alike: the TrainJob's by TFJob replica type.
    assert tfjob_result["replica_statuses"] == trainjob_result["replica_statuses"] == {
        "Worker": {"active": 0, "succeeded": 2, "failed": 0}
    }
    # The task logs, line shape by line shape (every line of the train task's, but the controllers' events).
    tfjob_shapes, trainjob_shapes = shapes(tfjob_log), shapes(trainjob_log)
    assert len(tfjob_shapes) >= 8, tfjob_shapes
    diff = (sorted(tfjob_shapes - trainjob_shapes), sorted(trainjob_shapes - tfjob_shapes))
    assert diff == ([], []), f"line shapes on one API only (logs kept in {tmp_path})"
