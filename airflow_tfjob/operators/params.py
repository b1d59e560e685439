"""The operator's parameters, declared once.

``TFJobOperator.__init__`` keeps an explicit keyword-only signature (users and IDEs read it); this
table says what each parameter is for, and everything else derives from it: the attributes
``__init__`` stores, ``template_fields``, the parameters handed to ``manifest.build_tfjob``, the
ones ``paramtypes`` checks by type, and the operator's own ones ``check_operator_parameters``
checks. ``tests/unit/test_operator_params.py`` fails when the table and the signature drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

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


def _p(name: str, role: Role, templated: bool = False, manifest_name: str | None = None) -> Param:
    return Param(name, role, templated, manifest_name)


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
    _p("chief", "shortcut"),
    _p("master", "shortcut"),
    _p("ps", "shortcut"),
    _p("worker", "shortcut"),
    _p("evaluator", "shortcut"),
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
    _p("success_policy", "manifest"),
    _p("enable_dynamic_worker", "manifest"),
    _p("log_replicas", "own", T),
    _p("get_logs", "own"),
    _p("metrics", "own"),
    _p("metrics_history", "own"),
    _p("startup_timeout", "own"),
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
    _p("allow_template_outside_dag_folder", "policy"),
    _p("allow_template_path_from_params", "policy"),
)

#: The kind-specific parameters of the generic operator (PyTorchJob, PaddleJob), after TFJob's own
#: spec fields; TFJobOperator does not take them.
KIND_SPECIFIC: tuple[Param, ...] = (
    _p("nproc_per_node", "manifest"),
    _p("elastic_policy", "manifest"),
)
_AFTER_SPEC = [p.name for p in PARAMETERS].index("enable_dynamic_worker") + 1
#: KubeflowJobOperator's parameters: `kind`, the manifest or template as `job`, then TFJobOperator's
#: (the kind-specific ones after the spec fields). Its `kind` is checked by kinds.kind_named.
GENERIC_PARAMETERS: tuple[Param, ...] = (
    _p("kind", "job"),
    _p("job", "job", T),
    *PARAMETERS[1:_AFTER_SPEC],
    *KIND_SPECIFIC,
    *PARAMETERS[_AFTER_SPEC:],
)
#: How the UI shows a rendered field (others: as text).
_RENDERED_AS_JSON = ("hyperparameters", "env", "container_resources", "volumes", "labels", "annotations")


class ParameterTable:
    """What derives from one operator's parameter rows (the names below, as module constants too for
    TFJobOperator's table)."""

    def __init__(self, rows: tuple[Param, ...], job_field: str) -> None:
        self.rows = rows
        #: The parameter holding the manifest or template (the one that may name a template file).
        self.job_field = job_field
        self.names: tuple[str, ...] = tuple(p.name for p in rows)
        self.template_fields: tuple[str, ...] = tuple(p.name for p in rows if p.templated)
        self.renderers: dict[str, str] = {self.job_field: "yaml", **dict.fromkeys(_RENDERED_AS_JSON, "json")}
        #: Handed to the manifest builder under their own name.
        self.manifest_params: tuple[str, ...] = tuple(
            p.name for p in rows if p.role == "manifest" and p.manifest_name is None
        )
        #: Handed to the manifest builder under another name: {operator's name: builder's name}.
        self.renamed: dict[str, str] = {p.name: p.manifest_name for p in rows if p.manifest_name is not None}
        self.replica_shortcuts: tuple[str, ...] = tuple(p.name for p in rows if p.role == "shortcut")
        #: Checked by check_operator_parameters.
        self.own: tuple[str, ...] = tuple(p.name for p in rows if p.role == "own")
        #: Checked by paramtypes (those passed as they are first, the renamed ones after).
        self.typed: tuple[str, ...] = (
            *(p.name for p in rows if p.role in ("job", "shortcut") or p.name in self.manifest_params),
            *self.renamed,
        )


TFJOB_TABLE = ParameterTable(PARAMETERS, "tfjob")
GENERIC_TABLE = ParameterTable(GENERIC_PARAMETERS, "job")

NAMES = TFJOB_TABLE.names
TEMPLATE_FIELDS = TFJOB_TABLE.template_fields
RENDERERS = TFJOB_TABLE.renderers
MANIFEST_PARAMS = TFJOB_TABLE.manifest_params
RENAMED = TFJOB_TABLE.renamed
REPLICA_SHORTCUTS = TFJOB_TABLE.replica_shortcuts
OWN = TFJOB_TABLE.own
TYPED = TFJOB_TABLE.typed


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
    env: Any
    secret_env: Any
    log_replicas: str
    get_logs: bool
    metrics: list[str]
    metrics_history: bool
    startup_timeout: float | None
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


def store(operator: Any, given: Mapping[str, Any], table: ParameterTable = TFJOB_TABLE) -> None:
    """Set each parameter as an attribute (so that it can be templated and shows in the UI)."""
    for name in table.names:
        setattr(operator, name, given[name])


def manifest_arguments(operator: Any, table: ParameterTable = TFJOB_TABLE) -> dict[str, Any]:
    """The keyword arguments of the manifest builder: the manifest parameters that are set, the
    replica shortcuts folded into ``replicas``, the renamed ones under the builder's names."""
    given = {
        key: getattr(operator, key) for key in table.manifest_params if getattr(operator, key) is not None
    }
    shortcuts = {
        key: getattr(operator, key) for key in table.replica_shortcuts if getattr(operator, key) is not None
    }
    if shortcuts:
        given["replicas"] = replica_counts(given.get("replicas"), shortcuts)
    for key, field in table.renamed.items():
        if getattr(operator, key) is not None:
            given[field] = getattr(operator, key)
    return given


def values(operator: Any, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: getattr(operator, name) for name in names}
