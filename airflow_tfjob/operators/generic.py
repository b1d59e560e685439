"""KubeflowJobOperator: run one Kubeflow training job (TFJob, PyTorchJob, XGBoostJob, JAXJob,
PaddleJob) as an Airflow task. TFJobOperator and the named operators are this class with a kind.

The task reads like the user's story: build the manifest -> validate it -> find the task's job again
or create it -> follow it (inline, or deferred to the triggerer) -> drain its logs -> clean up ->
return the result.

This module declares (DAG files are parsed all the time, so importing it must stay cheap): the story
itself, each entry point's body (``execute``, ``execute_complete``, ``resume_execution``'s ``__fail__``,
``on_kill``), is :class:`airflow_tfjob.operators.runs.TaskTry`, imported at the entry with what a run
needs (the Kubernetes clients, the trigger, the async follow core). The try owns the collaborators the
story is told with (the API choice, the manifest's builder); the operator keeps its parameters, the
steps a subclass overrides, what the try reported, and the methods Airflow calls on a task (templating,
OpenLineage's facets, made by :class:`~airflow_tfjob.operators.lineage.Lineage`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseOperator, BaseOperatorLink

from airflow_tfjob.build.secrets import mask_values, unquoted_in_errors
from airflow_tfjob.constants import KILL_GRACE_PERIOD
from airflow_tfjob.hooks.retry import DEFAULT_RETRY_TIMEOUT
from airflow_tfjob.integrations import links
from airflow_tfjob.jobs.kinds import JobKind
from airflow_tfjob.operators import params, retry_fallback
from airflow_tfjob.operators.api_choice import ApiChoice, check_api
from airflow_tfjob.operators.checks import (
    check_log_replicas_against_job,
    check_operator_parameters,
    check_parameter_types,
    tensorboard_spec,
)
from airflow_tfjob.operators.lineage import Lineage, declared_outlets
from airflow_tfjob.operators.shared_checks import kind_name_of
from airflow_tfjob.operators.templating import TemplateFileRendering
from airflow_tfjob.version_compat import conf

if TYPE_CHECKING:
    from airflow.sdk import Asset, Context

    from airflow_tfjob.follow.outcome import FollowOptions, FollowOutcome
    from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook
    from airflow_tfjob.hooks.sync import KubeflowJobHook
    from airflow_tfjob.integrations.tensorboard import TensorBoardSpec
    from airflow_tfjob.operators.runs import TaskTry

__all__ = ["KubeflowJobOperator"]


class KubeflowJobOperator(TemplateFileRendering, BaseOperator):
    """Run a Kubeflow training job of ``kind`` (TFJob, PyTorchJob, XGBoostJob, JAXJob, PaddleJob) and
    wait for its outcome.

    The job comes from parameters (replicas per type, image, command, args, hyperparameters, env,
    resources, volumes, run policy...) or from a full manifest ``job`` (a dict, a YAML string, or a
    ``.yaml``/``.yml``/``.json`` file rendered with Jinja), with explicit parameters overriding it.
    Replica shortcuts are those of the kind's replica types (``master``/``worker`` for PyTorchJob);
    ``nproc_per_node`` and ``elastic_policy`` are PyTorchJob's (``elastic_policy`` PaddleJob's too).
    The named classes (``TFJobOperator``, ``PyTorchJobOperator``, ...) fix the kind.

    Lifecycle:
      * the job is submitted with ``cleanPodPolicy: None`` and no TTL, so no pod disappears before its
        logs are read; the intended policy is kept in annotations and applied by the task after the
        logs are drained (see :mod:`airflow_tfjob.follow.cleanup`);
      * a retried task finds its job again (task_state_store, then identity labels): it reattaches to
        a running job or reports a succeeded one whose result was never reported; after a reported
        outcome or a failure it trains again with a new job and marks the old one handled;
      * ``on_finish_action``: ``"keep"`` (default: the job stays as the record of the training,
        with the intended cleanPodPolicy/TTL applied), ``"delete"``, or ``"delete_succeeded"``;
      * ``keep_failed_for`` (seconds or a timedelta): a failed job's finished pods stay that long after
        it failed, for ``kubectl logs``/``describe``, then Kubernetes deletes the job (its TTL, or a
        batch Job's for an API without one); the running ones go at once;
      * ``on_kill_action``: ``"delete"`` (default: the job and its pods) or ``"keep"``; a graceful
        worker shutdown also reaches ``on_kill``;
      * ``render_only=True`` renders the manifest into the log and XCom without submitting it.
      * ``preflight=True`` asks the cluster for what the job needs before submitting it (the job's API,
        a TrainJob's runtime, Kueue's integration for the kind, the Role's verbs) and fails the task with
        one table of what is missing and the fixes, creating nothing.

    Logs: ``get_logs``; ``log_replicas`` ("master", "all", a type such as "worker", one replica such
    as "worker:0", or a comma-separated list); ``log_rate_per_replica`` (lines per second per replica
    that reach the task log, default 1000) and ``log_total_cap`` (lines per job, default 1,000,000),
    0 meaning no limit: a runaway job cannot flood the task log, and a line says how many were dropped.
    ``progress={"metric": "epoch", "total": 10}`` (``total`` a number or a hyperparameter's name) adds
    throttled ``[progress]`` lines (percentage, pace, time left) and a ``progress`` key to the result.

    TensorBoard: ``tensorboard=True`` with ``tensorboard_log_dir`` (or ``tensorboard`` as a log
    directory, a dict of :class:`~airflow_tfjob.integrations.tensorboard.TensorBoardSpec` fields, or a spec)
    starts a TensorBoard pod and Service owned by the job once it is created, pushes its URL to
    the XCom ``tensorboard_url`` (the task's "TensorBoard" link in the UI), and removes it when the
    task ends unless ``tensorboard_keep=True`` (deleting the job removes it anyway).

    Lineage: ``model_asset`` (an ``airflow.sdk.Asset`` or its URI) names the model the job writes:
    it becomes an outlet of the task, and a succeeded job's asset event carries ``extra`` =
    ``{"metrics": <final metrics>, "job": {kind, name, namespace, uid}}`` for DAGs scheduled on it.
    ``lineage_inputs`` / ``lineage_outputs`` (lists of Assets, URIs or paths) name the data the job
    reads and the other locations it writes; with the OpenLineage provider installed the task's
    events carry them, the claims its replicas mount, the job's identity, replicas, images and
    final metrics, and on failure the job's failure reason (see :mod:`airflow_tfjob.integrations.lineage`).

    Every parameter is checked before any API call (at DAG parse time when it is not a template):
    a bad value raises JobValidationError naming the parameter and the fix, and creates nothing.

    The result (XCom ``return_value``) holds name, namespace, uid, state, reason, message,
    replica_statuses, start_time, completion_time, metrics and cost; ``metrics`` is also pushed on its
    own, and ``cost`` (GPU-hours and CPU core-hours, queued and running; a failed job's too) as well.
    Subclasses may return something else through :meth:`result_from_outcome` (``@task.tfjob``).
    """

    #: The parameters and what derives from them (operators/params.py); TFJobOperator has its own.
    parameter_table: ClassVar[params.ParameterSet] = params.GENERIC
    job_field = "job"
    #: The kind of the named classes (PyTorchJobOperator...); None: the generic class, `kind` required.
    default_kind: ClassVar[str | None] = None
    kind: str
    template_fields: Sequence[str] = params.GENERIC.template_fields
    # Only the job parameter may name a template file: see operators/templating.py.
    template_ext: Sequence[str] = (".yaml", ".yml", ".json")
    template_fields_renderers = params.renderers("job")
    operator_extra_links: tuple[BaseOperatorLink, ...] = (links.TensorBoardLink(),)
    ui_color = "#ff6f00"
    ui_fgcolor = "#ffffff"
    # The try running now (operators/runs.py), made at each entry point; None before the first.
    _try: TaskTry | None = None
    # Master-replica log lines starting with this carry the task's return value (``@task.tfjob``
    # sets it; see "Return values from replicas" in docs/architecture.md). None: no capture.
    return_marker: str | None = None

    # The parameters this class's own code reads (params.store keeps every row as an attribute; the
    # manifest rows reach build_job and the follow rows FollowOptions through the table instead).
    name: str | None
    namespace: str | None
    kubernetes_conn_id: str
    hyperparameters: Any
    secret_env: Any
    metrics: list[str]
    startup_timeout: float | None
    multikueue_connections: dict[str, str] | None
    tensorboard: Any
    tensorboard_log_dir: str | None
    tensorboard_keep: bool
    deferrable: bool
    on_finish_action: str
    keep_failed_for: float | timedelta | None
    on_kill_action: str
    kill_grace_period: int | None
    render_only: bool
    preflight: bool
    allow_template_outside_dag_folder: bool
    allow_template_path_from_params: bool
    api: str
    checkpoint: Any
    model_asset: Asset | str | None
    lineage_inputs: list[Asset | str] | None
    lineage_outputs: list[Asset | str] | None

    def __init__(
        self,
        *,
        kind: str | None = None,
        job: dict[str, Any] | str | None = None,
        name: str | None = None,
        namespace: str | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
        cluster_context: str | None = None,
        config_file: str | None = None,
        in_cluster: bool | None = None,
        api_retry_timeout: float | None = DEFAULT_RETRY_TIMEOUT,
        chief: int | None = None,
        master: int | None = None,
        ps: int | None = None,
        worker: int | None = None,
        evaluator: int | None = None,
        replicas: dict[str, int] | None = None,
        restart_policy: str | dict[str, str] | None = None,
        image: str | None = None,
        images: dict[str, str] | None = None,
        image_pull_policy: str | None = None,
        command: str | list[str] | None = None,
        args: str | list[Any] | None = None,
        hyperparameters: dict[str, Any] | None = None,
        env: dict[str, Any] | list[dict[str, Any]] | None = None,
        secret_env: dict[str, str] | None = None,
        env_from_secrets: dict[str, Any] | None = None,
        env_from_config_maps: dict[str, Any] | None = None,
        env_from: list[Any] | None = None,
        container_resources: dict[str, Any] | None = None,
        gpus: int | None = None,
        replica_resources: dict[str, dict[str, Any]] | None = None,
        replica_placement: dict[str, dict[str, Any]] | None = None,
        volume_mounts: list[dict[str, Any]] | None = None,
        working_dir: str | None = None,
        ports: dict[str, int] | list[Any] | None = None,
        volumes: list[dict[str, Any]] | None = None,
        pvc: str | dict[str, Any] | list[Any] | None = None,
        secret_volumes: dict[str, str] | list[dict[str, Any]] | None = None,
        config_map_volumes: dict[str, str] | list[dict[str, Any]] | None = None,
        node_selector: dict[str, str] | None = None,
        tolerations: list[dict[str, Any]] | None = None,
        service_account: str | None = None,
        image_pull_secrets: list[str] | None = None,
        pod_labels: dict[str, str] | None = None,
        pod_annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        kueue_queue: str | None = None,
        clean_pod_policy: str | None = None,
        ttl_seconds_after_finished: int | None = None,
        active_deadline_seconds: int | None = None,
        backoff_limit: int | None = None,
        suspend: bool | None = None,
        managed_by: str | None = None,
        scheduling: dict[str, Any] | None = None,
        success_policy: str | None = None,
        enable_dynamic_worker: bool | None = None,
        nproc_per_node: int | str | None = None,
        elastic_policy: dict[str, Any] | None = None,
        log_replicas: str = "master",
        get_logs: bool = True,
        metrics: list[str] | None = None,
        metrics_history: bool = False,
        progress: dict[str, Any] | None = None,
        startup_timeout: float | None = 600.0,
        queue_timeout: float | None = None,
        on_preemption: str = "wait",
        kueue_require_admission: bool = False,
        kueue_workload_window: float = 30.0,
        multikueue_connections: dict[str, str] | None = None,
        log_rate_per_replica: int = 1000,
        log_total_cap: int = 1_000_000,
        tensorboard: bool | str | dict[str, Any] | TensorBoardSpec | None = None,
        tensorboard_log_dir: str | None = None,
        tensorboard_keep: bool = False,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        on_finish_action: str = "keep",
        keep_failed_for: float | timedelta | None = None,
        on_kill_action: str = "delete",
        kill_grace_period: int | None = KILL_GRACE_PERIOD,
        render_only: bool = False,
        preflight: bool = False,
        model_asset: Asset | str | None = None,
        lineage_inputs: list[Asset | str] | None = None,
        lineage_outputs: list[Asset | str] | None = None,
        checkpoint: str | dict[str, str] | None = None,
        allow_template_outside_dag_folder: bool = False,
        allow_template_path_from_params: bool = False,
        api: str = "auto",
        retry_policy: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs, **retry_fallback.passed_on(retry_policy))
        given = dict(locals())
        # The canonical name, whatever spelling was given; TFJobOperator stores its manifest as
        # `tfjob`: the table says under which name.
        given["kind"] = kind_name_of(kind, self.default_kind, type(self).__name__)
        given[self.job_field] = job
        self._setup(given)

    def _setup(self, given: Mapping[str, Any]) -> None:
        """Store and check the parameters (``given``: every name of the parameter table), from any
        signature: TrainJobOperator's is its own."""
        params.store(self, given, self.parameter_table)
        self.kind = given["kind"]
        metrics = given["metrics"]
        # A bare string stays as given so that the parameter check names it (list("loss") is letters).
        self.metrics = list(metrics) if isinstance(metrics, (list, tuple)) else (metrics or [])
        self._try = None
        # What the try reports, kept here for Airflow's kill, the OpenLineage listener and the UI's links:
        # the job followed (name, namespace), the finished job, what it held (operators/outcome.report_cost),
        # the follow's outcome, and whether the task deleted its TensorBoard (its link is cleared then).
        self._job_ref: tuple[str, str] | None = None
        self._job: dict[str, Any] | None = None
        self._cost: dict[str, Any] | None = None
        self._outcome: FollowOutcome | None = None
        self._tensorboard_removed = False
        # A mistake in a parameter that is not a template fails the DAG's parse, not a run.
        with unquoted_in_errors(self.secret_env):
            check_operator_parameters(self._own_parameters(), self.parameter_table.rules, self.kind)
            check_api(self.kind, getattr(self, "api", "auto"))
            check_parameter_types(self._typed_parameters(), at_parse=True, kind=self.kind)
        if self.model_asset is not None:
            self.model_asset, self.outlets = declared_outlets(self.model_asset, self.outlets)
        # The UI's links are fixed at parse time: one "Logs <replica>" per replica counted here.
        self.operator_extra_links = links.operator_links(self.job_kind, self)

    # ------------------------------------------------------------------ hooks

    def get_hook(self) -> KubeflowJobHook:
        from airflow_tfjob.operators.runs import hook  # the run module: the cluster's client, not parsed

        return hook(self)

    def get_async_hook(self) -> AsyncKubeflowJobHook:
        from airflow_tfjob.operators import follow_runs  # the run module: the follow's client, not parsed

        return follow_runs.async_hook(self)

    # ------------------------------------------------------------------ the story

    @retry_fallback.fail_fast
    def execute(self, context: Context) -> Any:
        from airflow_tfjob.operators.runs import TaskTry  # the run module: what a try does, not parsed

        return TaskTry(self).execute(context)

    def _current_try(self) -> TaskTry:
        """The try running now, or one made for a step asked outside the entry points (a test's
        ``build_manifest``, the preflight command's ``choose_api``)."""
        if self._try is not None:
            return self._try
        from airflow_tfjob.operators.runs import TaskTry  # the run module: a step of a try, not parsed

        return TaskTry(self)

    # The steps of the story a subclass or a caller may take one by one; each is the try's.

    @property
    def job_kind(self) -> JobKind:
        """The kind of the job this task submits and follows: a TFJob may run as a TrainJob (the try's
        API choice; before a try, as the parameters say with "auto" not asked yet)."""
        if self._try is not None:
            return self._try.api.job_kind
        return ApiChoice(self.kind, getattr(self, "api", "auto"), render_only=self.render_only).job_kind

    def choose_api(self, hook: Callable[[], Any]) -> None:
        """Ask the cluster which API an ``api="auto"`` TFJob runs on (the hook is made only then; its
        discovery's type is the API choice's to name, operators/api_choice.py)."""
        self._current_try().api.choose(hook)

    def build_manifest(self, context: Context) -> dict[str, Any]:
        """The job the task wants (with its identity and intended policy), validated."""
        return self._current_try().building.build(context)

    def follow_options(self) -> FollowOptions:
        """The task's follow options, built once per try from its checked parameters."""
        return self._current_try().follow_options()

    def manifest_arguments(self) -> dict[str, Any]:
        """The keyword arguments of the kind's builder: the manifest parameters that are set."""
        return self._current_try().building.arguments()

    def check_log_replicas(self, manifest: Mapping[str, Any]) -> None:
        """``log_replicas`` naming only replica types the manifest has."""
        check_log_replicas_against_job(self.follow_options().selection, manifest)

    def _own_parameters(self) -> dict[str, Any]:
        """The operator's own (non-manifest) parameters, as checks.check_operator_parameters takes them."""
        return params.values(self, self.parameter_table.own)

    def _typed_parameters(self) -> dict[str, Any]:
        """The parameters that shape the manifest, by the operator's names (paramtypes checks them)."""
        return params.values(self, self.parameter_table.typed)

    def _mask_secrets(self) -> None:
        """Register the secret_env values with Airflow's masker: a replica printing one shows ***."""
        if isinstance(self.secret_env, Mapping):
            mask_values(self.secret_env.values())

    def _secret_strings(self) -> list[Any]:
        return list(self.secret_env.values()) if isinstance(self.secret_env, Mapping) else []

    # ------------------------------------------------------------------ identity: find or create

    def find_or_create(self, hook: KubeflowJobHook, job: dict[str, Any], context: Context) -> dict[str, Any]:
        """The task instance's job: an earlier try's job to reattach to or report, or a new one."""
        return self._current_try().find_or_create(hook, job, context)

    # ------------------------------------------------------------------ TensorBoard

    def _tensorboard_spec(self) -> TensorBoardSpec | None:
        return tensorboard_spec(self.tensorboard, self.tensorboard_log_dir, self.tensorboard_keep)

    # ------------------------------------------------------------------ resumed

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        """Resume after the trigger's one event: drain what is left of the logs, clean up, report."""
        from airflow_tfjob.operators.runs import TaskTry  # the run module: what a try does, not parsed

        return TaskTry(self).execute_complete(context, event)

    @retry_fallback.fail_fast
    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        # "__fail__": the trigger crashed or Airflow's trigger timeout fired; the job would run on with
        # nobody watching it (apache/airflow#67227, #62398), so delete it before the task fails.
        if next_method == "__fail__":
            from airflow_tfjob.operators.runs import TaskTry  # the run module: what a try does, not parsed

            TaskTry(self).after_trigger_failure(context, next_kwargs or {})
        return super().resume_execution(next_method, next_kwargs, context)

    # ------------------------------------------------------------------ outcome

    def result_from_outcome(self, outcome: FollowOutcome, context: Context) -> Any:
        """The task's return value (XCom) for a succeeded job; subclasses may return something else.

        ``@task.tfjob`` overrides it to decode ``outcome.part("return_payload")``, the value printed by the
        master replica; ``self._job`` is the finished job object.
        """
        return self._current_try().result(outcome)

    def on_kill(self) -> None:
        if self._job_ref is None:
            return
        self._current_try().on_kill()

    # ------------------------------------------------------------------ lineage

    def _lineage(self) -> Lineage:
        return Lineage(self.model_asset, self.lineage_inputs, self.lineage_outputs, self._planned_job)

    def _planned_job(self) -> dict[str, Any] | None:
        from airflow_tfjob.operators.runs import planned_job  # the run module: the builder is a worker's

        return planned_job(self)

    def get_openlineage_facets_on_start(self) -> Any:
        return self._lineage().on_start()

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        return self._lineage().on_complete(self._outcome, self._job, self._cost)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        return self._lineage().on_failure(self._outcome, self._job, self._cost)
