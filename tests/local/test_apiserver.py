"""The local API server through the official `kubernetes` client (CoreV1Api, CustomObjectsApi, watch,
DynamicClient) and raw HTTP for what clients never send (malformed bodies, odd parameters)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from kubernetes import client, config, dynamic, watch
from kubernetes.client.rest import ApiException

from airflow_tfjob.local import LocalCluster

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "tfjobs"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    # API-level tests need no controller or runner: objects stay exactly as the tests write them.
    with LocalCluster(controller=False, runner=False, history_limit=50, bookmark_interval=0.5) as c:
        yield c


@pytest.fixture(scope="module")
def api(cluster: LocalCluster) -> client.ApiClient:
    return config.new_client_from_config(str(cluster.kubeconfig_path))


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def crd(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def tfjob(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "tfReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "tensorflow", "image": "tf:2", "ports": [{"name": "tfjob-port", "containerPort": 2222}]}]}}}}}
    body.update(spec)
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": name}, "spec": body}


def pod_body(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "tensorflow", "image": "tf:2"}]}}


def status_of(exc: ApiException) -> dict[str, Any]:
    body = json.loads(exc.body)
    assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == exc.status
    return body


def test_discovery(api: client.ApiClient, cluster: LocalCluster) -> None:
    assert client.VersionApi(api).get_code().git_version.startswith("v1.32")
    groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    assert "kubeflow.org" in groups
    resources = requests.get(f"{cluster.url}/apis/kubeflow.org/v1", timeout=10).json()["resources"]
    assert {r["name"] for r in resources} >= {"tfjobs", "tfjobs/status"}
    core_names = {r.name for r in client.CoreV1Api(api).get_api_resources().resources}
    assert {"pods", "pods/log", "services", "events", "secrets", "configmaps", "namespaces"} <= core_names


def test_create_get_list_replace_patch_status(crd: client.CustomObjectsApi) -> None:
    name = unique("job")
    created = crd.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, tfjob(name, runPolicy={}))
    meta = created["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"] and meta["generation"] == 1
    # CRD schema defaults only: no operator defaults are persisted
    assert created["spec"]["runPolicy"] == {"suspend": False}
    port = created["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["ports"][0]
    assert port["protocol"] == "TCP" and "restartPolicy" not in created["spec"]["tfReplicaSpecs"]["Worker"]
    got = crd.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
    assert got == created
    with pytest.raises(ApiException) as err:
        crd.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, tfjob(name))
    assert err.value.status == 409 and status_of(err.value)["reason"] == "AlreadyExists"

    # merge patch (the sync client picks merge-patch for a dict), spec change bumps generation
    patched = crd.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name,
                                                 {"spec": {"runPolicy": {"backoffLimit": 3}}})
    assert patched["metadata"]["generation"] == 2 and patched["spec"]["runPolicy"]["backoffLimit"] == 3
    # JSON patch (a list)
    patched = crd.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name, [
        {"op": "add", "path": "/metadata/labels", "value": {"team": "ml"}}], _content_type="application/json-patch+json")
    assert patched["metadata"]["labels"] == {"team": "ml"} and patched["metadata"]["generation"] == 2
    # status subresource
    status = {"conditions": [{"type": "Created", "status": "True", "reason": "TFJobCreated"}]}
    with_status = crd.patch_namespaced_custom_object_status(GROUP, VERSION, "default", PLURAL, name,
                                                            {"status": status})
    assert with_status["status"] == status and with_status["metadata"]["generation"] == 2
    # status in a main-resource write is ignored
    ignored = crd.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name, {"status": {"x": 1}})
    assert ignored["status"] == status
    # replace with the current resourceVersion works, with a stale one gets 409
    current = crd.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
    current["spec"]["successPolicy"] = "AllWorkers"
    replaced = crd.replace_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name, current)
    assert replaced["metadata"]["generation"] == 3
    with pytest.raises(ApiException) as err:
        crd.replace_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name, current)
    assert err.value.status == 409 and status_of(err.value)["reason"] == "Conflict"
    listed = crd.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, label_selector="team=ml")
    assert [i["metadata"]["name"] for i in listed["items"]] == [name]
    assert listed["kind"] == "TFJobList" and int(listed["metadata"]["resourceVersion"]) >= int(
        replaced["metadata"]["resourceVersion"])
    with pytest.raises(ApiException) as err:
        crd.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "missing")
    assert err.value.status == 404 and status_of(err.value)["reason"] == "NotFound"


@pytest.mark.parametrize(
    ("mutate", "code", "fragment"),
    [
        (lambda j: j["spec"].pop("tfReplicaSpecs"), 422, "spec.tfReplicaSpecs: Required value"),
        (lambda j: j["spec"]["tfReplicaSpecs"]["Worker"].update(replicas="two"), 422,
         "spec.tfReplicaSpecs.Worker.replicas in body must be of type integer"),
        (lambda j: j["metadata"].update(name="Bad_Name"), 422, "a lowercase RFC 1123 subdomain"),
        (lambda j: j["metadata"].update(name="1job"), 403,
         'denied the request: metadata.name: Invalid value: "1job": should match: a DNS-1035 label'),
        (lambda j: j["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(image=""), 403,
         "spec.tfReplicaSpecs[Worker].template.spec.containers[0].image: Required value: must be required"),
        (lambda j: j["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(name="main"),
         403, "must have at least one container with name tensorflow"),
        (lambda j: j["spec"]["tfReplicaSpecs"].update(
            Chief=j["spec"]["tfReplicaSpecs"]["Worker"], Master=j["spec"]["tfReplicaSpecs"]["Worker"]), 403,
         "spec.tfReplicaSpecs: Forbidden: must not have more than 1 Chief or Master role"),
        (lambda j: j["spec"].update(runPolicy={"managedBy": "me"}), 403,
         'spec.runPolicy.managedBy: Unsupported value: "me"'),
    ],
)
def test_admission(crd: client.CustomObjectsApi, mutate: Any, code: int, fragment: str) -> None:
    job = tfjob(unique("adm"))
    mutate(job)
    with pytest.raises(ApiException) as err:
        crd.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, job)
    body = status_of(err.value)
    assert err.value.status == code and fragment in body["message"]
    if code == 403:
        assert body["reason"] == "Forbidden"
        assert body["message"].startswith(
            'admission webhook "validator.tfjob.training-operator.kubeflow.org" denied the request: ')
    else:
        assert body["reason"] == "Invalid" and body["details"]["causes"]


def test_webhook_aggregates_several_errors_in_brackets(crd: client.CustomObjectsApi) -> None:
    job = tfjob("2bad")
    job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] = ""
    with pytest.raises(ApiException) as err:
        crd.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, job)
    message = status_of(err.value)["message"]
    assert message.split("denied the request: ", 1)[1].startswith("[metadata.name: Invalid value")
    assert message.endswith("must be required]")


def test_managed_by_is_immutable(crd: client.CustomObjectsApi) -> None:
    name = unique("mb")
    crd.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL,
                                        tfjob(name, runPolicy={"managedBy": "kubeflow.org/training-operator"}))
    with pytest.raises(ApiException) as err:
        crd.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name,
                                           {"spec": {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}}})
    assert err.value.status == 403 and "field is immutable" in status_of(err.value)["message"]


def test_pods_services_selectors_and_defaults(core: client.CoreV1Api) -> None:
    run = unique("sel")
    for i, phase_label in enumerate(["a", "b", "c"]):
        core.create_namespaced_pod("default", pod_body(f"{run}-{i}", {"run": run, "slot": phase_label}))
    def names(**kw: Any) -> list[str]:
        return sorted(p.metadata.name for p in core.list_namespaced_pod("default", **kw).items)
    assert names(label_selector=f"run={run},slot in (a,b)") == [f"{run}-0", f"{run}-1"]
    assert names(label_selector=f"run={run},slot notin (a)") == [f"{run}-1", f"{run}-2"]
    assert names(label_selector=f"run=={run},slot!=c") == [f"{run}-0", f"{run}-1"]
    assert names(label_selector=f"run={run},!missing,slot") == [f"{run}-0", f"{run}-1", f"{run}-2"]
    assert names(field_selector=f"metadata.name={run}-2") == [f"{run}-2"]
    assert len(names(label_selector=f"run={run}", field_selector="status.phase=Pending")) == 3
    pod = core.read_namespaced_pod(f"{run}-0", "default")
    assert pod.spec.restart_policy == "Always" and pod.status.phase == "Pending"
    assert pod.spec.containers[0].termination_message_policy == "File"

    svc = core.create_namespaced_service("default", {"metadata": {"name": run}, "spec": {
        "selector": {"run": run}, "ports": [{"name": "http", "port": 8080}]}})
    assert svc.spec.type == "ClusterIP" and svc.spec.session_affinity == "None"
    assert svc.spec.ports[0].protocol == "TCP" and svc.spec.ports[0].target_port == 8080
    # strategic merge patch on a core kind merges ports by port number
    svc = core.patch_namespaced_service(run, "default", {"spec": {"ports": [{"name": "grpc", "port": 9090}]}})
    assert sorted(p.port for p in svc.spec.ports) == [8080, 9090]


def test_invalid_pod_is_422_with_causes(core: client.CoreV1Api) -> None:
    name = unique("bad")
    body = pod_body(name)
    body["spec"]["restartPolicy"] = "Sometimes"
    body["spec"]["containers"].append({"name": "tensorflow", "ports": [{"containerPort": 99999}]})
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", body)
    status = status_of(err.value)
    assert (err.value.status, status["reason"]) == (422, "Invalid")
    assert status["details"]["kind"] == "Pod" and status["details"]["name"] == name
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [
        ("spec.containers[1].name", "FieldValueDuplicate"),
        ("spec.containers[1].image", "FieldValueRequired"),
        ("spec.containers[1].ports[0].containerPort", "FieldValueInvalid"),
        ("spec.restartPolicy", "FieldValueNotSupported"),
    ]
    assert status["message"].startswith(f'Pod "{name}" is invalid: [spec.containers[1].name: Duplicate value: ')
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod(name, "default")
    assert err.value.status == 404


def test_strategic_merge_patch_rejected_on_custom_resources(cluster: LocalCluster, crd: client.CustomObjectsApi) -> None:
    name = unique("smp")
    crd.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, tfjob(name))
    url = f"{cluster.url}/apis/kubeflow.org/v1/namespaces/default/tfjobs/{name}"
    resp = requests.patch(url, data=b'{"spec":{}}',
                          headers={"Content-Type": "application/strategic-merge-patch+json"}, timeout=10)
    assert resp.status_code == 415 and resp.json()["reason"] == "UnsupportedMediaType"
    resp = requests.patch(url, data=b'{"spec":{}}', headers={"Content-Type": "text/plain"}, timeout=10)
    assert resp.status_code == 415
    # a JSON patch body that is an object (what kubernetes_asyncio sends by mistake) is a 400
    resp = requests.patch(url, data=b'{"spec":{}}', headers={"Content-Type": "application/json-patch+json"},
                          timeout=10)
    assert resp.status_code == 400 and resp.json()["kind"] == "Status"
    resp = requests.patch(url, data=b"{not json", headers={"Content-Type": "application/merge-patch+json"},
                          timeout=10)
    assert resp.status_code == 400


def test_events_field_selectors(cluster: LocalCluster, core: client.CoreV1Api, crd: client.CustomObjectsApi) -> None:
    from airflow_tfjob.local.store.events import record_event

    name = unique("ev")
    job = crd.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, tfjob(name))
    for _ in range(3):
        cluster.call(lambda: record_event(cluster.store, job, "Normal", "SuccessfulCreatePod",
                                          f"Created pod: {name}-worker-0", "tfjob-controller"))
    uid = job["metadata"]["uid"]
    for selector in (f"involvedObject.name={name}", f"involvedObject.uid={uid}",
                     f"involvedObject.name={name},involvedObject.namespace=default,involvedObject.kind=TFJob"):
        events = core.list_namespaced_event("default", field_selector=selector).items
        assert len(events) == 1 and events[0].count == 3 and events[0].reason == "SuccessfulCreatePod"


def test_delete_propagation_and_garbage_collection(cluster: LocalCluster, core: client.CoreV1Api,
                                                   crd: client.CustomObjectsApi) -> None:
    name = unique("gc")
    job = crd.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, tfjob(name))
    owner = [{"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": name, "uid": job["metadata"]["uid"],
              "controller": True, "blockOwnerDeletion": True}]
    for i in range(2):
        body = pod_body(f"{name}-worker-{i}", {"job": name})
        body["metadata"]["ownerReferences"] = owner
        core.create_namespaced_pod("default", body)
        core.create_namespaced_service("default", {"metadata": {"name": f"{name}-worker-{i}", "ownerReferences": owner},
                                                   "spec": {"clusterIP": "None", "ports": [{"port": 2222}]}})
    # worker-0 is "running" on the node: its deletion is graceful
    core.patch_namespaced_pod(f"{name}-worker-0", "default", {"spec": {"nodeName": "local"}})
    crd.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name,
                                        body=client.V1DeleteOptions(propagation_policy="Foreground"))
    job_now = crd.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
    assert job_now["metadata"]["deletionTimestamp"] and job_now["metadata"]["finalizers"] == ["foregroundDeletion"]
    remaining = core.list_namespaced_pod("default", label_selector=f"job={name}").items
    assert [p.metadata.name for p in remaining] == [f"{name}-worker-0"]
    assert remaining[0].metadata.deletion_timestamp is not None
    assert not [s for s in core.list_namespaced_service("default").items if s.metadata.name.startswith(name)]
    # the kubelet confirms: pod gone, then the job
    cluster.call(lambda: cluster.store.finalize_pod_deletion("default", f"{name}-worker-0"))
    with pytest.raises(ApiException) as err:
        crd.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
    assert err.value.status == 404

    # DeleteOptions in the query string, grace period 0, Orphan
    orphan = unique("orph")
    job = crd.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, tfjob(orphan))
    body = pod_body(f"{orphan}-worker-0")
    body["metadata"]["ownerReferences"] = [{**owner[0], "name": orphan, "uid": job["metadata"]["uid"]}]
    core.create_namespaced_pod("default", body)
    crd.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, orphan, propagation_policy="Orphan")
    kept = core.read_namespaced_pod(f"{orphan}-worker-0", "default")
    assert kept.metadata.owner_references is None
    core.patch_namespaced_pod(f"{orphan}-worker-0", "default", {"spec": {"nodeName": "local"}})
    core.delete_namespaced_pod(f"{orphan}-worker-0", "default", grace_period_seconds=0)
    with pytest.raises(ApiException):
        core.read_namespaced_pod(f"{orphan}-worker-0", "default")


def test_watch_from_resource_version_with_timeout(core: client.CoreV1Api) -> None:
    run = unique("w")
    rv = core.list_namespaced_config_map("default").metadata.resource_version

    def later() -> None:
        core.create_namespaced_config_map("default", {"metadata": {"name": run, "labels": {"run": run}}})
        core.patch_namespaced_config_map(run, "default", {"data": {"a": "1"}})
        core.delete_namespaced_config_map(run, "default")

    writer = threading.Thread(target=later)
    writer.start()
    seen = []
    w = watch.Watch()
    # The loop ends only when the server closes the stream: without timeoutSeconds that would be after
    # the server's default of 30 minutes, far past the test's timeout.
    for event in w.stream(core.list_namespaced_config_map, "default", resource_version=rv,
                          label_selector=f"run={run}", timeout_seconds=2):
        seen.append((event["type"], event["object"].metadata.name))
    writer.join()
    assert seen == [("ADDED", run), ("MODIFIED", run), ("DELETED", run)]


def test_watch_too_old_resource_version(cluster: LocalCluster, core: client.CoreV1Api) -> None:
    old = core.list_namespaced_secret("default").metadata.resource_version
    run = unique("old")
    for i in range(60):  # beyond the history window of 50 for this type
        core.create_namespaced_secret("default", {"metadata": {"name": f"{run}-{i}"}, "stringData": {"k": "v"}})
    # a plain LIST with a too-old resourceVersion is 410
    with pytest.raises(ApiException) as err:
        core.list_namespaced_secret("default", resource_version=old)
    assert err.value.status == 410 and status_of(err.value)["reason"] == "Expired"
    # a WATCH answers 200, then one ERROR event with the Status
    resp = requests.get(f"{cluster.url}/api/v1/namespaces/default/secrets",
                        params={"watch": "true", "resourceVersion": old}, timeout=10)
    assert resp.status_code == 200
    lines = [json.loads(x) for x in resp.text.splitlines()]
    assert len(lines) == 1 and lines[0]["type"] == "ERROR"
    assert lines[0]["object"]["code"] == 410 and lines[0]["object"]["reason"] == "Expired"
    # the official client's watch raises it as an ApiException 410
    w = watch.Watch()
    with pytest.raises(ApiException) as err:
        for _ in w.stream(core.list_namespaced_secret, "default", resource_version=old, timeout_seconds=2):
            pass
    assert err.value.status == 410
    secret = core.read_namespaced_secret(f"{run}-0", "default")
    assert secret.type == "Opaque" and secret.data == {"k": "dg=="}


@pytest.mark.parametrize("spelling", ["1", "t", "T", "TRUE", "true", "True"])
def test_watch_bool_spellings_and_bookmarks(cluster: LocalCluster, spelling: str) -> None:
    resp = requests.get(f"{cluster.url}/api/v1/namespaces/default/pods",
                        params={"watch": spelling, "allowWatchBookmarks": spelling, "timeoutSeconds": "1",
                                "resourceVersion": str(cluster.store.resource_version)}, timeout=10)
    events = [json.loads(x) for x in resp.text.splitlines()]
    assert events and all(e["type"] == "BOOKMARK" for e in events)
    assert events[-1]["object"]["kind"] == "Pod" and events[-1]["object"]["metadata"]["resourceVersion"]


def test_bad_bool_is_400(cluster: LocalCluster) -> None:
    resp = requests.get(f"{cluster.url}/api/v1/namespaces/default/pods", params={"watch": "yes"}, timeout=10)
    assert resp.status_code == 400 and "ParseBool" in resp.json()["message"]
    resp = requests.get(f"{cluster.url}/api/v1/namespaces/default/pods", params={"watch": "0"}, timeout=10)
    assert resp.status_code == 200 and resp.json()["kind"] == "PodList"


def test_dynamic_client(api: client.ApiClient) -> None:
    dyn = dynamic.DynamicClient(api)
    tfjobs = dyn.resources.get(api_version="kubeflow.org/v1", kind="TFJob")
    name = unique("dyn")
    created = tfjobs.create(body=tfjob(name), namespace="default")
    assert created.metadata.name == name
    assert name in [i.metadata.name for i in tfjobs.get(namespace="default").items]
    patched = tfjobs.patch(name=name, namespace="default", body={"metadata": {"labels": {"a": "b"}}},
                           content_type="application/merge-patch+json")
    assert patched.metadata.labels.a == "b"
    tfjobs.delete(name=name, namespace="default")
    pods = dyn.resources.get(api_version="v1", kind="Pod")
    assert pods.get(namespace="default", field_selector="metadata.name=none").items == []


def read_log(core: client.CoreV1Api, name: str, **kwargs: Any) -> str:
    # The sync client's own text decoding is broken for str responses (it returns "b'...'"), so read raw.
    resp = core.read_namespaced_pod_log(name, "default", _preload_content=False, **kwargs)
    return bytes(resp.data).decode()


def test_pod_logs(cluster: LocalCluster, core: client.CoreV1Api) -> None:
    name = unique("logs")
    core.create_namespaced_pod("default", pod_body(name))
    with pytest.raises(ApiException) as err:
        read_log(core, name)
    assert err.value.status == 400 and "is waiting to start" in status_of(err.value)["message"]
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log("no-such-pod", "default")
    assert err.value.status == 404

    def seed() -> None:
        first = cluster.podlogs.start_instance("default", name, "tensorflow")
        first.append(b"old run")
        first.close()
        current = cluster.podlogs.start_instance("default", name, "tensorflow")
        for i in range(5):
            current.append(f"line {i}".encode())

    cluster.call(seed)
    assert read_log(core, name) == "".join(f"line {i}\n" for i in range(5))
    assert read_log(core, name, tail_lines=2) == "line 3\nline 4\n"
    assert read_log(core, name, previous=True) == "old run\n"
    stamped = read_log(core, name, timestamps=True, tail_lines=1)
    stamp, text = stamped.rstrip("\n").split(" ", 1)
    assert text == "line 4" and len(stamp) == len("2026-01-02T03:04:05.123456789Z") and stamp.endswith("Z")
    assert read_log(core, name, since_seconds=3600).count("\n") == 5
    # sinceTime is truncated to whole seconds, so a time inside the same second includes the line
    since = stamp[:19] + ".999999999Z"
    resp = requests.get(f"{cluster.url}/api/v1/namespaces/default/pods/{name}/log",
                        params={"sinceTime": since, "timestamps": "true"}, timeout=10)
    assert resp.headers["Content-Type"].startswith("text/plain") and resp.text.endswith(stamped)
    assert all(line[:19] == stamp[:19] for line in resp.text.splitlines())  # same whole second only
    with pytest.raises(ApiException) as err:
        read_log(core, name, container="nope")
    assert err.value.status == 400

    # follow: streams new lines and ends once the run is closed and drained
    def finish() -> None:
        log = cluster.podlogs.current("default", name, "tensorflow")
        assert log is not None
        log.append(b"last")
        log.close()

    resp = core.read_namespaced_pod_log(name, "default", follow=True, _preload_content=False)
    threading.Timer(0.3, lambda: cluster.call(finish)).start()
    body = b"".join(resp.stream(64)).decode()
    assert body.endswith("line 4\nlast\n")


@pytest.mark.parametrize(
    ("method", "path", "body", "headers", "code"),
    [
        ("POST", "/api/v1/namespaces/default/pods", b"{garbage", {"Content-Type": "application/json"}, 400),
        ("POST", "/api/v1/namespaces/default/pods", b"[1,2]", {"Content-Type": "application/json"}, 400),
        ("POST", "/api/v1/namespaces/default/pods", b'{"metadata": {"name": 5}}',
         {"Content-Type": "application/json"}, 400),
        ("POST", "/api/v1/namespaces/default/pods", b'{"metadata": {"name": "x", "labels": [1]}}',
         {"Content-Type": "application/json"}, 400),
        ("POST", "/apis/kubeflow.org/v1/namespaces/default/tfjobs", b'{"metadata": {"name": "x"}, "spec": "s"}',
         {"Content-Type": "application/json"}, 422),
        ("POST", "/api/v1/namespaces/default/pods", b"x" * (4 * 1024 * 1024), {"Content-Type": "application/json"},
         413),
        ("GET", "/api/v1/namespaces/default/pods?resourceVersion=abc", b"", {}, 400),
        ("GET", "/api/v1/namespaces/default/pods?labelSelector=a%20in%20(", b"", {}, 400),
        ("GET", "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=x", b"", {}, 400),
        ("GET", "/api/v1/namespaces/default/widgets", b"", {}, 404),
        ("GET", "/apis/kubeflow.org/v2/namespaces/default/tfjobs", b"", {}, 404),
        ("DELETE", "/api/v1/namespaces/default/pods/none", b"{bad", {"Content-Type": "application/json"}, 400),
        ("PUT", "/api/v1/namespaces/default/pods/none", b"{}", {"Content-Type": "application/json"}, 404),
    ],
)
def test_malformed_requests_do_not_crash_or_corrupt(cluster: LocalCluster, method: str, path: str, body: bytes,
                                                     headers: dict[str, str], code: int) -> None:
    before = cluster.call(lambda: cluster.store.resource_version)
    resp = requests.request(method, cluster.url + path, data=body, headers=headers, timeout=30)
    assert resp.status_code == code
    status = resp.json()
    assert status["kind"] == "Status" and status["code"] == code
    assert cluster.call(lambda: cluster.store.resource_version) == before
    assert requests.get(cluster.url + "/version", timeout=10).status_code == 200


def test_namespaces_can_be_created(core: client.CoreV1Api) -> None:
    name = unique("ns")
    core.create_namespace({"metadata": {"name": name}})
    assert core.read_namespace(name).status.phase == "Active"
    core.create_namespaced_config_map(name, {"metadata": {"name": "c"}, "data": {"a": "b"}})
    assert core.read_namespaced_config_map("c", name).data == {"a": "b"}
    core.delete_namespace(name)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("c", name)
    assert err.value.status == 404


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(5, "5s"), (119, "119s"), (120, "2m"), (125, "2m5s"), (600, "10m"), (3 * 3600, "3h"), (3 * 3600 + 60, "3h1m"),
     (30 * 3600, "30h"), (50 * 3600, "2d2h"), (10 * 86400, "10d"), (3 * 365 * 86400, "3y")],
)
def test_age_column_formatting(seconds: int, text: str) -> None:
    from airflow_tfjob.local.apiserver.tables import human_duration

    assert human_duration(seconds) == text


def test_table_for_kubectl(cluster: LocalCluster, core: client.CoreV1Api) -> None:
    name = unique("tbl")
    core.create_namespaced_pod("default", pod_body(name))
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    resp = requests.get(f"{cluster.url}/api/v1/namespaces/default/pods/{name}", headers={"Accept": accept},
                        timeout=10)
    table = resp.json()
    assert table["kind"] == "Table" and [c["name"] for c in table["columnDefinitions"]][:5] == [
        "Name", "Ready", "Status", "Restarts", "Age"]
    assert table["rows"][0]["cells"][:4] == [name, "0/1", "Pending", 0]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    plain = requests.get(f"{cluster.url}/api/v1/namespaces/default/pods/{name}", timeout=10).json()
    assert plain["kind"] == "Pod"
