"""The operator's first step, building the job it submits: a collaborator of the task's try.

``ManifestBuilder.build`` is the same for every operator (template or manifest as the base, parameters
over it, namespace, identity, validation, the size limit); the steps that depend on the API are the job
API's adapter's (:mod:`airflow_tfjob.jobs.adapter`): assembling and validating the manifest are the
adapter of the kind the parameters describe, the name limit and the manifest the cluster takes the
API choice's (TFJob's ``api`` may run a TFJob as a TrainJob, :mod:`~airflow_tfjob.operators.api_choice`).

The builder reads the operator's parameters as rendered and calls its overridable steps: an operator
with a parameter table of its own says which arguments its kind's builder takes
(``manifest_arguments``) and how its ``log_replicas`` is checked (``check_log_replicas``). What it
keeps is this try's: the checkpoint plan, fixed once before the job is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_tfjob.build import templates
from airflow_tfjob.build.checkpoints import with_checkpoint_env
from airflow_tfjob.build.kindparts import check_shortcuts
from airflow_tfjob.build.limits import check_request_size
from airflow_tfjob.build.manifest import load_manifest
from airflow_tfjob.jobs.adapter import adapter_for
from airflow_tfjob.jobs.kinds import JobKind, kind_named
from airflow_tfjob.operators import params, submit
from airflow_tfjob.operators.api_bridge import name_limit, on_chosen_api
from airflow_tfjob.operators.checkpointing import CheckpointPlan, plan_for
from airflow_tfjob.operators.checks import check_parameter_types, replica_counts
from airflow_tfjob.operators.retry_policy import apply_to_manifest

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_tfjob.jobs.adapter import JobAdapter
    from airflow_tfjob.operators.api_choice import ApiChoice
    from airflow_tfjob.operators.generic import KubeflowJobOperator


class ManifestBuilder:
    """Build and validate the job a try submits (before any API call but the namespace's lookup)."""

    def __init__(self, operator: KubeflowJobOperator, api: ApiChoice) -> None:
        self.operator = operator
        self.api = api
        #: ``checkpoint=``: the task instance's checkpoint directory and resume point, fixed once per try
        #: before the job is built (:meth:`plan_checkpoints`); None: no checkpoints.
        self.checkpoints: CheckpointPlan | None = None

    def build(self, context: Context) -> dict[str, Any]:
        """The job the task wants (with its identity and intended policy), validated."""
        op = self.operator
        value = getattr(op, op.job_field)
        base = None
        if value is not None:
            base = load_manifest(
                value,
                searchpath=templates.template_folders(op.dag if op.has_dag() else None),
                allow_outside=op.allow_template_outside_dag_folder,
            )
        check_parameter_types(params.values(op, op.parameter_table.typed), kind=op.kind)
        if self.checkpoints is None:
            self.plan_checkpoints(context)
        manifest = self.assemble(base)
        metadata = manifest.setdefault("metadata", {})
        if op.namespace:
            metadata["namespace"] = op.namespace
        if not metadata.get("namespace"):
            metadata["namespace"] = default_namespace(op)
        submit.stamp_identity(manifest, context, name=op.name, max_length=name_limit(self.api, manifest))
        for warning in adapter_for(op.kind).validate_manifest(manifest):
            op.log.warning("%s %s: %s", op.kind, metadata["name"], warning)
        op.check_log_replicas(manifest)
        op.follow_options()  # the follow parameters too: a progress total naming no hyperparameter...
        # The manifest as the cluster's API takes it (a TFJob may run as a TrainJob: ``api``).
        manifest = on_chosen_api(self.api, manifest)
        # A retry policy's hand-over from an earlier try (a memory limit raised after an OOM kill).
        apply_to_manifest(manifest, context, op.log)
        check_request_size(manifest)
        return manifest

    def arguments(self) -> dict[str, Any]:
        """The body of the operator's ``manifest_arguments``: its kind's builder's arguments."""
        return manifest_arguments(self.operator, self.operator.kind)

    def assemble(self, base: dict[str, Any] | None) -> dict[str, Any]:
        """The manifest from the parameters over ``base`` (the ``job`` template or manifest, if any): the
        adapter of the kind the parameters describe builds it."""
        adapter = adapter_for(self.operator.kind)
        return adapter.assemble_manifest(base, self.checkpoint_arguments(adapter, self.operator.manifest_arguments()))

    def plan_checkpoints(self, context: Context, *, look: bool = True) -> CheckpointPlan | None:
        """``checkpoint=``'s plan for this try: where the replicas keep checkpoints, what they resume
        from (``look=False``: from the durable state only, no listing of the store)."""
        op = self.operator
        self.checkpoints = plan_for(op.checkpoint, context, op.log, look=look and not op.render_only)
        return self.checkpoints

    def checkpoint_arguments(self, adapter: JobAdapter, arguments: dict[str, Any]) -> dict[str, Any]:
        """The builder's arguments with the checkpoint's variables for every replica and, for a claim,
        its volume (the adapter knows where a volume goes in its API's manifest)."""
        plan = self.checkpoints
        if plan is None:
            return arguments
        arguments = with_checkpoint_env(arguments, plan.env())
        claim = plan.store.claim_volume()
        return adapter.with_volume(arguments, *claim) if claim is not None else arguments


def default_namespace(operator: KubeflowJobOperator) -> str:
    """The connection's namespace when the operator names none (the hook knows it), else default."""
    if operator.render_only:
        return "default"
    try:
        return operator.get_hook().get_namespace() or "default"
    except Exception:  # a render without a reachable connection still works
        return "default"


def manifest_arguments(operator: Any, kind: JobKind | str) -> dict[str, Any]:
    """The keyword arguments of manifest.build_job for ``kind``: the manifest
    parameters that are set, the replica shortcuts folded into ``replicas``, the renamed ones under
    build_job's names. Parameters the operator does not have count as not set; a shortcut naming a
    replica type ``kind`` has not (``ps=1`` for a PyTorchJob) is refused naming the parameter.
    """
    every = params.parameter_set(None)
    row = kind if isinstance(kind, JobKind) else kind_named(kind)

    def value(key: str) -> Any:
        return getattr(operator, key, None)

    given = {key: value(key) for key in every.manifest_params if value(key) is not None}
    shortcuts = {key: value(key) for key in every.replica_shortcuts if value(key) is not None}
    if shortcuts:
        check_shortcuts(row, shortcuts)
        given["replicas"] = replica_counts(given.get("replicas"), shortcuts)
    for key, field in every.renamed.items():
        if value(key) is not None:
            given[field] = value(key)
    return given
