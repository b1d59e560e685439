"""Fault injection on the local API server, as the official `kubernetes` client sees it."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
import requests
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from process_support import start_serve, stop_serve
from urllib3.exceptions import ProtocolError

from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.apiserver.requestmetrics import parse_text
from airflow_tfjob.local.faults import METRIC, FaultInjector, FaultPlan

PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(controller=False, runner=False) as c:
        yield c


@pytest.fixture
def core(cluster: LocalCluster) -> Iterator[client.CoreV1Api]:
    cluster.set_faults(None)
    # urllib3's own retries off (the stock client retries a 429 or 503 that has a Retry-After, and
    # idempotent verbs after a dropped connection): each call here is exactly one request.
    cfg = client.Configuration()
    config.load_kube_config(str(cluster.kubeconfig_path), client_configuration=cfg)
    cfg.retries = False
    api = client.ApiClient(cfg)
    yield client.CoreV1Api(api)
    cluster.set_faults(None)
    api.close()


def pod(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}}


def only(kind: str, **kw: object) -> FaultPlan:
    return FaultPlan(seed=3, rate=1.0, kinds=(kind,), **kw)  # type: ignore[arg-type]


def test_throttle_is_429_with_retry_after(cluster: LocalCluster, core: client.CoreV1Api) -> None:
    cluster.set_faults(only("throttle", retry_after=2))
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod("default")
    assert err.value.status == 429 and err.value.headers["Retry-After"] == "2"
    body = json.loads(err.value.body)
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "TooManyRequests", 429)
    assert body["details"] == {"retryAfterSeconds": 2}


def test_unavailable_is_503(cluster: LocalCluster, core: client.CoreV1Api) -> None:
    cluster.set_faults(only("unavailable"))
    with pytest.raises(ApiException) as err:
        core.read_namespace("default")
    assert err.value.status == 503 and json.loads(err.value.body)["reason"] == "ServiceUnavailable"


def test_server_errors_are_500_502_504_with_client_go_reasons(cluster: LocalCluster,
                                                              core: client.CoreV1Api) -> None:
    cluster.set_faults(only("server_error"))
    seen: dict[int, str] = {}
    for _ in range(40):
        with pytest.raises(ApiException) as err:
            core.read_namespace("default")
        seen[err.value.status] = json.loads(err.value.body)["reason"]
    assert seen == {500: "InternalError", 502: "InternalError", 504: "Timeout"}


def test_lost_reply_applies_the_change(cluster: LocalCluster, core: client.CoreV1Api) -> None:
    cluster.set_faults(only("lost_reply"))
    before = cluster.fault_counts()
    names = [f"lost-{uuid.uuid4().hex[:8]}" for _ in range(12)]
    outcomes = set()
    for name in names:
        try:
            core.create_namespaced_pod("default", pod(name))
            outcomes.add("created")
        except ApiException as exc:
            outcomes.add(exc.status)
        except ProtocolError:  # the connection was closed without a reply
            outcomes.add("no reply")
    # GETs are not mutating: never eligible for lost_reply, so the plan lets them through.
    assert {p.metadata.name for p in core.list_namespaced_pod("default").items} >= set(names)
    assert outcomes == {"no reply", 500, 504}
    assert cluster.fault_counts() == {**before, "lost_reply": before.get("lost_reply", 0) + len(names)}


def test_stream_cut_ends_a_watch(cluster: LocalCluster, core: client.CoreV1Api) -> None:
    cluster.set_faults(only("stream_cut", stream_cut_after=(0.2, 0.4)))
    before = cluster.fault_counts().get("stream_cut", 0)
    # Without the cut the server would end this watch cleanly after 300 s; a cut is a broken stream.
    with pytest.raises(ProtocolError):
        for _ in watch.Watch().stream(core.list_namespaced_pod, "default", timeout_seconds=300):
            pass
    assert cluster.fault_counts()["stream_cut"] == before + 1


def test_stream_cut_ends_a_follow_log(cluster: LocalCluster, core: client.CoreV1Api) -> None:
    name = f"logs-{uuid.uuid4().hex[:8]}"
    core.create_namespaced_pod("default", pod(name))
    cluster.call(lambda: cluster.podlogs.start_instance("default", name, "main").append(b"first line"))
    cluster.set_faults(only("stream_cut", stream_cut_after=(0.2, 0.4)))
    response = core.read_namespaced_pod_log(name, "default", follow=True, _preload_content=False)
    lines = []
    with pytest.raises(ProtocolError):
        for line in response.stream():
            lines.append(line)
    assert b"".join(lines) == b"first line\n"


def test_stream_end_ends_a_watch_properly_before_its_timeout(cluster: LocalCluster, core: client.CoreV1Api) -> None:
    cluster.set_faults(only("stream_end", stream_cut_after=(0.2, 0.4)))
    before = cluster.fault_counts().get("stream_end", 0)
    # Asked for 300 s; ended properly (no error) after the fault's 0.2-0.4 s.
    for _ in watch.Watch().stream(core.list_namespaced_pod, "default", timeout_seconds=300):
        pass
    assert cluster.fault_counts()["stream_end"] == before + 1


def test_stream_end_ends_a_follow_log_properly_while_the_container_runs(
    cluster: LocalCluster, core: client.CoreV1Api
) -> None:
    name = f"logs-{uuid.uuid4().hex[:8]}"
    core.create_namespaced_pod("default", pod(name))
    run = cluster.call(lambda: cluster.podlogs.start_instance("default", name, "main"))
    cluster.call(lambda: run.append(b"first line"))
    cluster.set_faults(only("stream_end", stream_cut_after=(0.2, 0.4)))
    response = core.read_namespaced_pod_log(name, "default", follow=True, _preload_content=False)
    # No ProtocolError: the stream ends as if the container had exited, although it has not.
    assert b"".join(response.stream()) == b"first line\n"
    assert not run.closed
    cluster.set_faults(None)
    cluster.call(lambda: run.append(b"second line"))
    whole = core.read_namespaced_pod_log(name, "default", _preload_content=False).data
    assert whole == b"first line\nsecond line\n"


def test_plain_requests_are_never_cut(cluster: LocalCluster, core: client.CoreV1Api) -> None:
    cluster.set_faults(only("stream_cut"))
    before = cluster.fault_counts()
    core.list_namespaced_pod("default")
    core.read_namespace("default")
    assert cluster.fault_counts() == before


def test_exempt_paths_and_verbs_filter(cluster: LocalCluster, core: client.CoreV1Api) -> None:
    cluster.set_faults(FaultPlan(rate=1.0, kinds=("throttle",), verbs=("POST",)))
    for path in ("/healthz", "/readyz", "/livez", "/version", "/metrics"):
        assert requests.get(cluster.url + path, timeout=10).status_code == 200, path
    assert core.list_namespaced_pod("default") is not None  # LIST is not in verbs
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod(f"p-{uuid.uuid4().hex[:8]}"))
    assert err.value.status == 429


def test_counters_on_metrics_and_set_faults_none(cluster: LocalCluster, core: client.CoreV1Api) -> None:
    cluster.set_faults(only("unavailable"))
    for _ in range(3):
        with pytest.raises(ApiException):
            core.read_namespace("default")
    cluster.set_faults(None)
    assert core.read_namespace("default").metadata.name == "default"
    samples = parse_text(requests.get(cluster.url + "/metrics", timeout=10).text)
    injected = {(labels["kind"], labels["verb"]): value for name, labels, value in samples if name == METRIC}
    assert injected[("unavailable", "GET")] >= 3
    assert sum(v for (kind, _), v in injected.items() if kind == "unavailable") == \
        cluster.fault_counts()["unavailable"]


def test_same_seed_same_faults_for_the_same_request_order(cluster: LocalCluster) -> None:
    def run() -> list[int]:
        cluster.set_faults(FaultPlan(seed=11, rate=0.5, kinds=("throttle", "unavailable", "server_error")))
        return [requests.get(cluster.url + PODS, timeout=10).status_code for _ in range(30)]

    first = run()
    assert first == run()
    assert {200, 429, 503} <= set(first)  # a mix, not all or nothing


def test_fault_plan_json_round_trip_and_cli_form() -> None:
    plan = FaultPlan.parse("seed=7,rate=0.05,kinds=throttle+lost_reply,verbs=GET+POST,latency=0.01,"
                           "retry_after=2,stream_cut_after=0.5+2")
    assert plan == FaultPlan(seed=7, rate=0.05, kinds=("throttle", "lost_reply"), verbs=("GET", "POST"),
                             latency=0.01, retry_after=2.0, stream_cut_after=(0.5, 2.0))
    assert FaultPlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan


@pytest.mark.parametrize(
    ("spec", "field"),
    [("rate=1.5", "rate"), ("kinds=throttle+boom", "kinds"), ("verbs=FETCH", "verbs"), ("latency=-1", "latency"),
     ("stream_cut_after=2+1", "stream_cut_after"), ("rate", "key=value"), ("seed=x", "seed"), ("color=red", "color")],
)
def test_bad_fault_plans_name_the_field(spec: str, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        FaultPlan.parse(spec)


def test_cli_refuses_a_bad_faults_spec() -> None:
    result = subprocess.run([sys.executable, "-m", "airflow_tfjob.local.cli", "serve", "--faults", "rate=2"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "FaultPlan.rate must be a share between 0 and 1" in result.stderr


def test_serve_with_faults_injects_them() -> None:
    proc, url, _ = start_serve("--faults", "seed=1,rate=1,kinds=unavailable")
    try:
        assert requests.get(url + PODS, timeout=10).status_code == 503
        assert requests.get(url + "/healthz", timeout=10).status_code == 200
    finally:
        code, _ = stop_serve(proc, signal.SIGTERM)
    assert code == 0


def test_latency_is_jitter_that_leaves_the_fault_sequence_unchanged() -> None:
    base = FaultPlan(seed=5, rate=0.3, kinds=("throttle", "unavailable"))
    plain, slow = FaultInjector(base), FaultInjector(dataclasses.replace(base, latency=0.5))
    draws = [(plain._draw("GET", False), slow._draw("GET", False)) for _ in range(50)]
    assert [p[2] for p, _ in draws] == [s[2] for _, s in draws]  # the same faults, in the same order
    delays = [s[1] for _, s in draws]
    assert all(0.0 <= d <= 0.5 for d in delays) and len(set(delays)) == len(delays)
    assert {p[1] for p, _ in draws} == {0.0}
