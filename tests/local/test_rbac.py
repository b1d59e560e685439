"""RBAC on the local cluster: the shipped Role loaded as-is, each verb kind allowed and denied,
subresources, namespaces, ClusterRoles, resourceNames, the 403 Status and the denial counters."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from process_support import start_serve, stop_serve

import airflow_tfjob
from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.apiserver.rbac import METRIC
from airflow_tfjob.local.apiserver.requestmetrics import parse_text

ROLE = Path(airflow_tfjob.__file__).parent / "rbac" / "role.yaml"
TFJOBS = "/apis/kubeflow.org/v1/namespaces/{ns}/tfjobs"
CORE = "/api/v1/namespaces/{ns}/{plural}"
EXTRA_ROLES = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: status-reader}
rules:
  - apiGroups: ["*"]
    resources: ["*/status"]
    verbs: ["get"]
  - apiGroups: [""]
    resources: ["configmaps"]
    resourceNames: ["allowed"]
    verbs: ["get"]
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    extra = tmp_path_factory.mktemp("roles") / "extra.yaml"
    extra.write_text(EXTRA_ROLES)
    roles: dict[str, list[Any]] = {"airflow": [ROLE], "team": [(ROLE, "kubeflow")], "auditor": [extra],
                                   "counted": [ROLE]}
    with LocalCluster(controller=False, runner=False, auth=True, roles=roles) as c:
        admin = c.issue_token()
        for ns, name in (("default", "job"), ("kubeflow", "job")):
            call(c, admin, "POST", TFJOBS.format(ns=ns), tfjob(name))
        call(c, admin, "POST", CORE.format(ns="default", plural="pods"), pod("worker-0"))
        call(c, admin, "POST", CORE.format(ns="default", plural="services"),
             {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "worker-0"}, "spec": {"ports": [{"port": 80}]}})
        for name in ("allowed", "other"):
            call(c, admin, "POST", CORE.format(ns="default", plural="configmaps"),
                 {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
        c.call(lambda: c.podlogs.start_instance("default", "worker-0", "tensorflow").append(b"hello"))
        yield c


def tfjob(name: str) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": name},
            "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "tensorflow", "image": "tf:2"}]}}}}}}


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "tensorflow", "image": "tf:2"}]}}


def call(cluster: LocalCluster, token: str, method: str, path: str, body: Any = None,
         content_type: str = "application/json") -> requests.Response:
    return requests.request(method, cluster.url + path, headers={"Authorization": f"Bearer {token}",
                                                                 "Content-Type": content_type},
                            data=json.dumps(body) if body is not None else None, timeout=10,
                            verify=str(cluster.ca_path))


MERGE = "application/merge-patch+json"
JOB = TFJOBS.format(ns="default") + "/job"
POD = CORE.format(ns="default", plural="pods") + "/worker-0"


@pytest.mark.parametrize(
    ("method", "path", "body", "allowed"),
    [
        ("GET", JOB, None, True),
        ("GET", TFJOBS.format(ns="default"), None, True),  # list
        ("GET", TFJOBS.format(ns="default") + "?watch=1&timeoutSeconds=1", None, True),
        ("POST", TFJOBS.format(ns="default"), tfjob("new-one"), True),
        ("PATCH", JOB, {"metadata": {"labels": {"a": "b"}}}, True),
        ("PUT", JOB, tfjob("job"), False),  # update is not in the Role
        ("DELETE", TFJOBS.format(ns="default"), None, False),  # deletecollection is not either
        ("GET", JOB + "/status", None, False),  # the status comes with the object
        ("PATCH", JOB + "/status", {"status": {}}, False),
        ("GET", POD + "/log", None, True),
        ("GET", POD, None, False),  # pods are listed and watched, never read one by one
        ("GET", POD + "/status", None, False),
        ("GET", CORE.format(ns="default", plural="services") + "?watch=true&timeoutSeconds=1", None, False),
        ("GET", CORE.format(ns="default", plural="services") + "/worker-0", None, True),  # get, not list
        ("GET", CORE.format(ns="default", plural="services"), None, False),
        ("GET", CORE.format(ns="default", plural="events") + "?watch=true&timeoutSeconds=1", None, True),
        ("POST", CORE.format(ns="default", plural="events"), {"metadata": {"name": "e"}}, False),
        ("GET", CORE.format(ns="default", plural="secrets"), None, False),
        ("GET", "/api/v1/namespaces", None, False),  # cluster-scoped: a Role cannot grant it
        ("GET", TFJOBS.format(ns="kubeflow") + "/job", None, False),  # the Role lives in default
        ("GET", "/apis/kubeflow.org/v1", None, True),  # discovery is open to every user
        ("DELETE", JOB, None, True),
    ],
)
def test_shipped_role_as_is(cluster: LocalCluster, method: str, path: str, body: Any, allowed: bool) -> None:
    response = call(cluster, cluster.issue_token("airflow"), method, path, body, MERGE if method == "PATCH" else
                    "application/json")
    if allowed:
        assert response.status_code < 400, response.text
    else:
        assert response.status_code == 403, response.text
        assert response.json()["reason"] == "Forbidden"


def test_forbidden_status_as_the_api_server_words_it(cluster: LocalCluster) -> None:
    api = config.new_client_from_config(str(cluster.kubeconfig_for("airflow")))
    with pytest.raises(ApiException) as err:
        client.CustomObjectsApi(api).replace_namespaced_custom_object(
            "kubeflow.org", "v1", "default", "tfjobs", "x", tfjob("x"))
    body = json.loads(err.value.body)
    assert err.value.status == 403 and body["message"] == (
        'tfjobs.kubeflow.org "x" is forbidden: User "airflow" cannot update resource "tfjobs" in API group '
        '"kubeflow.org" in the namespace "default"')
    assert body["details"] == {"name": "x", "group": "kubeflow.org", "kind": "tfjobs"}
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(api).list_namespace()
    assert json.loads(err.value.body)["message"] == (
        'namespaces is forbidden: User "airflow" cannot list resource "namespaces" in API group "" at the '
        "cluster scope")
    api.close()


def test_role_applied_to_another_namespace(cluster: LocalCluster) -> None:
    token = cluster.issue_token("team")
    assert call(cluster, token, "GET", TFJOBS.format(ns="kubeflow") + "/job").status_code == 200
    assert call(cluster, token, "GET", JOB).status_code == 403


def test_cluster_role_wildcard_subresource_and_resource_names(cluster: LocalCluster) -> None:
    token = cluster.issue_token("auditor")
    assert call(cluster, token, "GET", TFJOBS.format(ns="kubeflow") + "/job/status").status_code == 200
    assert call(cluster, token, "GET", POD + "/status").status_code == 200
    assert call(cluster, token, "GET", POD).status_code == 403  # */status is not the object itself
    cms = CORE.format(ns="default", plural="configmaps")
    assert call(cluster, token, "GET", cms + "/allowed").status_code == 200
    assert call(cluster, token, "GET", cms + "/other").status_code == 403
    assert call(cluster, token, "GET", cms).status_code == 403  # a list names no object


def test_users_without_roles_are_admins(cluster: LocalCluster) -> None:
    token = cluster.issue_token("someone-else")
    assert call(cluster, token, "GET", "/api/v1/namespaces").status_code == 200
    assert call(cluster, token, "GET", CORE.format(ns="default", plural="secrets")).status_code == 200


def test_denials_are_counted_on_metrics(cluster: LocalCluster) -> None:
    token = cluster.issue_token("airflow")
    for _ in range(2):
        assert call(cluster, token, "DELETE", POD + "/status").status_code == 403
        assert call(cluster, token, "GET", CORE.format(ns="default", plural="configmaps")).status_code == 403
    denied = cluster.denied_requests()
    assert denied[("airflow", "list", "configmaps", "default")] >= 2
    samples = parse_text(call(cluster, token, "GET", "/metrics").text)
    on_metrics = {(labels["user"], labels["verb"], labels["resource"], labels["namespace"]): value
                  for name, labels, value in samples if name == METRIC}
    assert on_metrics == {key: float(n) for key, n in cluster.denied_requests().items()}


def test_allowed_requests_are_counted_by_user_verb_group_and_resource(cluster: LocalCluster) -> None:
    token = cluster.issue_token("counted")
    for name in ("missing", "absent", "absent"):  # a 404 used the permission all the same
        assert call(cluster, token, "GET", TFJOBS.format(ns="default") + f"/{name}").status_code == 404
    assert call(cluster, token, "GET", CORE.format(ns="default", plural="pods")).status_code == 200
    assert call(cluster, token, "GET", POD + "/log").status_code == 200
    events = CORE.format(ns="default", plural="events") + "?watch=true&timeoutSeconds=1"
    assert call(cluster, token, "GET", events).status_code == 200
    assert call(cluster, token, "PUT", JOB, tfjob("job")).status_code == 403  # denied: not counted here
    assert call(cluster, token, "GET", "/apis/kubeflow.org/v1").status_code == 200  # not a resource
    assert {key: n for key, n in cluster.allowed_requests().items() if key[0] == "counted"} == {
        ("counted", "get", "kubeflow.org", "tfjobs", "default"): 3,
        ("counted", "list", "", "pods", "default"): 1,
        ("counted", "get", "", "pods/log", "default"): 1,
        ("counted", "watch", "", "events", "default"): 1,
    }
    assert cluster.denied_requests()[("counted", "update", "tfjobs", "default")] == 1


def test_bad_role_configuration_is_refused_before_start(tmp_path: Path) -> None:
    binding_only = tmp_path / "binding.yaml"
    binding_only.write_text("kind: RoleBinding\nmetadata: {name: b}\n")
    with pytest.raises(ValueError, match="holds no Role or ClusterRole"):
        LocalCluster(auth=True, roles={"u": [binding_only]}, workdir=tmp_path / "c")
    with pytest.raises(ValueError, match="need token authentication"):
        LocalCluster(roles={"u": [ROLE]}, workdir=tmp_path / "c")
    assert not (tmp_path / "c").exists()
    bad_rules = tmp_path / "bad.yaml"
    bad_rules.write_text("kind: Role\nmetadata: {name: r}\nrules: [{apiGroups: [''], resources: pods, verbs: [get]}]\n")
    with pytest.raises(ValueError, match=r"rules\[\]\.resources must be a list of strings"):
        LocalCluster(auth=True, roles={"u": [bad_rules]})


def test_serve_binds_roles_from_the_command_line(tmp_path: Path) -> None:
    proc, url, _ = start_serve("--auth", "token", "--role", f"airflow={ROLE}:default", "--workdir", str(tmp_path))
    try:
        plugin = subprocess.run([sys.executable, "-m", "airflow_tfjob.local.credential", "--secret-file",
                                 str(tmp_path / "token-secret"), "--user", "airflow"],
                                capture_output=True, text=True, timeout=60, check=True)
        headers = {"Authorization": f"Bearer {json.loads(plugin.stdout)['status']['token']}"}
        ca = str(tmp_path / "tls" / "ca.crt")
        assert requests.get(url + JOB, headers=headers, verify=ca, timeout=10).status_code == 404  # allowed
        assert requests.get(url + "/api/v1/namespaces", headers=headers, verify=ca, timeout=10).status_code == 403
    finally:
        code, _ = stop_serve(proc, signal.SIGTERM)
    assert code == 0
    bad = subprocess.run([sys.executable, "-m", "airflow_tfjob.local.cli", "serve", "--auth", "token", "--role",
                          f"airflow={tmp_path / 'missing.yaml'}"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--role" in bad.stderr and "no such file" in bad.stderr and "missing.yaml" in bad.stderr


def review(cluster: LocalCluster, token: str, **attributes: str) -> requests.Response:
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes} if attributes else {}}
    return call(cluster, token, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body)


def test_a_self_subject_access_review_answers_from_the_users_rules(cluster: LocalCluster) -> None:
    user, admin = cluster.issue_token("airflow"), cluster.issue_token()
    denied_before = dict(cluster.denied_requests())

    def allowed(token: str, **attributes: str) -> bool:
        answer = review(cluster, token, **attributes)
        assert answer.status_code == 201, answer.text
        return bool(answer.json()["status"]["allowed"])

    assert allowed(user, namespace="default", verb="delete", group="", resource="pods")
    assert allowed(user, namespace="default", verb="get", group="", resource="pods", subresource="log")
    assert not allowed(user, namespace="default", verb="get", group="", resource="secrets")
    assert not allowed(user, namespace="default", verb="update", group="kubeflow.org", resource="tfjobs")
    assert allowed(admin, namespace="default", verb="get", group="", resource="secrets")  # no roles: admin
    # Asking is not doing: no denial is counted, and a review naming no resource is a 400.
    assert cluster.denied_requests() == denied_before
    assert review(cluster, user).status_code == 400
