"""The example DAGs, run end to end with `airflow dags test` on the local cluster, real training.

Each run trains for real on the digits data set (TensorFlow MultiWorkerMirroredStrategy on 2 workers,
PyTorch DDP on a Master and a Worker, XGBoost's collective on a Master and 2 Workers); the tests
check what the runs produced (metrics in XCom, exported models, promotion decisions), not only that
they ran.

The three runs that need nothing but themselves (the two sweeps and the comparison) start together
when the module does, each in an Airflow home of its own, and run beside the retraining test: a run
spends most of its time waiting on Airflow's start-up, the cluster and its replicas, so one after the
other they kept a core idle. Each test then checks its own run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
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
    xcom_value,
)

# In the parallel suite like every other module. It ran apart for a while: the retraining test's second
# `airflow scheduler --num-runs 1` twice ran past its bound beside other files. That scheduler's
# LocalExecutor forked 32 idle workers on each start (one per slot of [core] parallelism) and joined them
# on exit, on two busy cores; it now gets parallelism 1 (airflow_cli.migrated_airflow_env,
# only_creates_runs) and a 120 s bound past which every process's stacks are printed (run_cli).
pytestmark = [
    pytest.mark.dags,
    pytest.mark.cluster,
    pytest.mark.tensorflow,
    pytest.mark.timeout(900),
]

EXAMPLES = Path(__file__).resolve().parents[2] / "example_dags"


def example_env(local_cluster: Any, tmp_path_factory: pytest.TempPathFactory, name: str) -> dict[str, str]:
    """An Airflow home of its own for the examples' runs, its data directory its own too."""
    examples_env = {
        # The replicas run on this machine with this Python (the DAGs' default is `python`).
        "TFJOB_EXAMPLES_PYTHON": sys.executable,
        "TFJOB_EXAMPLES_DATA_DIR": str(tmp_path_factory.mktemp(f"{name}-data")),
    }
    return migrated_airflow_env(
        tmp_path_factory.mktemp(f"{name}-home"),
        EXAMPLES,
        local_cluster.kubeconfig_path,
        examples_env,
        migrate_timeout=300,
        only_creates_runs=True,
    )


#: The runs started with the module: dag_id -> its conf.
BESIDE = {
    # One epoch a trial: the test checks the mapping, each trial's own job, metrics and cost, and that
    # pick_best names the trial the metrics rank first, not how well a trial trains.
    "example_tfjob_sweep": {"learning_rates": [0.0003, 0.03], "batch_sizes": [32], "epochs": 1},
    "example_pytorchjob_sweep": {
        "search_space": {"learning_rate": [0.0003, 0.01], "hidden_units": [32]},
        "fixed": {"epochs": 3},
    },
    "example_kubeflow_compare": {"epochs": 5, "num_rounds": 20},
}


@pytest.fixture(scope="module", autouse=True)
def beside(
    local_cluster: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[dict[str, str], Future[tuple[str, str]]]]]:
    """dag_id -> (its Airflow environment, its run: (run_id, output) once done). Every run is waited for
    before the module ends, whatever its test's outcome (each is bounded by run_cli)."""
    envs = {dag_id: example_env(local_cluster, tmp_path_factory, dag_id) for dag_id in BESIDE}
    with ThreadPoolExecutor(max_workers=len(BESIDE), thread_name_prefix="example-run") as pool:
        yield {
            dag_id: (envs[dag_id], pool.submit(run_example, envs[dag_id], dag_id, conf))
            for dag_id, conf in BESIDE.items()
        }


@pytest.fixture(scope="module")
def env(local_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return example_env(local_cluster, tmp_path_factory, "retraining")


def run_example(
    env: dict[str, str], dag_id: str, conf: dict[str, Any], logical_date: str | None = None
) -> tuple[str, str]:
    """Runs the DAG; returns (run_id, output). Fails the test with the output's tail if the run failed."""
    args = [*([logical_date] if logical_date else []), "-c", json.dumps(conf)]
    output = dags_test(env, dag_id, *args, "-f", str(EXAMPLES / f"{dag_id}.py"), timeout=840)
    with airflow_db(env) as db:
        (run_id,) = db.execute(
            "select run_id from dag_run where dag_id = ? order by id desc limit 1", (dag_id,)
        ).fetchone()
    return run_id, output


def states(env: dict[str, str], dag_id: str, run_id: str) -> dict[tuple[str, int], str]:
    with airflow_db(env) as db:
        rows = db.execute(
            "select task_id, map_index, state from task_instance where dag_id = ? and run_id = ?",
            (dag_id, run_id),
        ).fetchall()
    return {(task, index): state for task, index, state in rows}


def xcoms(
    env: dict[str, str], dag_id: str, run_id: str, task_id: str, key: str = "return_value"
) -> list[Any]:
    """The XCom values of every map index of a task (one item for an unmapped task), in index order."""
    with airflow_db(env) as db:
        rows = db.execute(
            "select value from xcom where dag_id = ? and run_id = ? and task_id = ? and key = ? order by map_index",
            (dag_id, run_id, task_id, key),
        ).fetchall()
    return [xcom_value(raw) for (raw,) in rows]


def retrain_and_deploy(
    env: dict[str, str], conf: dict[str, Any], logical_date: str
) -> tuple[str, dict, dict]:
    """A retraining run, then the deployment run its model asset event schedules: (run_id, the
    training's metrics, the deployment's decision as its task returned it)."""
    run_id, _ = run_example(env, "example_tfjob_retraining", conf, logical_date=logical_date)
    assert set(states(env, "example_tfjob_retraining", run_id).values()) == {"success"}
    (metrics,) = xcoms(env, "example_tfjob_retraining", run_id, "train", "metrics")
    event_id, extra, source_run = last_asset_event(env)
    assert (extra["metrics"], source_run) == (metrics, run_id)
    deploy_run = run_asset_triggered(env, "example_tfjob_deploy", "promote_if_better", event_id)
    return run_id, metrics, xcom_of(env, "example_tfjob_deploy", deploy_run, "promote_if_better")


def test_retraining_deploys_only_a_better_model(env: dict[str, str]) -> None:
    root = Path(env["TFJOB_EXAMPLES_DATA_DIR"]) / "retraining"
    # The deployment runs on the model asset's events: known to Airflow and unpaused beforehand.
    airflow(env, "dags", "reserialize")
    airflow(env, "dags", "unpause", "example_tfjob_deploy")

    # Three epochs (the DAG's default is ten): the test claims a promotion decision, not the accuracy
    # gate (test_digits_both_apis and the demo hold that), and three epochs at the default learning
    # rate beat the worse candidate below by far (0.93-0.95 against well under 0.9).
    first, metrics, decision = retrain_and_deploy(env, {"epochs": 3}, "2025-06-01")
    assert decision["promoted"] and decision["previous"] is None, decision
    assert decision["test_accuracy"] == metrics["test_accuracy"]
    assert decision["job"]["kind"] == "TFJob" and decision["job"]["uid"]
    current = root / "current"
    assert current.is_symlink()
    promoted = json.loads((current / "metrics.json").read_text())
    assert promoted["test_accuracy"] == pytest.approx(metrics["test_accuracy"], abs=1e-4)
    assert current.resolve().name == first.replace(":", "-").replace("+", "-")

    # One epoch at a tiny learning rate: a clearly worse candidate, which must not replace the model.
    _, worse, decision = retrain_and_deploy(env, {"epochs": 1, "learning_rate": 0.0003}, "2025-06-02")
    assert worse["test_accuracy"] < metrics["test_accuracy"]
    # The best so far came from the asset's state, written by the first deployment.
    assert not decision["promoted"] and decision["previous"] == metrics["test_accuracy"], decision
    assert current.resolve().name == first.replace(":", "-").replace("+", "-")
    history = (root / "promotions.jsonl").read_text().splitlines()
    assert len(history) == 1 and json.loads(history[0])["run_id"] == first


def test_sweep_maps_one_job_per_trial_and_picks_the_best(beside: dict[str, Any]) -> None:
    dag_id = "example_tfjob_sweep"
    env, run = beside[dag_id]
    run_id, _ = run.result()
    run_states = states(env, dag_id, run_id)
    assert [run_states[("train", i)] for i in range(2)] == ["success"] * 2
    assert run_states[("pick_best", -1)] == "success"

    (grid,) = xcoms(env, dag_id, run_id, "trials")
    assert [trial["learning_rate"] for trial in grid] == ["0.0003", "0.03"]
    metrics = xcoms(env, dag_id, run_id, "train", "metrics")
    results = xcoms(env, dag_id, run_id, "train")
    assert len(metrics) == len(results) == 2
    # Each mapped task instance ran its own TFJob.
    assert len({result["name"] for result in results}) == 2
    accuracies = [m["test_accuracy"] for m in metrics]
    assert all(0 < a <= 1 for a in accuracies)

    (choice,) = xcoms(env, dag_id, run_id, "pick_best")
    best = max(range(2), key=lambda i: accuracies[i])
    assert choice["best"]["trial"] == best
    assert choice["best"]["hyperparameters"] == grid[best]
    assert choice["best"]["test_accuracy"] == pytest.approx(accuracies[best])
    assert [row["test_accuracy"] for row in choice["trials"]] == pytest.approx(accuracies)
    # Each trial carries what its job cost (the mapped task's `cost` XCom), CPU core-hours included.
    costs = xcoms(env, dag_id, run_id, "train", "cost")
    assert [row["cost"] for row in choice["trials"]] == costs
    assert all(cost["running_seconds"] > 0 and cost["replicas"] == 2 for cost in costs)


@pytest.mark.pytorch
def test_pytorchjob_sweep_ranks_real_ddp_trials(beside: dict[str, Any]) -> None:
    dag_id = "example_pytorchjob_sweep"
    env, run = beside[dag_id]
    run_id, _ = run.result()
    run_states = states(env, dag_id, run_id)
    assert [run_states[("train", i)] for i in range(2)] == ["success"] * 2
    assert run_states[("pick_best", -1)] == "success"

    (grid,) = xcoms(env, dag_id, run_id, "trials")
    assert grid == [
        {"epochs": "3", "learning_rate": "0.0003", "hidden_units": "32"},
        {"epochs": "3", "learning_rate": "0.01", "hidden_units": "32"},
    ]
    metrics = xcoms(env, dag_id, run_id, "train", "metrics")
    results = xcoms(env, dag_id, run_id, "train")
    assert len({result["name"] for result in results}) == 2
    for result in results:
        assert result["state"] == "succeeded"
        assert result["replica_statuses"]["Master"]["succeeded"] == 1
    # Three epochs at 0.0003 stay far behind three at 0.01: the ranking has a clear answer.
    assert metrics[1]["test_accuracy"] > metrics[0]["test_accuracy"]
    assert metrics[1]["test_accuracy"] >= 0.85 and 0 < metrics[1]["loss"] < metrics[0]["loss"]

    (choice,) = xcoms(env, dag_id, run_id, "pick_best")
    assert choice["ranking"] == [1, 0]
    assert choice["best"]["hyperparameters"] == grid[1]
    assert choice["best"]["test_accuracy"] == pytest.approx(metrics[1]["test_accuracy"])


@pytest.mark.pytorch
@pytest.mark.xgboost
def test_kubeflow_compare_trains_three_frameworks_and_compares_their_metrics(beside: dict[str, Any]) -> None:
    dag_id = "example_kubeflow_compare"
    env, run = beside[dag_id]
    run_id, output = run.result()
    assert set(states(env, dag_id, run_id).values()) == {"success"}

    accuracy = {}
    for framework in ("tensorflow", "pytorch", "xgboost"):
        (metrics,) = xcoms(env, dag_id, run_id, f"train_{framework}", "metrics")
        assert metrics["missing"] == [], (framework, metrics)
        accuracy[framework] = metrics["test_accuracy"]
        assert 0.9 <= accuracy[framework] <= 1.0, (framework, metrics)
    (pytorch_job,) = xcoms(env, dag_id, run_id, "train_pytorch")
    assert pytorch_job["replica_statuses"]["Master"]["succeeded"] == 1
    (xgboost_job,) = xcoms(env, dag_id, run_id, "train_xgboost")
    assert xgboost_job["replica_statuses"]["Master"]["succeeded"] == 1
    # The Master's log reached the task log: the collective ranked all three replicas.
    assert "master-0: collective rank 0 of 3" in output, output[-4000:]
    assert "master-0: rank 0 of 2" in output, output[-4000:]

    (comparison,) = xcoms(env, dag_id, run_id, "compare")
    assert comparison["test_accuracy"] == pytest.approx(accuracy)
    assert comparison["winner"] == max(accuracy, key=lambda name: accuracy[name])
    assert comparison["nn_gap"] == pytest.approx(abs(accuracy["tensorflow"] - accuracy["pytorch"]))
