"""The OpenAPI documents and server-side field validation over HTTP, below kubectl: what is served, with
which headers, and how fieldValidation answers for custom and core kinds."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_tfjob.jobs.kinds import KINDS
from airflow_tfjob.local import LocalCluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(controller=False, runner=False) as c:
        yield c


def request(cluster: LocalCluster, method: str, path: str, body: Any = None, accept: str = "application/json",
            content_type: str = "application/json") -> tuple[int, dict[str, list[str]], Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(cluster.url + path, data=data, method=method,
                                 headers={"Accept": accept, "Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            status, headers, raw = resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as err:
        status, headers, raw = err.code, err.headers, err.read()
    multi = {k: headers.get_all(k) or [] for k in set(headers.keys())}
    return status, multi, json.loads(raw) if raw else None


def tfjob(name: str, **worker_extra: Any) -> dict[str, Any]:
    worker = {"replicas": 1, "template": {"spec": {"containers": [{"name": "tensorflow", "image": "tf:2"}]}},
              **worker_extra}
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": name},
            "spec": {"tfReplicaSpecs": {"Worker": worker}}}


def test_v3_root_lists_each_group_version_with_a_content_hash(cluster: LocalCluster) -> None:
    status, _, root = request(cluster, "GET", "/openapi/v3")
    assert status == 200 and {"api/v1", "apis/apps/v1", "apis/kubeflow.org/v1"} <= set(root["paths"])
    url = root["paths"]["apis/kubeflow.org/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/kubeflow.org/v1?hash=")
    status, headers, doc = request(cluster, "GET", url)
    assert status == 200 and headers["Cache-Control"] == ["public, immutable"]
    assert headers["ETag"] == ['"' + url.split("hash=")[1] + '"']
    _, stale, _ = request(cluster, "GET", "/openapi/v3/apis/kubeflow.org/v1?hash=OLD")
    assert stale["Cache-Control"] == ["no-cache, private"]
    for kind in KINDS:
        schema = doc["components"]["schemas"][f"org.kubeflow.v1.{kind.kind}"]
        assert schema["x-kubernetes-group-version-kind"] == [{"group": "kubeflow.org", "version": "v1",
                                                              "kind": kind.kind}]
        assert schema["properties"]["spec"]["required"] == [kind.spec_key]
        patch = doc["paths"][f"/apis/kubeflow.org/v1/namespaces/{{namespace}}/{kind.plural}/{{name}}"]["patch"]
        # What kubectl's query-param verifier looks for before it leaves validation to the server.
        assert patch["x-kubernetes-group-version-kind"]["kind"] == kind.kind
        assert {"name": "fieldValidation", "in": "query", "required": False,
                "schema": {"type": "string"}} in patch["parameters"]
        assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
        scale = doc["paths"].get(f"/apis/kubeflow.org/v1/namespaces/{{namespace}}/{kind.plural}/{{name}}/scale")
        assert (scale is not None) == (kind.scale_type is not None)
        if scale is not None:
            assert scale["patch"]["x-kubernetes-group-version-kind"] == {"group": "autoscaling", "version": "v1",
                                                                        "kind": "Scale"}
    assert "spec" in doc["components"]["schemas"]["io.k8s.api.autoscaling.v1.Scale"]["properties"]


def test_v2_is_json_and_protobuf_only_is_not_acceptable(cluster: LocalCluster) -> None:
    status, _, doc = request(cluster, "GET", "/openapi/v2")
    assert status == 200 and doc["swagger"] == "2.0"
    port = doc["definitions"]["io.k8s.api.core.v1.Pod"]["properties"]["spec"]["properties"]["containers"]
    probe_port = port["items"]["properties"]["livenessProbe"]["properties"]["httpGet"]["properties"]["port"]
    assert (probe_port["type"], probe_port["format"]) == ("string", "int-or-string")  # Swagger 2.0: no anyOf
    assert "anyOf" not in probe_port
    status, _, body = request(cluster, "GET", "/openapi/v2", accept="application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
    assert (status, body["reason"]) == (406, "NotAcceptable")
    assert request(cluster, "GET", "/openapi/v3/apis/nope/v1")[0] == 404


def test_unknown_fields_by_directive(cluster: LocalCluster) -> None:
    path = "/apis/kubeflow.org/v1/namespaces/default/tfjobs"
    status, _, body = request(cluster, "POST", path + "?fieldValidation=Strict", tfjob("strict", replica=2))
    assert (status, body["reason"], body["message"]) == (
        400, "BadRequest", 'TFJob in version "v1" cannot be handled as a TFJob: strict decoding error: '
                           'unknown field "spec.tfReplicaSpecs.Worker.replica"')
    status, headers, created = request(cluster, "POST", path, tfjob("warned", replica=2))  # default: Warn
    assert status == 201 and headers["Warning"] == ['299 - "unknown field \\"spec.tfReplicaSpecs.Worker.replica\\""']
    assert "replica" not in created["spec"]["tfReplicaSpecs"]["Worker"]
    status, headers, created = request(cluster, "POST", path + "?fieldValidation=Ignore", tfjob("ignored", replica=2))
    assert status == 201 and "Warning" not in headers and "replica" not in created["spec"]["tfReplicaSpecs"]["Worker"]
    status, _, body = request(cluster, "POST", path + "?fieldValidation=Loose", tfjob("loose"))
    assert (status, body["message"]) == (422, 'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: '
                                              'Unsupported value: "Loose": supported values: "", "Ignore", "Strict", "Warn"')


def test_patches_are_checked_as_sent(cluster: LocalCluster) -> None:
    path = "/apis/kubeflow.org/v1/namespaces/default/tfjobs"
    assert request(cluster, "POST", path, tfjob("patched"))[0] == 201
    merge = "application/merge-patch+json"
    status, _, body = request(cluster, "PATCH", path + "/patched?fieldValidation=Strict",
                              {"spec": {"runPolicy": {"backofLimit": 2}}}, content_type=merge)
    assert (status, body["message"]) == (400, 'strict decoding error: unknown field "spec.runPolicy.backofLimit"')
    # Removing a field (null) is no unknown field.
    status, _, _ = request(cluster, "PATCH", path + "/patched?fieldValidation=Strict",
                           {"spec": {"runPolicy": {"backoffLimit": None}}}, content_type=merge)
    assert status == 200


def test_core_kinds_and_strategic_patch_directives(cluster: LocalCluster) -> None:
    pods = "/api/v1/namespaces/default/pods"
    pod = {"metadata": {"name": "p1"}, "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicy": "Never",
                                                               "ports": [{"containerPort": 80, "hostPorts": 1}]}]}}
    status, _, body = request(cluster, "POST", pods + "?fieldValidation=Strict", pod)
    assert (status, body["message"]) == (400, 'Pod in version "v1" cannot be handled as a Pod: strict decoding '
                                              'error: unknown field "spec.containers[0].ports[0].hostPorts"')
    del pod["spec"]["containers"][0]["ports"]
    assert request(cluster, "POST", pods + "?fieldValidation=Strict", pod)[0] == 201
    smp = {"metadata": {"labels": {"a": "b"}}, "spec": {"$setElementOrder/containers": [{"name": "c"}],
                                                        "containers": [{"name": "c", "image": "j"}]}}
    status, _, patched = request(cluster, "PATCH", pods + "/p1?fieldValidation=Strict", smp,
                                 content_type="application/strategic-merge-patch+json")
    assert status == 200 and patched["spec"]["containers"][0]["image"] == "j"
