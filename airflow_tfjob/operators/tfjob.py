"""TFJobOperator: run one Kubeflow TFJob as an Airflow task.

The task reads like the user's story: build the manifest -> validate it -> find the task's job again
or create it -> follow it (inline, or deferred to the triggerer) -> drain its logs -> clean up ->
return the result.

Importing this module must stay cheap (DAG files are parsed all the time): the Kubernetes clients,
the cncf.kubernetes hooks, the trigger and the async follow core are imported inside the methods
that use them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator, conf
from airflow.sdk.exceptions import AirflowException, AirflowTaskTimeout

from airflow_tfjob import cleanup, naming, templates
from airflow_tfjob.constants import (
    ANNOTATION_RESULT_REPORTED,
    LABEL_HANDLED,
    LABEL_MANAGED,
)
from airflow_tfjob.hooks.retry import DEFAULT_RETRY_TIMEOUT
from airflow_tfjob.limits import check_request_size
from airflow_tfjob.links import TensorBoardLink
from airflow_tfjob.operators.checks import (
    check_log_replicas_against_job,
    check_operator_parameters,
    check_parameter_types,
    is_template,
    replica_counts,
    tensorboard_spec,
)
from airflow_tfjob.status import JobState, JobStatus, interpret, summarise
from airflow_tfjob.validation import TFJobValidationError

if TYPE_CHECKING:
    from pathlib import Path

    import jinja2
    from airflow.sdk import Context

    from airflow_tfjob.follow import FollowOptions, FollowOutcome
    from airflow_tfjob.hooks.tfjob import AsyncTFJobHook, TFJobHook
    from airflow_tfjob.tensorboard import TensorBoard, TensorBoardSpec

# Parameters handed to manifest.build_tfjob (TFJobParameters) as they are; each is also an attribute of
# the operator, so that it can be templated and shows in the UI. Two are renamed because BaseOperator
# already owns the name: `queue` (the executor queue) is `kueue_queue` here, and `resources` (the
# executor's task resources) is `container_resources`, as in the cncf.kubernetes pod operator.
MANIFEST_PARAMS: tuple[str, ...] = (
    "replicas",
    "restart_policy",
    "image",
    "images",
    "image_pull_policy",
    "command",
    "args",
    "hyperparameters",
    "env",
    "secret_env",
    "env_from_secrets",
    "env_from_config_maps",
    "env_from",
    "gpus",
    "replica_resources",
    "volume_mounts",
    "working_dir",
    "ports",
    "volumes",
    "pvc",
    "secret_volumes",
    "config_map_volumes",
    "node_selector",
    "tolerations",
    "service_account",
    "image_pull_secrets",
    "pod_labels",
    "pod_annotations",
    "labels",
    "annotations",
    "clean_pod_policy",
    "ttl_seconds_after_finished",
    "active_deadline_seconds",
    "backoff_limit",
    "suspend",
    "managed_by",
    "scheduling",
    "success_policy",
    "enable_dynamic_worker",
)
REPLICA_SHORTCUTS = ("chief", "master", "ps", "worker", "evaluator")

# The task_state_store key under which the job of this task instance is recorded (durable identity).
STATE_KEY = "tfjob"
# Extra time given to Airflow's own trigger timeout beyond the job deadline: the trigger enforces the
# deadline itself (and deletes the job); Airflow's timeout is the backstop for a stuck trigger.
TRIGGER_TIMEOUT_MARGIN = 120.0
RESULT_KEYS = (
    "name",
    "namespace",
    "uid",
    "state",
    "reason",
    "message",
    "replica_statuses",
    "start_time",
    "completion_time",
    "metrics",
)


class TFJobOperator(BaseOperator):
    """Run a Kubeflow TFJob (distributed TensorFlow training) and wait for its outcome.

    The job comes from parameters (replicas per type, image, command, args, hyperparameters, env,
    resources, volumes, run policy...) or from a full manifest ``tfjob`` (a dict, a YAML string, or a
    ``.yaml``/``.yml``/``.json`` file rendered with Jinja), with explicit parameters overriding it.

    Lifecycle:
      * the job is submitted with ``cleanPodPolicy: None`` and no TTL, so no pod disappears before its
        logs are read; the intended policy is kept in annotations and applied by the task after the
        logs are drained (see :mod:`airflow_tfjob.cleanup`);
      * a retried task finds its job again (task_state_store, then identity labels): it reattaches to
        a running job or reports a succeeded one whose result was never reported; after a reported
        outcome or a failure it trains again with a new job and marks the old one handled;
      * ``on_finish_action``: ``"keep"`` (default: the TFJob stays as the record of the training,
        with the intended cleanPodPolicy/TTL applied), ``"delete"``, or ``"delete_succeeded"``;
      * ``on_kill_action``: ``"delete"`` (default: the TFJob and its pods) or ``"keep"``; a graceful
        worker shutdown also reaches ``on_kill``;
      * ``render_only=True`` renders the manifest into the log and XCom without submitting it.

    Logs: ``get_logs``; ``log_replicas`` ("master", "all", a type such as "worker", one replica such
    as "worker:0", or a comma-separated list); ``log_rate_per_replica`` (lines per second per replica
    that reach the task log, default 1000) and ``log_total_cap`` (lines per job, default 1,000,000),
    0 meaning no limit: a runaway job cannot flood the task log, and a line says how many were dropped.

    TensorBoard: ``tensorboard=True`` with ``tensorboard_log_dir`` (or ``tensorboard`` as a log
    directory, a dict of :class:`~airflow_tfjob.tensorboard.TensorBoardSpec` fields, or a spec)
    starts a TensorBoard pod and Service owned by the TFJob once it is created, pushes its URL to
    the XCom ``tensorboard_url`` (the task's "TensorBoard" link in the UI), and removes it when the
    task ends unless ``tensorboard_keep=True`` (deleting the TFJob removes it anyway).

    Every parameter is checked before any API call (at DAG parse time when it is not a template):
    a bad value raises TFJobValidationError naming the parameter and the fix, and creates nothing.

    The result (XCom ``return_value``) holds name, namespace, uid, state, reason, message,
    replica_statuses, start_time, completion_time and metrics; ``metrics`` is also pushed on its own.
    Subclasses may return something else through :meth:`result_from_outcome` (``@task.tfjob``).
    """

    template_fields: Sequence[str] = (
        "tfjob",
        "name",
        "namespace",
        "cluster_context",
        "config_file",
        "image",
        "images",
        "command",
        "args",
        "hyperparameters",
        "env",
        "secret_env",
        "container_resources",
        "volumes",
        "pvc",
        "node_selector",
        "service_account",
        "labels",
        "annotations",
        "kueue_queue",
        "working_dir",
        "pod_labels",
        "pod_annotations",
        "log_replicas",
        "tensorboard_log_dir",
    )
    # Only `tfjob` may name a template file: see _do_render_template_fields.
    template_ext: Sequence[str] = (".yaml", ".yml", ".json")
    template_fields_renderers = {
        "tfjob": "yaml",
        "hyperparameters": "json",
        "env": "json",
        "container_resources": "json",
        "volumes": "json",
        "labels": "json",
        "annotations": "json",
    }
    operator_extra_links = (TensorBoardLink(),)
    ui_color = "#ff6f00"
    ui_fgcolor = "#ffffff"
    # Master-replica log lines starting with this carry the task's return value (``@task.tfjob``
    # sets it; see "Return values from replicas" in docs/architecture.md). None: no capture.
    return_marker: str | None = None

    def __init__(
        self,
        *,
        tfjob: dict[str, Any] | str | None = None,
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
        log_replicas: str = "master",
        get_logs: bool = True,
        metrics: list[str] | None = None,
        metrics_history: bool = False,
        startup_timeout: float | None = 600.0,
        log_rate_per_replica: int = 1000,
        log_total_cap: int = 1_000_000,
        tensorboard: bool | str | dict[str, Any] | TensorBoardSpec | None = None,
        tensorboard_log_dir: str | None = None,
        tensorboard_keep: bool = False,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        on_finish_action: str = "keep",
        on_kill_action: str = "delete",
        kill_grace_period: int | None = cleanup.KILL_GRACE_PERIOD,
        render_only: bool = False,
        allow_template_outside_dag_folder: bool = False,
        allow_template_path_from_params: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.tfjob = tfjob
        self.name = name
        self.namespace = namespace
        self.kubernetes_conn_id = kubernetes_conn_id
        self.cluster_context = cluster_context
        self.config_file = config_file
        self.in_cluster = in_cluster
        self.api_retry_timeout = api_retry_timeout
        self.chief, self.master, self.ps, self.worker, self.evaluator = chief, master, ps, worker, evaluator
        self.replicas = replicas
        self.restart_policy = restart_policy
        self.image, self.images, self.image_pull_policy = image, images, image_pull_policy
        self.command, self.args, self.hyperparameters = command, args, hyperparameters
        self.env, self.secret_env, self.env_from = env, secret_env, env_from
        self.env_from_secrets, self.env_from_config_maps = env_from_secrets, env_from_config_maps
        self.container_resources, self.gpus = container_resources, gpus
        self.replica_resources = replica_resources
        self.volume_mounts, self.working_dir, self.ports = volume_mounts, working_dir, ports
        self.volumes, self.pvc = volumes, pvc
        self.secret_volumes, self.config_map_volumes = secret_volumes, config_map_volumes
        self.node_selector, self.tolerations = node_selector, tolerations
        self.service_account, self.image_pull_secrets = service_account, image_pull_secrets
        self.pod_labels, self.pod_annotations = pod_labels, pod_annotations
        self.labels, self.annotations = labels, annotations
        self.kueue_queue = kueue_queue
        self.clean_pod_policy, self.ttl_seconds_after_finished = clean_pod_policy, ttl_seconds_after_finished
        self.active_deadline_seconds, self.backoff_limit = active_deadline_seconds, backoff_limit
        self.suspend, self.managed_by, self.scheduling = suspend, managed_by, scheduling
        self.success_policy, self.enable_dynamic_worker = success_policy, enable_dynamic_worker
        self.log_replicas = log_replicas
        self.get_logs = get_logs
        # A bare string stays as given so that the parameter check names it (list("loss") is letters).
        self.metrics: list[str] = list(metrics) if isinstance(metrics, (list, tuple)) else (metrics or [])
        self.metrics_history = metrics_history
        self.startup_timeout = startup_timeout
        self.log_rate_per_replica = log_rate_per_replica
        self.log_total_cap = log_total_cap
        self.tensorboard = tensorboard
        self.tensorboard_log_dir = tensorboard_log_dir
        self.tensorboard_keep = tensorboard_keep
        self.deferrable = deferrable
        self.on_finish_action = on_finish_action
        self.on_kill_action = on_kill_action
        self.kill_grace_period = kill_grace_period
        self.render_only = render_only
        self.allow_template_outside_dag_folder = allow_template_outside_dag_folder
        self.allow_template_path_from_params = allow_template_path_from_params
        # The job this task is following, for on_kill and __fail__ (name, namespace).
        self._job_ref: tuple[str, str] | None = None
        # The finished job, for result_from_outcome.
        self._job: dict[str, Any] | None = None
        # A mistake in a parameter that is not a template fails the DAG's parse, not a run.
        check_operator_parameters(self._own_parameters())
        check_parameter_types(self._typed_parameters(), at_parse=True)

    # ------------------------------------------------------------------ templating
    # Airflow treats every templated string ending in a template_ext suffix as a file name, list items
    # included, so `args=["--config=conf.yaml"]` would be looked up as a template file. Only `tfjob`
    # may name a file here, and only as the DAG author wrote it (airflow_tfjob.templates has the
    # rules): a path that templating produced (e.g. from params) is refused unless opted in.

    def resolve_template_files(self) -> None:
        # The file is read when the task renders, with the same rules; a path outside the allowed
        # folders fails the DAG's parse here already.
        if templates.looks_like_path(self.tfjob) and not is_template(self.tfjob) and self.has_dag():
            try:
                self._template_path(str(self.tfjob))
            except templates.TemplateNotFoundError:
                pass  # it may be written before the task runs; rendering reports it then
        self.prepare_template()

    def _do_render_template_fields(
        self,
        parent: Any,
        template_fields: Any,
        context: Context,
        jinja_env: jinja2.Environment,
        seen_oids: set[int],
    ) -> None:
        if parent is self and "tfjob" in template_fields and templates.looks_like_path(self.tfjob):
            if not is_template(self.tfjob):  # decided on the value as the DAG author wrote it
                self.tfjob = self._render_template_file(str(self.tfjob), context, jinja_env)
                template_fields = [f for f in template_fields if f != "tfjob"]
        if parent is not self:
            super()._do_render_template_fields(parent, template_fields, context, jinja_env, seen_oids)
            return
        for field in template_fields:  # one by one, so that a Jinja error names its field
            self._render_field(field, context, jinja_env, seen_oids)
        if parent is self:
            self._mask_secrets()
            if "tfjob" in template_fields and templates.looks_like_path(self.tfjob):
                self.tfjob = self._rendered_template_path(str(self.tfjob), context, jinja_env)

    def _rendered_template_path(self, path: str, context: Context, jinja_env: jinja2.Environment) -> Any:
        """A `tfjob` that names a file only once rendered: its path comes from run-time values."""
        if not self.allow_template_path_from_params:
            raise TFJobValidationError(
                "tfjob",
                f"rendered to {path[:200]!r}, which looks like a file path; a path that comes from "
                "templating (e.g. params) is not read",
                "write the file's path literally in the DAG, or pass the manifest itself; if run-time "
                "values may choose the file, pass allow_template_path_from_params=True",
            )
        return self._render_template_file(path, context, jinja_env)

    def render_template(
        self,
        content: Any,
        context: Context,
        jinja_env: jinja2.Environment | None = None,
        seen_oids: set[int] | None = None,
    ) -> Any:
        if isinstance(content, str):
            env = jinja_env or self.get_template_env()
            return self._render(env.from_string(content), context)
        return super().render_template(content, context, jinja_env, seen_oids)

    def _render_field(
        self, field: str, context: Context, jinja_env: jinja2.Environment, seen_oids: set[int]
    ) -> None:
        import jinja2

        try:
            super()._do_render_template_fields(self, [field], context, jinja_env, seen_oids)
        except jinja2.TemplateError as error:
            raise templates.jinja_error(error, None, field) from None

    def _template_path(self, value: str) -> Path:
        folders = templates.template_folders(self.dag if self.has_dag() else None)
        return templates.resolve_template_path(
            value, folders, allow_outside=self.allow_template_outside_dag_folder
        )

    def _render_template_file(self, path: str, context: Context, jinja_env: jinja2.Environment) -> Any:
        return templates.load_template_file(
            self._template_path(path), jinja_env, lambda template: self._render(template, context)
        )

    # ------------------------------------------------------------------ hooks

    def _hook_kwargs(self) -> dict[str, Any]:
        return {
            "conn_id": self.kubernetes_conn_id,
            "cluster_context": self.cluster_context,
            "config_file": self.config_file,
            "in_cluster": self.in_cluster,
            "api_retry_timeout": self.api_retry_timeout,
        }

    def get_hook(self) -> TFJobHook:
        from airflow_tfjob.hooks.tfjob import TFJobHook

        return TFJobHook(**self._hook_kwargs())

    def get_async_hook(self) -> AsyncTFJobHook:
        from airflow_tfjob.hooks.tfjob import AsyncTFJobHook

        return AsyncTFJobHook(**self._hook_kwargs())

    # ------------------------------------------------------------------ the story

    def execute(self, context: Context) -> Any:
        started = time.time()
        self._mask_secrets()
        # Everything is checked before the first API call: a bad value creates nothing.
        check_operator_parameters(self._own_parameters())
        manifest = self.build_manifest(context)
        if self.render_only:
            return self._render_only(manifest)
        hook = self.get_hook()
        job = self.find_or_create(hook, manifest, context)
        name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
        self._job_ref = (name, namespace)
        self._start_tensorboard(hook, job, context)
        options = self.follow_options(deadline=self._deadline(started))
        if self.deferrable:
            self._defer(name, namespace, options)
        outcome = self._follow(name, namespace, options)
        return self._complete(context, hook, name, namespace, outcome)

    def _own_parameters(self) -> dict[str, Any]:
        """The operator's own (non-manifest) parameters, as checks.check_operator_parameters takes them."""
        names = (
            "on_finish_action", "on_kill_action", "startup_timeout", "log_replicas", "metrics",
            "log_rate_per_replica", "log_total_cap", "get_logs", "metrics_history", "deferrable",
            "render_only", "kubernetes_conn_id", "tensorboard", "tensorboard_log_dir", "tensorboard_keep",
            "api_retry_timeout",
            "kill_grace_period",
        )  # fmt: skip
        return {key: getattr(self, key) for key in names}

    def _typed_parameters(self) -> dict[str, Any]:
        """The parameters that shape the manifest, by the operator's names (paramtypes checks them)."""
        names = ("tfjob", "name", "namespace", "cluster_context", "config_file", "in_cluster",
                 *REPLICA_SHORTCUTS, *MANIFEST_PARAMS, "container_resources", "kueue_queue")  # fmt: skip
        return {key: getattr(self, key) for key in names}

    def _mask_secrets(self) -> None:
        """Register the secret_env values with Airflow's masker: a replica printing one shows ***."""
        from airflow_tfjob.secrets import mask_values

        if isinstance(self.secret_env, Mapping):
            mask_values(self.secret_env.values())

    def build_manifest(self, context: Context) -> dict[str, Any]:
        """The TFJob the task wants (with its identity and intended policy), validated."""
        from airflow_tfjob import manifest as manifest_mod
        from airflow_tfjob.validation import validate_tfjob

        base = None
        if self.tfjob is not None:
            base = manifest_mod.load_manifest(
                self.tfjob,
                searchpath=templates.template_folders(self.dag if self.has_dag() else None),
                allow_outside=self.allow_template_outside_dag_folder,
            )
        check_parameter_types(self._typed_parameters())
        tfjob = manifest_mod.build_tfjob(base=base, **self._manifest_params())
        dag_id, task_id, run_id, map_index, try_number = _identity(context)
        metadata = tfjob.setdefault("metadata", {})
        if self.namespace:
            metadata["namespace"] = self.namespace
        if not metadata.get("namespace"):
            metadata["namespace"] = self._default_namespace()
        if self.name:
            metadata["name"] = self.name
        elif not metadata.get("name"):
            replicas = (tfjob.get("spec") or {}).get("tfReplicaSpecs") or {}
            metadata["name"] = naming.job_name(
                dag_id, task_id, run_id, map_index, try_number,
                max_length=naming.max_name_length(replicas),
            )  # fmt: skip
        metadata.setdefault("labels", {}).update(
            naming.identity_labels(dag_id, task_id, run_id, map_index, try_number)
        )
        metadata.setdefault("annotations", {}).update(
            naming.identity_annotations(dag_id, task_id, run_id, map_index, try_number)
        )
        for warning in validate_tfjob(tfjob):
            self.log.warning("TFJob %s: %s", metadata["name"], warning)
        check_log_replicas_against_job(self.log_replicas, tfjob)
        check_request_size(tfjob)
        return tfjob

    def _manifest_params(self) -> dict[str, Any]:
        params = {key: getattr(self, key) for key in MANIFEST_PARAMS if getattr(self, key) is not None}
        shortcuts = {key: getattr(self, key) for key in REPLICA_SHORTCUTS if getattr(self, key) is not None}
        if shortcuts:
            params["replicas"] = replica_counts(params.get("replicas"), shortcuts)
        if self.kueue_queue is not None:
            params["queue"] = self.kueue_queue
        if self.container_resources is not None:
            params["resources"] = self.container_resources
        return params

    def _default_namespace(self) -> str:
        """The connection's namespace when the operator names none (the hook knows it), else default."""
        if self.render_only:
            return "default"
        try:
            return self.get_hook().get_namespace() or "default"
        except Exception:  # a render without a reachable connection still works
            return "default"

    def _render_only(self, tfjob: dict[str, Any]) -> dict[str, Any]:
        from airflow_tfjob.limits import bounded, shown_json
        from airflow_tfjob.secrets import redact

        shown = redact(tfjob)
        self.log.info("render_only=True: TFJob not submitted. Manifest:\n%s", shown_json(shown))
        return {"rendered_only": True, "manifest": bounded(shown)}

    # ------------------------------------------------------------------ identity: find or create

    def find_or_create(self, hook: TFJobHook, tfjob: dict[str, Any], context: Context) -> dict[str, Any]:
        """The task instance's TFJob: an earlier try's job to reattach to or report, or a new one.

        Never a second job for one outcome, never a 409: the earlier tries' jobs are found through the
        task_state_store (durable identity), then through the identity labels.
        """
        from airflow_tfjob import identity

        try_number = _identity(context)[4]
        namespace = tfjob["metadata"]["namespace"]
        found = self._earlier_jobs(hook, namespace, context)
        decision = identity.decide(found, try_number)
        if found:
            self.log.info("Earlier TFJobs of this task instance: %s", decision.reason)
        for old_name in decision.mark_handled:
            self._mark_handled(hook, old_name, namespace)
        for old_name in decision.delete:
            # Never two live jobs for one task instance: an abandoned one still running is stopped.
            self.log.info("Deleting the abandoned TFJob %s/%s", namespace, old_name)
            hook.delete_tfjob(old_name, namespace, propagation="Foreground")
        if decision.action in ("reattach", "report") and decision.job is not None:
            job = dict(decision.job)
            self.log.info(
                "%s TFJob %s/%s (%s)",
                "Reattaching to" if decision.action == "reattach" else "Reporting the result of",
                namespace,
                job["metadata"]["name"],
                summarise(interpret(job)),
            )
            self._remember(context, job)
            return job
        job = self._create(hook, tfjob, context)
        self._remember(context, job)
        return job

    def _earlier_jobs(self, hook: TFJobHook, namespace: str, context: Context) -> list[dict[str, Any]]:
        dag_id, task_id, run_id, map_index, _ = _identity(context)
        jobs: dict[str, dict[str, Any]] = {}
        recorded = _state_get(context)
        if recorded:
            from airflow_tfjob.operators.submit import submission_id

            job = hook.find_tfjob(recorded["name"], recorded["namespace"])
            # A uid, or (the worker died before the create call answered) the submission id.
            if job is not None and (
                job["metadata"].get("uid") == recorded.get("uid")
                or (recorded.get("submission") and submission_id(job) == recorded.get("submission"))
            ):
                if LABEL_HANDLED not in (job["metadata"].get("labels") or {}):
                    jobs[job["metadata"]["uid"]] = job
        selector = naming.identity_selector(dag_id, task_id, run_id, map_index)
        for job in hook.list_tfjobs(namespace, selector):
            if naming.matches_identity(job, dag_id, task_id, run_id, map_index):
                jobs.setdefault(job["metadata"]["uid"], job)
        return list(jobs.values())

    def _create(self, hook: TFJobHook, tfjob: dict[str, Any], context: Context) -> dict[str, Any]:
        from airflow_tfjob.limits import shown_json
        from airflow_tfjob.manifest import redact, submission_manifest
        from airflow_tfjob.operators import submit

        dag_id, task_id, run_id, map_index, _ = _identity(context)
        name, namespace = tfjob["metadata"]["name"], tfjob["metadata"]["namespace"]
        existing = hook.find_tfjob(name, namespace)
        if existing is not None:
            labels = existing["metadata"].get("labels") or {}
            ours = labels.get(LABEL_MANAGED) == "true" and naming.matches_identity(
                existing, dag_id, task_id, run_id, map_index
            )
            if not ours or LABEL_HANDLED not in labels:
                raise AirflowException(
                    f"A TFJob named {namespace}/{name} already exists and was not created by this task "
                    f"instance (or is still in use): nothing was submitted. Choose another `name`, or "
                    f"delete that TFJob first (kubectl delete tfjob -n {namespace} {name})."
                )
            # A fixed `name` reused by a later try: the earlier, handled job makes way for the new one.
            self.log.info("Deleting the handled TFJob %s/%s to reuse its name", namespace, name)
            hook.delete_tfjob(name, namespace, propagation="Foreground")
            if not hook.wait_for_tfjob_deletion(name, namespace, timeout=120):
                raise AirflowException(f"TFJob {namespace}/{name} was not deleted within 120 s")
        body, intent = submission_manifest(tfjob)
        sid = submit.new_submission_id()
        body = submit.with_submission_id(body, sid)
        # Recorded before the call: a kill, or a crash, between the create and its answer still finds
        # the job (by name for on_kill, by submission id for the next try).
        self._job_ref = (name, namespace)
        _state_set(context, {"name": name, "namespace": namespace, "uid": None, "submission": sid})
        self.log.info(
            "Creating TFJob %s/%s (cleanPodPolicy %s and TTL %s applied by this task once logs are read):\n%s",
            namespace,
            name,
            intent.clean_pod_policy,
            intent.ttl_seconds_after_finished,
            shown_json(redact(body)),
        )
        return submit.create_or_adopt(hook, body, log=self.log.warning, timeout=hook.retry_policy.timeout)

    def _mark_handled(self, hook: TFJobHook, name: str, namespace: str) -> None:
        self.log.info("Marking the earlier TFJob %s/%s as handled", namespace, name)
        hook.patch_tfjob(name, namespace, {"metadata": {"labels": {LABEL_HANDLED: "true"}}})

    def _remember(self, context: Context, job: Mapping[str, Any]) -> None:
        meta = job["metadata"]
        _state_set(context, {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]})

    # ------------------------------------------------------------------ TensorBoard

    def _tensorboard(self, hook: TFJobHook, job: Mapping[str, Any]) -> TensorBoard | None:
        from airflow_tfjob.tensorboard import TensorBoard

        spec = tensorboard_spec(self.tensorboard, self.tensorboard_log_dir, self.tensorboard_keep)
        if spec is None:
            return None
        return TensorBoard(hook, spec, job)

    def _start_tensorboard(self, hook: TFJobHook, job: Mapping[str, Any], context: Context) -> None:
        """Start the job's board (a retried try reuses it) and publish its URL for the UI's link.

        A board that does not come up is reported loudly but does not stop the training it watches.
        """
        from airflow_tfjob.tensorboard import XCOM_KEY, TensorBoardError

        board = self._tensorboard(hook, job)
        if board is None:
            return
        try:
            board.start()
            url = board.wait_url()
        except TensorBoardError as error:
            self.log.error(
                "TensorBoard for TFJob %s/%s is not available: %s", board.namespace, board.job_name, error
            )
            return
        context["ti"].xcom_push(key=XCOM_KEY, value=url)
        self.log.info("TensorBoard for TFJob %s/%s: %s", board.namespace, board.job_name, url)

    def _stop_tensorboard(self, hook: TFJobHook, name: str, namespace: str, *, force: bool = False) -> None:
        """Remove the board after the job ended, unless tensorboard_keep (force: the job is gone too)."""
        from airflow_tfjob.tensorboard import TensorBoardError

        # Only the names matter to stop(); the uid is for the owner reference of new objects.
        board = self._tensorboard(hook, {"metadata": {"name": name, "namespace": namespace, "uid": ""}})
        if board is None:
            return
        try:
            if board.stop(force=force):
                self.log.info("TensorBoard %s/%s removed", namespace, board.name)
            else:
                self.log.info("TensorBoard %s/%s kept (tensorboard_keep=True)", namespace, board.name)
        except TensorBoardError as error:
            self.log.warning("Could not remove TensorBoard %s/%s: %s", namespace, board.name, error)

    # ------------------------------------------------------------------ following

    def follow_options(self, *, deadline: float | None) -> FollowOptions:
        from airflow_tfjob.follow import FollowOptions

        return FollowOptions(
            log_replicas=self.log_replicas,
            startup_timeout=self.startup_timeout,
            deadline=deadline,
            metrics=list(self.metrics),
            metrics_history=self.metrics_history,
            get_logs=self.get_logs,
            return_marker=self.return_marker,
            log_rate_per_replica=self.log_rate_per_replica,
            log_total_cap=self.log_total_cap,
        )

    def _deadline(self, started: float) -> float | None:
        if self.execution_timeout is None:
            return None
        return started + self.execution_timeout.total_seconds()

    def _follow(
        self,
        name: str,
        namespace: str,
        options: FollowOptions,
        cursors: dict[str, Any] | None = None,
    ) -> FollowOutcome:
        from airflow_tfjob.follow import follow_job

        async def run() -> FollowOutcome:
            return await follow_job(self.get_async_hook(), name, namespace, options, self.log.info, cursors)

        return asyncio.run(run())

    def _defer(self, name: str, namespace: str, options: FollowOptions) -> None:
        from airflow_tfjob.triggers.tfjob import TFJobTrigger

        now = time.time()
        timeout = None
        if options.deadline is not None:
            remaining = max(options.deadline - now, 0.0)
            timeout = timedelta(seconds=remaining + TRIGGER_TIMEOUT_MARGIN)
        # Absolute times: a restarted triggerer rebuilds the trigger from these kwargs, and neither
        # the start-up timeout nor the execution deadline may start over with it.
        startup_deadline = None if options.startup_timeout is None else now + options.startup_timeout
        trigger = TFJobTrigger(
            name=name,
            namespace=namespace,
            kubernetes_conn_id=self.kubernetes_conn_id,
            cluster_context=self.cluster_context,
            config_file=self.config_file,
            in_cluster=self.in_cluster,
            api_retry_timeout=self.api_retry_timeout,
            # The worker's drain continues this follow and reports unseen metrics from the final view.
            options={**asdict(options), "report_missing_metrics": False},
            deadline=options.deadline,
            delete_on_kill=self.on_kill_action == "delete",
            kill_grace_period=self.kill_grace_period,
            deferred_at=now,
            startup_deadline=startup_deadline,
        )
        self.log.info("Deferring while TFJob %s/%s runs (logs continue in the triggerer)", namespace, name)
        self.defer(trigger=trigger, method_name="execute_complete", timeout=timeout)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        """Resume after the trigger's one event: drain what is left of the logs, clean up, report."""
        from airflow_tfjob.follow import FollowOutcome

        name, namespace = event["name"], event["namespace"]
        self._job_ref = (name, namespace)
        outcome = FollowOutcome.from_dict(event)
        hook = self.get_hook()
        if outcome.event in ("succeeded", "failed"):
            outcome = self._drain(name, namespace, outcome)
        if outcome.event == "timeout" and not event.get("deleted"):
            self._kill(hook, name, namespace, "delete", "its deadline passed")
        return self._complete(context, hook, name, namespace, outcome)

    def _drain(self, name: str, namespace: str, outcome: FollowOutcome) -> FollowOutcome:
        """Continue the trigger's follow to the job's end, so that the result is the synchronous one.

        The lines written after the trigger's last cursor, the metrics and return value completed from
        what the trigger collected, and the job's status as it ended (the trigger fired on the first
        terminal status, before the replica counts settled).
        """
        from airflow_tfjob.follow import drain_job

        options = self.follow_options(deadline=None)
        options.startup_timeout = None

        async def run() -> FollowOutcome:
            return await drain_job(self.get_async_hook(), name, namespace, options, self.log.info, outcome)

        try:
            return asyncio.run(run())
        except Exception as error:  # the outcome stands even if the last lines cannot be read
            self.log.warning("Could not drain the last log lines of %s/%s: %s", namespace, name, error)
            return outcome

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        # "__fail__": the trigger crashed or Airflow's trigger timeout fired; the job would run on with
        # nobody watching it (apache/airflow#67227, #62398), so delete it before the task fails.
        if next_method == "__fail__":
            self._delete_after_trigger_failure(context, next_kwargs or {})
        return super().resume_execution(next_method, next_kwargs, context)

    def _delete_after_trigger_failure(self, context: Context, next_kwargs: Mapping[str, Any]) -> None:
        hook = self.get_hook()
        ref = self._job_of_this_try(hook, context)
        if ref is None:
            self.log.warning(
                "Trigger failed (%s); no TFJob of this try found to delete", next_kwargs.get("error")
            )
            return
        self.log.error("Trigger failed (%s): deleting TFJob %s/%s", next_kwargs.get("error"), ref[1], ref[0])
        self._kill(hook, ref[0], ref[1], "delete", "its trigger failed")
        self._stop_tensorboard(hook, ref[0], ref[1], force=True)

    def _job_of_this_try(self, hook: TFJobHook, context: Context) -> tuple[str, str] | None:
        if self._job_ref is not None:
            return self._job_ref
        recorded = _state_get(context)
        if recorded:
            return recorded["name"], recorded["namespace"]
        dag_id, task_id, run_id, map_index, _ = _identity(context)
        selector = naming.identity_selector(dag_id, task_id, run_id, map_index)
        namespace = self.namespace or self._default_namespace()
        for job in hook.list_tfjobs(namespace, selector):
            if not interpret(job).finished:
                return job["metadata"]["name"], job["metadata"]["namespace"]
        return None

    # ------------------------------------------------------------------ outcome

    def _complete(
        self, context: Context, hook: TFJobHook, name: str, namespace: str, outcome: FollowOutcome
    ) -> Any:
        """Clean up after the final state (logs drained) and report it: the result, or the failure."""
        try:
            return self._report(context, hook, name, namespace, outcome)
        finally:
            # Whatever the outcome: a board nobody asked to keep never outlives its task.
            self._stop_tensorboard(hook, name, namespace)

    def _report(
        self, context: Context, hook: TFJobHook, name: str, namespace: str, outcome: FollowOutcome
    ) -> Any:
        for line in outcome.diagnostics:
            self.log.error("%s", line)
        job = hook.find_tfjob(name, namespace)
        if outcome.event == "timeout":
            if job is not None:
                self._kill(hook, name, namespace, "delete", "it did not finish within execution_timeout")
            raise AirflowTaskTimeout(
                f"TFJob {namespace}/{name} did not finish within execution_timeout and was deleted: "
                f"{outcome.message}"
            )
        if outcome.event == "startup_timeout":
            # Its pods never started: keeping it would let it grab resources long after the task failed.
            self._kill(hook, name, namespace, "delete", "its pods did not start within startup_timeout")
            raise AirflowException(
                f"TFJob {namespace}/{name} did not start within startup_timeout={self.startup_timeout} s "
                f"and was deleted: {outcome.message}"
            )
        if outcome.event == "error" or outcome.status is None or job is None:
            raise AirflowException(
                f"Lost track of TFJob {namespace}/{name}: {outcome.message or 'the job no longer exists'}"
            )
        status = outcome.status
        succeeded = status.state is JobState.SUCCEEDED
        self._finish_cleanup(context, hook, job, succeeded)
        self._job = job
        if outcome.metrics:
            context["ti"].xcom_push(key="metrics", value=outcome.metrics)
        if not succeeded:
            self._mark_reported(hook, job)
            failing = ", ".join(status.failed_replica_types) or "unknown"
            raise AirflowException(
                f"TFJob {namespace}/{name} failed ({status.reason}): {status.message} "
                f"[failing replicas: {failing}]"
            )
        self.log.info("TFJob %s/%s succeeded: %s", namespace, name, summarise(status))
        # Computed before the job is marked reported: a result that cannot be produced (a missing
        # return value) leaves the job reportable by a retry instead of training again.
        result = self.result_from_outcome(outcome, context)
        self._mark_reported(hook, job)
        return result

    def _finish_cleanup(
        self, context: Context, hook: TFJobHook, job: Mapping[str, Any], succeeded: bool
    ) -> None:
        """Apply the on-finish action and the intended cleanup; its failure never decides the outcome.

        The job's outcome is known and its logs are read: a cleanup the API refuses even after the
        retry policy is reported (warning, XCom ``cleanup_error``) and the task keeps the job's outcome.
        """
        try:
            cleanup.finish(
                hook, job, succeeded=succeeded, on_finish_action=self.on_finish_action, log=self.log.info
            )
        except Exception as error:
            meta = job["metadata"]
            left = cleanup.leftover_description(job, self.on_finish_action, succeeded)
            self.log.warning(
                "Cleanup of TFJob %s/%s failed (%s); left behind: %s. The task keeps the job's outcome.",
                meta["namespace"],
                meta["name"],
                error,
                left,
            )
            context["ti"].xcom_push(key="cleanup_error", value={"error": str(error), "left_behind": left})

    def result_from_outcome(self, outcome: FollowOutcome, context: Context) -> Any:
        """The task's return value (XCom) for a succeeded job; subclasses may return something else.

        ``@task.tfjob`` overrides it to decode ``outcome.return_payload``, the value printed by the
        master replica; ``self._job`` is the finished TFJob object.
        """
        assert self._job is not None and outcome.status is not None
        return _result(self._job, outcome.status, outcome.metrics)

    def _mark_reported(self, hook: TFJobHook, job: Mapping[str, Any]) -> None:
        """Record that a try reported this job's outcome, so that a later try trains again.

        Done just before the task returns (Airflow pushes the XCom right after): a worker dying in
        between makes the next try train again rather than report a result twice.
        """
        meta = job["metadata"]
        try:
            hook.patch_tfjob(
                meta["name"],
                meta["namespace"],
                {"metadata": {"annotations": {ANNOTATION_RESULT_REPORTED: "true"}}},
            )
        except Exception as error:
            # Deleted by on_finish_action or TTL 0: nobody can find it again anyway.
            self.log.debug("Could not mark %s/%s reported: %s", meta["namespace"], meta["name"], error)

    def on_kill(self) -> None:
        if self._job_ref is None:
            return
        name, namespace = self._job_ref
        hook = self.get_hook()
        if self._kill(hook, name, namespace, self.on_kill_action):
            self._stop_tensorboard(hook, name, namespace, force=True)

    def _kill(
        self, hook: TFJobHook, name: str, namespace: str, action: str, why: str = "the task was killed"
    ) -> bool:
        """Every kill path of the task (a user's kill, a timeout, a failed trigger) stops the job alike."""
        return cleanup.kill(
            hook,
            name,
            namespace,
            on_kill_action=action,
            log=self.log.info,
            grace_period_seconds=self.kill_grace_period,
            why=why,
        )


def _identity(context: Context) -> tuple[str, str, str, int, int]:
    ti = context["ti"]
    map_index = getattr(ti, "map_index", -1)
    return (
        ti.dag_id,
        ti.task_id,
        ti.run_id,
        -1 if map_index is None else int(map_index),
        int(getattr(ti, "try_number", 1) or 1),
    )


def _state_set(context: Context, value: dict[str, Any]) -> None:
    store = context.get("task_state_store")
    if store is not None:
        store.set(STATE_KEY, value)


def _state_get(context: Context) -> dict[str, Any] | None:
    store = context.get("task_state_store")
    if store is None:
        return None
    value = store.get(STATE_KEY)
    return value if isinstance(value, dict) and value.get("name") and value.get("namespace") else None


def _result(job: Mapping[str, Any], status: JobStatus, metrics: Mapping[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    return {
        "name": meta["name"],
        "namespace": meta["namespace"],
        "uid": meta.get("uid"),
        "state": status.state.value,
        "reason": status.reason,
        "message": status.message,
        "replica_statuses": status.replica_statuses,
        "start_time": status.start_time,
        "completion_time": status.completion_time,
        "metrics": dict(metrics),
    }
