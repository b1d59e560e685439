"""kubectl 1.32 against the local cluster for every job kind: api-resources, get (the CRDs' State and Age
columns, run by each kind's controller), create and delete, and scale where the CRD has a scale
subresource (PyTorchJob, JAXJob, PaddleJob)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_kubectl import KUBECTL, kubectl, ok
from waiting import until

from airflow_tfjob.jobs.kinds import KINDS, JobKind, kind_named
from airflow_tfjob.local import LocalCluster

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster() as c:
        yield c


def manifest(kind: JobKind, name: str, script: str = "pass") -> str:
    container = {"name": kind.container, "image": "python:3.11", "command": [sys.executable, "-c", script]}
    replicas = {t: {"replicas": 1, "template": {"spec": {"containers": [container]}}} for t in kind.replica_types}
    return json.dumps({"apiVersion": "kubeflow.org/v1", "kind": kind.kind, "metadata": {"name": name},
                       "spec": {kind.spec_key: replicas}})


def state(cluster: LocalCluster, kind: JobKind, name: str) -> str:
    lines = ok(kubectl(cluster, "get", kind.plural, name)).splitlines()
    assert lines[0].split() == ["NAME", "STATE", "AGE"]
    return lines[1].split()[1] if len(lines[1].split()) == 3 else ""


def test_api_resources_lists_every_kind(cluster: LocalCluster) -> None:
    rows = [line.split() for line in ok(kubectl(cluster, "api-resources", "--api-group=kubeflow.org")).splitlines()]
    assert rows[0] == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    assert sorted(rows[1:]) == sorted([k.plural, "kubeflow.org/v1", "true", k.kind] for k in KINDS)


@pytest.mark.parametrize("kind", [k for k in KINDS if k.kind != "TFJob"], ids=lambda k: k.kind)
def test_create_get_state_and_delete(cluster: LocalCluster, kind: JobKind, tmp_path: Path) -> None:
    name = f"kc-{kind.singular}"
    path = tmp_path / "job.json"
    path.write_text(manifest(kind, name))
    # Validation on: kubectl reads the OpenAPI documents and leaves field validation to the server.
    assert f"{kind.singular}.kubeflow.org/{name} created" in ok(kubectl(cluster, "create", "-f", str(path)))
    until(lambda: state(cluster, kind, name) == "Succeeded", f"kubectl to show {name} Succeeded")
    got = json.loads(ok(kubectl(cluster, "get", kind.singular, name, "-o", "json")))
    assert got["status"]["conditions"][-1]["reason"] == f"{kind.kind}Succeeded"
    pods = ok(kubectl(cluster, "get", "pods", "-l", f"training.kubeflow.org/job-name={name}", "-o", "name"))
    assert sorted(pods.split()) == sorted(f"pod/{name}-{t.lower()}-0" for t in kind.replica_types)
    assert f'{kind.singular}.kubeflow.org "{name}" deleted' in ok(kubectl(cluster, "delete", kind.plural, name))
    until(lambda: not ok(kubectl(cluster, "get", "pods", "-l", f"training.kubeflow.org/job-name={name}", "-o",
                                 "name")).strip(), "the job's pods to be garbage-collected")


def test_scale_edits_the_worker_replicas_where_the_crd_has_a_scale_subresource(cluster: LocalCluster,
                                                                              tmp_path: Path) -> None:
    kind = kind_named("PyTorchJob")
    path = tmp_path / "job.json"
    path.write_text(manifest(kind, "kc-scaled", "import time; time.sleep(3600)"))
    ok(kubectl(cluster, "create", "--validate=false", "-f", str(path)))
    assert "scaled" in ok(kubectl(cluster, "scale", "pytorchjob/kc-scaled", "--replicas=2"))
    replicas = "jsonpath={.spec.pytorchReplicaSpecs.Worker.replicas}"
    assert ok(kubectl(cluster, "get", "pytorchjob", "kc-scaled", "-o", replicas)) == "2"
    until(lambda: "kc-scaled-worker-1" in ok(kubectl(cluster, "get", "pods", "-o", "name")), "a second worker")
    ok(kubectl(cluster, "delete", "pytorchjob", "kc-scaled"))

    xgb = kind_named("XGBoostJob")
    path.write_text(manifest(xgb, "kc-noscale", "import time; time.sleep(3600)"))
    ok(kubectl(cluster, "create", "--validate=false", "-f", str(path)))
    refused = kubectl(cluster, "scale", "xgboostjob/kc-noscale", "--replicas=2")
    assert refused.returncode != 0 and "could not find the requested resource" in refused.stderr
    ok(kubectl(cluster, "delete", "xgboostjob", "kc-noscale"))
