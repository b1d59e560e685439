"""Triggers of the provider: KubeflowJobTrigger (the operator's) and KubeflowJobConditionTrigger (the sensor's).

KubeflowJobTrigger waits in the triggerer for a TFJob to finish, following it as the synchronous mode does.
Constructor (every argument is JSON and survives a triggerer restart)::

    KubeflowJobTrigger(
        name, namespace,
        kubernetes_conn_id="kubernetes_default", cluster_context=None, config_file=None, in_cluster=None,
        api_retry_timeout=None, # seconds every API call is retried in all (hooks.retry)
        options=None,          # follow.FollowOptions as a dict: everything the follow needs, the
                               # deadline (epoch seconds: task start + execution_timeout) included
        cursors=None,          # log cursors from an earlier follow: logs resume without loss
        delete_on_kill=True,   # a user's kill deletes the TFJob (Foreground) and its pods
        kill_grace_period=1,   # grace (s) of those pod deletions; None: the pods' own
        deferred_at=None,      # epoch seconds when the task deferred (identifies this deferral, and
                               # starts its start-up clock)
    )

``deadline`` and ``startup_deadline`` are the previous release's kwargs (the deadline beside the
options', the start-up clock as an absolute time): a trigger it serialized still runs, read by
:func:`read_options`, the one place that knows that form.

Triggerer restarts and take-overs: the triggerer rebuilds the trigger from these kwargs, whose cursors
are the task's at deferral. While it follows, the trigger keeps the position it has written up to
durable (:mod:`airflow_tfjob.triggers.positions`: one ConfigMap per namespace, saved every few seconds
with what changed), so a trigger that another triggerer was running resumes from there: nothing lost,
nothing repeated after a graceful stop, and after a SIGKILL only the last few seconds' lines, counted
and labelled. With remote task logs the stopped triggerer's part is not kept (Airflow uploads a
trigger's log only when it finishes there), so the take-over reads again from the deferral. A take-over
that resumes from a saved position reads the master replica's lines since the deferral again for its
metrics, progress, checkpoints and returned value (the stopped trigger's were lost with it), without
showing them. Either way it writes one marker line first (starting with :data:`airflow_tfjob.triggers.positions.TAKE_OVER`) that says which. It knows it is
a take-over because the first run of a deferral stamps the TFJob with ``deferred_at`` (annotation
:data:`airflow_tfjob.triggers.runs.ANNOTATION_TRIGGER_STARTED`). The start-up timeout counts from ``deferred_at``, so it does
not start over with each restart either; a job that had already started before the restart is not
held to it again.

It runs :func:`airflow_tfjob.follow.core.follow_job` (the same core as the synchronous mode, watching the job
through the shared per-namespace watch) and yields exactly ONE event whose payload is::

    {"event": "succeeded" | "failed" | "timeout" | "startup_timeout" | "error",
     "name": str, "namespace": str,
     "status": JobStatus.to_dict() | None, "message": str,
     "diagnostics": list[str], "cursors": dict,
     "parts": dict,     # what each follow part saved, by its section (metrics, progress, queue...)
     "deleted": bool,   # True when this trigger deleted the job (deadline passed)
     "options": dict}   # the options it followed with, which the worker's drain continues

Kill and timeout semantics (Airflow 3.3.2):

- ``on_kill()`` runs only when a user acts on the deferred task (mark failed/success, clear): it deletes
  the TFJob with Foreground propagation and its pods with ``kill_grace_period`` (regression
  apache/airflow#36090, #62398), through :func:`airflow_tfjob.follow.cleanup.kill_async`, the same steps as the
  worker's kill. The triggerer cancels ``on_kill`` again about a second later, so the deletion runs in
  a task of its own that the cancellation does not reach: it finishes its requests regardless.
- ``cleanup()`` runs on every exit, triggerer restarts included, so it deletes nothing.
- Airflow does not apply ``execution_timeout`` to a deferred task (apache/airflow#67227): when
  ``deadline`` passes the trigger deletes the job itself, then yields ``timeout``. The operator should
  defer with a timeout somewhat beyond the deadline, so that Airflow's own timeout only catches a stuck
  trigger (and handle ``__fail__`` by deleting the job).

This module declares (the triggerer imports it on its event loop); what the triggers do when they run is
:mod:`airflow_tfjob.triggers.runs`, imported at each entry point once
:func:`airflow_tfjob.triggers.loader.load_run_modules` has loaded it off the loop.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_tfjob.constants import KILL_GRACE_PERIOD, STARTUP_TIMEOUT
from airflow_tfjob.hooks.connection import connection_of
from airflow_tfjob.triggers.loader import load_run_modules, run_modules_loaded

if TYPE_CHECKING:
    from airflow_tfjob.jobs.kinds import JobKind
    from airflow_tfjob.jobs.status import JobStatus


class _ClusterTrigger(BaseTrigger):
    """What both triggers share: the connection fields (serialized as given)."""

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

def _kind_named(name: str) -> JobKind:
    """The kind table's row for ``name``: read where the table is loaded already (in a run, after
    :func:`load_run_modules`; in ``serialize``, where the trigger is made, on a worker), not on the loop."""
    # Not at the top: the triggerer imports this module on its event loop, where no import should run.
    from airflow_tfjob.jobs.kinds import kind_named

    return kind_named(name)


def read_options(
    options: dict[str, Any] | None, deadline: float | None = None, startup_deadline: float | None = None
) -> dict[str, Any]:
    """The follow options of a trigger's kwargs, as FollowOptions.to_dict writes them (a dict: the
    follow parses it once, when it runs in the triggerer).

    The one reading of the previous release's form (tests/integration/recorded/triggers_0.1.0_*.json):
    it sent the deadline a second time as ``deadline`` (the same value) and the start-up clock as
    the absolute ``startup_deadline`` (deferred_at + startup_timeout), which says when that clock
    started. Keys of another version inside ``options`` are ignored by FollowOptions.from_dict.
    """
    if deadline is None and startup_deadline is None:
        # The current form, kept as given: a triggerer holds one per waiting job, so no copy of it.
        return options if options is not None else {}
    read = dict(options or {})
    if deadline is not None:
        read["deadline"] = deadline
    timeout = read.get("startup_timeout", STARTUP_TIMEOUT)  # FollowOptions' default
    if startup_deadline is not None and timeout is not None:
        read["startup_from"] = startup_deadline - timeout
    return read


class KubeflowJobTrigger(_ClusterTrigger):
    """Fires once when the TFJob succeeds, fails, times out, or cannot be followed."""

    #: The context of the running run's task (its log goes where Airflow routes that context).
    _log_context: contextvars.Context | None = None
    #: Set once the run yields its event: a cleanup after it has no kill to tell (before Airflow 3.3).
    _fired = False

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
        self.options = read_options(options, deadline, startup_deadline)
        self.cursors = dict(cursors or {})
        self.delete_on_kill = delete_on_kill
        self.deferred_at = deferred_at
        self.kill_grace_period = kill_grace_period
        # The job as the run found it at its start (read once, from the namespace's shared watch), and
        # whether that read is done; not held while the job is followed, and held until then as the
        # watch keeps it (compact JSON): thousands of triggers start at once, each holding it while
        # its start stamp waits for a turn.
        self._job_at_start: bytes | None = None
        self._job_read = False

    @property
    def deadline(self) -> float | None:
        """Epoch seconds past which the job is deleted and the event is ``timeout`` (the options')."""
        deadline = self.options.get("deadline")
        return None if deadline is None else float(deadline)

    @property
    def kind(self) -> JobKind:
        """The job's kind, from the options (a trigger serialized before kinds existed: TFJob); read in
        run() and after, when :func:`load_run_modules` has imported the kinds."""
        return _kind_named(str(self.options.get("kind") or "TFJob"))

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "name": self.name,
                "namespace": self.namespace,
                **self._connection(),
                "options": self.options,
                "cursors": self.cursors,
                "delete_on_kill": self.delete_on_kill,
                "deferred_at": self.deferred_at,
                "kill_grace_period": self.kill_grace_period,
            },
        )

    def run(self) -> AsyncIterator[TriggerEvent]:
        # Airflow's triggerer routes a log call by the context of the task that makes it (see
        # hooks/waits.py): this run's context, kept so that the follow's lines reach this trigger's log
        # whichever task writes them (the namespace's position book flushes pending lines on its saves).
        self._log_context = contextvars.copy_context()
        return _OneEvent(self)

    def _warn(self, line: str) -> None:
        """A warning into the trigger's log, in the run's context (as :meth:`_info`)."""
        if self._log_context is None:
            self.log.warning(line)
        else:
            self._log_context.run(self.log.warning, line)

    def _info(self, line: str) -> None:
        """The follow's lines into the trigger's log, in the run's context whatever task calls. The
        logger (Airflow's LoggingMixin makes one per trigger, about 0.7 KB) is made at the first line,
        not for every job that waits in silence."""
        if self._log_context is None:
            self.log.info(line)
        else:
            self._log_context.run(self.log.info, line)

    async def on_kill(self) -> None:
        """A user killed the deferred task: delete the TFJob unless told to keep it.

        Airflow 3.3's triggerer cancels on_kill about a second after calling it; the deletion requests
        and the wait run in a task of their own (kept referenced), which that cancellation does not
        reach, so they finish anyway.
        """
        await load_run_modules()
        from airflow_tfjob.triggers import runs  # the run module: loaded by the await above, off the loop

        await runs.on_kill(self)

    async def cleanup(self) -> None:
        """From Airflow 3.3, nothing: this runs on triggerer restarts too, and the job must survive
        those (a user's kill reaches :meth:`on_kill`).

        Before 3.3 the triggerer calls no ``on_kill``: a cancelled trigger whose task is no longer
        deferred was cancelled by a user (marked failed or success, cleared), so the job is deleted as
        ``on_kill`` would; a task still deferred means a restart or a move, and a state that cannot be
        read deletes nothing (apache/airflow#36090). The plugin's listener deletes it from the API
        server too; a second deletion of a job already going finds nothing left to do.
        """
        if self._fired or not self.delete_on_kill:
            return
        await load_run_modules()  # the version flags among them: no import on the loop
        from airflow_tfjob.triggers import runs  # the run module: loaded by the await above, off the loop

        await runs.cleanup(self)


class _OneEvent:
    """KubeflowJobTrigger's run, as the triggerer iterates it: one event, the run module's ``follow``
    (``triggers/runs.py``), awaited by the triggerer's own task. An async generator here would keep a
    frame of its own around that await for as long as the job runs: about 0.2 KB per waiting job
    (bench_triggers' breakdown)."""

    __slots__ = ("_trigger",)

    def __init__(self, trigger: KubeflowJobTrigger) -> None:
        self._trigger: KubeflowJobTrigger | None = trigger

    def __aiter__(self) -> _OneEvent:
        return self

    def __anext__(self) -> Awaitable[TriggerEvent]:
        trigger, self._trigger = self._trigger, None
        if trigger is None:
            return _no_more()
        if run_modules_loaded():
            from airflow_tfjob.triggers import runs  # the run module, loaded already: no import on the loop

            return runs.follow(trigger)
        return _follow_once_loaded(trigger)


async def _follow_once_loaded(trigger: KubeflowJobTrigger) -> TriggerEvent:
    """The first runs of a process wait for the run modules, loaded off the loop."""
    await load_run_modules()
    from airflow_tfjob.triggers import runs  # the run module, loaded by the await above

    return await runs.follow(trigger)


async def _no_more() -> TriggerEvent:
    raise StopAsyncIteration


class KubeflowJobConditionTrigger(_ClusterTrigger):
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
        # By name (JSON); a trigger serialized before kinds existed has none and watches TFJobs. Read
        # (any spelling kind_named takes) by serialize() and run(), not here: the triggerer builds the
        # trigger on its event loop, where the kind table is not imported.
        self.kind = kind

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "name": self.name,
                "namespace": self.namespace,
                "target_condition": self.target_condition,
                **self._connection(),
                "kind": _kind_named(self.kind).kind,
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
        try:
            await load_run_modules()
        except Exception as error:  # reported to the task, which fails with the message
            yield self._event("error", f"{type(error).__name__}: {error}")
            return
        from airflow_tfjob.triggers import runs  # the run module: loaded by the await above, off the loop

        event = await runs.reach(self)
        if event is not None:
            yield event
