"""RBAC on the Kueue emulation's API: the kinds' plurals in both versions and the visibility API's
`clusterqueues/pendingworkloads` and `localqueues/pendingworkloads` (Kueue's
kueue-pending-workloads-{cq,lq}-viewer roles), each allowed or answered 403 like any resource."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests

from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.kueue import queue_objects

ROLE = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: queue-reader, namespace: default}
rules:
  - apiGroups: ["kueue.x-k8s.io"]
    resources: ["workloads", "localqueues"]
    verbs: ["get", "list", "watch"]
  - apiGroups: ["visibility.kueue.x-k8s.io"]
    resources: ["localqueues/pendingworkloads"]
    verbs: ["get"]
"""
CQ = "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/cluster-queue/pendingworkloads"
LQ = "/apis/visibility.kueue.x-k8s.io/{v}/namespaces/{ns}/localqueues/user-queue/pendingworkloads"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    role = tmp_path_factory.mktemp("roles") / "role.yaml"
    role.write_text(ROLE)
    with LocalCluster(controller=False, runner=False, auth=True, roles={"user": [role]},
                      kueue={"objects": queue_objects()}) as c:
        yield c


def get(cluster: LocalCluster, path: str) -> requests.Response:
    return requests.get(cluster.url + path, headers={"Authorization": f"Bearer {cluster.issue_token('user')}"},
                        timeout=10, verify=str(cluster.ca_path))


@pytest.mark.parametrize(("path", "allowed"), [
    ("/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads", True),
    ("/apis/kueue.x-k8s.io/v1beta1/namespaces/default/workloads", True),
    ("/apis/kueue.x-k8s.io/v1beta1/namespaces/default/localqueues/user-queue", True),
    ("/apis/kueue.x-k8s.io/v1beta2/clusterqueues", False),
    ("/apis/kueue.x-k8s.io/v1beta2/namespaces/kubeflow/workloads", False),
    (LQ.format(v="v1beta1", ns="default"), True),
    (LQ.format(v="v1beta2", ns="default"), True),
    (LQ.format(v="v1beta1", ns="kubeflow"), False),
    (CQ, False),
])
def test_kueue_plurals_and_pending_workloads_under_rbac(cluster: LocalCluster, path: str, allowed: bool) -> None:
    response = get(cluster, path)
    assert (response.status_code < 400) == allowed, response.text
    if not allowed:
        assert response.status_code == 403


def test_the_forbidden_message_names_the_visibility_subresource(cluster: LocalCluster) -> None:
    body = json.loads(get(cluster, CQ).text)
    assert body["message"] == (
        'clusterqueues.visibility.kueue.x-k8s.io "cluster-queue" is forbidden: User "user" cannot get resource '
        '"clusterqueues/pendingworkloads" in API group "visibility.kueue.x-k8s.io" at the cluster scope')
