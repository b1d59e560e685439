"""The MultiKueue variant of the sweep example, run with `airflow dags test` on a local MultiKueue manager
with two worker clusters (the queue objects the example ships, example_dags/kueue/multikueue.yaml), the
training program replaced by a quick one that prints the metric: the DAG's wiring through MultiKueue and
the follow on the workers, not TensorFlow, is under test.

`airflow dags test` runs the mapped trials one after another, so how Kueue spreads trials that wait
together over the workers is shown by tests/integration/test_multikueue_follow.py's sweep.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from airflow_cli import dag_test_run, dags_test, migrated_airflow_env
from test_kueue_example import QUICK_TRAINING as INSTANT_TRAINING

pytestmark = [pytest.mark.dags, pytest.mark.cluster, pytest.mark.timeout(600)]

EXAMPLES = Path(__file__).resolve().parents[2] / "example_dags"
DAG_ID = "example_tfjob_sweep_multikueue"
# test_kueue_example's stand-in for training/digits_mwms.py, holding after its first line until a follow
# reads its log (its pod's name in HOLDS, made by _let_followed_pods_go; 120 s at most): MultiKueue removes
# the worker's copy, pods included, as soon as the job ends, so a program that ends before the follow
# reaches the worker leaves no line to read (docs/howto/kueue.md). A fixed second once fell short at load 17.
HOLD = """
import os, time
deadline = time.monotonic() + 120
while not os.path.exists(os.path.join(HOLDS, os.environ["HOSTNAME"])) and time.monotonic() < deadline:
    time.sleep(0.05)
"""


def quick_training(holds: Path) -> str:
    held = f"\nHOLDS = {str(holds)!r}{HOLD}print(f\"test_accuracy"
    return INSTANT_TRAINING.replace("\nprint(f\"test_accuracy", held)


@contextmanager
def _let_followed_pods_go(cluster: Any, holds: Path) -> Iterator[None]:
    """While the run lasts, marks in `holds` each worker pod a `follow=true` log stream reads; fails the
    test if the marking itself failed (the replicas would have waited out their bound)."""
    done, failed = threading.Event(), []

    def watch() -> None:
        try:
            while not done.wait(0.05):
                for worker in cluster.workers:
                    for pod in cluster.followed_pods("default", worker):
                        (holds / pod).touch()
        except Exception as error:
            failed.append(error)

    thread = threading.Thread(target=watch, daemon=True, name="let-followed-pods-go")
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(5)
    assert not failed, f"marking the followed pods failed: {failed[0]!r}"
    assert {path.name for path in holds.iterdir()}, "no pod was ever followed"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from airflow_tfjob.local import LocalCluster
    from airflow_tfjob.local.kueue.startobjects import load_objects

    objects = load_objects([EXAMPLES / "kueue" / "multikueue.yaml"])
    with LocalCluster(multikueue_workers=2, kueue={"integrations": ["kubeflow.org/tfjob"], "objects": objects}) as c:
        yield c


@pytest.fixture(scope="module")
def env(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    training = tmp_path_factory.mktemp("training")
    (training / "digits_mwms.py").write_text(quick_training(training / "holds"))
    (training / "holds").mkdir()
    extra = {"TFJOB_EXAMPLES_PYTHON": sys.executable, "TFJOB_EXAMPLES_TRAINING_DIR": str(training)}
    for worker in cluster.workers:  # the connections the example maps its workers to
        conn = {"kube_config_path": str(cluster.worker_kubeconfig(worker)), "namespace": "default"}
        extra[f"AIRFLOW_CONN_K8S_{worker.upper()}"] = json.dumps({"conn_type": "kubernetes", "extra": conn})
    home = tmp_path_factory.mktemp("airflow-home")
    return migrated_airflow_env(home, EXAMPLES, cluster.kubeconfig_path, extra, migrate_timeout=300)


def test_every_trial_runs_on_a_worker_and_its_replicas_lines_reach_its_task_log(cluster: Any,
                                                                                env: dict[str, str]) -> None:
    from kubernetes import client, config

    conf = {"learning_rates": [0.1, 0.3], "batch_sizes": [16], "epochs": 1}  # two trials: each a run of its own
    with _let_followed_pods_go(cluster, Path(env["TFJOB_EXAMPLES_TRAINING_DIR"]) / "holds"):
        output = dags_test(env, DAG_ID, "-c", json.dumps(conf), "-f", str(EXAMPLES / f"{DAG_ID}.py"), timeout=540)
    by_task, rows = dag_test_run(env, DAG_ID, "report")
    assert by_task == {("grid", -1): "success", **{("train", i): "success" for i in range(2)}, ("report", -1): "success"}
    assert [row["test_accuracy"] for row in rows] == [0.6, 0.8]
    told = re.findall(r"\[multikueue\] TFJob default/(\S+) runs on worker cluster '(worker\d)': following its "
                      r"replicas there \(connection 'k8s_(worker\d)'\)", output)
    assert len({job for job, _, _ in told}) == 2 and all(w == c for _, w, c in told), output[-6000:]
    for replica in ("worker-0", "worker-1"):  # every replica's lines, read on its worker
        assert output.count(f"[{replica}] training with ") == 2, output[-6000:]
    workers = [client.CustomObjectsApi(config.new_client_from_config(str(cluster.worker_kubeconfig(w))))
               for w in cluster.workers]
    deadline = time.monotonic() + 10
    while (left := [o["metadata"]["name"] for api in workers
                    for o in api.list_namespaced_custom_object("kubeflow.org", "v1", "default", "tfjobs")["items"]]):
        assert time.monotonic() < deadline, f"copies left on the workers 10 s after the run: {left}"
        time.sleep(0.2)  # polling the workers for a bounded condition
