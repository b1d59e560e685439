"""TrainingRetryPolicy in real DAG runs (`airflow dags test`: the real task runner evaluates the policy,
retries and defers) against the local cluster, one task per cause in each mode (retry_dags/): a lost
node is retried and succeeds, a user's traceback and an unpullable image fail after one try with
retries=3, an OOM kill fails naming the replica and its limit, or, opted in, succeeds on the next try
with the raised limit. One DAG run for all ten tasks: one Airflow start-up, ten short jobs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_cli import AIRFLOW, airflow_db, migrated_airflow_env, run_cli, xcom_value

pytestmark = [pytest.mark.dags, pytest.mark.cluster, pytest.mark.timeout(600)]

DAGS = Path(__file__).parent / "retry_dags"
MODES = ("sync", "deferred")


class NodeLoser(threading.Thread):
    """Loses the node of each selected job's first try once its replica says it is ready: the way a
    spot node goes away under a running job."""

    def __init__(self, cluster: Any, selectors: list[str]) -> None:
        super().__init__(daemon=True)
        self.cluster, self.pending, self.lost = cluster, set(selectors), {}  # type: ignore[var-annotated]
        self.stop = threading.Event()

    def _ready(self, selector: str) -> bool:
        def look() -> bool:
            pods, _ = self.cluster.store.list("pods", "default", label_selector=selector)
            for pod in pods:
                env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env") or []}
                log = self.cluster.podlogs.current("default", pod["metadata"]["name"], "tensorflow")
                lines = [line for _, line in log.entries] if log is not None else []
                if env.get("TRY") == "1" and b"ready on try 1" in lines:
                    return True
            return False

        return bool(self.cluster.call(look))

    def run(self) -> None:
        while self.pending and not self.stop.wait(0.2):
            for selector in sorted(self.pending):
                if self._ready(selector):
                    self.lost[selector] = self.cluster.lose_node(selector)
                    self.pending.discard(selector)


@pytest.fixture(scope="module")
def run(
    local_cluster: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[str, str], str, NodeLoser]]:
    env = migrated_airflow_env(tmp_path_factory.mktemp("airflow-home"), DAGS, local_cluster.kubeconfig_path)
    loser = NodeLoser(local_cluster, [f"retry-test=node-lost-{mode}" for mode in MODES])
    loser.start()
    try:
        # Some tasks fail on purpose, so the run fails and `dags test` exits 1: the tasks are read below.
        # run_cli: a run past its bound fails with every process's stacks.
        _, output = run_cli([AIRFLOW, "dags", "test", "retry_policy"], env, timeout=540)
    finally:
        loser.stop.set()
        loser.join(5)
    yield env, output, loser


def tries(env: dict[str, str]) -> dict[str, tuple[str, int]]:
    with airflow_db(env) as db:
        rows = db.execute(
            "select task_id, state, try_number from task_instance where dag_id = 'retry_policy'"
        ).fetchall()
    return {task: (state, number) for task, state, number in rows}


def xcom(env: dict[str, str], task_id: str, key: str) -> Any:
    with airflow_db(env) as db:
        row = db.execute(
            "select value from xcom where dag_id = 'retry_policy' and task_id = ? and key = ?", (task_id, key)
        ).fetchone()
    assert row is not None, f"no XCom {key} for {task_id}"
    return xcom_value(row[0])


@pytest.mark.parametrize("mode", MODES)
def test_a_lost_node_is_retried_at_once_and_the_next_try_succeeds(run: Any, mode: str) -> None:
    env, output, loser = run
    assert loser.lost.get(f"retry-test=node-lost-{mode}"), f"the node of node_lost_{mode} was never lost"
    assert tries(env)[f"node_lost_{mode}"] == ("success", 2), output[-6000:]
    assert xcom(env, f"node_lost_{mode}", "return_value")["state"] == "succeeded"
    (decision,) = xcom(env, f"node_lost_{mode}", "retry_decisions")
    assert decision["action"] == "retry" and decision["delay_seconds"] == 0
    assert decision["cause"]["reason"] == "NodeLost" and decision["cause"]["replica_type"] == "Worker"
    # worker-0 when the follow saw the pod; "worker replica(s)" when its pod was gone before the
    # trigger started, and only its events told (the deferred task, often).
    assert ": its node was lost (DeletionByTaintManager" in decision["reason"]
    assert decision["reason"].startswith("TrainingRetryPolicy: infrastructure (NodeLost): worker")


@pytest.mark.parametrize("mode", MODES)
def test_a_users_traceback_runs_once_with_retries_3_and_fails_naming_it(run: Any, mode: str) -> None:
    env, output, _ = run
    assert tries(env)[f"traceback_{mode}"] == ("failed", 1)
    decision = xcom(env, f"traceback_{mode}", "retry_decision")
    assert decision["action"] == "fail" and decision["cause"]["reason"] == "Traceback"
    assert decision["reason"] == (
        "TrainingRetryPolicy: the job's own failure (Traceback): worker-0 raised ValueError: learning rate "
        "must be positive -> fail now, a retry would fail the same way (try 1 of 4)"
    )
    assert decision["reason"] in output


@pytest.mark.parametrize("mode", MODES)
def test_an_oom_kill_fails_naming_the_replica_and_its_limit(run: Any, mode: str) -> None:
    env, _, _ = run
    assert tries(env)[f"oom_{mode}"] == ("failed", 1)
    decision = xcom(env, f"oom_{mode}", "retry_decision")
    assert decision["action"] == "fail"
    assert decision["cause"]["memory_limit"] == "100Mi" and decision["cause"]["exit_code"] == 137
    assert (
        "out of memory: worker-0 was killed for running out of memory at its memory limit 100Mi"
        in decision["reason"]
    )


@pytest.mark.parametrize("mode", MODES)
def test_an_oom_kill_opted_in_succeeds_on_the_next_try_with_the_raised_limit(
    run: Any, mode: str, local_cluster: Any
) -> None:
    env, output, _ = run
    assert tries(env)[f"oom_raise_{mode}"] == ("success", 2), output[-6000:]
    result = xcom(env, f"oom_raise_{mode}", "return_value")
    assert result["state"] == "succeeded"
    (decision,) = xcom(env, f"oom_raise_{mode}", "retry_decisions")
    assert decision["action"] == "retry" and decision["memory_limits"] == {"Worker": "200Mi"}
    job = local_cluster.call(lambda: local_cluster.store.get("tfjobs", "default", result["name"]))
    container = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["memory"] == "200Mi"
    assert "Retry policy: Worker's memory limit is 200Mi on this try (raised after an OOM kill)" in output


@pytest.mark.parametrize("mode", MODES)
def test_an_unpullable_image_fails_at_once(run: Any, mode: str) -> None:
    env, _, _ = run
    assert tries(env)[f"unpullable_{mode}"] == ("failed", 1)
    decision = xcom(env, f"unpullable_{mode}", "retry_decision")
    assert decision["action"] == "fail" and decision["cause"]["reason"] == "ImagePull"
    # The kubelet reports ErrImagePull, then ImagePullBackOff a moment later; the task decides on whichever
    # it sees first (ci18 saw the first), and either names the image.
    image = "registry.invalid/team/trainer:1.0"
    assert (
        f'its image cannot be pulled (ImagePullBackOff: Back-off pulling image "{image}")'
        in decision["reason"]
        or f'its image cannot be pulled (ErrImagePull: rpc error: code = Unknown desc = failed to pull and unpack image "{image}"'
        in decision["reason"]
    ), decision["reason"]
