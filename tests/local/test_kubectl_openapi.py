"""kubectl 1.32 with validation on against the local cluster: `create -f` and `apply -f` read the OpenAPI
v3 documents, leave field validation to the server (fieldValidation=Strict) and print its answers as
against a real API server; `explain` reads each kind's schema."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubectl_support import needs_kubectl, run_kubectl

from airflow_tfjob.jobs.kinds import KINDS, kind_named
from airflow_tfjob.local import LocalCluster

pytestmark = needs_kubectl


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(controller=False, runner=False) as c:
        yield c


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kube-cache")


def kubectl(cluster: LocalCluster, cache_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_kubectl(cluster, *args, timeout=60, cache_dir=cache_dir)


def manifest(kind: str, name: str, **container_extra: Any) -> dict[str, Any]:
    row = kind_named(kind)
    container = {"name": row.container, "image": "python:3", "command": ["python", "-c", "print(1)"],
                 **container_extra}
    replicas: dict[str, Any] = {"Worker": {"replicas": 2, "template": {"spec": {"containers": [container]}}}}
    if kind == "PyTorchJob":
        master = {k: v for k, v in container.items() if k not in container_extra}
        replicas["Master"] = {"replicas": 1, "template": {"spec": {"containers": [master]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": row.kind, "metadata": {"name": name},
            "spec": {row.spec_key: replicas}}


def write(tmp_path: Path, obj: dict[str, Any]) -> Path:
    path = tmp_path / f"{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj))
    return path


def stored(cluster: LocalCluster, kind: str, name: str) -> dict[str, Any] | None:
    plural = kind_named(kind).plural
    return cluster.call(lambda: {e.obj["metadata"]["name"]: e.obj
                                 for e in cluster.store.list_entries(plural, "default")[0]}.get(name))


@pytest.mark.parametrize("kind", ["TFJob", "PyTorchJob"])
@pytest.mark.parametrize("verb", ["create", "apply"])
def test_valid_manifest_is_accepted_with_validation_on(cluster: LocalCluster, cache_dir: Path, tmp_path: Path,
                                                       kind: str, verb: str) -> None:
    name = f"ok-{uuid.uuid4().hex[:6]}"
    path = write(tmp_path, manifest(kind, name))
    result = kubectl(cluster, cache_dir, verb, "-f", str(path))
    assert (result.returncode, result.stdout, result.stderr) == (
        0, f"{kind.lower()}.kubeflow.org/{name} created\n", "")
    job = stored(cluster, kind, name)
    assert job is not None and job["kind"] == kind
    if verb == "apply":
        again = kubectl(cluster, cache_dir, "apply", "-f", str(path))
        assert again.stdout == f"{kind.lower()}.kubeflow.org/{name} unchanged\n", again.stderr


@pytest.mark.parametrize("kind", ["TFJob", "PyTorchJob"])
def test_unknown_field_is_refused_by_create_as_by_a_real_server(cluster: LocalCluster, cache_dir: Path,
                                                                tmp_path: Path, kind: str) -> None:
    name = f"unk-{uuid.uuid4().hex[:6]}"
    path = write(tmp_path, manifest(kind, name, imagePullPolicyy="Always"))
    result = kubectl(cluster, cache_dir, "create", "-f", str(path))
    key = kind_named(kind).spec_key
    assert result.returncode == 1
    assert result.stderr == (
        f'Error from server (BadRequest): error when creating "{path}": {kind} in version "v1" cannot be handled '
        f'as a {kind}: strict decoding error: unknown field '
        f'"spec.{key}.Worker.template.spec.containers[0].imagePullPolicyy"\n')
    assert stored(cluster, kind, name) is None


def test_unknown_field_under_validate_warn_is_a_warning_and_dropped(cluster: LocalCluster, cache_dir: Path,
                                                                     tmp_path: Path) -> None:
    name = f"warn-{uuid.uuid4().hex[:6]}"
    path = write(tmp_path, manifest("PyTorchJob", name, imagePullPolicyy="Always"))
    result = kubectl(cluster, cache_dir, "create", "--validate=warn", "-f", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ('Warning: unknown field "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].'
                             'imagePullPolicyy"\n')
    job = stored(cluster, "PyTorchJob", name)
    assert job is not None
    container = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert "imagePullPolicyy" not in container and container["image"] == "python:3"


def test_apply_of_an_unknown_field_to_an_existing_job_is_refused(cluster: LocalCluster, cache_dir: Path,
                                                                 tmp_path: Path) -> None:
    name = f"upd-{uuid.uuid4().hex[:6]}"
    ok = kubectl(cluster, cache_dir, "apply", "-f", str(write(tmp_path, manifest("TFJob", name))))
    assert ok.returncode == 0, ok.stderr
    obj = manifest("TFJob", name)
    obj["spec"]["runPolicy"] = {"backofLimit": 3}
    result = kubectl(cluster, cache_dir, "apply", "-f", str(write(tmp_path, obj)))
    assert result.returncode == 1
    assert result.stderr.endswith('strict decoding error: unknown field "spec.runPolicy.backofLimit"\n')
    obj["spec"]["runPolicy"] = {"backoffLimit": 3}
    configured = kubectl(cluster, cache_dir, "apply", "-f", str(write(tmp_path, obj)))
    assert configured.stdout == f"tfjob.kubeflow.org/{name} configured\n", configured.stderr
    job = stored(cluster, "TFJob", name)
    assert job is not None and job["spec"]["runPolicy"] == {"backoffLimit": 3, "suspend": False}


def test_admission_refusals_print_as_from_a_real_server(cluster: LocalCluster, cache_dir: Path,
                                                         tmp_path: Path) -> None:
    obj = manifest("PyTorchJob", f"adm-{uuid.uuid4().hex[:6]}")
    del obj["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"]
    path = write(tmp_path, obj)
    webhook = kubectl(cluster, cache_dir, "create", "-f", str(path))
    assert webhook.stderr == (
        f'Error from server (Forbidden): error when creating "{path}": admission webhook '
        '"validator.pytorchjob.training-operator.kubeflow.org" denied the request: '
        "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1\n")
    obj["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 1
    obj["spec"]["nprocPerNode"] = 4
    schema = kubectl(cluster, cache_dir, "create", "-f", str(write(tmp_path, obj)))
    assert schema.stderr == (
        f'The PyTorchJob "{obj["metadata"]["name"]}" is invalid: spec.nprocPerNode: Invalid value: "integer": '
        'spec.nprocPerNode in body must be of type string: "integer"\n')


@pytest.mark.parametrize("kind", [k.kind for k in KINDS])
def test_explain_every_kind(cluster: LocalCluster, cache_dir: Path, kind: str) -> None:
    row = kind_named(kind)
    result = kubectl(cluster, cache_dir, "explain", f"{row.singular}.spec")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith(f"GROUP:      kubeflow.org\nKIND:       {kind}\nVERSION:    v1\n\nFIELD: spec <Object>")
    assert f"  {row.spec_key}\t<map[string]Object> -required-\n" in out
    for name in ("runPolicy", *row.extra_spec_fields):
        assert f"\n  {name}\t<" in out
    ports = kubectl(cluster, cache_dir, "explain", f"{row.plural}.spec.{row.spec_key}.template.spec.containers.ports")
    assert "  containerPort\t<integer> -required-\n" in ports.stdout, ports.stderr


def test_explain_core_kind_and_openapi_v2(cluster: LocalCluster, cache_dir: Path) -> None:
    result = kubectl(cluster, cache_dir, "explain", "pod.spec.containers.resources.limits")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("KIND:       Pod\nVERSION:    v1\n\nFIELD: limits <map[string]")
    assert "Limits describes the maximum amount of compute resources allowed." in result.stdout
    v2 = kubectl(cluster, cache_dir, "get", "--raw", "/openapi/v2")
    definitions = json.loads(v2.stdout)["definitions"]
    assert definitions["org.kubeflow.v1.PyTorchJob"]["x-kubernetes-group-version-kind"] == [
        {"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"}]
