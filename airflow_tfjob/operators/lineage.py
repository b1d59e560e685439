"""The operator's lineage: the model it writes as an Airflow Asset, and its OpenLineage facets.

``model_asset`` names the model output: the task declares it as an outlet, and a succeeded job's
asset event carries the final metrics and the job's identity in its ``extra``, so that a DAG
scheduled on the asset (a deployment) can read them from ``triggering_asset_events``.
``lineage_inputs`` / ``lineage_outputs`` name the storage the job reads and writes besides (URIs,
paths or Assets). The OpenLineage provider reads them, with the claims the replicas mount, through
``get_openlineage_facets_on_start`` / ``_on_complete`` / ``_on_failure`` (built by
:mod:`airflow_tfjob.integrations.lineage`, which imports OpenLineage only when asked and only if installed).

The operator keeps those methods (the listener asks the task) and what its try reported (the follow's
outcome, the finished job, its cost); :class:`Lineage` makes the facets from the operator's lineage
parameters as rendered, given that report.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_tfjob.integrations.lineage import job_identity, manifest_claims, operator_lineage, pvc_uri
from airflow_tfjob.operators.checks import as_asset

if TYPE_CHECKING:
    from airflow.sdk import Asset, Context

    from airflow_tfjob.follow.outcome import FollowOutcome

LINEAGE_PARAMETERS = ("model_asset", "lineage_inputs", "lineage_outputs")


def _uri(item: Asset | str) -> str:
    return item if isinstance(item, str) else item.uri


def declared_outlets(model_asset: Asset | str | None, outlets: list[Any]) -> tuple[Asset | None, list[Any]]:
    """``model_asset`` as an Asset, and the task's outlets with it (at parse time: the scheduler needs it
    to know which DAGs the task's events schedule)."""
    if model_asset is None:
        return None, outlets
    asset = as_asset(model_asset)
    return asset, outlets if asset in outlets else [*outlets, asset]


def publish_model(
    model_asset: Asset | str | None, kind: str, context: Context, job: Mapping[str, Any], metrics: Mapping[str, Any]
) -> None:
    """Put the final metrics and the job's identity in the model asset's event (succeeded job)."""
    if model_asset is None:
        return
    meta = job["metadata"]
    extra = {
        "metrics": dict(metrics),
        "job": {"kind": kind, "name": meta["name"], "namespace": meta["namespace"], "uid": meta.get("uid")},
    }
    context["outlet_events"][as_asset(model_asset)].extra.update(extra)


class Lineage:
    """The task's OpenLineage facets: the data it names (``model_asset``, ``lineage_inputs``,
    ``lineage_outputs``) and the claims its job mounts; ``planned`` is the job as the task will submit
    it, for the facets asked before the try reports one (None when it cannot be built)."""

    def __init__(
        self,
        model_asset: Asset | str | None,
        inputs: list[Asset | str] | None,
        outputs: list[Asset | str] | None,
        planned: Callable[[], dict[str, Any] | None],
    ) -> None:
        self.model_asset = model_asset
        self.inputs = inputs
        self.outputs = outputs
        self.planned = planned

    def uris(self, job: Mapping[str, Any] | None) -> tuple[list[str], list[str]]:
        inputs = [_uri(item) for item in self.inputs or []]
        if job is not None:
            namespace = (job.get("metadata") or {}).get("namespace") or "default"
            inputs += [pvc_uri(namespace, claim) for claim in manifest_claims(job)]
        outputs = [_uri(item) for item in self.outputs or []]
        if self.model_asset is not None:
            outputs.insert(0, _uri(self.model_asset))
        return inputs, outputs

    def on_start(self) -> Any:
        job = self.planned()
        inputs, outputs = self.uris(job)
        return operator_lineage(inputs, outputs, job=job_identity(job) if job else None)

    def on_complete(
        self, outcome: FollowOutcome | None, job: dict[str, Any] | None, cost: dict[str, Any] | None
    ) -> Any:
        """The facets of the try's report: the follow's ``outcome``, the finished ``job``, its ``cost``."""
        if job is None:
            return self.on_start()
        inputs, outputs = self.uris(job)
        status = outcome.status if outcome is not None else None
        identity = job_identity(
            job, state=status.state.value if status else None, metrics=outcome.part("metrics", {}) if outcome else None
        )
        return operator_lineage(inputs, outputs, job=identity, cost=cost)

    def on_failure(
        self, outcome: FollowOutcome | None, job: dict[str, Any] | None, cost: dict[str, Any] | None
    ) -> Any:
        lineage = self.on_complete(outcome, job, cost)
        if lineage is None or outcome is None:
            return lineage
        error = operator_lineage([], [], error=failure_reason(outcome), details=outcome.diagnostics)
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
