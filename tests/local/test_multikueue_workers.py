"""One local cluster hosting a Kueue manager and MultiKueue worker clusters (issue 37, part 1, step 2),
through the official client over real HTTP: each worker its own API server (own port and kubeconfig),
store and node; the manager holds a kubeconfig Secret and a MultiKueueCluster per worker, the
MultiKueueConfig listing them and the AdmissionCheck naming it, as Kueue's MultiKueue setup installs
them; the manager runs no node; the workers stop with the manager. Off unless asked for."""

from __future__ import annotations

import base64
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client, config
from kueue_support import KUEUE, V2, Kube
from waiting import until

from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.cli import build_parser, build_runtime
from airflow_tfjob.local.kueue import KUBEFLOW_V1, queue_objects
from airflow_tfjob.local.multikueue import CHECK_NAME, CONTROLLER_NAME
from airflow_tfjob.local.node.ports import host_ports

QUEUES = queue_objects(cluster_queue="cq", local_queue="lq", quota={"cpu": 4}, admission_checks=[CHECK_NAME])


@pytest.fixture(scope="module")
def manager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(workdir=tmp_path_factory.mktemp("multikueue"), multikueue_workers=2,
                      kueue={"integrations": KUBEFLOW_V1, "objects": QUEUES}) as cluster:
        yield cluster


def _secret_kubeconfig(kube: Kube, worker: str) -> dict[str, object]:
    secret = client.CoreV1Api(kube.api).read_namespaced_secret(f"{worker}-kubeconfig", "kueue-system")
    return dict(yaml.safe_load(base64.b64decode(secret.data["kubeconfig"])))


def test_each_worker_is_a_cluster_of_its_own_reached_through_the_managers_secret(manager: LocalCluster) -> None:
    kube = Kube.on(manager)
    assert manager.workers == ("worker1", "worker2")
    urls = {manager.url}
    for worker in manager.workers:
        kubeconfig = _secret_kubeconfig(kube, worker)
        assert kubeconfig == yaml.safe_load(manager.worker_kubeconfig(worker).read_text())
        remote = config.new_client_from_config_dict(kubeconfig)
        urls.add(remote.configuration.host)
        # The worker answers on its own port, with its own store: a namespace made there is not on the
        # manager, and the worker serves no MultiKueue kinds (it is no manager).
        client.CoreV1Api(remote).create_namespace({"metadata": {"name": f"only-on-{worker}"}})
        with pytest.raises(client.ApiException) as caught:
            client.CoreV1Api(kube.api).read_namespace(f"only-on-{worker}")
        assert caught.value.status == 404
        with pytest.raises(client.ApiException) as caught:
            client.CustomObjectsApi(remote).list_cluster_custom_object(KUEUE, V2, "multikueueclusters")
        assert caught.value.status == 404
    assert len(urls) == 3


def test_the_manager_holds_the_multikueue_objects_for_its_workers(manager: LocalCluster) -> None:
    crd = Kube.on(manager).crd
    for worker in manager.workers:
        mkc = crd.get_cluster_custom_object(KUEUE, V2, "multikueueclusters", worker)
        assert mkc["spec"] == {"clusterSource": {"kubeConfig": {"location": f"{worker}-kubeconfig",
                                                                "locationType": "Secret"}}}
    mkconf = crd.get_cluster_custom_object(KUEUE, V2, "multikueueconfigs", "multikueue")
    assert mkconf["spec"]["clusters"] == ["worker1", "worker2"]
    check = crd.get_cluster_custom_object(KUEUE, V2, "admissionchecks", CHECK_NAME)
    assert check["spec"] == {"controllerName": CONTROLLER_NAME, "parameters": {
        "apiGroup": KUEUE, "kind": "MultiKueueConfig", "name": "multikueue"}}
    cq = crd.get_cluster_custom_object(KUEUE, V2, "clusterqueues", "cq")
    assert cq["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": CHECK_NAME}]}


def test_each_worker_has_the_managers_queues_without_the_check(manager: LocalCluster) -> None:
    for worker in manager.workers:
        remote = client.CustomObjectsApi(config.new_client_from_config(str(manager.worker_kubeconfig(worker))))
        cq = remote.get_cluster_custom_object(KUEUE, V2, "clusterqueues", "cq")
        assert "admissionChecksStrategy" not in cq["spec"]
        assert remote.get_namespaced_custom_object(KUEUE, V2, "default", "localqueues", "lq")["spec"] == {
            "clusterQueue": "cq", "stopPolicy": "None"}


def test_replicas_run_on_workers_only(manager: LocalCluster) -> None:
    assert manager.runtime.runner is None
    assert all(w.runner is not None for w in manager.runtime.workers.values())


def test_the_workers_stop_with_the_manager(tmp_path: Path) -> None:
    with LocalCluster(workdir=tmp_path, multikueue_workers=1, kueue=True) as cluster:
        address = urlsplit(yaml.safe_load(cluster.worker_kubeconfig("worker1").read_text())
                           ["clusters"][0]["cluster"]["server"])
        socket.create_connection((address.hostname, address.port), timeout=5).close()
    with pytest.raises(OSError):
        socket.create_connection((address.hostname, address.port), timeout=5).close()


def test_off_by_default_and_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs Kueue on the manager"):
        LocalCluster(workdir=tmp_path, multikueue_workers=2)
    for bad in (-1, 9, True, "2"):
        with pytest.raises(ValueError, match="multikueue_workers must be a whole number"):
            LocalCluster(workdir=tmp_path, multikueue_workers=bad, kueue=True)  # type: ignore[arg-type]
    assert LocalCluster(workdir=tmp_path, kueue=True).workers == ()


def test_serve_takes_the_number_of_workers_and_implies_kueue(tmp_path: Path) -> None:
    runtime = build_runtime(build_parser().parse_args(["serve", "--workdir", str(tmp_path),
                                                      "--multikueue-workers", "2"]))
    assert list(runtime.workers) == ["worker1", "worker2"] and runtime.kueue is not None
    assert runtime.kueue.options.multikueue
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--multikueue-workers", "many"])


# ---- Active conditions: Kueue v0.19.2 test/integration/multikueue/setup_test.go


def _active(crd: client.CustomObjectsApi, plural: str, name: str) -> tuple[str, str, str] | None:
    """(status, reason, message) of the object's Active condition, None without one (or without it)."""
    try:
        obj = crd.get_cluster_custom_object(KUEUE, V2, plural, name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == "Active":
            return cond["status"], cond["reason"], cond["message"]
    return None


def _wait_active(crd: client.CustomObjectsApi, plural: str, name: str, want: tuple[str, str, str]) -> None:
    seen: list[object] = []

    def check() -> bool:
        seen.append(_active(crd, plural, name))
        return seen[-1] == want

    try:
        until(check, f"{plural}/{name} Active {want}")
    except AssertionError:
        raise AssertionError(f"{plural}/{name}: wanted Active {want}, last saw {seen[-1]}") from None


def test_the_hosted_workers_and_check_become_active(manager: LocalCluster) -> None:
    crd = Kube.on(manager).crd
    for worker in manager.workers:
        _wait_active(crd, "multikueueclusters", worker, ("True", "Active", "Connected"))
    _wait_active(crd, "admissionchecks", CHECK_NAME, ("True", "Active", "The admission check is active"))


def _testing_check(crd: client.CustomObjectsApi) -> None:
    crd.create_cluster_custom_object(KUEUE, V2, "admissionchecks", {
        "apiVersion": f"{KUEUE}/{V2}", "kind": "AdmissionCheck", "metadata": {"name": "testing-ac"},
        "spec": {"controllerName": CONTROLLER_NAME,
                 "parameters": {"apiGroup": KUEUE, "kind": "MultiKueueConfig", "name": "testing-config"}}})


def _create(crd: client.CustomObjectsApi, plural: str, kind: str, name: str, spec: dict[str, object]) -> None:
    crd.create_cluster_custom_object(KUEUE, V2, plural, {"apiVersion": f"{KUEUE}/{V2}", "kind": kind,
                                                         "metadata": {"name": name}, "spec": spec})


def _cleanup(kube: Kube) -> None:
    for plural, name in (("admissionchecks", "testing-ac"), ("multikueueconfigs", "testing-config"),
                         ("multikueueclusters", "testing-cluster")):
        try:
            kube.crd.delete_cluster_custom_object(KUEUE, V2, plural, name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
    try:
        client.CoreV1Api(kube.api).delete_namespaced_secret("testing-secret", "kueue-system")
    except client.ApiException as exc:
        if exc.status != 404:
            raise


@pytest.fixture
def kube(manager: LocalCluster) -> Iterator[Kube]:
    kube = Kube.on(manager)
    yield kube
    _cleanup(kube)


def _secret(text: str) -> dict[str, object]:
    return {"metadata": {"name": "testing-secret", "namespace": "kueue-system"},
            "data": {"kubeconfig": base64.b64encode(text.encode()).decode()}}


def test_active_conditions_kubeconfig_by_secret(manager: LocalCluster, kube: Kube) -> None:
    """Kueue v0.19.2: setup_test.go, "Should properly manage the active condition of AdmissionChecks and
    MultiKueueClusters, kubeconfig provided by secret" (worker1's kubeconfig as the secret)."""
    crd = kube.crd
    _testing_check(crd)
    _wait_active(crd, "admissionchecks", "testing-ac", (
        "False", "BadConfig",
        'Cannot load the AdmissionChecks parameters: MultiKueueConfig.kueue.x-k8s.io "testing-config" not found'))
    with pytest.raises(client.ApiException) as caught:
        _create(crd, "multikueueconfigs", "MultiKueueConfig", "bad-config", {"clusters": ["c1", "c2", "c1"]})
    assert "must be unique" in caught.value.body
    _create(crd, "multikueueconfigs", "MultiKueueConfig", "testing-config", {"clusters": ["testing-cluster"]})
    _wait_active(crd, "admissionchecks", "testing-ac", ("False", "NoUsableClusters",
                                                        "Missing clusters: [testing-cluster]"))
    _create(crd, "multikueueclusters", "MultiKueueCluster", "testing-cluster",
            {"clusterSource": {"kubeConfig": {"location": "testing-secret", "locationType": "Secret"}}})
    _wait_active(crd, "multikueueclusters", "testing-cluster", (
        "False", "BadKubeConfig", 'load client config failed: Secret "testing-secret" not found'))
    _wait_active(crd, "admissionchecks", "testing-ac", ("False", "NoUsableClusters",
                                                        "Inactive clusters: [testing-cluster]"))
    client.CoreV1Api(kube.api).create_namespaced_secret(
        "kueue-system", _secret(manager.worker_kubeconfig("worker1").read_text()))
    _wait_active(crd, "multikueueclusters", "testing-cluster", ("True", "Active", "Connected"))
    _wait_active(crd, "admissionchecks", "testing-ac", ("True", "Active", "The admission check is active"))


def test_active_conditions_kubeconfig_by_file(manager: LocalCluster, kube: Kube, tmp_path: Path) -> None:
    """Kueue v0.19.2: setup_test.go, "Should properly manage the active condition of AdmissionChecks and
    MultiKueueClusters, kubeconfig provided by file" (path validation off, as the test sets it)."""
    crd = kube.crd
    path = tmp_path / "worker.kubeconfig"
    _testing_check(crd)
    _create(crd, "multikueueconfigs", "MultiKueueConfig", "testing-config", {"clusters": ["testing-cluster"]})
    _create(crd, "multikueueclusters", "MultiKueueCluster", "testing-cluster",
            {"clusterSource": {"kubeConfig": {"location": str(path), "locationType": "Path"}}})
    _wait_active(crd, "multikueueclusters", "testing-cluster", (
        "False", "BadKubeConfig", f"load client config failed: open {path}: no such file or directory"))
    _wait_active(crd, "admissionchecks", "testing-ac", ("False", "NoUsableClusters",
                                                        "Inactive clusters: [testing-cluster]"))
    path.write_text(manager.worker_kubeconfig("worker2").read_text())
    # Upstream watches the file (fswatch.go); here the retry after the failed load reads it (a touch of the
    # object makes the reconcile come now rather than after the backoff).
    crd.patch_cluster_custom_object(KUEUE, V2, "multikueueclusters", "testing-cluster",
                                    {"metadata": {"labels": {"touched": "yes"}}})
    _wait_active(crd, "multikueueclusters", "testing-cluster", ("True", "Active", "Connected"))
    _wait_active(crd, "admissionchecks", "testing-ac", ("True", "Active", "The admission check is active"))


def test_insecure_kubeconfig_by_secret(manager: LocalCluster, kube: Kube) -> None:
    """Kueue v0.19.2: setup_test.go, "Should properly detect insecure kubeconfig of MultiKueueClusters,
    kubeconfig provided by secret": a CA file path is refused, a valid kubeconfig in the Secret then
    makes the cluster and the check active."""
    crd = kube.crd
    insecure = yaml.safe_load(manager.worker_kubeconfig("worker1").read_text())
    insecure["clusters"][0]["name"] = "default-cluster"
    insecure["clusters"][0]["cluster"]["certificate-authority"] = "/some/ca.crt"
    insecure["contexts"][0]["context"]["cluster"] = "default-cluster"
    core = client.CoreV1Api(kube.api)
    core.create_namespaced_secret("kueue-system", _secret(yaml.safe_dump(insecure)))
    _testing_check(crd)
    _create(crd, "multikueueconfigs", "MultiKueueConfig", "testing-config", {"clusters": ["testing-cluster"]})
    _create(crd, "multikueueclusters", "MultiKueueCluster", "testing-cluster",
            {"clusterSource": {"kubeConfig": {"location": "testing-secret", "locationType": "Secret"}}})
    _wait_active(crd, "multikueueclusters", "testing-cluster", (
        "False", "InsecureKubeConfig", "load client config failed: certificate-authority file paths are not "
        "allowed, use certificate-authority-data for cluster default-cluster"))
    _wait_active(crd, "admissionchecks", "testing-ac", ("False", "NoUsableClusters",
                                                        "Inactive clusters: [testing-cluster]"))
    core.replace_namespaced_secret("testing-secret", "kueue-system",
                                   _secret(manager.worker_kubeconfig("worker1").read_text()))
    _wait_active(crd, "multikueueclusters", "testing-cluster", ("True", "Active", "Connected"))
    _wait_active(crd, "admissionchecks", "testing-ac", ("True", "Active", "The admission check is active"))


def test_an_unreachable_worker_is_a_failed_connection(manager: LocalCluster, kube: Kube) -> None:
    """A kubeconfig whose server nothing listens on: `ClientConnectionFailed` (multikueuecluster.go's
    reason when the remote client cannot be set up), and the check with one of two clusters usable is
    Active with reason `SomeActiveClusters`."""
    crd = kube.crd
    free = host_ports().reserve()  # reserved and never bound: nothing listens there (node/ports.py)
    dead = yaml.safe_load(manager.worker_kubeconfig("worker1").read_text())
    dead["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{free}"
    client.CoreV1Api(kube.api).create_namespaced_secret("kueue-system", _secret(yaml.safe_dump(dead)))
    _testing_check(crd)
    _create(crd, "multikueueconfigs", "MultiKueueConfig", "testing-config", {"clusters": ["testing-cluster",
                                                                                          "worker1"]})
    _create(crd, "multikueueclusters", "MultiKueueCluster", "testing-cluster",
            {"clusterSource": {"kubeConfig": {"location": "testing-secret", "locationType": "Secret"}}})
    until(lambda: (_active(crd, "multikueueclusters", "testing-cluster") or ("",))[:2]
          == ("False", "ClientConnectionFailed"), "the connection to fail")
    _wait_active(crd, "admissionchecks", "testing-ac", ("True", "SomeActiveClusters",
                                                        "Inactive clusters: [testing-cluster]"))


def test_a_cluster_profile_source_reports_the_gate_off(kube: Kube) -> None:
    """Kueue v0.19.2: setup_test.go, "Should report feature gate disabled when ClusterProfileRef is set"
    (its first step; ClusterProfile objects are not served here, so the second is not reproduced)."""
    _create(kube.crd, "multikueueclusters", "MultiKueueCluster", "testing-cluster",
            {"clusterSource": {"clusterProfileRef": {"name": "cp"}}})
    _wait_active(kube.crd, "multikueueclusters", "testing-cluster", (
        "False", "MultiKueueClusterProfileFeatureDisabled",
        "load client config failed: MultiKueueClusterProfile feature gate is disabled"))


def test_a_lost_worker_turns_inactive(tmp_path: Path) -> None:
    """A worker that goes away (LocalCluster.lose_worker: its whole cluster stops): the end of the
    manager's watch of it brings a new reach, which fails, so its MultiKueueCluster is `Active` False
    `ClientConnectionFailed` and the check, with the other worker still there, `SomeActiveClusters`
    (admissioncheck.go). Its jobs' re-dispatch: test_multikueue_dispatch.py."""
    with LocalCluster(workdir=tmp_path, multikueue_workers=2, kueue=True) as cluster:
        crd = Kube.on(cluster).crd
        for worker in cluster.workers:
            _wait_active(crd, "multikueueclusters", worker, ("True", "Active", "Connected"))
        cluster.lose_worker("worker2")
        until(lambda: (_active(crd, "multikueueclusters", "worker2") or ("",))[:2]
              == ("False", "ClientConnectionFailed"), "worker2 to be inactive")
        _wait_active(crd, "admissionchecks", CHECK_NAME, ("True", "SomeActiveClusters",
                                                          "Inactive clusters: [worker2]"))
        assert _active(crd, "multikueueclusters", "worker1") == ("True", "Active", "Connected")
        with pytest.raises(ValueError, match="no MultiKueue worker 'worker9'"):
            cluster.lose_worker("worker9")
