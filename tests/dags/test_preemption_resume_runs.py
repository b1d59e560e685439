"""Issue 26, preemption in a real DAG run (`airflow dags test`, the real task runner evaluating the retry
policy) against the local cluster with Kueue, synchronous and deferred (preemption_dags/): a spot task
(low priority, on_preemption="fail", checkpoint=, TrainingRetryPolicy, retries=1) is preempted by a
high-priority job once it has saved the checkpoint of epoch 3; the policy retries it, and the next try
resumes from its newest checkpoint and trains only the remaining epochs."""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_cli import AIRFLOW, airflow_db, migrated_airflow_env, run_cli, xcom_value

pytestmark = [pytest.mark.dags, pytest.mark.cluster, pytest.mark.timeout(400)]

DAGS = Path(__file__).parent / "preemption_dags"
MODES = ("sync", "deferred")
EPOCHS = 20  # preemption_dags/preemption_resume_dag.py
PREEMPT_AFTER = 3


def urgent_job(name: str) -> dict[str, Any]:
    """A high-priority TFJob in the same queue: Kueue preempts the spot job to admit it."""
    container = {
        "name": "tensorflow",
        "image": "local/python",
        "command": [sys.executable, "-c", "print('urgent work done', flush=True)"],
        "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}},
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "prio", "kueue.x-k8s.io/priority-class": "high"},
        },
        "spec": {
            "runPolicy": {"suspend": True},
            "tfReplicaSpecs": {
                "Worker": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {"spec": {"containers": [container]}},
                }
            },
        },
    }


class Preemptor(threading.Thread):
    """Creates a high-priority job in the spot task's queue once try 1 of each selected task's replica
    says it saved the checkpoint of epoch PREEMPT_AFTER: the way a more urgent job arrives while a
    spot job trains."""

    def __init__(self, cluster: Any, modes: tuple[str, ...]) -> None:
        super().__init__(daemon=True)
        from kubernetes import client, config

        self.cluster, self.pending, self.created = cluster, set(modes), {}  # type: ignore[var-annotated]
        self.api = client.CustomObjectsApi(config.new_client_from_config(str(cluster.kubeconfig_path)))
        self.stop = threading.Event()

    def _saved(self, mode: str) -> bool:
        def look() -> bool:
            pods, _ = self.cluster.store.list("pods", "default", label_selector=f"preemption-test={mode}")
            for pod in pods:
                env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env") or []}
                log = self.cluster.podlogs.current("default", pod["metadata"]["name"], "tensorflow")
                lines = [line for _, line in log.entries] if log is not None else []
                if env.get("TRY") == "1" and any(
                    line.endswith(b" epoch=%d" % PREEMPT_AFTER) for line in lines
                ):
                    return True
            return False

        return bool(self.cluster.call(look))

    def run(self) -> None:
        while self.pending and not self.stop.wait(0.1):
            for mode in sorted(self.pending):
                if self._saved(mode):
                    job = urgent_job(f"urgent-{mode}")
                    self.api.create_namespaced_custom_object("kubeflow.org", "v1", "default", "tfjobs", job)
                    self.created[mode] = job["metadata"]["name"]
                    self.pending.discard(mode)


@pytest.fixture(scope="module")
def kueue_cluster() -> Iterator[Any]:
    from airflow_tfjob.local import LocalCluster
    from airflow_tfjob.local.kueue.options import queue_objects

    prio = queue_objects(
        cluster_queue="cq-prio", local_queue="prio", namespace="default", quota={"cpu": 1}, flavor="f-prio",
        preemption="LowerPriority", priorities={"low": 10, "high": 1000},
    )  # fmt: skip
    with LocalCluster(kueue={"integrations": ["kubeflow.org/tfjob"], "objects": prio}) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def run(
    kueue_cluster: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[str, str], str, Path, Preemptor]]:
    checkpoints = tmp_path_factory.mktemp("checkpoints")
    env = migrated_airflow_env(
        tmp_path_factory.mktemp("airflow-home"),
        DAGS,
        kueue_cluster.kubeconfig_path,
        extra_env={"PREEMPTION_CHECKPOINTS": str(checkpoints)},
    )
    preemptor = Preemptor(kueue_cluster, MODES)
    preemptor.start()
    try:
        # run_cli: a run past its bound fails with every process's stacks (a run on eight workers once
        # ran past it, and subprocess.run said nothing of where it waited).
        _, output = run_cli([AIRFLOW, "dags", "test", "preemption_resume"], env, timeout=360)
    finally:
        preemptor.stop.set()
        preemptor.join(5)
    yield env, output, checkpoints, preemptor


def task_row(env: dict[str, str], task_id: str) -> tuple[str, int]:
    with airflow_db(env) as db:
        row = db.execute(
            "select state, try_number from task_instance where dag_id = 'preemption_resume' and task_id = ?",
            (task_id,),
        ).fetchone()
    return (row[0], row[1]) if row else ("missing", 0)


def xcom(env: dict[str, str], task_id: str, key: str) -> Any:
    with airflow_db(env) as db:
        row = db.execute(
            "select value from xcom where dag_id = 'preemption_resume' and task_id = ? and key = ?",
            (task_id, key),
        ).fetchone()
    assert row is not None, f"no XCom {key} for {task_id}"
    return xcom_value(row[0])


def trained(checkpoints: Path, mode: str) -> dict[int, list[int]]:
    """Which epochs each try's replica trained (the replica's own record, in its checkpoint directory)."""
    (record,) = checkpoints.glob(f"preemption_resume/spot_{mode}/*/*/trained")
    epochs: dict[int, list[int]] = {}
    for line in record.read_text().splitlines():
        attempt, epoch = line.split()
        epochs.setdefault(int(attempt), []).append(int(epoch))
    return epochs


@pytest.mark.parametrize("mode", MODES)
def test_a_preempted_spot_task_is_retried_and_resumes_from_its_checkpoint(run: Any, mode: str) -> None:
    env, output, checkpoints, preemptor = run
    task_id = f"spot_{mode}"
    assert preemptor.created.get(mode), f"{task_id} never saved epoch {PREEMPT_AFTER} on try 1"
    assert task_row(env, task_id) == ("success", 2), output[-6000:]

    (decision,) = xcom(env, task_id, "retry_decisions")
    assert decision["action"] == "retry" and decision["delay_seconds"] == 1
    assert decision["cause"]["reason"] == "Preempted"
    assert decision["reason"].startswith("TrainingRetryPolicy: infrastructure (Preempted)")
    assert decision["reason"] in output

    # Try 2 started from the newest checkpoint try 1 saved before it was stopped, said so, and
    # trained only the epochs after it.
    epochs = trained(checkpoints, mode)
    k = max(epochs[1])
    # Try 1 held after PREEMPT_AFTER (the DAG's HOLD_AFTER) until the preemption stopped it.
    assert k == PREEMPT_AFTER and epochs[1] == list(range(1, k + 1))
    assert epochs[2] == list(range(k + 1, EPOCHS + 1))
    resumed = re.findall(rf"resuming from (\S*/{task_id}/\S*/epoch-(\d+)) \(epoch (\d+)\)", output)
    assert resumed and all(int(file) == k and int(epoch) == k for _, file, epoch in resumed), output[-6000:]
    result = xcom(env, task_id, "return_value")
    assert result["state"] == "succeeded"
    assert xcom(env, task_id, "checkpoint")["epoch"] == EPOCHS
