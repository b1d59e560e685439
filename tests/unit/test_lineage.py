"""Lineage without a cluster: dataset naming, what the facets say about a job, the parameters'
checks, the model asset as an outlet, and nothing OpenLineage when its provider is absent."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from airflow.sdk import DAG, Asset

from airflow_tfjob.build.manifest import build_job
from airflow_tfjob.build.validation import JobValidationError
from airflow_tfjob.integrations.lineage import dataset_name, job_identity, manifest_claims, operator_lineage
from airflow_tfjob.jobs.kinds import PYTORCHJOB, TFJOB
from airflow_tfjob.operators.generic import KubeflowJobOperator
from airflow_tfjob.operators.tfjob import TFJobOperator


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://bucket/data/train", ("s3://bucket", "data/train")),
        ("gs://bucket/x", ("gs://bucket", "x")),
        ("/mnt/models/digits", ("file", "/mnt/models/digits")),
        ("file:///mnt/models", ("file", "/mnt/models")),
        ("pvc://team-a/training-data", ("kubernetes://team-a", "pvc/training-data")),
        ("hdfs://namenode:8020/warehouse", ("hdfs://namenode:8020", "warehouse")),
    ],
)
def test_dataset_naming_follows_openlineage(uri: str, expected: tuple[str, str]) -> None:
    assert dataset_name(uri) == expected


def _job() -> dict[str, Any]:
    job = build_job(
        PYTORCHJOB,
        name="train-1",
        namespace="ml",
        replicas={"master": 1, "worker": 3},
        image="repo/train:1",
        images={"worker": "repo/train-worker:1"},
        pvc=["data:/data", {"claim": "models", "mount_path": "/models"}],
        volumes=[{"name": "more", "persistentVolumeClaim": {"claimName": "data"}}],
    )
    job["metadata"]["uid"] = "u-1"
    return job


def test_job_identity_and_claims_from_a_manifest() -> None:
    job = _job()
    assert manifest_claims(job) == ["data", "models"]
    assert job_identity(job, state="succeeded", metrics={"acc": 0.9, "missing": [], "ok": True}) == {
        "kind": "PyTorchJob",
        "name": "train-1",
        "namespace": "ml",
        "uid": "u-1",
        "state": "succeeded",
        "replicas": {"Master": 1, "Worker": 3},
        "images": {"Master": "repo/train:1", "Worker": "repo/train-worker:1"},
        "metrics": {"acc": 0.9},
    }


def test_operator_lineage_is_openlineage_facets() -> None:
    from openlineage.client.serde import Serde

    lineage = operator_lineage(
        ["s3://b/d", "s3://b/d", "pvc://ml/data"],
        ["/models/x"],
        job=job_identity(_job()),
        error="TFJobFailed: worker-1 exited [failing replicas: Worker]",
        details=["worker-1: exit code 3"],
    )
    assert [(d.namespace, d.name) for d in lineage.inputs] == [
        ("s3://b", "d"),
        ("kubernetes://ml", "pvc/data"),
    ]
    assert [(d.namespace, d.name) for d in lineage.outputs] == [("file", "/models/x")]
    facets = {key: Serde.to_dict(facet) for key, facet in lineage.run_facets.items()}
    assert facets["kubeflowJob"]["replicas"] == {"Master": 1, "Worker": 3}
    assert facets["kubeflowJob"]["_schemaURL"].endswith("/docs/howto/lineage.md")
    assert facets["kubeflowJobError"]["message"].startswith("TFJobFailed")
    assert facets["kubeflowJobError"]["stackTrace"] == "worker-1: exit code 3"


def test_operator_facets_before_the_job_runs() -> None:
    op = TFJobOperator(
        task_id="t",
        name="n",
        namespace="ml",
        worker=2,
        image="i",
        pvc="data:/data",
        model_asset="s3://models/digits",
        lineage_inputs=[Asset("raw", uri="s3://raw/digits"), "/data/digits"],
        lineage_outputs=["s3://models/digits/logs"],
    )
    lineage = op.get_openlineage_facets_on_start()
    assert [(d.namespace, d.name) for d in lineage.inputs] == [
        ("s3://raw", "digits"),
        ("file", "/data/digits"),
        ("kubernetes://ml", "pvc/data"),
    ]
    assert [(d.namespace, d.name) for d in lineage.outputs] == [
        ("s3://models", "digits"),
        ("s3://models", "digits/logs"),
    ]
    assert lineage.run_facets["kubeflowJob"].replicas == {"Worker": 2}
    # Before any outcome, completion and failure say what the start said (no error facet).
    assert "kubeflowJobError" not in op.get_openlineage_facets_on_failure(None).run_facets


def test_model_asset_is_an_outlet_of_the_task_and_serializes() -> None:
    from airflow_compat import dag_serialization

    DagSerialization = dag_serialization()

    model = Asset("digits_model", uri="s3://models/digits")
    with DAG("lineage_params", schedule=None) as dag:
        by_asset = TFJobOperator(task_id="a", image="i", worker=1, model_asset=model)
        by_uri = KubeflowJobOperator(
            task_id="b", kind="PyTorchJob", image="i", master=1, model_asset="s3://m/x"
        )
    assert by_asset.outlets == [model]
    assert by_uri.outlets == [Asset("s3://m/x", uri="s3://m/x")]
    serialized = json.dumps(DagSerialization.to_dict(dag))
    assert "s3://models/digits" in serialized and "s3://m/x" in serialized


@pytest.mark.parametrize(
    ("kwargs", "field", "fix"),
    [
        ({"model_asset": 3}, "model_asset", "airflow.sdk.Asset or a URI"),
        ({"model_asset": " "}, "model_asset", "s3://models/digits"),
        ({"lineage_inputs": "s3://raw"}, "lineage_inputs", "a list of them"),
        ({"lineage_outputs": ["s3://x", 7]}, "lineage_outputs", "item 1 (7)"),
    ],
)
def test_bad_lineage_parameters_are_refused_at_parse_time(
    kwargs: dict[str, Any], field: str, fix: str
) -> None:
    with pytest.raises(JobValidationError) as info:
        TFJobOperator(task_id="t", image="i", worker=1, **kwargs)
    assert field in str(info.value) and fix in str(info.value)


# The client and the provider's extractors made unimportable, as where the provider is not installed.
BLOCK_OPENLINEAGE = (
    "import sys\n"
    "for name in ('openlineage', 'airflow.providers.openlineage.extractors',\n"
    "             'airflow.providers.common.compat.openlineage.facet'):\n"
    "    sys.modules[name] = None\n"
)


def _run(code: str) -> Any:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_without_the_openlineage_provider_the_facets_are_none() -> None:
    code = BLOCK_OPENLINEAGE + (
        "import json; from airflow_tfjob.operators.tfjob import TFJobOperator\n"
        "op = TFJobOperator(task_id='t', image='i', worker=1, model_asset='s3://m/x')\n"
        "print(json.dumps([op.get_openlineage_facets_on_start() is None, op.outlets[0].uri]))\n"
    )
    assert _run(code) == [True, "s3://m/x"]


def test_importing_the_operator_loads_no_openlineage() -> None:
    # Airflow's provider discovery reads the provider's get_provider_info; nothing else may load.
    code = (
        "import json, sys; import airflow_tfjob.operators.generic, airflow_tfjob.operators.tfjob\n"
        "print(json.dumps(sorted(m for m in sys.modules if 'openlineage' in m)))"
    )
    assert set(_run(code)) <= {
        "airflow.providers.openlineage",
        "airflow.providers.openlineage.get_provider_info",
    }


def test_tfjob_kind_identity_reads_its_container() -> None:
    job = build_job(TFJOB, name="j", namespace="d", replicas={"chief": 1, "worker": 2}, image="tf:2")
    assert job_identity(job)["images"] == {"Chief": "tf:2", "Worker": "tf:2"}


def test_trainjob_identity_counts_its_nodes_and_trainer_image() -> None:
    """A TrainJob has no replica specs: its run facet says how many nodes and which trainer image."""
    from airflow_tfjob.jobs.trainjob.manifest import build_trainjob

    job = build_trainjob(None, name="tj", namespace="ml", runtime="torch-distributed", image="repo/t:1", num_nodes=3)
    identity = job_identity(job, state="succeeded")
    assert (identity["kind"], identity["replicas"], identity["images"]) == (
        "TrainJob", {"Node": 3}, {"Node": "repo/t:1"}
    )
    assert manifest_claims(job) == []
