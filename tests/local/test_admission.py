"""Each kind's admission: CRD-schema refusals (422) and the training-operator webhook's (403), with the
exact messages of docs/reference/kubeflow-v1-kinds.md §1.5, §2.4, §3.4, §4.4 and the TFJob reference."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_tfjob.jobs.kinds import KINDS, kind_named
from airflow_tfjob.local.admission import warnings
from airflow_tfjob.local.admission.v1jobs import JobAdmission
from airflow_tfjob.local.model.resources import ApiError

JsonDict = dict[str, Any]


def replica(container: str, replicas: int | None = 1, image: str = "img:1") -> JsonDict:
    spec: JsonDict = {"template": {"spec": {"containers": [{"name": container, "image": image}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return spec


def job(kind: str, replicas: dict[str, JsonDict], name: str = "job-1", **spec: Any) -> JsonDict:
    row = kind_named(kind)
    return {"apiVersion": "kubeflow.org/v1", "kind": row.kind, "metadata": {"name": name},
            "spec": {row.spec_key: replicas, **spec}}


def admit(obj: JsonDict, old: JsonDict | None = None) -> list[str]:
    """Admits `obj` as its kind; returns the warnings the request would carry."""
    token = warnings.collect()
    try:
        JobAdmission().admit(kind_named(obj["kind"]).plural, "UPDATE" if old else "CREATE", obj, old)
    finally:
        collected = warnings.take(token)
    return collected


def refused(obj: JsonDict, old: JsonDict | None = None) -> ApiError:
    with pytest.raises(ApiError) as err:
        admit(obj, old)
    return err.value


def denied(kind: str, errors: str) -> str:
    return f'admission webhook "validator.{kind.lower()}.training-operator.kubeflow.org" denied the request: {errors}'


PT, XGB, JAX, PD = "PyTorchJob", "XGBoostJob", "JAXJob", "PaddleJob"
VALID = {
    PT: job(PT, {"Master": replica("pytorch"), "Worker": replica("pytorch", 2)}),
    XGB: job(XGB, {"Master": replica("xgboost"), "Worker": replica("xgboost", 2)}),
    JAX: job(JAX, {"Worker": replica("jax", 2)}),
    PD: job(PD, {"Worker": replica("paddle", 2)}),
    "TFJob": job("TFJob", {"Worker": replica("tensorflow", 2)}),
}


@pytest.mark.parametrize("kind", list(VALID))
def test_valid_job_of_each_kind_is_admitted_with_schema_defaults_only(kind: str) -> None:
    obj = job(kind, dict(VALID[kind]["spec"][kind_named(kind).spec_key]), runPolicy={"backoffLimit": 1})
    first = next(iter(obj["spec"][kind_named(kind).spec_key].values()))
    first["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 9}]
    assert admit(obj) == []
    assert obj["spec"]["runPolicy"] == {"backoffLimit": 1, "suspend": False}
    assert first["template"]["spec"]["containers"][0]["ports"] == [{"containerPort": 9, "protocol": "TCP"}]
    assert "restartPolicy" not in first  # the operator's defaults stay in the controller's memory


@pytest.mark.parametrize(("obj", "errors"), [
    # PyTorchJob (§1.5)
    (job(PT, {"Master": replica("pytorch", None)}), "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1"),
    (job(PT, {"Master": replica("pytorch", 2)}), "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1"),
    (job(PT, {"Worker": replica("pytorch", 0)}),
     "spec.pytorchReplicaSpecs[Worker].replicas: Forbidden: must be at least 1"),
    (job(PT, {"worker": replica("pytorch")}),
     'spec.pytorchReplicaSpecs[worker]: Unsupported value: "worker": supported values: "Master", "Worker"'),
    (job(PT, {"Worker": replica("torch")}), "spec.pytorchReplicaSpecs[Worker].template.spec.containers: Required "
                                           "value: must have at least one container with name pytorch"),
    (job(PT, {"Master": replica("pytorch")}, elasticPolicy={"maxReplicas": 2}),
     "spec.pytorchReplicaSpecs[Worker]: Required value: must be configured if elastic policy is used"),
    (job(PT, {"Worker": replica("pytorch")}, elasticPolicy={"nProcPerNode": 2}, nprocPerNode="2"),
     "spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with spec.nprocPerNode"),
    (job(PT, {"Worker": replica("pytorch", image="")}, runPolicy={"managedBy": "me"}),
     '[spec.runPolicy.managedBy: Unsupported value: "me": supported values: "kubeflow.org/training-operator", '
     '"kueue.x-k8s.io/multikueue", spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].image: '
     "Required value: must be required]"),
    (job(PT, {"Worker": replica("pytorch")}, name="job.one"), 'metadata.name: Invalid value: "job.one": should '
     "match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
     "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used "
     "for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"),
    # XGBoostJob (§2.4)
    (job(XGB, {"Worker": replica("xgboost")}), "spec.xgbReplicaSpecs[Master]: Required value: must be present"),
    (job(XGB, {"Master": replica("xgboost", 2)}), "spec.xgbReplicaSpecs[Master].replicas: Forbidden: must be 1"),
    (job(XGB, {"Master": replica("xgb")}), "spec.xgbReplicaSpecs[Master].template.spec.containers: Required "
                                           "value: must have at least one container with name xgboost"),
    (job(XGB, {"Master": {"replicas": 1}}), "[spec.xgbReplicaSpecs[Master].template.spec.containers: Required "
     "value: must be specified, spec.xgbReplicaSpecs[Master].template.spec.containers: Required value: must "
     "have at least one container with name xgboost]"),
    # JAXJob (§3.4)
    (job(JAX, {"Master": replica("jax")}),
     'spec.jaxReplicaSpecs[Master]: Unsupported value: "Master": supported values: "Worker"'),
    (job(JAX, {"Worker": replica("python")}), "spec.jaxReplicaSpecs[Worker].template.spec.containers: Required "
                                              "value: must have at least one container with name jax"),
    # PaddleJob (§4.4): the container name is quoted
    (job(PD, {"Worker": replica("paddlepaddle")}), "spec.paddleReplicaSpecs[Worker].template.spec.containers: "
     'Required value: must have at least one container with name "paddle"'),
    (job(PD, {"Worker": replica("paddle")}, runPolicy={"managedBy": "me"}),
     'spec.runPolicy.managedBy: Unsupported value: "me": supported values: "kubeflow.org/training-operator", '
     '"kueue.x-k8s.io/multikueue"'),
    # TFJob (TF-ref §1.3)
    (job("TFJob", {"Chief": replica("tensorflow"), "Master": replica("tensorflow")}),
     "spec.tfReplicaSpecs: Forbidden: must not have more than 1 Chief or Master role"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 20 else None)
def test_webhook_refusals(obj: JsonDict, errors: str) -> None:
    err = refused(obj)
    assert (err.code, err.reason, err.message) == (403, "Forbidden", denied(obj["kind"], errors))


@pytest.mark.parametrize("obj", [
    job(PD, {"Master": replica("paddle", 2), "Worker": replica("paddle", 0)}),  # no replica-count rules
    job(JAX, {"Worker": replica("jax")}, runPolicy={"managedBy": "me"}),  # JAX never checks managedBy
    job(XGB, {"Master": replica("xgboost"), "Worker": replica("xgboost", 0)}),  # Worker count unchecked
    job("TFJob", {"worker": replica("tensorflow")}),  # TFJob accepts any key (the defaulter normalises)
])
def test_what_the_webhooks_let_through(obj: JsonDict) -> None:
    assert admit(obj) == []


def test_pytorch_deprecated_nproc_per_node_is_a_warning() -> None:
    obj = job(PT, {"Worker": replica("pytorch")}, elasticPolicy={"nProcPerNode": 2})
    assert admit(obj) == ["spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"]


@pytest.mark.parametrize("kind", [XGB, PD, "TFJob"])
def test_managed_by_is_immutable(kind: str) -> None:
    old = job(kind, VALID[kind]["spec"][kind_named(kind).spec_key], runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"})
    new = job(kind, VALID[kind]["spec"][kind_named(kind).spec_key], runPolicy={"managedBy": "me"})
    err = refused(new, old)
    assert err.message == denied(kind, '[spec.runPolicy.managedBy: Invalid value: "me": field is immutable, '
                                       'spec.runPolicy.managedBy: Unsupported value: "me": supported values: '
                                       '"kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"]')


@pytest.mark.parametrize("kind", [PT, JAX])
def test_managed_by_change_passes_where_the_webhook_does_not_compare(kind: str) -> None:
    """PyTorchJob's ValidateUpdate compares the new object with itself; JAXJob's ignores runPolicy."""
    specs = VALID[kind]["spec"][kind_named(kind).spec_key]
    old = job(kind, specs, runPolicy={"managedBy": "kubeflow.org/training-operator"})
    assert admit(job(kind, specs, runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"}), old) == []


@pytest.mark.parametrize("kind", [k.kind for k in KINDS])
def test_schema_refusals(kind: str) -> None:
    key = kind_named(kind).spec_key
    missing = refused(job(kind, {}) | {"spec": {}})
    assert (missing.code, missing.reason) == (422, "Invalid")
    assert missing.message == f'{kind}.kubeflow.org "job-1" is invalid: spec.{key}: Required value'
    wrong = refused(job(kind, {"Worker": {**replica(kind_named(kind).container), "replicas": "two"}},
                        runPolicy={"suspend": "yes"}))
    assert wrong.message == (
        f'{kind}.kubeflow.org "job-1" is invalid: [spec.{key}.Worker.replicas: Invalid value: "string": '
        f'spec.{key}.Worker.replicas in body must be of type integer: "string", spec.runPolicy.suspend: Invalid '
        f'value: "string": spec.runPolicy.suspend in body must be of type boolean: "string"]')
    assert wrong.details is not None and [c["field"] for c in wrong.details["causes"]] == [
        f"spec.{key}.Worker.replicas", "spec.runPolicy.suspend"]


@pytest.mark.parametrize("kind", [k.kind for k in KINDS])
def test_scheduling_queue_is_immutable(kind: str) -> None:
    specs = VALID[kind]["spec"][kind_named(kind).spec_key]
    old = job(kind, specs, runPolicy={"schedulingPolicy": {"queue": "a"}})
    err = refused(job(kind, specs, runPolicy={"schedulingPolicy": {"queue": "b"}}), old)
    assert err.message == (f'{kind}.kubeflow.org "job-1" is invalid: spec.runPolicy.schedulingPolicy.queue: '
                           'Invalid value: "string": spec.runPolicy.schedulingPolicy.queue is immutable')
    # Adding a queue is no transition: the rule only compares two values.
    assert admit(job(kind, specs, runPolicy={"schedulingPolicy": {"queue": "b"}}), job(kind, specs)) == []


def test_pytorch_nproc_per_node_is_a_string_in_the_schema() -> None:
    err = refused(job(PT, {"Worker": replica("pytorch")}, nprocPerNode=4))
    assert err.message == ('PyTorchJob.kubeflow.org "job-1" is invalid: spec.nprocPerNode: Invalid value: '
                           '"integer": spec.nprocPerNode in body must be of type string: "integer"')
    quantities = job(PT, {"Worker": {"template": {"spec": {"containers": [
        {"name": "pytorch", "image": "i", "resources": {"limits": {"cpu": 2, "memory": "1Gi"}}}]}}}})
    assert admit(quantities) == []  # quantities are int-or-string
