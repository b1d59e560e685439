"""The Kueue variant of the sweep example, run with `airflow dags test` on a local cluster with Kueue on
(the queue objects the example ships, example_dags/kueue/queues.yaml), the training program replaced by
a quick one that prints the metric: the DAG's wiring through Kueue, not TensorFlow, is under test.

`airflow dags test` runs the mapped trials one after another (each defers and its trigger runs inline),
so queueing behind one another is shown by tests/integration/test_kueue.py, which follows six deferred
trials at once.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from airflow_cli import dag_test_run, dags_test, migrated_airflow_env

pytestmark = [pytest.mark.dags, pytest.mark.cluster, pytest.mark.timeout(600)]

EXAMPLES = Path(__file__).resolve().parents[2] / "example_dags"
DAG_ID = "example_tfjob_sweep_kueue"
# Stands in for training/digits_mwms.py: the accuracy grows with the learning rate.
QUICK_TRAINING = r"""
import sys
args = dict(a.lstrip("-").split("=", 1) for a in sys.argv[1:])
print(f"training with {args}", flush=True)
print(f"test_accuracy={0.5 + float(args['learning_rate'])}", flush=True)
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    from airflow_tfjob.local import LocalCluster
    from airflow_tfjob.local.kueue.startobjects import load_objects

    training = tmp_path_factory.mktemp("training")
    (training / "digits_mwms.py").write_text(QUICK_TRAINING)
    objects = load_objects([EXAMPLES / "kueue" / "queues.yaml"])
    with LocalCluster(kueue={"integrations": ["kubeflow.org/tfjob"], "objects": objects}) as cluster:
        extra = {"TFJOB_EXAMPLES_PYTHON": sys.executable, "TFJOB_EXAMPLES_TRAINING_DIR": str(training)}
        home = tmp_path_factory.mktemp("airflow-home")
        yield migrated_airflow_env(home, EXAMPLES, cluster.kubeconfig_path, extra, migrate_timeout=300)


def test_the_kueue_sweep_runs_every_trial_through_the_queue(env: dict[str, str]) -> None:
    conf = {"learning_rates": [0.1, 0.3], "batch_sizes": [16, 64], "epochs": 1}
    output = dags_test(env, DAG_ID, "-c", json.dumps(conf), "-f", str(EXAMPLES / f"{DAG_ID}.py"), timeout=540)
    by_task, rows = dag_test_run(env, DAG_ID, "report")
    assert by_task == {("grid", -1): "success", **{("train", i): "success" for i in range(4)}, ("report", -1): "success"}
    assert [row["test_accuracy"] for row in rows] == [0.6, 0.6, 0.8, 0.8]
    assert all(row["preemptions"] == 0 and row["queue_wait_seconds"] >= 0 for row in rows)
    # Every trial went through Kueue's queue: its Workload admitted by the example's ClusterQueue.
    assert output.count("[kueue] admitted by ClusterQueue sweep-cluster-queue") == 4, output[-6000:]
    assert "Deferring while TFJob default/" in output
