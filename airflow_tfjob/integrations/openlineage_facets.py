"""OpenLineage's classes a task's lineage is made of, with the provider's custom run facets (attrs
classes on OpenLineage's base).

Imported at its top what it needs of OpenLineage, an optional dependency: so this module is imported
only where lineage is built (:func:`airflow_tfjob.integrations.lineage.operator_lineage`), and an
ImportError there means the OpenLineage provider is not installed.
"""

from __future__ import annotations

import attrs
from airflow.providers.common.compat.openlineage.facet import Dataset, ErrorMessageRunFacet, RunFacet
from airflow.providers.openlineage.extractors import OperatorLineage

__all__ = [
    "Dataset",
    "ErrorMessageRunFacet",
    "KubeflowJobCostRunFacet",
    "KubeflowJobRunFacet",
    "OperatorLineage",
]

# The custom facets' schema URLs name where each is described (OpenLineage requires one per facet); the
# project has no published home yet, so they are the documentation pages' sources.
_SCHEMA = "https://github.com/airflow-provider-tfjob/airflow-provider-tfjob/blob/main/docs/howto/lineage.md"
_COST_SCHEMA = "https://github.com/airflow-provider-tfjob/airflow-provider-tfjob/blob/main/docs/howto/cost.md"


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
