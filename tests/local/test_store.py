"""The object store on its own: resourceVersions, selectors, patches, GC, graceful deletion, watch history."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from airflow_tfjob.local.model.resources import ApiError, json_type, parse_rfc3339
from airflow_tfjob.local.store.core import Store
from airflow_tfjob.local.store.events import record_event


def pod(name: str, labels: dict[str, str] | None = None, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [{
            "apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True,
        }]
    return {"metadata": meta, "spec": {"containers": [{"name": "tensorflow", "image": "busybox:1.36"}]}}


def tfjob(name: str) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": name},
            "spec": {"tfReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [
                {"name": "tensorflow", "image": "tf"}]}}}}}}


def test_create_sets_metadata_and_global_resource_versions() -> None:
    store = Store()
    a = store.create("pods", "default", pod("a"))
    b = store.create("configmaps", "default", {"metadata": {"name": "b"}, "data": {"k": "v"}})
    assert int(b["metadata"]["resourceVersion"]) == int(a["metadata"]["resourceVersion"]) + 1
    assert a["metadata"]["uid"] and a["metadata"]["creationTimestamp"].endswith("Z")
    assert a["metadata"]["generation"] == 1 and a["metadata"]["namespace"] == "default"
    with pytest.raises(ApiError) as err:
        store.create("pods", "default", pod("a"))
    assert err.value.code == 409 and err.value.reason == "AlreadyExists"
    with pytest.raises(ApiError) as err:
        store.create("pods", "nowhere", pod("x"))
    assert err.value.code == 404 and 'namespaces "nowhere" not found' in err.value.message


def test_pod_and_service_defaults() -> None:
    store = Store()
    p = store.create("pods", "default", pod("a"))
    container = p["spec"]["containers"][0]
    assert p["spec"]["restartPolicy"] == "Always"
    assert container["terminationMessagePolicy"] == "File" and container["imagePullPolicy"] == "IfNotPresent"
    assert p["status"]["phase"] == "Pending"
    svc = store.create("services", "default", {"metadata": {"name": "s"}, "spec": {"clusterIP": "None", "ports": [
        {"name": "tfjob-port", "port": 2222}]}})
    assert svc["spec"]["type"] == "ClusterIP" and svc["spec"]["sessionAffinity"] == "None"
    assert svc["spec"]["ports"] == [{"name": "tfjob-port", "port": 2222, "protocol": "TCP", "targetPort": 2222}]


def test_label_and_field_selectors() -> None:
    store = Store()
    store.create("pods", "default", pod("a", {"app": "x", "tier": "web"}))
    store.create("pods", "default", pod("b", {"app": "y"}))
    store.create("pods", "kubeflow", pod("c", {"app": "x"}))

    def names(ns: str | None, labels: str | None = None, fields: str | None = None) -> list[str]:
        return [o["metadata"]["name"] for o in store.list("pods", ns, labels, fields)[0]]

    assert names("default", "app=x") == ["a"]
    assert names("default", "app==y") == ["b"]
    assert names("default", "app!=x") == ["b"]
    assert names(None, "app in (x, z)") == ["a", "c"]
    assert names(None, "app notin (x)") == ["b"]
    assert names(None, "tier") == ["a"]
    assert names(None, "!tier") == ["b", "c"]
    assert names(None, "app=x,tier=web") == ["a"]
    assert names(None, None, "metadata.name=b") == ["b"]
    assert names(None, None, "metadata.namespace=kubeflow") == ["c"]
    assert names(None, None, "status.phase=Pending,metadata.name!=a") == ["b", "c"]
    with pytest.raises(ApiError) as err:
        names(None, None, "spec.bogus=1")
    assert err.value.code == 400
    with pytest.raises(ApiError) as err:
        names(None, "app in (x")
    assert err.value.code == 400


def test_replace_conflict_generation_and_status_subresource() -> None:
    store = Store()
    job = store.create("tfjobs", "default", tfjob("j"))
    stale = dict(job)
    job["spec"]["runPolicy"] = {"backoffLimit": 1}
    updated = store.replace("tfjobs", "default", "j", job)
    assert updated["metadata"]["generation"] == 2
    with pytest.raises(ApiError) as err:
        store.replace("tfjobs", "default", "j", stale)
    assert err.value.code == 409 and err.value.reason == "Conflict"
    # status is ignored on the main resource and written through /status without a generation bump
    updated["status"] = {"conditions": [{"type": "Created", "status": "True"}]}
    again = store.replace("tfjobs", "default", "j", updated)
    assert "status" not in again and again["metadata"]["generation"] == 2
    with_status = store.replace("tfjobs", "default", "j", {**again, "status": {"x": 1}}, "status")
    assert with_status["status"] == {"x": 1} and with_status["metadata"]["generation"] == 2
    labelled = store.patch("tfjobs", "default", "j", {"metadata": {"labels": {"a": "b"}}}, "merge")
    assert labelled["metadata"]["generation"] == 2


def test_noop_update_keeps_resource_version() -> None:
    store = Store()
    job = store.create("tfjobs", "default", tfjob("j"))
    same = store.update_status("tfjobs", "default", "j", {"a": 1})
    again = store.update_status("tfjobs", "default", "j", {"a": 1})
    assert same["metadata"]["resourceVersion"] == again["metadata"]["resourceVersion"]
    assert same["metadata"]["resourceVersion"] != job["metadata"]["resourceVersion"]


def test_patches() -> None:
    store = Store()
    store.create("pods", "default", pod("a", {"x": "1"}))
    merged = store.patch("pods", "default", "a", {"metadata": {"labels": {"x": None, "y": "2"}}}, "merge")
    assert merged["metadata"]["labels"] == {"y": "2"}
    patched = store.patch("pods", "default", "a", [{"op": "add", "path": "/metadata/labels/z", "value": "3"}], "json")
    assert patched["metadata"]["labels"] == {"y": "2", "z": "3"}
    strategic = store.patch("pods", "default", "a", {"spec": {"containers": [
        {"name": "tensorflow", "env": [{"name": "A", "value": "1"}]},
        {"name": "sidecar", "image": "s"},
    ]}}, "strategic")
    containers = {c["name"]: c for c in strategic["spec"]["containers"]}
    assert containers["tensorflow"]["image"] == "busybox:1.36"  # merged by name, not replaced
    assert containers["tensorflow"]["env"] == [{"name": "A", "value": "1"}] and "sidecar" in containers
    deleted = store.patch("pods", "default", "a", {"spec": {"containers": [
        {"name": "sidecar", "$patch": "delete"}]}}, "strategic")
    assert [c["name"] for c in deleted["spec"]["containers"]] == ["tensorflow"]
    store.create("tfjobs", "default", tfjob("j"))
    with pytest.raises(ApiError) as err:
        store.patch("tfjobs", "default", "j", {"spec": {}}, "strategic")
    assert err.value.code == 415
    with pytest.raises(ApiError) as err:
        store.patch("tfjobs", "default", "j", {"spec": {}}, "json")  # a dict is not a JSON patch
    assert err.value.code == 400
    with pytest.raises(ApiError) as err:
        store.patch("tfjobs", "default", "j", [{"op": "test", "path": "/spec/x", "value": 1}], "json")
    assert err.value.code == 422
    with pytest.raises(ApiError) as err:
        store.patch("tfjobs", "default", "j", {"metadata": {"resourceVersion": "1"}}, "merge")
    assert err.value.code == 409


@pytest.mark.parametrize(
    ("value", "openapi", "go"),
    [(True, "boolean", "bool"), (3, "integer", "number"), (1.5, "number", "number"), ("x", "string", "string"),
     ([1], "array", "array"), ({"a": 1}, "object", "object"), (None, "null", "null")],
)
def test_a_json_type_is_named_once_and_a_patch_body_of_the_wrong_one_in_gos_words(
    value: Any, openapi: str, go: str
) -> None:
    """The schema check and the patch handler classify a decoded value alike (a bool is no integer); the
    patch handler's 400 says it as Go's encoding/json does."""
    assert json_type(value) == openapi
    store = Store()
    store.create("tfjobs", "default", tfjob("j"))
    if not isinstance(value, list):
        with pytest.raises(ApiError) as err:
            store.patch("tfjobs", "default", "j", value, "json")
        assert (err.value.code, err.value.message) == (
            400, f"json: cannot unmarshal {go} into Go value of type jsonpatch.Patch")
    if not isinstance(value, dict):
        with pytest.raises(ApiError) as err:
            store.patch("tfjobs", "default", "j", value, "merge")
        assert (err.value.code, err.value.message) == (
            400, f"json: cannot unmarshal {go} into Go value of type map[string]interface {{}}")


def test_malformed_objects_are_rejected_without_changing_state() -> None:
    store = Store()
    before = store.resource_version
    for body in (
        {"metadata": {"name": "a", "labels": "oops"}},
        {"metadata": {"name": "a", "ownerReferences": [{"name": "x"}]}},
        {"metadata": "nope"},
        {"metadata": {"name": "a"}, "spec": {"containers": "x"}},
        {"metadata": {"name": "Bad_Name"}},
    ):
        with pytest.raises(ApiError) as err:
            store.create("pods", "default", body)
        assert err.value.code in (400, 422)
    assert store.resource_version == before and store.list("pods", "default")[0] == []


def test_background_foreground_orphan_and_graceful_pod_deletion() -> None:
    store = Store()
    # Background: the owner goes at once; unbound pods and services go with it.
    job = store.create("tfjobs", "default", tfjob("bg"))
    store.create("pods", "default", pod("bg-worker-0", owner=job))
    store.create("services", "default", {"metadata": {"name": "bg-worker-0", "ownerReferences": pod(
        "x", owner=job)["metadata"]["ownerReferences"]}, "spec": {"clusterIP": "None"}})
    store.delete("tfjobs", "default", "bg", "Background")
    assert store.list("pods", "default")[0] == [] and store.list("services", "default")[0] == []

    # Foreground with a bound pod: the job waits (deletionTimestamp + finalizer) until the kubelet is done.
    job = store.create("tfjobs", "default", tfjob("fg"))
    store.create("pods", "default", pod("fg-worker-0", owner=job))
    store.patch("pods", "default", "fg-worker-0", {"spec": {"nodeName": "local"}}, "merge")
    store.update_status("pods", "default", "fg-worker-0", {"phase": "Running"})
    pending = store.delete("tfjobs", "default", "fg", "Foreground")
    assert pending["metadata"]["deletionTimestamp"] and "foregroundDeletion" in pending["metadata"]["finalizers"]
    terminating = store.get("pods", "default", "fg-worker-0")
    assert terminating["metadata"]["deletionTimestamp"] and terminating["metadata"]["deletionGracePeriodSeconds"] == 30
    store.finalize_pod_deletion("default", "fg-worker-0")
    with pytest.raises(ApiError):
        store.get("tfjobs", "default", "fg")

    # Orphan: dependents stay, without the owner reference.
    job = store.create("tfjobs", "default", tfjob("or"))
    store.create("pods", "default", pod("or-worker-0", owner=job))
    store.delete("tfjobs", "default", "or", "Orphan")
    assert "ownerReferences" not in store.get("pods", "default", "or-worker-0")["metadata"]

    # grace period 0 removes a bound pod immediately
    store.patch("pods", "default", "or-worker-0", {"spec": {"nodeName": "local"}}, "merge")
    store.delete("pods", "default", "or-worker-0", grace_period_seconds=0)
    assert store.list("pods", "default")[0] == []


async def test_watch_history_expiry_and_selector_transitions() -> None:
    store = Store(history_limit=3)
    start = store.resource_version
    watcher = store.watch("pods", "default", str(start), label_selector="app=x")
    store.create("pods", "default", pod("a", {"app": "x"}))
    store.create("pods", "default", pod("b", {"app": "y"}))
    store.patch("pods", "default", "a", {"metadata": {"labels": {"app": "z"}}}, "merge")
    store.patch("pods", "default", "b", {"metadata": {"labels": {"app": "x"}}}, "merge")
    seen = [(await asyncio.wait_for(watcher.__anext__(), 5)) for _ in range(3)]
    assert [(t, o["metadata"]["name"]) for t, o in seen] == [("ADDED", "a"), ("DELETED", "a"), ("ADDED", "b")]
    watcher.close()
    with pytest.raises(ApiError) as err:
        store.watch("pods", "default", str(start))
    assert err.value.code == 410 and err.value.reason == "Expired"
    with pytest.raises(ApiError) as err:
        store.list_entries("pods", "default", resource_version=str(start))
    assert err.value.code == 410
    # without a resourceVersion: the current objects as ADDED
    fresh = store.watch("pods", "default")
    assert sorted([(await fresh.__anext__())[1]["metadata"]["name"] for _ in range(2)]) == ["a", "b"]
    fresh.close()
    assert store.watcher_count() == 0


async def test_watch_fan_out_to_many_watchers() -> None:
    store = Store()
    watchers = [store.watch("tfjobs", "default", str(store.resource_version)) for _ in range(200)]
    store.create("tfjobs", "default", tfjob("j"))
    batches = await asyncio.gather(*(w.next_batch(5) for w in watchers))
    assert all(len(b) == 1 and b[0][0] == "ADDED" for b in batches)
    assert len({id(b[0][1]) for b in batches}) == 1  # one shared entry, encoded once
    for w in watchers:
        w.close()


def test_record_event_aggregates_repeats() -> None:
    store = Store()
    job = store.create("tfjobs", "default", tfjob("j"))
    first = record_event(store, job, "Normal", "SuccessfulCreatePod", "Created pod: j-worker-0", "tfjob-controller")
    again = record_event(store, job, "Normal", "SuccessfulCreatePod", "Created pod: j-worker-0", "tfjob-controller")
    other = record_event(store, job, "Warning", "Failed", "x", "tfjob-controller")
    assert first["metadata"]["name"] == again["metadata"]["name"] != other["metadata"]["name"]
    assert again["count"] == 2 and again["firstTimestamp"] == first["firstTimestamp"]
    assert again["involvedObject"]["uid"] == job["metadata"]["uid"]
    found = store.list("events", "default", None, f"involvedObject.uid={job['metadata']['uid']},type=Warning")[0]
    assert [e["reason"] for e in found] == ["Failed"]


def test_namespaces() -> None:
    store = Store()
    names = [n["metadata"]["name"] for n in store.list("namespaces")[0]]
    assert {"default", "kubeflow"} <= set(names)
    store.create("namespaces", None, {"metadata": {"name": "team-a"}})
    store.create("configmaps", "team-a", {"metadata": {"name": "c"}})
    store.delete("namespaces", None, "team-a")
    assert store.list("configmaps", "team-a")[0] == []
    with pytest.raises(ApiError) as err:
        store.delete("namespaces", None, "default")
    assert err.value.code == 403


def _pod_with(**spec: Any) -> dict[str, Any]:
    body = pod("v")
    body["spec"].update(spec)
    return body


def _containers(*containers: dict[str, Any]) -> dict[str, Any]:
    return _pod_with(containers=list(containers))


@pytest.mark.parametrize(
    ("body", "causes"),
    [
        (_pod_with(restartPolicy="Sometimes"), [("spec.restartPolicy", "FieldValueNotSupported",
         'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"')]),
        (_pod_with(containers=[]), [("spec.containers", "FieldValueRequired", "Required value")]),
        (_containers({"image": "x"}), [("spec.containers[0].name", "FieldValueRequired", "Required value")]),
        (_containers({"name": "Side_Car", "image": "x"}), [("spec.containers[0].name", "FieldValueInvalid",
         'Invalid value: "Side_Car": a lowercase RFC 1123 label must consist of lower case alphanumeric '
         "characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
         "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")]),
        (_containers({"name": "a", "image": "x"}, {"name": "a", "image": "y"}),
         [("spec.containers[1].name", "FieldValueDuplicate", 'Duplicate value: "a"')]),
        (_pod_with(initContainers=[{"name": "tensorflow", "image": "x"}]),
         [("spec.initContainers[0].name", "FieldValueDuplicate", 'Duplicate value: "tensorflow"')]),
        (_containers({"name": "a"}), [("spec.containers[0].image", "FieldValueRequired", "Required value")]),
        (_containers({"name": "a", "image": "x", "ports": [{"containerPort": 70000}]}),
         [("spec.containers[0].ports[0].containerPort", "FieldValueInvalid",
           "Invalid value: 70000: must be between 1 and 65535, inclusive")]),
        (_containers({"name": "a", "image": "x", "ports": [{"containerPort": 0}]}),
         [("spec.containers[0].ports[0].containerPort", "FieldValueRequired", "Required value")]),
        (_containers({"name": "a", "image": "x", "ports": [{"containerPort": 80, "hostPort": -1}]}),
         [("spec.containers[0].ports[0].hostPort", "FieldValueInvalid",
           "Invalid value: -1: must be between 1 and 65535, inclusive")]),
        (_containers({"name": "a", "image": "x", "ports": [{"containerPort": 80, "protocol": "ICMP"}]}),
         [("spec.containers[0].ports[0].protocol", "FieldValueNotSupported",
           'Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"')]),
        (_containers({"name": "a", "image": "x", "ports": [
            {"containerPort": 80, "name": "web"}, {"containerPort": 81, "name": "web"}]}),
         [("spec.containers[0].ports[1].name", "FieldValueDuplicate", 'Duplicate value: "web"')]),
        (_containers({"name": "a", "image": "x", "ports": [{"containerPort": 80, "name": "tensorboard-http"}]}),
         [("spec.containers[0].ports[0].name", "FieldValueInvalid",
           'Invalid value: "tensorboard-http": must be no more than 15 characters')]),
    ],
)
def test_pod_validation_on_create(body: dict[str, Any], causes: list[tuple[str, str, str]]) -> None:
    store = Store()
    before = store.resource_version
    with pytest.raises(ApiError) as err:
        store.create("pods", "default", body)
    assert (err.value.code, err.value.reason) == (422, "Invalid")
    assert err.value.details is not None
    got = [(c["field"], c["reason"], c["message"]) for c in err.value.details["causes"]]
    assert got == causes
    field, _, detail = causes[0]
    assert err.value.message == f'Pod "v" is invalid: {field}: {detail}'
    assert store.resource_version == before


def test_pod_validation_aggregates_causes_and_accepts_valid_pods() -> None:
    store = Store()
    with pytest.raises(ApiError) as err:
        store.create("pods", "default", _containers({"name": "a"}, {"name": "a", "image": "x"}))
    assert err.value.message == (
        'Pod "v" is invalid: [spec.containers[0].image: Required value, '
        'spec.containers[1].name: Duplicate value: "a"]'
    )
    # Empty restartPolicy and protocol are defaulted (as Go defaults the empty string), not refused.
    body = _containers(
        {"name": "a", "image": "x", "ports": [{"containerPort": 2222, "name": "tfjob-port", "protocol": ""}]},
        {"name": "b", "image": "x", "ports": [{"containerPort": 2222, "name": "tfjob-port", "hostPort": 8080}]},
    )
    body["spec"]["restartPolicy"] = ""
    ok = store.create("pods", "default", body)
    assert ok["spec"]["restartPolicy"] == "Always"
    assert ok["spec"]["containers"][0]["ports"][0]["protocol"] == "TCP"
    with pytest.raises(ApiError) as err:
        store.create("pods", "default", _containers({"name": "a", "image": "x", "ports": [{"containerPort": "80"}]}))
    assert err.value.code == 400


@pytest.mark.parametrize(("value", "want"), [
    ("2026-12-06T10:00:00Z", dt.datetime(2026, 12, 6, 10, tzinfo=dt.timezone.utc)),
    ("2026-12-06T10:00:00.250Z", dt.datetime(2026, 12, 6, 10, 0, 0, 250000, tzinfo=dt.timezone.utc)),
    ("2026-12-06T12:00:00+02:00", dt.datetime(2026, 12, 6, 10, tzinfo=dt.timezone.utc)),
    ("", None), (None, None), (1765015200, None), ("yesterday", None),
])
def test_one_rfc3339_parser_for_the_local_cluster(value: object, want: dt.datetime | None) -> None:
    """The times the objects carry, read by one function (the controllers, Kueue's clocks, kubectl's
    tables): aware and equal whatever the offset; no time, or one that does not parse, is None."""
    assert parse_rfc3339(value) == want

