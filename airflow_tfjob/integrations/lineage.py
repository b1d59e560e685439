"""OpenLineage facets for a Kubeflow training task: what it read, what it wrote, which job ran it.

The OpenLineage provider calls the operator's ``get_openlineage_facets_on_start`` /
``_on_complete`` / ``_on_failure`` (see :mod:`airflow_tfjob.operators.lineage`); they gather plain
data with the pure functions here and hand it to :func:`operator_lineage`, the only place that
imports OpenLineage. Without the provider installed it returns None (the provider is then not
there to ask either): importing this module costs nothing and never imports OpenLineage.

Datasets follow OpenLineage's naming: ``s3://bucket/key`` is namespace ``s3://bucket``, name
``key`` (likewise gs, abfss, hdfs...); a local path or ``file://`` URI is namespace ``file``; a
PersistentVolumeClaim is namespace ``kubernetes://<namespace>``, name ``pvc/<claim>`` (OpenLineage
has no naming rule for claims: this one says where the claim lives and that it is one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from airflow_tfjob.jobs.adapter import adapter_of
from airflow_tfjob.jobs.status import job_kind

#: The run facets' keys. The custom facet's schema URL names where it is described (OpenLineage
#: requires one per facet); the project has no published home yet, so it is the documentation page's source.
RUN_FACET = "kubeflowJob"
ERROR_FACET = "kubeflowJobError"
COST_FACET = "kubeflowJobCost"
_SCHEMA = "https://github.com/airflow-provider-tfjob/airflow-provider-tfjob/blob/main/docs/howto/lineage.md"
_COST_SCHEMA = "https://github.com/airflow-provider-tfjob/airflow-provider-tfjob/blob/main/docs/howto/cost.md"


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
def _openlineage() -> tuple[Any, ...] | None:
    """OpenLineage's classes the task's lineage is made of, with the custom run facets (attrs classes,
    defined on OpenLineage's base); None without the OpenLineage provider.

    The one place that imports OpenLineage, inside this function: it is an optional dependency, and
    a task asks for lineage only when the provider is there to listen.
    """
    try:
        import attrs
        from airflow.providers.common.compat.openlineage.facet import Dataset, ErrorMessageRunFacet, RunFacet
        from airflow.providers.openlineage.extractors import OperatorLineage
    except ImportError:
        return None

    @attrs.define
    class KubeflowJobRunFacet(RunFacet):  # type: ignore[misc]
        """The Kubeflow job a task ran: kind, name, namespace, uid, state, replicas, images, metrics."""

        kind: str
        name: str | None
        namespace: str | None
        uid: str | None = None
        state: str | None = None
        replicas: dict[str, int] = attrs.field(factory=dict)
        images: dict[str, str] = attrs.field(factory=dict)
        metrics: dict[str, float] = attrs.field(factory=dict)

        @staticmethod
        def _get_schema() -> str:
            return _SCHEMA

    @attrs.define
    class KubeflowJobCostRunFacet(RunFacet):  # type: ignore[misc]
        """What the job held (follow/cost.py): GPU-hours and CPU core-hours, queued and running."""

        gpu_hours: float
        queued_gpu_hours: float
        running_gpu_hours: float
        cpu_core_hours: float
        queued_cpu_core_hours: float
        running_cpu_core_hours: float
        queued_seconds: float
        running_seconds: float
        replicas: int
        gpus: float
        cpu_cores: float
        accelerators: dict[str, float] = attrs.field(factory=dict)
        finished: bool = True

        @staticmethod
        def _get_schema() -> str:
            return _COST_SCHEMA

    return OperatorLineage, Dataset, KubeflowJobRunFacet, ErrorMessageRunFacet, KubeflowJobCostRunFacet


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
    classes = _openlineage()
    if classes is None:
        return None
    OperatorLineage, Dataset, run_facet, error_facet, cost_facet = classes
    run_facets: dict[str, Any] = {}
    if job is not None:
        run_facets[RUN_FACET] = run_facet(**job)
    if cost is not None:
        run_facets[COST_FACET] = cost_facet(**cost)
    if error:
        trace = "\n".join(details) or None
        run_facets[ERROR_FACET] = error_facet(message=error, programmingLanguage="python", stackTrace=trace)
    return OperatorLineage(
        inputs=[Dataset(*dataset_name(uri)) for uri in _unique(inputs)],
        outputs=[Dataset(*dataset_name(uri)) for uri in _unique(outputs)],
        run_facets=run_facets,
    )


def _unique(uris: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(uris))
