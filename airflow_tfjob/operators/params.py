"""The operator's parameters, declared once.

``TFJobOperator.__init__`` keeps an explicit keyword-only signature (users and IDEs read it); this
table says what each parameter is for, and everything else derives from it: the attributes
``__init__`` stores, ``template_fields``, the parameters handed to ``manifest.build_tfjob``, the
ones ``paramtypes`` checks by type, and the operator's own ones ``check_operator_parameters``
checks. ``tests/unit/test_operator_params.py`` fails when the table and the signature drift apart.

Every kind's operator reads the same table: a row says which kinds have the parameter (a replica
shortcut exists where the kind has that replica type; ``success_policy`` is TFJob's, ``nproc_per_node``
PyTorchJob's...). :func:`parameter_set` gives one kind's view; the module's constants are TFJob's
(``TFJobOperator``'s signature), ``parameter_set(None)`` is every row (a generic operator over all
kinds, which leaves the refusal of a parameter its kind lacks to ``manifest.build_job``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from airflow_tfjob.kinds import KINDS, TFJOB, JobKind, kind_named
from airflow_tfjob.operators.checks import replica_counts

# job: what names and finds the job (checked by type); shortcut: a replica count by type;
# manifest: a TFJobParameters field; own: the task's behaviour (check_operator_parameters);
# policy: how template files may be read (checked where they are read).
Role = Literal["job", "shortcut", "manifest", "own", "policy"]


@dataclass(frozen=True)
class Param:
    name: str
    role: Role
    templated: bool = False
    # The TFJobParameters field, when BaseOperator already owns the name: `queue` (the executor's
    # queue) is `kueue_queue` here, `resources` (the executor's) is `container_resources`, as in the
    # cncf.kubernetes pod operator.
    manifest_name: str | None = None
    # The kinds that have this parameter (kind names); None: every kind.
    kinds: tuple[str, ...] | None = None


def _p(
    name: str,
    role: Role,
    templated: bool = False,
    manifest_name: str | None = None,
    kinds: tuple[str, ...] | None = None,
) -> Param:
    return Param(name, role, templated, manifest_name, kinds)


def _typed(rtype: str) -> tuple[str, ...]:
    """The kinds with replica type ``rtype`` (those that have its shortcut, ``ps=`` for PS)."""
    return tuple(k.kind for k in KINDS if rtype in k.replica_types)


def _having(field: str) -> tuple[str, ...]:
    """The kinds whose spec has ``field`` (those that have the parameter setting it)."""
    return tuple(k.kind for k in KINDS if field in k.extra_spec_fields)


T = True  # templated: the column that reads best in the table below

#: In the order of the signature (the drift test checks that too).
PARAMETERS: tuple[Param, ...] = (
    _p("tfjob", "job", T),
    _p("name", "job", T),
    _p("namespace", "job", T),
    _p("kubernetes_conn_id", "own"),
    _p("cluster_context", "job", T),
    _p("config_file", "job", T),
    _p("in_cluster", "job"),
    _p("api_retry_timeout", "own"),
    _p("chief", "shortcut", kinds=_typed("Chief")),
    _p("master", "shortcut", kinds=_typed("Master")),
    _p("ps", "shortcut", kinds=_typed("PS")),
    _p("worker", "shortcut", kinds=_typed("Worker")),
    _p("evaluator", "shortcut", kinds=_typed("Evaluator")),
    _p("replicas", "manifest"),
    _p("restart_policy", "manifest"),
    _p("image", "manifest", T),
    _p("images", "manifest", T),
    _p("image_pull_policy", "manifest"),
    _p("command", "manifest", T),
    _p("args", "manifest", T),
    _p("hyperparameters", "manifest", T),
    _p("env", "manifest", T),
    _p("secret_env", "manifest", T),
    _p("env_from_secrets", "manifest"),
    _p("env_from_config_maps", "manifest"),
    _p("env_from", "manifest"),
    _p("container_resources", "manifest", T, manifest_name="resources"),
    _p("gpus", "manifest"),
    _p("replica_resources", "manifest"),
    _p("replica_placement", "manifest"),
    _p("volume_mounts", "manifest"),
    _p("working_dir", "manifest", T),
    _p("ports", "manifest"),
    _p("volumes", "manifest", T),
    _p("pvc", "manifest", T),
    _p("secret_volumes", "manifest"),
    _p("config_map_volumes", "manifest"),
    _p("node_selector", "manifest", T),
    _p("tolerations", "manifest"),
    _p("service_account", "manifest", T),
    _p("image_pull_secrets", "manifest"),
    _p("pod_labels", "manifest", T),
    _p("pod_annotations", "manifest", T),
    _p("labels", "manifest", T),
    _p("annotations", "manifest", T),
    _p("kueue_queue", "manifest", T, manifest_name="queue"),
    _p("clean_pod_policy", "manifest"),
    _p("ttl_seconds_after_finished", "manifest"),
    _p("active_deadline_seconds", "manifest"),
    _p("backoff_limit", "manifest"),
    _p("suspend", "manifest"),
    _p("managed_by", "manifest"),
    _p("scheduling", "manifest"),
    _p("success_policy", "manifest", kinds=_having("successPolicy")),
    _p("enable_dynamic_worker", "manifest", kinds=_having("enableDynamicWorker")),
    _p("nproc_per_node", "manifest", kinds=_having("nprocPerNode")),
    _p("elastic_policy", "manifest", kinds=_having("elasticPolicy")),
    _p("log_replicas", "own", T),
    _p("get_logs", "own"),
    _p("metrics", "own"),
    _p("metrics_history", "own"),
    _p("progress", "own", T),
    _p("startup_timeout", "own"),
    _p("queue_timeout", "own"),
    _p("on_preemption", "own"),
    _p("kueue_require_admission", "own"),
    _p("kueue_workload_window", "own"),
    _p("log_rate_per_replica", "own"),
    _p("log_total_cap", "own"),
    _p("tensorboard", "own"),
    _p("tensorboard_log_dir", "own", T),
    _p("tensorboard_keep", "own"),
    _p("deferrable", "own"),
    _p("on_finish_action", "own"),
    _p("on_kill_action", "own"),
    _p("kill_grace_period", "own"),
    _p("render_only", "own"),
    _p("model_asset", "own"),
    _p("lineage_inputs", "own", T),
    _p("lineage_outputs", "own", T),
    _p("allow_template_outside_dag_folder", "policy"),
    _p("allow_template_path_from_params", "policy"),
    _p("api", "own", kinds=("TFJob",)),
)


@dataclass(frozen=True)
class ParameterSet:
    """One kind's parameters (or every row's) and what derives from them, in signature order."""

    rows: tuple[Param, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.rows)

    @property
    def template_fields(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.rows if p.templated)

    @property
    def manifest_params(self) -> tuple[str, ...]:
        """Handed to manifest.build_job under their own name."""
        return tuple(p.name for p in self.rows if p.role == "manifest" and p.manifest_name is None)

    @property
    def renamed(self) -> dict[str, str]:
        """Handed to manifest.build_job under another name: {operator's name: TFJobParameters field}."""
        return {p.name: p.manifest_name for p in self.rows if p.manifest_name is not None}

    @property
    def replica_shortcuts(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.rows if p.role == "shortcut")

    @property
    def own(self) -> tuple[str, ...]:
        """Checked by check_operator_parameters."""
        return tuple(p.name for p in self.rows if p.role == "own")

    @property
    def typed(self) -> tuple[str, ...]:
        """Checked by paramtypes (those passed as they are first, the renamed ones after)."""
        shown = self.manifest_params
        return (
            *(p.name for p in self.rows if p.role in ("job", "shortcut") or p.name in shown),
            *self.renamed,
        )


@cache
def parameter_set(kind: JobKind | str | None) -> ParameterSet:
    """The parameters of ``kind``'s operator; ``None``: every parameter of every kind."""
    if kind is None:
        return ParameterSet(PARAMETERS)
    name = kind.kind if isinstance(kind, JobKind) else kind_named(kind).kind
    return ParameterSet(tuple(p for p in PARAMETERS if p.kinds is None or name in p.kinds))


_TF = parameter_set(TFJOB)
NAMES: tuple[str, ...] = _TF.names
TEMPLATE_FIELDS: tuple[str, ...] = _TF.template_fields


def renderers(job_field: str) -> dict[str, str]:
    """How the UI shows a rendered field (others: as text); `job_field` holds the manifest."""
    return {
        job_field: "yaml",
        **dict.fromkeys(
            ("hyperparameters", "env", "container_resources", "volumes", "labels", "annotations"), "json"
        ),
    }


RENDERERS: dict[str, str] = renderers("tfjob")
#: Handed to manifest.build_tfjob under their own name.
MANIFEST_PARAMS: tuple[str, ...] = _TF.manifest_params
#: Handed to manifest.build_tfjob under another name: {operator's name: TFJobParameters field}.
RENAMED: dict[str, str] = _TF.renamed
REPLICA_SHORTCUTS: tuple[str, ...] = _TF.replica_shortcuts
#: Checked by check_operator_parameters.
OWN: tuple[str, ...] = _TF.own
#: Checked by paramtypes (those passed as they are first, the renamed ones after).
TYPED: tuple[str, ...] = _TF.typed


#: KubeflowJobOperator's parameters (and the named operators'): `kind`, the manifest or template as
#: `job`, then every kind's parameters (manifest.build_job refuses one the job's kind lacks).
GENERIC = ParameterSet((_p("kind", "job"), _p("job", "job", T), *PARAMETERS[1:]))
#: TFJobOperator's: TFJob's view of the table, the manifest as `tfjob` (the module constants above).
TFJOB_PARAMETERS = _TF


class StoredParameters:
    """The types of the stored parameters the operator reads by name (the rest it reads through the
    table). Annotations only: :func:`store` sets the values; the drift test checks each is in the table.
    """

    tfjob: Any
    name: str | None
    namespace: str | None
    kubernetes_conn_id: str
    cluster_context: str | None
    config_file: str | None
    in_cluster: bool | None
    api_retry_timeout: float | None
    hyperparameters: Any
    env: Any
    secret_env: Any
    log_replicas: str
    get_logs: bool
    metrics: list[str]
    metrics_history: bool
    progress: Any
    startup_timeout: float | None
    queue_timeout: float | None
    on_preemption: str
    kueue_require_admission: bool
    kueue_workload_window: float
    log_rate_per_replica: int
    log_total_cap: int
    tensorboard: Any
    tensorboard_log_dir: str | None
    tensorboard_keep: bool
    deferrable: bool
    on_finish_action: str
    on_kill_action: str
    kill_grace_period: int | None
    render_only: bool
    allow_template_outside_dag_folder: bool
    allow_template_path_from_params: bool
    api: str


def store(operator: Any, given: Mapping[str, Any], names: tuple[str, ...] = NAMES) -> None:
    """Set each parameter as an attribute (so that it can be templated and shows in the UI).

    ``names``: the operator's parameters (``parameter_set(kind).names``; TFJobOperator's by default).
    """
    for name in names:
        setattr(operator, name, given[name])


def manifest_arguments(operator: Any, kind: JobKind | str | None = None) -> dict[str, Any]:
    """The keyword arguments of manifest.build_job for ``kind`` (TFJob by default): the manifest
    parameters that are set, the replica shortcuts folded into ``replicas``, the renamed ones under
    build_job's names. Parameters the operator does not have count as not set; a shortcut naming a
    replica type ``kind`` has not (``ps=1`` for a PyTorchJob) is refused naming the parameter.
    """
    every = parameter_set(None)
    row = TFJOB if kind is None else (kind if isinstance(kind, JobKind) else kind_named(kind))

    def value(key: str) -> Any:
        return getattr(operator, key, None)

    given = {key: value(key) for key in every.manifest_params if value(key) is not None}
    shortcuts = {key: value(key) for key in every.replica_shortcuts if value(key) is not None}
    if shortcuts:
        from airflow_tfjob.manifest_kinds import check_shortcuts

        check_shortcuts(row, shortcuts)
        given["replicas"] = replica_counts(given.get("replicas"), shortcuts)
    for key, field in every.renamed.items():
        if value(key) is not None:
            given[field] = value(key)
    return given


def values(operator: Any, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: getattr(operator, name) for name in names}
