"""Triggers of the provider: TFJobTrigger (the operator's) and TFJobConditionTrigger (the sensor's).

TFJobTrigger waits in the triggerer for a TFJob to finish, following it as the synchronous mode does.
Constructor (every argument is JSON and survives a triggerer restart)::

    TFJobTrigger(
        name, namespace,
        kubernetes_conn_id="kubernetes_default", cluster_context=None, config_file=None, in_cluster=None,
        api_retry_timeout=None, # seconds every API call is retried in all (hooks.retry)
        options=None,          # follow.FollowOptions as a dict
        cursors=None,          # log cursors from an earlier follow: logs resume without loss
        deadline=None,         # epoch seconds (task start + execution_timeout)
        delete_on_kill=True,   # a user's kill deletes the TFJob (Foreground) and its pods
        kill_grace_period=1,   # grace (s) of those pod deletions; None: the pods' own
        deferred_at=None,      # epoch seconds when the task deferred (identifies this deferral)
        startup_deadline=None, # epoch seconds: deferred_at + startup_timeout, absolute
    )

Triggerer restarts: the triggerer rebuilds the trigger from these kwargs, so a restarted trigger
starts again from the cursors the task deferred with. Nothing is lost (the lines are re-read), but
lines shown before the restart may be shown again: the restarted trigger says so with one marker
line (:data:`RESUME_MARKER`) before it re-reads. It knows it is a restart because the first run of
a deferral stamps the TFJob with ``deferred_at`` (annotation :data:`ANNOTATION_TRIGGER_STARTED`);
the triggers have no task_state_store. The start-up timeout is an absolute deadline, so it does not
start over with each restart either; a job that had already started before the restart is not held
to it again.

It runs :func:`airflow_tfjob.follow.follow_job` (the same core as the synchronous mode, watching the job
through the shared per-namespace watch) and yields exactly ONE event whose payload is::

    {"event": "succeeded" | "failed" | "timeout" | "startup_timeout" | "error",
     "name": str, "namespace": str,
     "status": JobStatus.to_dict() | None, "message": str,
     "metrics": dict, "diagnostics": list[str], "cursors": dict,
     "deleted": bool}   # True when this trigger deleted the job (deadline passed)

Kill and timeout semantics (Airflow 3.3.2):

- ``on_kill()`` runs only when a user acts on the deferred task (mark failed/success, clear): it deletes
  the TFJob with Foreground propagation and its pods with ``kill_grace_period`` (regression
  apache/airflow#36090, #62398), through :func:`airflow_tfjob.cleanup.kill_async`, the same steps as the
  worker's kill. The triggerer cancels ``on_kill`` again about a second later, so the deletion runs in
  a task of its own that the cancellation does not reach: it finishes its requests regardless.
- ``cleanup()`` runs on every exit, triggerer restarts included, so it deletes nothing.
- Airflow does not apply ``execution_timeout`` to a deferred task (apache/airflow#67227): when
  ``deadline`` passes the trigger deletes the job itself, then yields ``timeout``. The operator should
  defer with a timeout somewhat beyond the deadline, so that Airflow's own timeout only catches a stuck
  trigger (and handle ``__fail__`` by deleting the job).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_tfjob.cleanup import KILL_GRACE_PERIOD, kill_async
from airflow_tfjob.connection import connection_of, hook_kwargs
from airflow_tfjob.kinds import JobKind, kind_named
from airflow_tfjob.status import JobState, JobStatus, interpret, summarise

if TYPE_CHECKING:
    from airflow_tfjob.follow import FollowOptions
    from airflow_tfjob.hooks.tfjob import AsyncTFJobHook

#: The TFJob annotation holding the ``deferred_at`` of the deferral whose trigger has started.
ANNOTATION_TRIGGER_STARTED = "tfjob.airflow.apache.org/trigger-started"
#: Written to the task log by a trigger that resumes after a triggerer restart, before it re-reads.
RESUME_MARKER = (
    "----- triggerer restarted: following the TFJob again from the position saved when the task "
    "deferred; the log lines below may repeat lines already shown above -----"
)

#: How long the trigger waits past ``deadline`` for follow_job to report the timeout itself (with its
#: cursors and diagnostics) before it cancels it.
DEADLINE_GRACE = 15.0
#: How long deletion (timeout, kill) waits for the TFJob to disappear; on_kill is bounded by
#: ``[triggerer] on_kill_timeout`` (30 s by default).
DELETE_WAIT = 20.0
#: Kills in progress: a task must be referenced until it is done, or the loop may collect it half-way.
_KILLS: set[asyncio.Task[bool]] = set()


class _ClusterTrigger(BaseTrigger):
    """What both triggers share: the connection fields (serialized as given) and the async hook."""

    def __init__(
        self,
        kubernetes_conn_id: str,
        cluster_context: str | None,
        config_file: str | None,
        in_cluster: bool | None,
        api_retry_timeout: float | None = None,
    ) -> None:
        super().__init__()
        self.kubernetes_conn_id = kubernetes_conn_id
        self.cluster_context = cluster_context
        self.config_file = config_file
        self.in_cluster = in_cluster
        self.api_retry_timeout = api_retry_timeout

    def _connection(self) -> dict[str, Any]:
        return connection_of(self)

    def _hook(self) -> AsyncTFJobHook:
        from airflow_tfjob.hooks.tfjob import AsyncTFJobHook

        return AsyncTFJobHook(**hook_kwargs(self))


class TFJobTrigger(_ClusterTrigger):
    """Fires once when the TFJob succeeds, fails, times out, or cannot be followed."""

    def __init__(
        self,
        name: str,
        namespace: str,
        kubernetes_conn_id: str = "kubernetes_default",
        cluster_context: str | None = None,
        config_file: str | None = None,
        in_cluster: bool | None = None,
        api_retry_timeout: float | None = None,
        options: dict[str, Any] | None = None,
        cursors: dict[str, Any] | None = None,
        deadline: float | None = None,
        delete_on_kill: bool = True,
        deferred_at: float | None = None,
        startup_deadline: float | None = None,
        kill_grace_period: int | None = KILL_GRACE_PERIOD,
    ) -> None:
        super().__init__(kubernetes_conn_id, cluster_context, config_file, in_cluster, api_retry_timeout)
        self.name = name
        self.namespace = namespace
        self.options = dict(options or {})
        self.cursors = dict(cursors or {})
        self.deadline = deadline
        self.delete_on_kill = delete_on_kill
        self.deferred_at = deferred_at
        self.startup_deadline = startup_deadline
        self.kill_grace_period = kill_grace_period
        self._job_at_start: dict[str, Any] | None = None

    @property
    def kind(self) -> JobKind:
        """The job's kind, from the options (a trigger serialized before kinds existed: TFJob)."""
        return kind_named(str(self.options.get("kind") or "TFJob"))

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "name": self.name,
                "namespace": self.namespace,
                **self._connection(),
                "options": self.options,
                "cursors": self.cursors,
                "deadline": self.deadline,
                "delete_on_kill": self.delete_on_kill,
                "deferred_at": self.deferred_at,
                "startup_deadline": self.startup_deadline,
                "kill_grace_period": self.kill_grace_period,
            },
        )

    def _payload(self, event: str, message: str, **extra: Any) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "event": event,
            "name": self.name,
            "namespace": self.namespace,
            "status": None,
            "message": message,
            "metrics": {},
            "diagnostics": [],
            "cursors": self.cursors,
            "deleted": False,
        }
        payload.update(extra)
        return payload

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow_tfjob.follow import FollowOptions, follow_job

        hook = self._hook()
        ref = f"{self.kind.kind} {self.namespace}/{self.name}"
        # from_dict ignores unknown keys: a trigger serialized by another provider version still runs.
        options = FollowOptions.from_dict(self.options)
        if self.deadline is not None:
            options.deadline = self.deadline
        await self._mask_secrets(hook)
        restarted = await self._is_restart(hook)
        if restarted:
            self.log.info("%s", RESUME_MARKER)
        self._resume_startup_clock(options, restarted)

        follow = asyncio.ensure_future(
            follow_job(hook, self.name, self.namespace, options, self.log.info, self.cursors)
        )
        try:
            wait_for = None if self.deadline is None else self.deadline + DEADLINE_GRACE - time.time()
            done, _ = await asyncio.wait({follow}, timeout=None if wait_for is None else max(wait_for, 0))
            if follow in done:
                try:
                    outcome = follow.result()
                    payload = {**self._payload(outcome.event, outcome.message), **outcome.to_dict()}
                except Exception as exc:
                    # Reported, not raised: a crashed trigger would resume the task with a bare
                    # "__fail__" and no message; the operator decides what to do with the job.
                    self.log.exception("Following %s failed", ref)
                    payload = self._payload("error", f"Following {ref} failed: {exc!r}")
            else:
                follow.cancel()
                payload = self._payload("timeout", f"{ref} did not finish before its deadline.")
        finally:
            if not follow.done():
                follow.cancel()
                await asyncio.gather(follow, return_exceptions=True)

        if payload["event"] == "timeout":
            payload["deleted"] = await self._delete(hook, "its deadline passed")
        yield TriggerEvent(payload)

    async def _mask_secrets(self, hook: AsyncTFJobHook) -> None:
        """The job's secret_env values masked in the trigger's log (a replica may print them)."""
        from airflow_tfjob.secrets import amask_job_secrets

        try:
            await amask_job_secrets(await hook.find_job(self.kind, self.name, self.namespace))
        except Exception as error:  # the follow reports real API trouble
            self.log.warning(
                "Could not read %s %s/%s to mask its secrets: %s",
                self.kind.kind,
                self.namespace,
                self.name,
                error,
            )

    async def _is_restart(self, hook: AsyncTFJobHook) -> bool:
        """Whether a trigger of this same deferral already ran (then the triggerer restarted).

        The first run stamps the job; a failure to read or stamp it (RBAC without patch, API
        trouble) counts as a first run: the follow itself reports real API problems.
        """
        if self.deferred_at is None:
            return False
        stamp = repr(float(self.deferred_at))
        try:
            job = self._job_at_start = await hook.find_job(self.kind, self.name, self.namespace)
            if job is None:
                return False
            annotations = (job.get("metadata") or {}).get("annotations") or {}
            if annotations.get(ANNOTATION_TRIGGER_STARTED) == stamp:
                return True
            await hook.patch_job(
                self.kind,
                self.name,
                self.namespace,
                {"metadata": {"annotations": {ANNOTATION_TRIGGER_STARTED: stamp}}},
            )
        except Exception as error:
            self.log.warning(
                "Could not record the trigger's start on %s %s/%s: %s",
                self.kind.kind,
                self.namespace,
                self.name,
                error,
            )
        return False

    def _resume_startup_clock(self, options: FollowOptions, restarted: bool) -> None:
        """Make the start-up timeout count from the deferral, not from this (re)start of the trigger."""
        if self.startup_deadline is None or options.startup_timeout is None:
            return
        if restarted and self._had_started():
            options.startup_timeout = None  # held to it once already; pods restarting now are not a start-up
            return
        if restarted and self._was_suspended():
            # A queued (e.g. Kueue) job's start-up window opens when it is admitted, and the follow core
            # restarts it while the job is suspended: the deferral's deadline says nothing about it, so
            # keep the whole window rather than fail the moment the job is admitted.
            return
        options.startup_timeout = max(self.startup_deadline - time.time(), 0.0)

    def _was_suspended(self) -> bool:
        """The job has been suspended at some point (a Suspended condition, True or False, stays)."""
        conditions = ((self._job_at_start or {}).get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Suspended" for c in conditions)

    def _had_started(self) -> bool:
        """The job reached Running (or further) at some point: its conditions keep the history."""
        conditions = ((self._job_at_start or {}).get("status") or {}).get("conditions") or []
        return any(c.get("type") in ("Running", "Succeeded", "Failed") for c in conditions)

    async def _delete(self, hook: AsyncTFJobHook, why: str) -> bool:
        """Delete the TFJob and its pods (:func:`cleanup.kill_async`); False if that could not be done."""
        try:
            gone = await kill_async(
                hook,
                self.name,
                self.namespace,
                on_kill_action="delete",
                log=self.log.info,
                grace_period_seconds=self.kill_grace_period,
                why=why,
                wait_timeout=DELETE_WAIT,
                kind=self.kind,
            )
        except Exception:
            self.log.exception("Could not delete %s %s/%s", self.kind.kind, self.namespace, self.name)
            return False
        if not gone:
            self.log.warning(
                "%s %s/%s: deletion requested, not finished yet", self.kind.kind, self.namespace, self.name
            )
        return True

    async def on_kill(self) -> None:
        """A user killed the deferred task: delete the TFJob unless told to keep it.

        Airflow 3.3's triggerer cancels on_kill about a second after calling it; the deletion requests
        and the wait run in a task of their own (kept referenced), which that cancellation does not
        reach, so they finish anyway.
        """
        if not self.delete_on_kill:
            self.log.info(
                "Task killed; keeping %s %s/%s (delete_on_kill=False)",
                self.kind.kind,
                self.namespace,
                self.name,
            )
            return
        task = asyncio.get_running_loop().create_task(
            self._delete(self._hook(), "the task was killed"), name=f"tfjob-kill-{self.name}"
        )
        _KILLS.add(task)
        task.add_done_callback(_KILLS.discard)
        await asyncio.shield(task)

    async def cleanup(self) -> None:
        """Nothing to delete: this runs on triggerer restarts too, and the job must survive those."""


TARGET_CONDITIONS = ("Succeeded", "Running", "Created")

# A job that has run (or finished) satisfies "Running"; one that merely exists satisfies "Created".
_REACHED: dict[str, frozenset[JobState]] = {
    "Succeeded": frozenset({JobState.SUCCEEDED}),
    "Running": frozenset({JobState.RUNNING, JobState.RESTARTING, JobState.SUCCEEDED}),
    "Created": frozenset(JobState),
}


def condition_reached(status: JobStatus, target_condition: str) -> bool:
    """Whether a (non-failed) job status satisfies the sensor's target."""
    return status.state in _REACHED[target_condition]


def failure_message(name: str, namespace: str, status: JobStatus, kind: str = "TFJob") -> str:
    failing = ", ".join(status.failed_replica_types) or "unknown"
    return (
        f"{kind} {namespace}/{name} failed ({status.reason}): {status.message} [failing replicas: {failing}]"
    )


class TFJobConditionTrigger(_ClusterTrigger):
    """Fires once: when the TFJob reaches the target condition, fails, or cannot be watched.

    A job that does not exist yet is waited for; the sensor's timeout (the defer timeout) bounds it.
    Payload: ``{"event": "reached" | "failed" | "error", "name", "namespace", "status", "message"}``.
    """

    def __init__(
        self,
        name: str,
        namespace: str,
        target_condition: str = "Succeeded",
        kubernetes_conn_id: str = "kubernetes_default",
        cluster_context: str | None = None,
        config_file: str | None = None,
        in_cluster: bool | None = None,
        api_retry_timeout: float | None = None,
        kind: str = "TFJob",
    ) -> None:
        super().__init__(kubernetes_conn_id, cluster_context, config_file, in_cluster, api_retry_timeout)
        self.name = name
        self.namespace = namespace
        self.target_condition = target_condition
        # By name (JSON); a trigger serialized before kinds existed has none and watches TFJobs.
        self.kind = kind_named(kind).kind

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "name": self.name,
                "namespace": self.namespace,
                "target_condition": self.target_condition,
                **self._connection(),
                "kind": self.kind,
            },
        )

    def _event(self, event: str, message: str, status: JobStatus | None = None) -> TriggerEvent:
        return TriggerEvent(
            {
                "event": event,
                "name": self.name,
                "namespace": self.namespace,
                "status": status.to_dict() if status is not None else None,
                "message": message,
            }
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow_tfjob.kueue.note import aqueue_note
        from airflow_tfjob.watch import shared_watch

        told = None
        try:
            hook = self._hook()
            watch = shared_watch(hook, self.namespace, kind=kind_named(self.kind))
            async with watch.subscribe(self.name) as sub:
                async for obj in sub:
                    if obj is None:
                        continue  # not created yet (or deleted and maybe re-created): keep waiting
                    status = interpret(obj)
                    note = await aqueue_note(hook, obj)  # a job with a Kueue queue: where it stands
                    if note is not None and note != told:
                        told = note
                        self.log.info("%s %s/%s: %s", self.kind, self.namespace, self.name, note)
                    if status.state is JobState.FAILED:
                        yield self._event(
                            "failed", failure_message(self.name, self.namespace, status, self.kind), status
                        )
                        return
                    if condition_reached(status, self.target_condition):
                        yield self._event("reached", summarise(status), status)
                        return
        except Exception as error:  # reported to the task, which fails with the message
            yield self._event("error", f"{type(error).__name__}: {error}")
