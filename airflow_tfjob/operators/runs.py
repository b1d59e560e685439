"""What a job operator's task does when it runs: the bodies of its entry points, one object per try.

Contract: ``KubeflowJobOperator``'s module declares (its signature, its parameter table's checks at parse
time, its links and outlets); ``execute``, ``execute_complete`` and ``resume_execution``'s ``__fail__``
each import this module at their entry and hand the try to a new :class:`TaskTry`, which ``on_kill``
finds again. The try owns its collaborators, each made with what it needs: the API choice
(:class:`~airflow_tfjob.operators.api_choice.ApiChoice`), the builder holding the checkpoint plan
(:class:`~airflow_tfjob.operators.building.ManifestBuilder`), and its own clock, checked parameters and
follow options. What the task reports is kept on the operator (``_job_ref``, ``_job``, ``_cost``,
``_outcome``, ``_tensorboard_removed``): Airflow's kill, the OpenLineage listener and the UI's links read
it there. The operator's overridable steps (``find_or_create``, ``result_from_outcome``,
``manifest_arguments``, ``check_log_replicas``, ``_mask_secrets``) stay its methods, which the try calls.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_tfjob.build.manifest import build_job, load_manifest
from airflow_tfjob.build.secrets import unquoted_in_errors
from airflow_tfjob.follow import cleanup
from airflow_tfjob.follow.outcome import FollowOptions, FollowOutcome
from airflow_tfjob.hooks.connection import connection_of
from airflow_tfjob.hooks.sync import KubeflowJobHook, task_hook
from airflow_tfjob.integrations import links
from airflow_tfjob.integrations.kueue.multikueue import CONNECTIONS_EXTRA, WorkerCopyCheck, connection_map
from airflow_tfjob.integrations.tensorboard import XCOM_KEY, start_for_job, stop_for_job
from airflow_tfjob.jobs.status import as_ended, summarise
from airflow_tfjob.operators import checkpointing, follow_runs, params, submit
from airflow_tfjob.operators import outcome as outcome_mod
from airflow_tfjob.operators.api_choice import ApiChoice
from airflow_tfjob.operators.building import ManifestBuilder, default_namespace, manifest_arguments
from airflow_tfjob.operators.checks import check_operator_parameters
from airflow_tfjob.operators.lineage import publish_model
from airflow_tfjob.preflight.checks import check
from airflow_tfjob.preflight.failures import explain
from airflow_tfjob.preflight.needs import Target
from airflow_tfjob.version_compat import AirflowException, warn_missing

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_tfjob.operators.generic import KubeflowJobOperator


def hook(operator: KubeflowJobOperator) -> KubeflowJobHook:
    """The body of the operator's ``get_hook``: its synchronous hook, made once per operator instance."""
    return task_hook(operator)


class TaskTry:
    """One try of the operator's task: build, submit, follow (inline or deferred), report; or resume after
    the trigger, or kill. Made at each entry point (a deferred task resumes in a new process), and the
    operator's current try from then on: the steps a caller asks of the operator one by one
    (``build_manifest``, ``follow_options``, ``job_kind``) are this try's."""

    def __init__(self, operator: KubeflowJobOperator) -> None:
        self.op = operator
        self.api = ApiChoice(operator.kind, getattr(operator, "api", "auto"), render_only=operator.render_only)
        self.building = ManifestBuilder(operator, self.api)
        #: When the try started (execute): the deadline of ``execution_timeout`` counts from it.
        self.started: float | None = None
        # The rendered parameters as their rules checked them, and the follow options built from them:
        # once per try, for the inline follow, the trigger and the drain's base alike.
        self._checked: dict[str, Any] | None = None
        self._options: FollowOptions | None = None
        operator._try = self

    def checked(self) -> dict[str, Any]:
        """The rendered own and follow parameters, checked by their rows' rules once per try, as the code
        using them takes them (``log_replicas`` a LogSelection)."""
        if self._checked is None:
            op = self.op
            own = params.values(op, op.parameter_table.own)
            self._checked = check_operator_parameters(own, op.parameter_table.rules, op.kind)
        return self._checked

    def follow_options(self) -> FollowOptions:
        """The try's follow options, built once from its checked parameters (with the checkpoint part's
        fields when ``checkpoint=`` is set)."""
        if self._options is None:
            options = follow_runs.options_for(self.op, self.checked(), started=self.started)
            plan = self.building.checkpoints
            self._options = options.with_parts(**plan.follow_fields()) if plan is not None else options
        return self._options

    # ------------------------------------------------------------------ the story

    def execute(self, context: Context) -> Any:
        op = self.op
        op._unhide_rendered_secrets()
        warn_missing(op.log, "retry_policy", "task_state_store", "trigger_on_kill")
        self.started = time.time()
        op._mask_secrets()
        # Everything is checked before the first API call: a bad value creates nothing.
        with unquoted_in_errors(op.secret_env):
            self.checked()
            self.building.plan_checkpoints(context)  # before the follow options and the job, which carry it
            built = None
            if self.api.asks_cluster():
                # The job as its parameters describe it, checked before the cluster is asked which API
                # runs it: invalid input costs no request and fails the same with or without a cluster.
                built = self.building.build(context)
                self._options = None  # of the kind the API chosen runs
            self.api.choose(op.get_hook)
            options = self.follow_options()  # of the kind the API chosen runs
            manifest = built if built is not None and not self.api.api_changed_kind() else self.building.build(context)
        if op.render_only:
            return outcome_mod.rendered_only(manifest, op.log)
        hook = op.get_hook()
        if op.preflight:
            self.preflight(hook, manifest)
        job = self.submit(hook, manifest, context)
        name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
        op._job_ref = (name, namespace)
        checkpointing.announce(self.building.checkpoints, job, context, op.log)
        # Links before anything waits, so they work while the job runs and the task is deferred.
        links.push_links(
            op.job_kind,
            job,
            op.kubernetes_conn_id,
            context["ti"].xcom_push,
            op.log,
            tensorboard=op._tensorboard_spec() is not None,
        )
        self.start_tensorboard(hook, job, context)
        if op.deferrable:
            self.defer(name, namespace, options)
        outcome = follow_runs.follow(op.get_async_hook(), name, namespace, options, op.log.info)
        return self.complete(context, hook, name, namespace, outcome)

    def submit(self, hook: KubeflowJobHook, manifest: dict[str, Any], context: Context) -> dict[str, Any]:
        """find_or_create, with a refusal for what the cluster lacks (a webhook's 403, a kind's 404, a
        denied verb) told as the missing part and its fix rather than as the client's exception."""
        try:
            return self.op.find_or_create(hook, manifest, context)
        except Exception as error:
            target = Target.of_manifest(manifest, self.op.task_id)
            meta = manifest["metadata"]
            doing = f"submitting {target.kind.kind} {meta['namespace']}/{meta['name']}"
            failure = submit.refusal(error, explain(error, hook, meta["namespace"], target, doing), doing)
            if failure is None:
                raise
        # Raised outside the handler: the task log shows the explanation, not the client's traceback.
        raise failure

    def find_or_create(self, hook: KubeflowJobHook, job: dict[str, Any], context: Context) -> dict[str, Any]:
        """The body of the operator's ``find_or_create``: an earlier try's job to reattach to or report,
        or a new one (the job followed from the moment it is submitted)."""
        op = self.op

        def submitted(name: str, namespace: str) -> None:
            op._job_ref = (name, namespace)

        return submit.find_or_create(hook, job, context, log=op.log, on_submit=submitted)

    def preflight(self, hook: KubeflowJobHook, manifest: dict[str, Any]) -> None:
        """preflight=True: the job's parts asked of the cluster; a missing one fails the task, nothing created."""
        # MultiKueue's workers, as the follow will reach them: the operator's map over the extra's.
        given = connection_map(self.op.multikueue_connections)
        workers = {**connection_map(hook.connection_extra(CONNECTIONS_EXTRA)), **given}
        target = replace(Target.of_manifest(manifest, self.op.task_id), workers=tuple(workers.items()))
        meta = manifest["metadata"]
        report = check(hook, meta["namespace"], [target], partial(_worker_hook, hook))
        if not report.ok:
            raise AirflowException(
                f"Preflight: the cluster lacks what {target.kind.kind} {meta['namespace']}/{meta['name']} "
                f"needs ({report.summary()}); nothing was submitted.\n{report.table()}"
            )
        self.op.log.info("Preflight: %s\n%s", report.summary(), report.table())

    # ------------------------------------------------------------------ TensorBoard

    def start_tensorboard(self, hook: KubeflowJobHook, job: Mapping[str, Any], context: Context) -> None:
        def push(url: str) -> None:
            context["ti"].xcom_push(key=XCOM_KEY, value=url)

        start_for_job(hook, self.op._tensorboard_spec(), job, push, self.op.log)

    def stop_tensorboard(self, hook: KubeflowJobHook, name: str, namespace: str, *, force: bool = False) -> None:
        if stop_for_job(hook, self.op._tensorboard_spec(), name, namespace, self.op.log, force=force):
            self.op._tensorboard_removed = True  # links.TensorBoardLink: no link to a deleted board

    # ------------------------------------------------------------------ deferred

    def defer(self, name: str, namespace: str, options: FollowOptions) -> None:
        op = self.op
        trigger, timeout = follow_runs.trigger_for(
            name,
            namespace,
            options,
            connection_of(op),
            delete_on_kill=op.on_kill_action == "delete",
            kill_grace_period=op.kill_grace_period,
        )
        op.log.info(
            "Deferring while %s %s/%s runs (logs continue in the triggerer)", op.job_kind.kind, namespace, name
        )
        op.defer(trigger=trigger, method_name="execute_complete", timeout=timeout)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        """Resume after the trigger's one event: drain what is left of the logs, clean up, report."""
        op = self.op
        op._unhide_rendered_secrets()
        name, namespace = event["name"], event["namespace"]
        op._job_ref = (name, namespace)
        outcome = FollowOutcome.from_dict(event)
        hook = op.get_hook()
        self.api.resume((event.get("options") or {}).get("kind"), lambda: hook)
        if outcome.event in ("succeeded", "failed"):
            outcome = self.drain(name, namespace, event, outcome)
        if outcome.event == "timeout" and not event.get("deleted"):
            self.kill(hook, name, namespace, "delete", "its deadline passed")
        return self.complete(context, hook, name, namespace, outcome)

    def drain(self, name: str, namespace: str, event: Mapping[str, Any], outcome: FollowOutcome) -> FollowOutcome:
        # The options the trigger followed with (the task's, built in execute); an event of the
        # previous release carries none, and the task builds them again.
        sent = event.get("options")
        options = FollowOptions.from_dict(sent) if sent is not None else self.follow_options()
        return follow_runs.drain(self.op.get_async_hook(), name, namespace, options, self.op.log, outcome)

    def after_trigger_failure(self, context: Context, next_kwargs: Mapping[str, Any]) -> None:
        """"__fail__": the trigger crashed or Airflow's trigger timeout fired; the job would run on with
        nobody watching it (apache/airflow#67227, #62398), so it is deleted before the task fails."""
        op = self.op
        hook = op.get_hook()
        self.api.choose(lambda: hook)
        ref = op._job_ref or submit.running_job_of_this_try(
            hook, context, op.namespace or default_namespace(op), op.job_kind
        )
        if ref is None:
            op.log.warning(
                "Trigger failed (%s); no %s of this try found to delete", next_kwargs.get("error"), op.job_kind.kind
            )
            return
        op.log.error(
            "Trigger failed (%s): deleting %s %s/%s", next_kwargs.get("error"), op.job_kind.kind, ref[1], ref[0]
        )
        self.kill(hook, ref[0], ref[1], "delete", "its trigger failed")
        self.stop_tensorboard(hook, ref[0], ref[1], force=True)

    # ------------------------------------------------------------------ outcome

    def complete(
        self, context: Context, hook: KubeflowJobHook, name: str, namespace: str, outcome: FollowOutcome
    ) -> Any:
        """Clean up after the final state (logs drained) and report it: the result, or the failure."""
        op = self.op
        # The newest checkpoint first, whatever the outcome: a failed or preempted try's is the next one's start.
        plan = self.building.checkpoints or self.building.plan_checkpoints(context, look=False)
        checkpointing.record(plan, outcome.part("checkpoint"), context, op.log)
        try:
            return self.report(context, hook, name, namespace, outcome)
        finally:
            # Whatever the outcome: a board nobody asked to keep never outlives its task.
            self.stop_tensorboard(hook, name, namespace)

    def report(
        self, context: Context, hook: KubeflowJobHook, name: str, namespace: str, outcome: FollowOutcome
    ) -> Any:
        op = self.op
        op._outcome = outcome  # for the OpenLineage facets
        for line in outcome.diagnostics:
            op.log.error("%s", line)
        if outcome.dropped:
            # Each drop was announced in the task log where it happened; the counts, for whoever reads
            # the task's XCom (by replica: {"worker-3": {"budget": n, "rate": m}}, "*": the total cap).
            context["ti"].xcom_push(key="log_lines_dropped", value=outcome.dropped)
        job = hook.find_job(op.job_kind, name, namespace)
        # The status as the job ended (its replica counts settle after the terminal condition).
        outcome.status = as_ended(outcome.status, job)
        status = outcome_mod.final_status(
            outcome,
            job,
            name,
            namespace,
            startup_timeout=op.startup_timeout,
            delete=lambda why: self.kill(hook, name, namespace, "delete", why),
            kind=op.job_kind.kind,
        )
        assert job is not None  # final_status raised otherwise
        op._job = job

        def push(key: str, value: Any) -> None:
            context["ti"].xcom_push(key=key, value=value)

        reported = outcome.part("reported")
        if reported:
            # The last progress the job's status reported (a TrainJob's trainer_status), whatever the
            # outcome: beside the result's log-parsed progress, and there for a failed try too.
            push(reported["key"], reported["value"])
        op._cost = outcome_mod.report_cost(job, outcome.part("queue"), now=time.time(), log=op.log, push=push)
        outcome_mod.settle(
            hook, job, status, outcome.part("metrics", {}), op.on_finish_action, log=op.log, push=push,
            failures=outcome.failures,
            keep_failed_for=self.checked()["keep_failed_for"], now=time.time(),
        )  # fmt: skip
        op.log.info("%s %s/%s succeeded: %s", op.job_kind.kind, namespace, name, summarise(status))
        publish_model(op.model_asset, op.kind, context, job, outcome.part("metrics", {}))
        # Computed before the job is marked reported: a result that cannot be produced (a missing
        # return value) leaves the job reportable by a retry instead of training again.
        result = op.result_from_outcome(outcome, context)
        outcome_mod.mark_reported(hook, job, op.log)
        return result

    def result(self, outcome: FollowOutcome) -> Any:
        """The body of the operator's ``result_from_outcome``: the result of a succeeded job."""
        op = self.op
        assert op._job is not None and outcome.status is not None
        return outcome_mod.result(
            op._job, outcome.status, outcome.part("metrics", {}), outcome.part("progress"), outcome.part("queue"),
            op._cost,
        )

    # ------------------------------------------------------------------ kill

    def on_kill(self) -> None:
        op = self.op
        if op._job_ref is None:
            return
        name, namespace = op._job_ref
        hook = op.get_hook()
        if self.kill(hook, name, namespace, op.on_kill_action):
            self.stop_tensorboard(hook, name, namespace, force=True)

    def kill(
        self, hook: KubeflowJobHook, name: str, namespace: str, action: str, why: str = "the task was killed"
    ) -> bool:
        """Every kill path of the task (a user's kill, a timeout, a failed trigger) stops the job alike,
        and checks that MultiKueue's copy on a worker goes with it."""
        op = self.op
        worker = WorkerCopyCheck(op.multikueue_connections, warn=op.log.warning, info=op.log.info)
        return cleanup.kill(
            hook,
            name,
            namespace,
            on_kill_action=action,
            log=op.log.info,
            grace_period_seconds=op.kill_grace_period,
            why=why,
            kind=op.job_kind,
            elsewhere=worker,
        )


#: Seconds a preflight question to a MultiKueue worker is retried in all: an unreachable worker is a
#: row of the report (a warning), not a wait of the whole api_retry_timeout.
WORKER_PREFLIGHT_TIMEOUT = 10.0


def _worker_hook(hook: KubeflowJobHook, conn_id: str) -> KubeflowJobHook:
    """A MultiKueue worker's hook for preflight: the job hook's class, on the worker's connection."""
    return type(hook)(conn_id=conn_id, api_retry_timeout=WORKER_PREFLIGHT_TIMEOUT)


def planned_job(operator: KubeflowJobOperator) -> dict[str, Any] | None:
    """The body of the operator's ``_planned_job``: the job as the task will submit it, before its try (no
    identity yet), for the lineage's claims; None when it cannot be built (the try reports why; lineage
    never fails the task)."""
    value = getattr(operator, operator.job_field)
    try:
        job = build_job(
            operator.job_kind,
            base=load_manifest(value) if value is not None else None,
            **manifest_arguments(operator, operator.job_kind),
        )
    except Exception:
        return None
    metadata = job.setdefault("metadata", {})
    metadata["namespace"] = operator.namespace or metadata.get("namespace") or default_namespace(operator)
    return job
