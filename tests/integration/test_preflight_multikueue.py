"""Preflight of a job whose queue dispatches to MultiKueue's workers (issue 37, item 3): for a LocalQueue
whose ClusterQueue has a MultiKueue AdmissionCheck, ``tfjob-preflight`` (its main, in this process:
tests/cli_support.py) and ``preflight=True`` give one row per worker cluster of the check's
MultiKueueConfig: its connection mapped, the worker reachable through it, the kind served there, the
verbs the follow reads the replicas with allowed; each missing part with its fix. One local manager with
two workers for the module (test_multikueue_follow.py's fixture, its queue "mk")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import test_multikueue_follow
import yaml
from cli_support import run_main
from operator_support import TaskInstance, context_for
from test_deferred_parity import TaskLog
from test_kueue import operator
from test_preflight import row

from airflow_tfjob.local.node.ports import host_ports
from airflow_tfjob.preflight.cli import main

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

NS = "default"
#: test_multikueue_follow's module fixture (a manager and two workers, the queue "mk"), one for this module.
manager = test_multikueue_follow.manager
_connect = test_multikueue_follow._connect


def _conn(kubeconfig: Path | str) -> str:
    return json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig), "namespace": NS}})


@pytest.fixture(scope="module")
def nowhere(manager: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """worker1's kubeconfig pointed at a port nothing listens on: a worker that does not answer."""
    port = host_ports().reserve()  # reserved and never bound: nothing listens there (node/ports.py)
    config = yaml.safe_load(manager.worker_kubeconfig("worker1").read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path = tmp_path_factory.mktemp("nowhere") / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_each_worker_of_the_queue_is_a_row_with_its_fix(manager: Any, nowhere: Path) -> None:
    """worker1 mapped and fine; worker2 mapped to a connection whose server does not answer: a warning
    naming the connection (the job can run; its lines would not be read). Exit 0: nothing blocks."""
    env = {"AIRFLOW_CONN_K8S_WORKER1": _conn(manager.worker_kubeconfig("worker1")), "AIRFLOW_CONN_K8S_GONE": _conn(nowhere)}
    done = run_main(main, ["--kubeconfig", str(manager.kubeconfig_path), "--namespace", NS, "--kind", "TFJob",
                           "--queue", "mk", "--worker-connection", "worker1=k8s_worker1",
                           "--worker-connection", "worker2=k8s_gone", "--timeout", "1"], env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    one = row(done.stdout, "MultiKueue worker worker1 (TFJob)")
    assert " ok " in one and "connection k8s_worker1: reachable, tfjobs served, the 6 verbs the follow uses allowed" in one
    two = row(done.stdout, "MultiKueue worker worker2 (TFJob)")
    assert " warning " in two and "connection k8s_gone: the worker did not answer" in two, two
    assert "check connection k8s_gone (its kubeconfig, server and credentials)" in two


def test_a_worker_without_a_connection_says_which_to_add(manager: Any) -> None:
    done = run_main(main, ["--kubeconfig", str(manager.kubeconfig_path), "--namespace", NS, "--kind", "TFJob",
                           "--queue", "mk"])
    assert done.returncode == 0, done.stdout + done.stderr
    for worker in ("worker1", "worker2"):
        line = row(done.stdout, f"MultiKueue worker {worker} (TFJob)")
        assert line.split()[4:8] == ["warning", "no", "connection", "mapped"], line
        assert f"multikueue_connections={{'{worker}': '<conn id>'}}" in line


def test_a_malformed_worker_connection_flag_is_a_usage_error(manager: Any) -> None:
    done = run_main(main, ["--kubeconfig", str(manager.kubeconfig_path), "--kind", "TFJob", "--queue", "mk",
                           "--worker-connection", "worker1"])
    assert done.returncode == 2
    assert "--worker-connection 'worker1': give WORKER=CONN_ID, e.g. worker1=k8s_worker1" in done.stderr


def test_preflight_true_checks_the_workers_through_the_task_s_map(manager: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The connection's extra maps worker1, the operator's parameter worker2: both rows ok in the task
    log, before the job is submitted (and runs)."""
    _connect(manager, monkeypatch, mapped=True)
    extra = {"kube_config_path": str(manager.kubeconfig_path), "namespace": NS,
             "multikueue_connections": {"worker1": "k8s_worker1"}}
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps({"conn_type": "kubernetes", "extra": extra}))
    log = TaskLog()
    op = operator(log, task_id="mk-preflight", kueue_queue="mk", preflight=True,
                  multikueue_connections={"worker2": "k8s_worker2"})
    assert op.execute(context_for(TaskInstance(task_id="mk-preflight")))["state"] == "succeeded"
    text = "\n".join(log.lines)
    for worker in manager.workers:
        line = row(text, f"MultiKueue worker {worker} (TFJob)")
        assert line.split()[4:7] == ["ok", "connection", f"k8s_{worker}:"] and "reachable" in line, line


def test_the_manager_row_is_the_clusterrole_asked_at_the_cluster_scope(tmp_path: Path) -> None:
    """The manager's row against the local API server's RBAC: a user bound to the shipped Role alone is
    warned with the ClusterRole file to apply; the Role with multikueueclusters granted in the
    namespace does not do (MultiKueueClusters are cluster-scoped: the review asks at that scope); bound
    to the Role and the shipped ClusterRole, the row is ok. A cluster of its own (users and roles), with
    no node: nothing runs."""
    import airflow_tfjob
    from airflow_tfjob.local import LocalCluster
    from airflow_tfjob.local.kueue.options import queue_objects
    from airflow_tfjob.local.multikueue import CHECK_NAME

    rbac = Path(airflow_tfjob.__file__).parent / "rbac"
    docs = list(yaml.safe_load_all((rbac / "role.yaml").read_text()))
    docs[0]["rules"].append({"apiGroups": ["kueue.x-k8s.io"], "resources": ["multikueueclusters"], "verbs": ["get"]})
    in_namespace = tmp_path / "role-in-namespace.yaml"
    in_namespace.write_text(yaml.safe_dump_all(docs))
    # Preflight reads the queue's chain (LocalQueue, ClusterQueue, AdmissionCheck, MultiKueueConfig) to
    # find the workers; the follow does not, so neither shipped file grants it: a viewer's ClusterRole.
    viewer = tmp_path / "kueue-viewer.yaml"
    viewer.write_text(yaml.safe_dump({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                      "metadata": {"name": "kueue-viewer"}, "rules": [{
                                          "apiGroups": ["kueue.x-k8s.io"], "verbs": ["get"], "resources": [
                                              "localqueues", "clusterqueues", "admissionchecks", "multikueueconfigs"]}]}))
    roles = {"plain": [rbac / "role.yaml", viewer], "namespaced": [in_namespace, viewer],
             "granted": [rbac / "role.yaml", rbac / "multikueue-clusterrole.yaml", viewer]}
    queues = queue_objects(cluster_queue="mk", local_queue="mk", namespace=NS, quota={"cpu": 4},
                           admission_checks=[CHECK_NAME])
    part = "MultiKueue on the manager (airflow_tfjob/rbac/multikueue-clusterrole.yaml)"
    with LocalCluster(auth=True, roles=roles, runner=False, multikueue_workers=1,
                      kueue={"integrations": ["kubeflow.org/tfjob"], "objects": queues}) as cluster:
        def manager_row(user: str) -> str:
            done = run_main(main, ["--kubeconfig", str(cluster.kubeconfig_for(user)), "--namespace", NS,
                                   "--kind", "TFJob", "--queue", "mk"])
            assert done.returncode == 0, done.stdout + done.stderr
            return row(done.stdout, part)

        for user in ("plain", "namespaced"):
            line = manager_row(user)
            assert " warning " in line and "0 of 1 verbs allowed cluster-wide" in line, (user, line)
            assert "kubectl apply -f airflow_tfjob/rbac/multikueue-clusterrole.yaml and bind the ClusterRole" in line
        line = manager_row("granted")
        assert " ok " in line and "the 1 cluster-wide verbs the follow uses allowed" in line, line
