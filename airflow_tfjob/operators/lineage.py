"""The operator's lineage: the model it writes as an Airflow Asset, and its OpenLineage facets.

``model_asset`` names the model output: the task declares it as an outlet, and a succeeded job's
asset event carries the final metrics and the job's identity in its ``extra``, so that a DAG
scheduled on the asset (a deployment) can read them from ``triggering_asset_events``.
``lineage_inputs`` / ``lineage_outputs`` name the storage the job reads and writes besides (URIs,
paths or Assets). The OpenLineage provider reads them, with the claims the replicas mount, through
``get_openlineage_facets_on_start`` / ``_on_complete`` / ``_on_failure`` (built by
:mod:`airflow_tfjob.integrations.lineage`, which imports OpenLineage only when asked and only if installed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_tfjob.operators import params
from airflow_tfjob.operators.checks import as_asset

if TYPE_CHECKING:
    from airflow.sdk import Asset, Context

    from airflow_tfjob.follow.outcome import FollowOutcome
    from airflow_tfjob.jobs.kinds import JobKind

LINEAGE_PARAMETERS = ("model_asset", "lineage_inputs", "lineage_outputs")
def _uri(item: Asset | str) -> str:
    return item if isinstance(item, str) else item.uri


class LineageMixin:
    """Asset outlet and OpenLineage methods of KubeflowJobOperator (the attributes below are its)."""

    model_asset: Asset | str | None
    lineage_inputs: list[Asset | str] | None
    lineage_outputs: list[Asset | str] | None
    kind: str
    namespace: str | None
    outlets: list[Any]
    #: The follow's outcome and the finished job once the task reports them (for the facets).
    _outcome: FollowOutcome | None = None
    _job: dict[str, Any] | None
    _cost: dict[str, Any] | None = None  # what the job held (operators/outcome.report_cost)

    if TYPE_CHECKING:  # declared only: a runtime stub here would hide the operator's own (mixin order)

        @property
        def job_kind(self) -> JobKind: ...

    def _declare_model_asset(self) -> None:
        """Make ``model_asset`` an Asset and one of the task's outlets (at parse time: the scheduler
        needs it to know which DAGs the task's events schedule)."""
        if self.model_asset is None:
            return
        self.model_asset = as_asset(self.model_asset)
        if self.model_asset not in self.outlets:
            self.outlets = [*self.outlets, self.model_asset]

    def _publish_model(self, context: Context, job: Mapping[str, Any], metrics: Mapping[str, Any]) -> None:
        """Put the final metrics and the job's identity in the model asset's event (succeeded job)."""
        if self.model_asset is None:
            return
        meta = job["metadata"]
        extra = {
            "metrics": dict(metrics),
            "job": {
                "kind": self.kind,
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
            },
        }
        context["outlet_events"][as_asset(self.model_asset)].extra.update(extra)

    # ------------------------------------------------------------------ OpenLineage

    def _lineage_uris(self, job: Mapping[str, Any] | None) -> tuple[list[str], list[str]]:
        from airflow_tfjob.integrations.lineage import manifest_claims, pvc_uri

        inputs = [_uri(item) for item in self.lineage_inputs or []]
        if job is not None:
            namespace = (job.get("metadata") or {}).get("namespace") or "default"
            inputs += [pvc_uri(namespace, claim) for claim in manifest_claims(job)]
        outputs = [_uri(item) for item in self.lineage_outputs or []]
        if self.model_asset is not None:
            outputs.insert(0, _uri(self.model_asset))
        return inputs, outputs

    def _planned_job(self) -> dict[str, Any] | None:
        """The job as the task will submit it (before execute: no identity yet), for the claims;
        None when it cannot be built (execute reports why; lineage never fails the task)."""
        from airflow_tfjob.build import manifest as manifest_mod

        base = getattr(self, "_job_value", None)
        try:
            job = manifest_mod.build_job(
                self.job_kind,
                base=manifest_mod.load_manifest(base) if base is not None else None,
                **params.manifest_arguments(self, self.job_kind),
            )
        except Exception:
            return None
        metadata = job.setdefault("metadata", {})
        metadata["namespace"] = self.namespace or metadata.get("namespace") or self._default_namespace()
        return job

    if TYPE_CHECKING:  # the operator's own (operators/building.py), declared only

        def _default_namespace(self) -> str: ...

    def get_openlineage_facets_on_start(self) -> Any:
        from airflow_tfjob.integrations.lineage import job_identity, operator_lineage

        job = self._planned_job()
        inputs, outputs = self._lineage_uris(job)
        return operator_lineage(inputs, outputs, job=job_identity(job) if job else None)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        from airflow_tfjob.integrations.lineage import job_identity, operator_lineage

        outcome, job = self._outcome, self._job
        if job is None:
            return self.get_openlineage_facets_on_start()
        inputs, outputs = self._lineage_uris(job)
        status = outcome.status if outcome is not None else None
        identity = job_identity(
            job, state=status.state.value if status else None, metrics=outcome.part("metrics", {}) if outcome else None
        )
        return operator_lineage(inputs, outputs, job=identity, cost=self._cost)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        from airflow_tfjob.integrations.lineage import operator_lineage

        lineage = self.get_openlineage_facets_on_complete(task_instance)
        outcome = self._outcome
        if lineage is None or outcome is None:
            return lineage
        reason = failure_reason(outcome)
        error = operator_lineage([], [], error=reason, details=outcome.diagnostics)
        lineage.run_facets.update(error.run_facets)
        return lineage


def failure_reason(outcome: FollowOutcome) -> str:
    """One line: why the job failed (its status' reason and message, the failing replica types), or
    how following it ended (a timeout, a lost job)."""
    status = outcome.status
    if outcome.event in ("succeeded", "failed") and status is not None:
        failing = ", ".join(status.failed_replica_types) or "unknown"
        return f"{status.reason}: {status.message} [failing replicas: {failing}]"
    return f"{outcome.event}: {outcome.message}"
