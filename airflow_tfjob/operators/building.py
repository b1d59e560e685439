"""The operator's first step, building the job it submits: a mixin of KubeflowJobOperator.

``build_manifest`` is the same for every operator (template or manifest as the base, parameters over
it, namespace, identity, validation, the size limit); the steps that depend on the API are methods a
subclass overrides: ``assemble_manifest`` (the kind's builder), ``validate_manifest``,
``max_name_length`` and ``for_cluster`` (TrainJobOperator builds a TrainJob; TFJob's ``api`` maps a
TFJob onto one, :mod:`~airflow_tfjob.operators.api_choice`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_tfjob import templates
from airflow_tfjob.limits import check_request_size
from airflow_tfjob.operators import params, submit
from airflow_tfjob.operators.api_choice import ApiChoice
from airflow_tfjob.operators.checks import check_log_replicas_against_job, check_parameter_types

if TYPE_CHECKING:
    from airflow.sdk import Context


class ManifestBuilding(ApiChoice):
    """Build and validate the job a task submits (before any API call but the namespace's lookup)."""

    # What the operator provides (KubeflowJobOperator and its parameter table).
    _job_value: Any
    allow_template_outside_dag_folder: bool
    namespace: str | None
    name: str | None
    log_replicas: str
    progress: Any
    hyperparameters: Any
    log: Any

    if TYPE_CHECKING:  # BaseOperator's and KubeflowJobOperator's
        dag: Any

        def has_dag(self) -> bool: ...

        def _typed_parameters(self) -> dict[str, Any]: ...

        def get_hook(self) -> Any: ...

    def build_manifest(self, context: Context) -> dict[str, Any]:
        """The job the task wants (with its identity and intended policy), validated."""
        from airflow_tfjob import manifest as manifest_mod
        from airflow_tfjob.progress import progress_spec

        base = None
        if self._job_value is not None:
            base = manifest_mod.load_manifest(
                self._job_value,
                searchpath=templates.template_folders(self.dag if self.has_dag() else None),
                allow_outside=self.allow_template_outside_dag_folder,
            )
        check_parameter_types(self._typed_parameters())
        manifest = self.assemble_manifest(base)
        metadata = manifest.setdefault("metadata", {})
        if self.namespace:
            metadata["namespace"] = self.namespace
        if not metadata.get("namespace"):
            metadata["namespace"] = self._default_namespace()
        submit.stamp_identity(manifest, context, name=self.name, max_length=self.max_name_length(manifest))
        for warning in self.validate_manifest(manifest):
            self.log.warning("%s %s: %s", self.kind, metadata["name"], warning)
        progress_spec(self.progress, self.hyperparameters)  # a total naming no hyperparameter: refused now
        manifest = self.for_cluster(manifest)
        check_request_size(manifest)
        return manifest

    # The steps of build_manifest that depend on the API (TrainJobOperator and TFJobOperator's
    # api="trainjob" override them); everything else is shared.

    def assemble_manifest(self, base: dict[str, Any] | None) -> dict[str, Any]:
        """The manifest from the parameters over ``base`` (the ``job`` template or manifest, if any)."""
        from airflow_tfjob import manifest as manifest_mod
        from airflow_tfjob.kinds import kind_named

        # The kind the parameters describe (a TFJob that for_cluster may then map onto a TrainJob).
        kind = kind_named(self.kind)
        return manifest_mod.build_job(kind, base=base, **params.manifest_arguments(self, kind))

    def max_name_length(self, manifest: Mapping[str, Any]) -> int | None:
        """The longest name a derived job name may have (None: the kind's default)."""
        return self.trainjob_name_length(manifest)

    def validate_manifest(self, manifest: dict[str, Any]) -> list[str]:
        """Raise TFJobValidationError for every problem; return the warnings."""
        from airflow_tfjob.validation import validate_job

        warnings = validate_job(manifest)
        check_log_replicas_against_job(self.log_replicas, manifest)
        return warnings

    def for_cluster(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """The manifest as the cluster's API takes it (a TFJob may run as a TrainJob: ``api``)."""
        return self.as_trainjob(manifest)

    def _default_namespace(self) -> str:
        """The connection's namespace when the operator names none (the hook knows it), else default."""
        if self.render_only:
            return "default"
        try:
            return self.get_hook().get_namespace() or "default"
        except Exception:  # a render without a reachable connection still works
            return "default"

