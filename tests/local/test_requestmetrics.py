"""Request counters and the watch gauge of the local API server: /metrics and LocalCluster's readers."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import requests
from kubernetes import client, config, watch
from urllib3.exceptions import ProtocolError
from waiting import until

from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.apiserver.requestmetrics import LONGRUNNING, REQUESTS, classify, parse_text

TFJOBS = "/apis/kubeflow.org/v1/namespaces/default/tfjobs"


@pytest.mark.parametrize(
    ("method", "path", "query", "key"),
    [
        ("GET", f"{TFJOBS}/a", {}, ("GET", "tfjobs", "")),
        ("GET", TFJOBS, {}, ("LIST", "tfjobs", "")),
        ("GET", "/apis/kubeflow.org/v1/tfjobs", {}, ("LIST", "tfjobs", "")),
        ("GET", TFJOBS, {"watch": "True"}, ("WATCH", "tfjobs", "")),
        ("GET", TFJOBS, {"watch": "false"}, ("LIST", "tfjobs", "")),
        ("GET", "/api/v1/watch/namespaces/default/pods", {}, ("WATCH", "pods", "")),
        ("GET", "/api/v1/namespaces/default/pods/p/log", {"follow": "true"}, ("GET", "pods", "log")),
        ("PATCH", f"{TFJOBS}/a/status", {}, ("PATCH", "tfjobs", "status")),
        ("POST", TFJOBS, {}, ("POST", "tfjobs", "")),
        ("DELETE", TFJOBS, {}, ("DELETECOLLECTION", "tfjobs", "")),
        ("DELETE", f"{TFJOBS}/a", {}, ("DELETE", "tfjobs", "")),
        ("GET", "/api/v1/namespaces/default", {}, ("GET", "namespaces", "")),
        ("PUT", "/api/v1/namespaces/x/status", {}, ("PUT", "namespaces", "status")),
        ("GET", "/version", {}, ("GET", "", "")),
        ("GET", "/apis/kubeflow.org/v1", {}, ("GET", "", "")),
        ("GET", "/api/v1/namespaces/default/widgets", {}, ("GET", "", "")),
        ("GET", "/api/v1/namespaces/default/pods/p/exec", {}, ("GET", "", "")),
        ("BREW", TFJOBS, {}, ("OTHER", "tfjobs", "")),
    ],
)
def test_classify(method: str, path: str, query: dict[str, str], key: tuple[str, str, str]) -> None:
    assert classify(method, path, query) == key


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(controller=False, runner=False) as c:
        yield c


@pytest.fixture(scope="module")
def api(cluster: LocalCluster) -> client.ApiClient:
    return config.new_client_from_config(str(cluster.kubeconfig_path))


def scrape(cluster: LocalCluster) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    resp = requests.get(f"{cluster.url}/metrics", timeout=10)
    assert resp.status_code == 200 and resp.headers["Content-Type"].startswith("text/plain")
    return {(name, tuple(sorted(labels.items()))): value for name, labels, value in parse_text(resp.text)}


def test_requests_are_counted_by_verb_resource_and_subresource(cluster: LocalCluster, api: client.ApiClient) -> None:
    crd = client.CustomObjectsApi(api)
    before = {verb: cluster.request_count(verb, "tfjobs") for verb in ("POST", "GET", "LIST", "PATCH", "DELETE")}
    total = cluster.request_count()
    job = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "counted"}, "spec": {
        "tfReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [{"name": "tensorflow", "image": "tf"}]}}}}}}
    crd.create_namespaced_custom_object("kubeflow.org", "v1", "default", "tfjobs", job)
    for _ in range(3):
        crd.get_namespaced_custom_object("kubeflow.org", "v1", "default", "tfjobs", "counted")
    crd.list_namespaced_custom_object("kubeflow.org", "v1", "default", "tfjobs")
    crd.patch_namespaced_custom_object_status("kubeflow.org", "v1", "default", "tfjobs", "counted",
                                              {"status": {"startTime": "2026-01-01T00:00:00Z"}})
    crd.delete_namespaced_custom_object("kubeflow.org", "v1", "default", "tfjobs", "counted")
    assert requests.get(f"{cluster.url}/version", timeout=10).status_code == 200
    after = {verb: cluster.request_count(verb, "tfjobs") for verb in before}
    assert {v: after[v] - before[v] for v in before} == {"POST": 1, "GET": 3, "LIST": 1, "PATCH": 1, "DELETE": 1}
    assert cluster.request_count("PATCH", "tfjobs", "status") >= 1
    assert cluster.request_count(resource="tfjobs", subresource="") == sum(after.values()) - cluster.request_count(
        "PATCH", "tfjobs", "status")
    assert cluster.request_count() - total == 8  # the 7 above and /version
    # The same numbers on /metrics; reading /metrics does not count itself.
    first = scrape(cluster)
    second = scrape(cluster)
    assert first == second
    key = (REQUESTS, (("resource", "tfjobs"), ("subresource", ""), ("verb", "GET")))
    assert first[key] == after["GET"]


def test_watch_gauge_follows_open_streams(cluster: LocalCluster, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    assert cluster.watch_count("pods") == 0
    watches_before = cluster.request_count("WATCH", "pods")
    w = watch.Watch()
    started = threading.Event()
    ended: list[ProtocolError | None] = []

    def consume() -> None:
        started.set()
        try:
            for _ in w.stream(core.list_namespaced_pod, "default", timeout_seconds=30):
                pass
        except ProtocolError as exc:  # kubernetes 36's Watch.stop() shuts the socket under the reader
            ended.append(exc)
        else:
            ended.append(None)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    started.wait(5)
    until(lambda: cluster.watch_count("pods") == 1, "the watch to be open")
    assert cluster.watch_count() >= 1 and cluster.watch_count("tfjobs") == 0
    assert scrape(cluster)[(LONGRUNNING, (("resource", "pods"), ("verb", "WATCH")))] == 1
    assert cluster.request_count("WATCH", "pods") == watches_before + 1
    # The client hanging up ends the stream on the server too (the gauge goes back to 0).
    w.stop()
    thread.join(10)
    assert not thread.is_alive() and len(ended) == 1
    until(lambda: cluster.watch_count("pods") == 0, "the watch to be closed")
