"""TensorBoard pod/Service construction and URL extraction (pure)."""

from __future__ import annotations

import pytest

from airflow_tfjob.integrations.tensorboard import (
    CONTAINER,
    TensorBoardSpec,
    build_objects,
    tensorboard_name,
    url_from_service,
)

JOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "TFJob",
    "metadata": {"name": "digits", "namespace": "ml", "uid": "uid-1"},
}


def _service(ingress: list[dict] | None, port: int = 6006) -> dict:
    return {
        "metadata": {"name": "digits-tensorboard", "namespace": "ml"},
        "spec": {"ports": [{"port": port, "nodePort": 31000}]},
        "status": {"loadBalancer": {"ingress": ingress} if ingress is not None else {}},
    }


def test_objects_are_owned_by_the_job_and_select_each_other() -> None:
    pod, service = build_objects(TensorBoardSpec(log_dir="/data/logs", volume_mounts=[{"name": "d"}]), JOB)
    assert pod["metadata"]["name"] == service["metadata"]["name"] == "digits-tensorboard"
    for obj in (pod, service):
        (owner,) = obj["metadata"]["ownerReferences"]
        assert owner["uid"] == "uid-1" and owner["kind"] == "TFJob"
        # Not a controller reference: the training-operator must not adopt the board as a replica.
        assert owner["controller"] is False
        assert obj["metadata"]["namespace"] == "ml"
    labels = pod["metadata"]["labels"]
    assert service["spec"]["selector"] == labels
    assert not any(key.startswith("training.kubeflow.org") for key in labels)
    (container,) = pod["spec"]["containers"]
    assert container["name"] == CONTAINER
    assert "--logdir=/data/logs" in container["args"]
    assert "--host=$(POD_IP)" in container["args"]
    assert container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert container["volumeMounts"] == [{"name": "d"}]
    assert service["spec"]["type"] == "LoadBalancer"


def test_name_fits_dns_label() -> None:
    name = tensorboard_name("j" * 63)
    assert len(name) == 63 and name.endswith("-tensorboard")


@pytest.mark.parametrize(
    ("ingress", "expected"),
    [
        (None, None),
        ([], None),
        ([{"ip": "127.0.3.4"}], "http://127.0.3.4:6006/"),
        ([{"hostname": "lb.example.com"}], "http://lb.example.com:6006/"),
        ([{"ip": "fd00::1"}], "http://[fd00::1]:6006/"),
    ],
)
def test_url_from_load_balancer_status(ingress: list[dict] | None, expected: str | None) -> None:
    assert url_from_service(TensorBoardSpec(log_dir="/l"), "digits", _service(ingress)) == expected


def test_url_template_for_cluster_ip() -> None:
    spec = TensorBoardSpec(
        log_dir="/l", service_type="ClusterIP", url_template="https://tb.example.com/{namespace}/{service}/"
    )
    assert url_from_service(spec, "digits", _service(None)) == "https://tb.example.com/ml/digits-tensorboard/"


def test_invalid_specs_name_the_field() -> None:
    with pytest.raises(ValueError, match="url_template"):
        TensorBoardSpec(log_dir="/l", service_type="ClusterIP")
    with pytest.raises(ValueError, match="service_type"):
        TensorBoardSpec(log_dir="/l", service_type="Ingress")
    with pytest.raises(ValueError, match="log_dir"):
        TensorBoardSpec(log_dir="")


def test_coerce_round_trip() -> None:
    spec = TensorBoardSpec(log_dir="/l", keep=True)
    assert TensorBoardSpec.coerce(spec.to_dict()) == spec
    assert TensorBoardSpec.coerce("/x").log_dir == "/x"
