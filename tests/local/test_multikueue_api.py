"""MultiKueue's kinds in the local cluster, through the official client over real HTTP (issue 37, part 1,
step 1): AdmissionCheck, MultiKueueConfig and MultiKueueCluster are served only when MultiKueue is asked
for, with their v1beta2 schemas, defaults and CEL rules, and the deprecated v1beta1 view.

The cases marked "Kueue v0.19.2:" are ports of Kueue's own tests (file and case named); they check what
the real API server with Kueue's CRDs answers (a create that succeeds, or 422 Invalid).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kueue_support import KUEUE, V2, Kube

from airflow_tfjob.local import LocalCluster

V1 = "v1beta1"
AC_TEST = "test/integration/singlecluster/webhook/core/admissioncheck_test.go"
MKC_TEST = "test/integration/singlecluster/webhook/core/multikueue_cluster_test.go"
MKCONF_TEST = "test/integration/singlecluster/webhook/core/multikueue_config_test.go"


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    with LocalCluster(workdir=tmp_path_factory.mktemp("multikueue-api"), kueue={"multikueue": True}) as cluster:
        yield Kube.on(cluster)


def _create(kube: Kube, plural: str, obj: dict[str, Any], version: str = V2) -> dict[str, Any]:
    return dict(kube.crd.create_cluster_custom_object(KUEUE, version, plural, obj))


def _invalid(kube: Kube, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Create `obj` expecting 422 Invalid; the Status's details (causes) for the test to look at."""
    with pytest.raises(client.ApiException) as caught:
        _create(kube, plural, obj)
    assert caught.value.status == 422, caught.value.body
    return dict(json.loads(caught.value.body).get("details") or {})


def _delete(kube: Kube, plural: str, name: str) -> None:
    kube.crd.delete_cluster_custom_object(KUEUE, V2, plural, name)


def _ac(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{KUEUE}/{V2}", "kind": "AdmissionCheck", "metadata": {"name": name}, "spec": spec}


def _mkc(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{KUEUE}/{V2}", "kind": "MultiKueueCluster", "metadata": {"name": name}, "spec": spec}


def _mkconf(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{KUEUE}/{V2}", "kind": "MultiKueueConfig", "metadata": {"name": name}, "spec": spec}


def _kubeconfig(location_type: str | None, location: str) -> dict[str, Any]:
    kubeconfig: dict[str, Any] = {"location": location}
    if location_type is not None:
        kubeconfig["locationType"] = location_type
    return {"clusterSource": {"kubeConfig": kubeconfig}}


PARAMS = {"apiGroup": "ref.api.group", "kind": "RefKind", "name": "ref-name"}


# ---- served only when asked for


def test_the_multikueue_kinds_are_served_with_multikueue_on(kube: Kube) -> None:
    for version in (V2, V1):
        listed = {r.name: r for r in kube.crd.get_api_resources(KUEUE, version).resources}
        assert {"admissionchecks", "admissionchecks/status", "multikueueconfigs", "multikueueclusters",
                "multikueueclusters/status"} <= set(listed)
        assert "multikueueconfigs/status" not in listed  # the CRD has no status subresource
        assert [listed[p].short_names for p in ("admissionchecks", "multikueueconfigs", "multikueueclusters")] \
            == [["ac"], ["mkconf"], ["mkc"]]
        assert not any(listed[p].namespaced for p in ("admissionchecks", "multikueueconfigs", "multikueueclusters"))


def test_kueue_alone_does_not_serve_them(tmp_path_factory: pytest.TempPathFactory) -> None:
    with LocalCluster(workdir=tmp_path_factory.mktemp("kueue-alone"), kueue=True) as cluster:
        plain = Kube.on(cluster)
        listed = {r.name for r in plain.crd.get_api_resources(KUEUE, V2).resources}
        assert not {"admissionchecks", "multikueueconfigs", "multikueueclusters"} & listed
        with pytest.raises(client.ApiException) as caught:
            plain.crd.list_cluster_custom_object(KUEUE, V2, "multikueueclusters")
        assert caught.value.status == 404


# ---- AdmissionCheck: Kueue v0.19.2 test/integration/singlecluster/webhook/core/admissioncheck_test.go


def test_admissioncheck_all_defaults(kube: Kube) -> None:
    """Kueue v0.19.2: admissioncheck_test.go, "Defaulting on creating" / "All defaults": nothing added."""
    created = _create(kube, "admissionchecks", _ac("defaults", {"controllerName": "ac-controller"}))
    try:
        assert created["spec"] == {"controllerName": "ac-controller"}
    finally:
        _delete(kube, "admissionchecks", "defaults")


@pytest.mark.parametrize(("case", "spec"), [
    ("Should fail to create AdmissionCheck with no controller name", {"parameters": PARAMS}),
    ("Should fail to create AdmissionCheck with bad ref api group",
     {"controllerName": "controller-name", "parameters": {**PARAMS, "apiGroup": "ref.api.group/Bad"}}),
    ("Should fail to create AdmissionCheck with no ref api group",
     {"controllerName": "controller-name", "parameters": {"kind": "RefKind", "name": "ref-name"}}),
    ("Should fail to create AdmissionCheck with bad ref kind",
     {"controllerName": "controller-name", "parameters": {**PARAMS, "kind": "RefKind/Bad"}}),
    ("Should fail to create AdmissionCheck with no ref kind",
     {"controllerName": "controller-name", "parameters": {"apiGroup": "ref.api.group", "name": "ref-name"}}),
    ("Should fail to create AdmissionCheck with bad ref name",
     {"controllerName": "controller-name", "parameters": {**PARAMS, "name": "ref-name/Bad"}}),
    ("Should fail to create AdmissionCheck with no ref name",
     {"controllerName": "controller-name", "parameters": {"apiGroup": "ref.api.group", "kind": "RefKind"}}),
])
def test_admissioncheck_invalid_on_creation(kube: Kube, case: str, spec: dict[str, Any]) -> None:
    """Kueue v0.19.2: admissioncheck_test.go, "Validate AdmissionCheck on creation" / `case`: 422."""
    details = _invalid(kube, "admissionchecks", _ac("bad", spec))
    assert details["kind"] == "AdmissionCheck" and details["causes"]


@pytest.mark.parametrize(("case", "spec"), [
    ("Should allow to create AdmissionCheck with no parameters", {"controllerName": "controller-name"}),
    ("Should allow to create AdmissionCheck with valid spec", {"controllerName": "controller-name",
                                                               "parameters": PARAMS}),
])
def test_admissioncheck_valid_on_creation(kube: Kube, case: str, spec: dict[str, Any]) -> None:
    """Kueue v0.19.2: admissioncheck_test.go, "Validate AdmissionCheck on creation" / `case`."""
    assert _create(kube, "admissionchecks", _ac("good", spec))["spec"] == spec
    _delete(kube, "admissionchecks", "good")


@pytest.fixture
def admission_check(kube: Kube) -> Iterator[dict[str, Any]]:
    yield _create(kube, "admissionchecks", _ac("admission-check", {"controllerName": "controller-name",
                                                                   "parameters": PARAMS}))
    _delete(kube, "admissionchecks", "admission-check")


def _replace_ac(kube: Kube, ac: dict[str, Any]) -> dict[str, Any]:
    return dict(kube.crd.replace_cluster_custom_object(KUEUE, V2, "admissionchecks", ac["metadata"]["name"], ac))


def test_admissioncheck_update_changing_parameters(kube: Kube, admission_check: dict[str, Any]) -> None:
    """Kueue v0.19.2: admissioncheck_test.go, "Should allow to update AdmissionCheck when changing
    parameters"."""
    admission_check["spec"]["parameters"] = {"apiGroup": "ref.api.group2", "kind": "RefKind2", "name": "ref-name2"}
    assert _replace_ac(kube, admission_check)["spec"]["parameters"]["name"] == "ref-name2"


def test_admissioncheck_update_removing_parameters(kube: Kube, admission_check: dict[str, Any]) -> None:
    """Kueue v0.19.2: admissioncheck_test.go, "Should allow to update AdmissionCheck when removing
    parameters"."""
    del admission_check["spec"]["parameters"]
    assert "parameters" not in _replace_ac(kube, admission_check)["spec"]


@pytest.mark.parametrize(("field", "value"), [("parameters", {**PARAMS, "name": ""}),
                                              ("controllerName", "controller-name2")])
def test_admissioncheck_update_breaking(kube: Kube, admission_check: dict[str, Any], field: str,
                                        value: Any) -> None:
    """Kueue v0.19.2: admissioncheck_test.go, both "Should fail to update AdmissionCheck when breaking
    parameters" cases: an empty parameters name (schema), a new controllerName (the CEL rule
    `self == oldSelf`)."""
    admission_check["spec"][field] = value
    with pytest.raises(client.ApiException) as caught:
        _replace_ac(kube, admission_check)
    assert caught.value.status == 422
    if field == "controllerName":
        assert json.loads(caught.value.body)["message"].endswith(
            'spec.controllerName: Invalid value: "string": field is immutable')


# ---- MultiKueueCluster: Kueue v0.19.2 test/integration/singlecluster/webhook/core/multikueue_cluster_test.go


def test_multikueuecluster_location_type_defaults_to_secret(kube: Kube) -> None:
    """Kueue v0.19.2: multikueue_cluster_test.go, "Defaulting on creation" / "KubeConfig locationType
    defaults to Secret"."""
    created = _create(kube, "multikueueclusters", _mkc("worker", _kubeconfig(None, "worker-secret")))
    try:
        assert created["spec"] == _kubeconfig("Secret", "worker-secret")
    finally:
        _delete(kube, "multikueueclusters", "worker")


@pytest.mark.parametrize(("case", "spec"), [
    ("Should allow KubeConfig with Secret location type", _kubeconfig("Secret", "worker-secret")),
    ("Should allow KubeConfig with Path location type", _kubeconfig("Path", "/etc/kueue/worker.kubeconfig")),
    ("Should allow ClusterProfileRef", {"clusterSource": {"clusterProfileRef": {"name": "worker-profile"}}}),
])
def test_multikueuecluster_valid_on_creation(kube: Kube, case: str, spec: dict[str, Any]) -> None:
    """Kueue v0.19.2: multikueue_cluster_test.go, "Validate MultiKueueCluster on creation" / `case`."""
    assert _create(kube, "multikueueclusters", _mkc("worker", spec))["spec"] == spec
    _delete(kube, "multikueueclusters", "worker")


BOTH = {"clusterSource": {"kubeConfig": {"location": "worker-secret", "locationType": "Secret"},
                          "clusterProfileRef": {"name": "worker-profile"}}}


@pytest.mark.parametrize(("case", "spec", "said"), [
    ("Should reject missing cluster source", {}, "spec.clusterSource: Required value"),
    ("Should reject both KubeConfig and ClusterProfileRef", BOTH,
     'spec.clusterSource: Invalid value: "object": exactly one of the fields in [kubeConfig clusterProfileRef] '
     "must be set"),
    ("Should reject empty KubeConfig location", _kubeconfig("Secret", ""), "spec.clusterSource.kubeConfig.location"),
    ("Should reject too long KubeConfig location", _kubeconfig("Secret", "a" * 257),
     "spec.clusterSource.kubeConfig.location"),
    ("Should reject invalid KubeConfig location type", _kubeconfig("Invalid", "worker-secret"),
     'spec.clusterSource.kubeConfig.locationType: Unsupported value: "Invalid"'),
    ("Should reject empty ClusterProfileRef name", {"clusterSource": {"clusterProfileRef": {"name": ""}}},
     "spec.clusterSource.clusterProfileRef.name"),
    ("Should reject too long ClusterProfileRef name",
     {"clusterSource": {"clusterProfileRef": {"name": "a" * 257}}}, "spec.clusterSource.clusterProfileRef.name"),
])
def test_multikueuecluster_invalid_on_creation(kube: Kube, case: str, spec: dict[str, Any], said: str) -> None:
    """Kueue v0.19.2: multikueue_cluster_test.go, "Validate MultiKueueCluster on creation" / `case`: 422,
    naming the field."""
    details = _invalid(kube, "multikueueclusters", _mkc("worker", spec))
    assert any(said in f"{c['field']}: {c['message']}" for c in details["causes"]), details


def test_multikueuecluster_v1beta1_view_has_the_source_on_the_spec(kube: Kube) -> None:
    """v1beta1 keeps kubeConfig (and clusterProfileRef) on the spec itself; v1beta2 under clusterSource
    (apis/kueue/v1beta1/multikueue_conversion.go). Written in one version, read in the other."""
    old_form = {"apiVersion": f"{KUEUE}/{V1}", "kind": "MultiKueueCluster", "metadata": {"name": "old-form"},
                "spec": {"kubeConfig": {"location": "old-secret", "locationType": "Secret"}}}
    _create(kube, "multikueueclusters", old_form, version=V1)
    try:
        stored = kube.crd.get_cluster_custom_object(KUEUE, V2, "multikueueclusters", "old-form")
        assert stored["spec"] == _kubeconfig("Secret", "old-secret")
        viewed = kube.crd.get_cluster_custom_object(KUEUE, V1, "multikueueclusters", "old-form")
        assert (viewed["apiVersion"], viewed["spec"]) == (f"{KUEUE}/{V1}", old_form["spec"])
    finally:
        _delete(kube, "multikueueclusters", "old-form")


# ---- MultiKueueConfig: Kueue v0.19.2 test/integration/singlecluster/webhook/core/multikueue_config_test.go


@pytest.mark.parametrize(("case", "clusters"), [
    ("Should allow one cluster", ["worker1"]),
    ("Should allow multiple clusters", ["worker1", "worker2"]),
])
def test_multikueueconfig_valid_on_creation(kube: Kube, case: str, clusters: list[str]) -> None:
    """Kueue v0.19.2: multikueue_config_test.go, "Validate MultiKueueConfig on creation" / `case`."""
    created = _create(kube, "multikueueconfigs", _mkconf("multikueue-config", {"clusters": clusters}))
    assert created["spec"]["clusters"] == clusters and "status" not in created
    _delete(kube, "multikueueconfigs", "multikueue-config")


@pytest.mark.parametrize(("case", "spec", "said"), [
    ("Should reject missing clusters", {}, "spec.clusters: Required value"),
    ("Should reject duplicate clusters", {"clusters": ["worker1", "worker1"]},
     'spec.clusters: Invalid value: "array": must be unique'),
    ("Should reject too many clusters", {"clusters": [f"worker{i}" for i in range(21)]}, "spec.clusters: Too many"),
    ("Should reject too long cluster name", {"clusters": ["a" * 257]}, "spec.clusters[0]"),
])
def test_multikueueconfig_invalid_on_creation(kube: Kube, case: str, spec: dict[str, Any], said: str) -> None:
    """Kueue v0.19.2: multikueue_config_test.go, "Validate MultiKueueConfig on creation" / `case`: 422."""
    details = _invalid(kube, "multikueueconfigs", _mkconf("multikueue-config", spec))
    assert any(said in f"{c['field']}: {c['message']}" for c in details["causes"]), details


def test_multikueueconfig_v1beta1_view_drops_quota_management(kube: Kube) -> None:
    """quotaManagement is v1beta2's only (multikueue_conversion.go copies all fields but it)."""
    _create(kube, "multikueueconfigs", _mkconf("managed", {"clusters": ["w1"], "quotaManagement": "Manual"}))
    try:
        viewed = kube.crd.get_cluster_custom_object(KUEUE, V1, "multikueueconfigs", "managed")
        assert viewed["spec"] == {"clusters": ["w1"]}
    finally:
        _delete(kube, "multikueueconfigs", "managed")
