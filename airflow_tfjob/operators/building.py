"""The operator's first step, building the job it submits: a mixin of KubeflowJobOperator.

``build_manifest`` is the same for every operator (template or manifest as the base, parameters over
it, namespace, identity, validation, the size limit); the steps that depend on the API are the job
API's adapter's (:mod:`airflow_tfjob.jobs.adapter`): assembling and validating the manifest are the
adapter of the kind the parameters describe, the name limit and the manifest the cluster takes the
adapter of the kind the task runs (TFJob's ``api`` may run a TFJob as a TrainJob,
:mod:`~airflow_tfjob.operators.api_choice`). An operator with a parameter table of its own says which
arguments its kind's builder takes (``manifest_arguments``) and how its ``log_replicas`` is checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_tfjob.build import templates
from airflow_tfjob.build.limits import check_request_size
from airflow_tfjob.jobs.adapter import adapter_for
from airflow_tfjob.jobs.kinds import kind_named
from airflow_tfjob.operators import params, submit
from airflow_tfjob.operators.api_choice import ApiChoice
from airflow_tfjob.operators.checks import check_log_replicas_against_job, check_parameter_types

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_tfjob.follow.outcome import FollowOptions
    from airflow_tfjob.jobs.adapter import JobAdapter
    from airflow_tfjob.operators.checkpointing import CheckpointPlan


class ManifestBuilding(ApiChoice):
    """Build and validate the job a task submits (before any API call but the namespace's lookup)."""

    # What the operator provides (KubeflowJobOperator and its parameter table).
    _job_value: Any
    allow_template_outside_dag_folder: bool
    namespace: str | None
    name: str | None
    log: Any
    checkpoint: Any
    # checkpoint=: the task instance's checkpoint directory and resume point, fixed once per try before
    # the job is built (plan_checkpoints); None: no checkpoints.
    _checkpoint_plan: CheckpointPlan | None = None

    if TYPE_CHECKING:  # BaseOperator's and KubeflowJobOperator's
        dag: Any

        def has_dag(self) -> bool: ...

        def _typed_parameters(self) -> dict[str, Any]: ...

        def follow_options(self) -> FollowOptions: ...

        def get_hook(self) -> Any: ...

    def build_manifest(self, context: Context) -> dict[str, Any]:
        """The job the task wants (with its identity and intended policy), validated."""
        from airflow_tfjob.build import manifest as manifest_mod

        base = None
        if self._job_value is not None:
            base = manifest_mod.load_manifest(
                self._job_value,
                searchpath=templates.template_folders(self.dag if self.has_dag() else None),
                allow_outside=self.allow_template_outside_dag_folder,
            )
        check_parameter_types(self._typed_parameters(), kind=self.kind)
        if self._checkpoint_plan is None:
            self.plan_checkpoints(context)
        manifest = self.assemble_manifest(base)
        metadata = manifest.setdefault("metadata", {})
        if self.namespace:
            metadata["namespace"] = self.namespace
        if not metadata.get("namespace"):
            metadata["namespace"] = self._default_namespace()
        submit.stamp_identity(manifest, context, name=self.name, max_length=self.max_name_length(manifest))
        for warning in self.validate_manifest(manifest):
            self.log.warning("%s %s: %s", self.kind, metadata["name"], warning)
        self.follow_options()  # the follow parameters too: a progress total naming no hyperparameter...
        manifest = self.for_cluster(manifest)
        # A retry policy's hand-over from an earlier try (a memory limit raised after an OOM kill).
        from airflow_tfjob.operators.retry_policy import apply_to_manifest

        apply_to_manifest(manifest, context, self.log)
        check_request_size(manifest)
        return manifest

    # The steps of build_manifest that depend on the API: each asks the adapter. The kind the
    # parameters describe builds and validates; the kind the task runs (a TFJob may run as a TrainJob)
    # names the limits and the manifest the cluster takes.

    def manifest_arguments(self) -> dict[str, Any]:
        """The keyword arguments of the kind's builder: the manifest parameters that are set."""
        return params.manifest_arguments(self, kind_named(self.kind))

    def assemble_manifest(self, base: dict[str, Any] | None) -> dict[str, Any]:
        """The manifest from the parameters over ``base`` (the ``job`` template or manifest, if any)."""
        adapter = adapter_for(self.kind)
        return adapter.assemble_manifest(base, self.checkpoint_arguments(adapter, self.manifest_arguments()))

    def plan_checkpoints(self, context: Context, *, look: bool = True) -> CheckpointPlan | None:
        """``checkpoint=``'s plan for this try: where the replicas keep checkpoints, what they resume
        from (``look=False``: from the durable state only, no listing of the store)."""
        from airflow_tfjob.operators.checkpointing import plan_for

        self._checkpoint_plan = plan_for(self.checkpoint, context, self.log, look=look and not self.render_only)
        return self._checkpoint_plan

    def checkpoint_arguments(self, adapter: JobAdapter, arguments: dict[str, Any]) -> dict[str, Any]:
        """The builder's arguments with the checkpoint's variables for every replica and, for a claim,
        its volume (the adapter knows where a volume goes in its API's manifest)."""
        plan = self._checkpoint_plan
        if plan is None:
            return arguments
        from airflow_tfjob.build.checkpoints import with_checkpoint_env

        arguments = with_checkpoint_env(arguments, plan.env())
        claim = plan.store.claim_volume()
        return adapter.with_volume(arguments, *claim) if claim is not None else arguments

    def max_name_length(self, manifest: Mapping[str, Any]) -> int | None:
        """The longest name a derived job name may have (None: the kind's default), on the API chosen."""
        return self.name_limit(manifest)

    def validate_manifest(self, manifest: dict[str, Any]) -> list[str]:
        """Raise JobValidationError for every problem; return the warnings."""
        warnings = adapter_for(self.kind).validate_manifest(manifest)
        self.check_log_replicas(manifest)
        return warnings

    def check_log_replicas(self, manifest: Mapping[str, Any]) -> None:
        """``log_replicas`` naming only replica types the manifest has."""
        check_log_replicas_against_job(self.follow_options().selection, manifest)

    def for_cluster(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """The manifest as the cluster's API takes it (a TFJob may run as a TrainJob: ``api``)."""
        return self.on_chosen_api(manifest)

    def _default_namespace(self) -> str:
        """The connection's namespace when the operator names none (the hook knows it), else default."""
        if self.render_only:
            return "default"
        try:
            return self.get_hook().get_namespace() or "default"
        except Exception:  # a render without a reachable connection still works
            return "default"
