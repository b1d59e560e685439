"""OpenLineage facets for a Kubeflow training task: what it read, what it wrote, which job ran it.

The OpenLineage provider calls the operator's ``get_openlineage_facets_on_start`` /
``_on_complete`` / ``_on_failure`` (see :mod:`airflow_tfjob.operators.lineage`); they gather plain
data with the pure functions here and hand it to :func:`operator_lineage`, the only place that
imports OpenLineage (through :mod:`airflow_tfjob.integrations.openlineage_facets`, which imports it at
its top). Without the provider installed it returns None (the provider is then not there to ask
either): importing this module costs nothing and never imports OpenLineage.

Datasets follow OpenLineage's naming: ``s3://bucket/key`` is namespace ``s3://bucket``, name
``key`` (likewise gs, abfss, hdfs...); a local path or ``file://`` URI is namespace ``file``; a
PersistentVolumeClaim is namespace ``kubernetes://<namespace>``, name ``pvc/<claim>`` (OpenLineage
has no naming rule for claims: this one says where the claim lives and that it is one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

from airflow_tfjob.jobs.adapter import adapter_of
from airflow_tfjob.jobs.status import job_kind

#: The run facets' keys (the facets: :mod:`airflow_tfjob.integrations.openlineage_facets`).
RUN_FACET = "kubeflowJob"
ERROR_FACET = "kubeflowJobError"
COST_FACET = "kubeflowJobCost"


def dataset_name(uri: str) -> tuple[str, str]:
    """(namespace, name) of a storage URI or path, by OpenLineage's naming conventions."""
    parts = urlsplit(uri)
    if parts.scheme in ("", "file"):
        return "file", parts.path or uri
    if parts.scheme == "pvc":  # pvc://<namespace>/<claim>, as pvc_dataset writes them
        return f"kubernetes://{parts.netloc}", f"pvc/{parts.path.strip('/')}"
    return f"{parts.scheme}://{parts.netloc}", parts.path.lstrip("/") or "/"


def pvc_uri(namespace: str, claim: str) -> str:
    return f"pvc://{namespace}/{claim}"


def manifest_claims(job: Mapping[str, Any]) -> list[str]:
    """The PersistentVolumeClaims any replica of a job (manifest or object) mounts, in order, once."""
    claims: list[str] = []
    for spec in replica_specs(job).values():
        volumes = ((spec.get("template") or {}).get("spec") or {}).get("volumes") or []
        for volume in volumes:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim and claim not in claims:
                claims.append(claim)
    return claims


def replica_specs(job: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The job's replicas by type, as its API's adapter shapes them (a TrainJob's nodes as one type)."""
    return adapter_of(job).replica_specs(job)


def job_identity(
    job: Mapping[str, Any], *, state: str | None = None, metrics: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What the run facet says about the job: identity, replicas and images by type, state, metrics."""
    kind = job_kind(job)
    meta = job.get("metadata") or {}
    replicas: dict[str, int] = {}
    images: dict[str, str] = {}
    for rtype, spec in replica_specs(job).items():
        replicas[rtype] = int(spec.get("replicas", 1))
        containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
        main = next(
            (c for c in containers if c.get("name") == kind.container), containers[0] if containers else {}
        )
        if main.get("image"):
            images[rtype] = main["image"]
    return {
        "kind": kind.kind,
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "state": state,
        "replicas": replicas,
        "images": images,
        "metrics": {
            k: v
            for k, v in (metrics or {}).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        },
    }


@cache
def _openlineage() -> ModuleType | None:
    """:mod:`airflow_tfjob.integrations.openlineage_facets` (OpenLineage's classes and the custom run
    facets), or None without the OpenLineage provider."""
    try:
        # OpenLineage, an optional dependency: loaded where a task's lineage is built, and only if installed.
        from airflow_tfjob.integrations import openlineage_facets
    except ImportError:
        return None
    return openlineage_facets


def operator_lineage(
    inputs: Iterable[str],
    outputs: Iterable[str],
    *,
    job: Mapping[str, Any] | None = None,
    error: str | None = None,
    details: Iterable[str] = (),
    cost: Mapping[str, Any] | None = None,
) -> Any:
    """The OperatorLineage of the task (None without the OpenLineage provider).

    ``inputs``/``outputs``: URIs or paths (``pvc://ns/claim`` for a claim); ``job``: the
    :func:`job_identity` for the run facet; ``error``: the failure reason, as an error facet whose
    stack trace holds ``details`` (the job's diagnostics: exit codes, last log lines); ``cost``: what
    the job held (``follow.cost.JobCost.to_dict``), as the run facet ``kubeflowJobCost``.
    """
    facets = _openlineage()
    if facets is None:
        return None
    run_facets: dict[str, Any] = {}
    if job is not None:
        run_facets[RUN_FACET] = facets.KubeflowJobRunFacet(**job)
    if cost is not None:
        run_facets[COST_FACET] = facets.KubeflowJobCostRunFacet(**cost)
    if error:
        trace = "\n".join(details) or None
        error_facet = facets.ErrorMessageRunFacet
        run_facets[ERROR_FACET] = error_facet(message=error, programmingLanguage="python", stackTrace=trace)
    return facets.OperatorLineage(
        inputs=[facets.Dataset(*dataset_name(uri)) for uri in _unique(inputs)],
        outputs=[facets.Dataset(*dataset_name(uri)) for uri in _unique(outputs)],
        run_facets=run_facets,
    )


def _unique(uris: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(uris))
