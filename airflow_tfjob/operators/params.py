"""The operators' parameters, declared once: one row each.

A row says everything about a parameter but its written-out annotation (kept in the signatures that
IDEs and type checkers read): what it is for (its role), its default, whether it is templated,
which kinds have it, the name the code using it reads it under (a JobParameters field for the
manifest, a FollowOptions field for the follow core), the rule that checks it, and its line in the
parameter reference. Everything else derives from the rows: the attributes ``__init__`` stores,
``template_fields``, the arguments of ``manifest.build_job``, the FollowOptions, the checks of
``check_operator_parameters`` and the table of docs/api/parameters.md. The written-out signatures
(TFJobOperator, KubeflowJobOperator, TrainJobOperator) are checked against the rows, names, order
and defaults (tests/unit/test_operator_params.py, test_trainjob_params.py, test_kind_threading.py).

One mechanism for both APIs: TrainJobOperator's table (operators/trainjob_params.py) is made of the
same rows, the shared ones taken from this table by name, so a follow or lifecycle parameter is
declared once for every operator; only the manifest rows differ (the TrainJob's fields).

Every kind's operator reads the same table: a row says which kinds have the parameter (a replica
shortcut exists where the kind has that replica type; ``success_policy`` is TFJob's, ``nproc_per_node``
PyTorchJob's...). :func:`parameter_set` gives one kind's view; the module's constants are TFJob's
(``TFJobOperator``'s signature), ``parameter_set(None)`` is every row (a generic operator over all
kinds, which leaves the refusal of a parameter its kind lacks to ``manifest.build_job``).
"""

# names-job-apis: rows name the kinds that take them, and TFJobOperator's set is built here
# (tests/unit/test_api_blind_core.py).
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from airflow_tfjob.constants import KILL_GRACE_PERIOD
from airflow_tfjob.follow.cleanup import ON_FINISH_ACTIONS, ON_KILL_ACTIONS
from airflow_tfjob.follow.progress_spec import progress_spec
from airflow_tfjob.hooks.retry import DEFAULT_RETRY_TIMEOUT
from airflow_tfjob.jobs.kinds import KINDS, TFJOB, JobKind, kind_named
from airflow_tfjob.operators import checks
from airflow_tfjob.operators.checks import Rule
from airflow_tfjob.version_compat import conf

# job: names and finds the job (paramtypes checks its type); shortcut: a replica count by type;
# manifest: a JobParameters field (paramtypes checks its type); follow: a FollowOptions field (the
# follow core reads it); own: the operator's own behaviour (the operator reads it); policy: how
# template files may be read (checked where they are read).
Role = Literal["job", "shortcut", "manifest", "follow", "own", "policy"]


@dataclass(frozen=True)
class ConfDefault:
    """A default read from Airflow's configuration when the operator's module is imported."""

    section: str
    key: str
    fallback: bool

    def value(self) -> bool:
        return conf.getboolean(self.section, self.key, fallback=self.fallback)

    def __str__(self) -> str:
        return f"[{self.section}] {self.key} ({self.fallback} unless set)"


@dataclass(frozen=True)
class Param:
    """One parameter of the operators (see the module's docstring)."""

    name: str
    role: Role
    doc: str
    default: Any = None
    templated: bool = False
    # The name the code using it reads it under, when not the parameter's: a JobParameters field
    # where BaseOperator already owns the name (`queue`, the executor's queue, is `kueue_queue` here;
    # `resources` is `container_resources`, as in the cncf.kubernetes pod operator).
    target: str | None = None
    # The kinds that have this parameter (kind names); None: every kind.
    kinds: tuple[str, ...] | None = None
    # follow and own rows: the rule of operators/checks.py that checks the value and returns it as
    # its user takes it; the types of job, shortcut and manifest rows are paramtypes' (by name).
    check: Rule | None = None
    # follow rows: the FollowOptions value from the checked one and the operator (`progress` becomes
    # a spec once its total is read from the hyperparameters); None: the checked value itself.
    to_option: Callable[[Any, Any], Any] | None = None

    @property
    def field(self) -> str:
        """The name its user reads it under (JobParameters or FollowOptions field, or its own)."""
        return self.target or self.name


def _typed(rtype: str) -> tuple[str, ...]:
    """The kinds with replica type ``rtype`` (those that have its shortcut, ``ps=`` for PS)."""
    return tuple(k.kind for k in KINDS if rtype in k.replica_types)


def _having(field: str) -> tuple[str, ...]:
    """The kinds whose spec has ``field`` (those that have the parameter setting it)."""
    return tuple(k.kind for k in KINDS if field in k.extra_spec_fields)


def _progress_option(value: Any, operator: Any) -> dict[str, Any] | None:
    spec = progress_spec(value, operator.hyperparameters)  # a total naming no hyperparameter: refused
    return spec.to_dict() if spec is not None else None


def _job(name: str, doc: str, templated: bool = True, default: Any = None) -> Param:
    return Param(name, "job", doc, default, templated)


def _shortcut(rtype: str) -> Param:
    return Param(rtype.lower(), "shortcut", f"number of {rtype} replicas", kinds=_typed(rtype))


def _manifest(
    name: str,
    doc: str,
    templated: bool = False,
    target: str | None = None,
    kinds: tuple[str, ...] | None = None,
    check: Rule | None = None,
) -> Param:
    return Param(name, "manifest", doc, None, templated, target, kinds, check)


def _follow(name: str, rule: Rule, default: Any, doc: str, templated: bool = False) -> Param:
    return Param(name, "follow", doc, default, templated, check=rule)


def _own(name: str, rule: Rule | None, default: Any, doc: str, templated: bool = False) -> Param:
    return Param(name, "own", doc, default, templated, check=rule)


T = True  # templated: the column that reads best in the table below
DEFAULT_DEFERRABLE = ConfDefault("operators", "default_deferrable", False)
_ON_PREEMPTION = ("wait", "fail")  # a preemption by Kueue: wait for the job's readmission, or fail

#: In the order of the signature (the drift test checks that too).
PARAMETERS: tuple[Param, ...] = (
    _job("tfjob", "the TFJob manifest or template: a dict, YAML text or a .yaml/.yml/.json file"),
    _job("name", "the job's name (default: derived from the DAG, task and run)"),
    _job("namespace", "the job's namespace (default: the connection's, else default)"),
    _own("kubernetes_conn_id", checks.connection_id, "kubernetes_default", "the Kubernetes connection"),
    _job("cluster_context", "the kubeconfig context, over the connection's"),
    _job("config_file", "the kubeconfig file, over the connection's"),
    _job("in_cluster", "use the pod's service account, over the connection's", templated=False),
    _own(
        "api_retry_timeout",
        checks.retry_seconds,
        DEFAULT_RETRY_TIMEOUT,
        "seconds every API call may be retried in all (0: no retries)",
    ),
    _shortcut("Chief"),
    _shortcut("Master"),
    _shortcut("PS"),
    _shortcut("Worker"),
    _shortcut("Evaluator"),
    _manifest("replicas", "replica count per type, e.g. {'Worker': 2}"),
    _manifest("restart_policy", "the replicas' restart policy, one or per type"),
    _manifest("image", "the container image of every replica", T),
    _manifest("images", "a container image per replica type", T),
    _manifest("image_pull_policy", "Always, IfNotPresent or Never"),
    _manifest("command", "the container's command", T),
    _manifest("args", "the container's arguments", T),
    _manifest("hyperparameters", "appended to the arguments as --key=value", T),
    _manifest("env", "environment variables (a dict, or a list of EnvVar dicts)", T),
    _manifest(
        "secret_env",
        "environment variables from Secrets, 'secret:key'; masked in the log",
        T,
        check=checks.env_names,
    ),
    _manifest("env_from_secrets", "environment variables from Secret keys, by variable"),
    _manifest("env_from_config_maps", "environment variables from ConfigMap keys, by variable"),
    _manifest("env_from", "whole Secrets or ConfigMaps as environment (envFrom)"),
    _manifest(
        "container_resources", "requests and limits of every replica's container", T, target="resources"
    ),
    _manifest("gpus", "GPUs per replica (nvidia.com/gpu limit)"),
    _manifest("replica_resources", "requests and limits per replica type"),
    _manifest("replica_placement", "node selector, tolerations, affinity per replica type"),
    _manifest("volume_mounts", "volume mounts of the container"),
    _manifest("working_dir", "the container's working directory", T),
    _manifest("ports", "container ports (name: port, or a list)"),
    _manifest("volumes", "pod volumes", T),
    _manifest("pvc", "PersistentVolumeClaims to mount: name, {name: path} or a list", T),
    _manifest("secret_volumes", "Secrets mounted as files"),
    _manifest("config_map_volumes", "ConfigMaps mounted as files"),
    _manifest("node_selector", "the pods' node selector", T),
    _manifest("tolerations", "the pods' tolerations"),
    _manifest("service_account", "the pods' service account", T),
    _manifest("image_pull_secrets", "Secrets to pull the images with"),
    _manifest("pod_labels", "labels of the pods", T),
    _manifest("pod_annotations", "annotations of the pods", T),
    _manifest("labels", "labels of the job", T, check=checks.queue_label),
    _manifest("annotations", "annotations of the job", T),
    _manifest(
        "kueue_queue",
        "the Kueue LocalQueue the job is submitted to",
        T,
        target="queue",
        check=checks.queue_name,
    ),
    _manifest("clean_pod_policy", "which pods remain once the job ends (applied after the logs are read)"),
    _manifest(
        "ttl_seconds_after_finished", "seconds the finished job is kept (applied after the logs are read)"
    ),
    _manifest("active_deadline_seconds", "seconds the job may run, enforced by the training operator"),
    _manifest("backoff_limit", "retries before the job is marked failed"),
    _manifest("suspend", "create the job suspended"),
    _manifest("managed_by", "the controller that reconciles the job (runPolicy.managedBy)"),
    _manifest("scheduling", "gang scheduling: queue, min_available, priority_class..."),
    _manifest(
        "success_policy",
        "when a TFJob succeeds: '' (chief or worker 0) or AllWorkers",
        kinds=_having("successPolicy"),
    ),
    _manifest(
        "enable_dynamic_worker",
        "let workers join and leave a running TFJob",
        kinds=_having("enableDynamicWorker"),
    ),
    _manifest(
        "nproc_per_node", "processes per node (a number, or auto/cpu/gpu/xpu)", kinds=_having("nprocPerNode")
    ),
    _manifest("elastic_policy", "elastic training bounds and rendezvous", kinds=_having("elasticPolicy")),
    _follow(
        "log_replicas",
        checks.log_selection,
        "master",
        "whose logs reach the task log: master, all, a type, 'worker:0', or a list",
        T,
    ),
    _follow(
        "get_logs", checks.boolean, True, "stream the replicas' logs and the job's events to the task log"
    ),
    _follow("metrics", checks.metric_names, None, "metric names read from the master's name=value lines"),
    _follow(
        "metrics_history", checks.boolean, False, "keep every reported value of each metric, timestamped"
    ),
    Param(
        "progress",
        "follow",
        "[progress] lines from a metric: {'metric': ..., 'total': ...}",
        None,
        T,
        check=checks.progress_shape,
        to_option=_progress_option,
    ),
    _follow(
        "startup_timeout",
        checks.seconds(none_ok=True),
        600.0,
        "seconds the pods may take to start (after Kueue's admission); None: no limit",
    ),
    _follow(
        "queue_timeout",
        checks.seconds(none_ok=True),
        None,
        "seconds the job may wait for Kueue's admission; None: no limit",
    ),
    _follow(
        "on_preemption",
        checks.choice(*_ON_PREEMPTION),
        "wait",
        "a preemption by Kueue: wait for readmission, or fail the task",
    ),
    _follow("kueue_require_admission", checks.boolean, False, "fail when Kueue does not take the job in"),
    _follow(
        "kueue_workload_window",
        checks.seconds(none_ok=False),
        30.0,
        "seconds Kueue's Workload may take to appear",
    ),
    _follow(
        "multikueue_connections",
        checks.worker_connections,
        None,
        "MultiKueue worker cluster name to the Airflow kubernetes connection its replicas are read "
        "through; beside the connection's extra of that name, this map wins per worker",
    ),
    _follow(
        "log_rate_per_replica",
        checks.count("lines per second"),
        1000,
        "log lines per second per replica reaching the task log (0: no limit)",
    ),
    _follow(
        "log_total_cap",
        checks.count("lines"),
        1_000_000,
        "log lines per job reaching the task log (0: no limit)",
    ),
    _own(
        "tensorboard", checks.tensorboard, None, "a TensorBoard for the job: True, a log directory, or a spec"
    ),
    _own(
        "tensorboard_log_dir",
        checks.checked_with("tensorboard"),
        None,
        "where the training writes its summaries",
        T,
    ),
    _own("tensorboard_keep", checks.boolean, False, "keep the TensorBoard after the task"),
    _own("deferrable", checks.boolean, DEFAULT_DEFERRABLE, "wait in the triggerer instead of a worker slot"),
    _own(
        "on_finish_action",
        checks.choice(*ON_FINISH_ACTIONS),
        "keep",
        "what happens to the finished job: keep, delete or delete_succeeded",
    ),
    _own(
        "keep_failed_for",
        checks.window,
        None,
        "a failed job's pods stay this long (seconds or timedelta) for kubectl logs/describe, then go",
    ),
    _own("on_kill_action", checks.choice(*ON_KILL_ACTIONS), "delete", "what a killed task does to its job"),
    _own(
        "kill_grace_period",
        checks.grace_period,
        KILL_GRACE_PERIOD,
        "grace seconds of the pods' deletion on kill; None: the pods' own",
    ),
    _own("render_only", checks.boolean, False, "render the manifest into the log and XCom, submit nothing"),
    _own(
        "preflight",
        checks.boolean,
        False,
        "check the cluster has what the job needs first; fail with what is missing and the fixes",
    ),
    _own(
        "model_asset", checks.lineage, None, "the Asset the job's model is: an outlet with the final metrics"
    ),
    _own("lineage_inputs", checks.lineage, None, "Assets, URIs or paths the job reads (OpenLineage)", T),
    _own("lineage_outputs", checks.lineage, None, "Assets, URIs or paths the job writes (OpenLineage)", T),
    _own(
        "checkpoint",
        checks.checkpoint_store,
        None,
        "where checkpoints survive retries and preemption: 'pvc://<claim>/<path>' or an object-storage "
        "prefix (s3://, gs://, file://); replicas get CHECKPOINT_DIR and RESUME_FROM",
        T,
    ),
    Param(
        "allow_template_outside_dag_folder", "policy", "read a template file outside the DAG folder", False
    ),
    Param("allow_template_path_from_params", "policy", "let a rendered value name a template file", False),
    Param(
        "api",
        "own",
        "the API a TFJob runs on: auto, tfjob or trainjob",
        "auto",
        kinds=("TFJob",),
        check=checks.api_choice,
    ),
    _own(
        "retry_policy",
        checks.retry_policy,
        None,
        "what each failure does to the task's retries (TrainingRetryPolicy()); applied by Airflow from "
        "3.3, by the operator itself before",
    ),
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
        """Handed to the manifest builder under their own name."""
        return tuple(p.name for p in self.rows if p.role == "manifest" and p.target is None)

    @property
    def renamed(self) -> dict[str, str]:
        """Handed to the manifest builder under another name: {operator's name: JobParameters field}."""
        return {p.name: p.target for p in self.rows if p.role == "manifest" and p.target is not None}

    @property
    def replica_shortcuts(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.rows if p.role == "shortcut")

    @property
    def follow(self) -> tuple[Param, ...]:
        """The rows the follow core reads, as FollowOptions fields (follow_runs.options_for)."""
        return tuple(p for p in self.rows if p.role == "follow")

    @property
    def own(self) -> tuple[str, ...]:
        """Checked by check_operator_parameters (each by its row's rule)."""
        return tuple(p.name for p in self.rows if p.check is not None)

    @property
    def rules(self) -> dict[str, Rule]:
        """check_operator_parameters' rules: each checked parameter's, in signature order."""
        return {p.name: p.check for p in self.rows if p.check is not None}

    @property
    def typed(self) -> tuple[str, ...]:
        """Checked by paramtypes (those passed as they are first, the renamed ones after)."""
        shown = self.manifest_params
        return (
            *(p.name for p in self.rows if p.role in ("job", "shortcut") or p.name in shown),
            *self.renamed,
        )

    @property
    def defaults(self) -> dict[str, Any]:
        """The defaults the signature writes out (a ConfDefault read from Airflow's configuration)."""
        return {
            p.name: p.default.value() if isinstance(p.default, ConfDefault) else p.default for p in self.rows
        }


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
#: Handed to manifest.build_tfjob under another name: {operator's name: JobParameters field}.
RENAMED: dict[str, str] = _TF.renamed
REPLICA_SHORTCUTS: tuple[str, ...] = _TF.replica_shortcuts
#: Checked by check_operator_parameters.
OWN: tuple[str, ...] = _TF.own
#: Checked by paramtypes (those passed as they are first, the renamed ones after).
TYPED: tuple[str, ...] = _TF.typed


#: KubeflowJobOperator's parameters (and the named operators'): `kind`, the manifest or template as
#: `job`, then every kind's parameters (manifest.build_job refuses one the job's kind lacks).
GENERIC = ParameterSet(
    (
        _job("kind", "the job's kind: TFJob, PyTorchJob, XGBoostJob, JAXJob or PaddleJob", templated=False),
        _job("job", "the manifest or template: a dict, YAML text or a .yaml/.yml/.json file"),
        *PARAMETERS[1:],
    )
)
#: TFJobOperator's: TFJob's view of the table, the manifest as `tfjob` (the module constants above).
TFJOB_PARAMETERS = _TF


def store(operator: Any, given: Mapping[str, Any], table: ParameterSet) -> None:
    """Keep each parameter of ``table`` as the operator's attribute of the same name.

    Airflow renders template fields and shows parameters as attributes, so the values live there;
    the code using them reads them under their row's name (the operator's own rows, its class
    annotations), or through the manifest arguments and the FollowOptions derived below.
    """
    for row in table.rows:
        setattr(operator, row.name, given[row.name])


def follow_options(table: ParameterSet, checked: Mapping[str, Any], operator: Any) -> dict[str, Any]:
    """The FollowOptions fields of ``table``'s follow rows: each checked value under its field name."""
    return {
        row.field: row.to_option(checked[row.name], operator) if row.to_option else checked[row.name]
        for row in table.follow
    }


def values(operator: Any, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: getattr(operator, name) for name in names}
