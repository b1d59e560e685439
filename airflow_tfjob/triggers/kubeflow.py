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
:data:`ANNOTATION_TRIGGER_STARTED`). The start-up timeout counts from ``deferred_at``, so it does
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
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import gc
import importlib
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_tfjob.constants import KILL_GRACE_PERIOD
from airflow_tfjob.hooks.connection import connection_of, hook_kwargs

if TYPE_CHECKING:
    from airflow_tfjob.follow.outcome import FollowOptions
    from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook
    from airflow_tfjob.jobs.kinds import JobKind
    from airflow_tfjob.jobs.status import JobStatus
    from airflow_tfjob.triggers.positions import LineHook, PositionBook, SavedPosition

#: The TFJob annotation holding the ``deferred_at`` of the deferral whose trigger has started.
ANNOTATION_TRIGGER_STARTED = "tfjob.airflow.apache.org/trigger-started"

#: How long the trigger waits past ``deadline`` for follow_job to report the timeout itself (with its
#: cursors and diagnostics) before it cancels it.
DEADLINE_GRACE = 15.0
#: How long a stopping trigger waits for its position to be saved (a triggerer's shutdown is not held).
STOP_SAVE_TIMEOUT = 5.0
#: How long the start of a run waits for the shared watch's first LIST before it reads the job by a GET.
JOB_READ_TIMEOUT = 60.0
#: How long deletion (timeout, kill) waits for the TFJob to disappear; on_kill is bounded by
#: ``[triggerer] on_kill_timeout`` (30 s by default).
DELETE_WAIT = 20.0
#: Kills in progress: a task must be referenced until it is done, or the loop may collect it half-way.
_KILLS: set[asyncio.Task[bool]] = set()

#: What a trigger's run needs beyond this module. The triggerer imports a trigger's class and runs the
#: trigger on its event loop, so this module stays light and these (kubernetes_asyncio, aiohttp, the cncf
#: hook: seconds of imports, more on a loaded machine) are imported once per process on a thread of
#: their own, which every trigger awaits before it touches them (:func:`load_run_modules`).
RUN_MODULES: tuple[str, ...] = (
    "urllib3.exceptions",
    # The release's flags, and the supervisor's channel (the masker, a task's state).
    "airflow_tfjob.version_compat",
    "airflow_tfjob.hooks.supervisor",
    "airflow_tfjob.jobs.kinds",
    "airflow_tfjob.jobs.adapter",
    "airflow_tfjob.jobs.status",
    "airflow_tfjob.follow.outcome",
    "airflow_tfjob.follow.cleanup",
    "airflow_tfjob.triggers.positions",
    "airflow_tfjob.hooks.aio",
    "airflow_tfjob.hooks.jobwatch",
    "airflow_tfjob.follow.core",
    "airflow_tfjob.follow.diagnosis",
    "airflow_tfjob.build.secrets",
    "airflow_tfjob.build.checker",
    # Every job API's adapter (jobs.adapter.ADAPTER_MODULES, which an import would load on the loop).
    "airflow_tfjob.jobs.v1",
    "airflow_tfjob.jobs.trainjob.adapter",
    "airflow_tfjob.integrations.kueue.note",
    "airflow_tfjob.integrations.kueue.tracker",
    "airflow_tfjob.integrations.parts",
)
_loading: concurrent.futures.Future[None] | None = None
_loading_lock = threading.Lock()


def _import_run_modules(done: concurrent.futures.Future[None]) -> None:
    # The imports allocate a few hundred thousand objects (kubernetes' models), which sets off the
    # cyclic garbage collector's full collections: each walks every object of the process (150 ms
    # and more in a triggerer, measured) holding the GIL, so the event loop's thread waits through
    # it. No collection runs during the imports; then what exists is frozen (gc.freeze, as Airflow's
    # executors do before they fork), so later full collections walk only the objects made since:
    # the triggerer's loop never pays for the modules it has loaded.
    try:
        with _collector_paused():
            for module in RUN_MODULES:
                importlib.import_module(module)
            gc.freeze()
    except BaseException as error:  # told to every waiting trigger; the next one tries again
        global _loading
        with _loading_lock:
            _loading = None
        done.set_exception(error)
    else:
        done.set_result(None)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside (on again before any waiting trigger is told)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


async def load_run_modules() -> None:
    """Import :data:`RUN_MODULES` off the event loop, once per process; every trigger awaits the same
    import (a module being imported on another thread must not be imported on the loop meanwhile: the
    loop would wait on its import lock)."""
    global _loading
    with _loading_lock:
        loading = _loading
        if loading is None:
            loading = _loading = concurrent.futures.Future()
            # Running from the start, so that it cannot be cancelled: a trigger cancelled while it waits
            # (a user's mark, a triggerer's shutdown) cancels its own wait, and asyncio.wrap_future would
            # pass that on to this shared future, failing every other trigger of the process with it.
            loading.set_running_or_notify_cancel()
            threading.Thread(
                target=_import_run_modules, args=(loading,), name="tfjob-trigger-imports", daemon=True
            ).start()
    if not loading.done():
        await asyncio.wrap_future(loading)
    loading.result()


#: Triggers of one event loop in their start at once (reading the job, stamping it, reading a saved log
#: position). A sweep defers thousands together; each start holds requests, retry state and a decoded
#: job while it waits for the API, and the allocator keeps what the peak of all of them took: at 1,000
#: triggers started at once that was most of what waiting cost.
STARTS_AT_ONCE = 32
_STARTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def start_turn() -> asyncio.Semaphore:
    """The running loop's turnstile for trigger starts (:data:`STARTS_AT_ONCE`)."""
    loop = asyncio.get_running_loop()
    turns = _STARTS.get(loop)
    if turns is None:
        turns = _STARTS[loop] = asyncio.Semaphore(STARTS_AT_ONCE)
    return turns


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

    def _hook(self) -> AsyncKubeflowJobHook:
        # One hook for the triggers of one connection (the loop's, renewed each minute): a triggerer
        # waiting on thousands of jobs neither holds nor loads a connection per job.
        from airflow_tfjob.hooks.aio import shared_hook

        return shared_hook(**hook_kwargs(self))


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
    from airflow_tfjob.follow.outcome import FollowOptions

    read = dict(options or {})
    if deadline is not None:
        read["deadline"] = deadline
    timeout = read.get("startup_timeout", FollowOptions.__dataclass_fields__["startup_timeout"].default)
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
        from airflow_tfjob.jobs.kinds import kind_named

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
                "delete_on_kill": self.delete_on_kill,
                "deferred_at": self.deferred_at,
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
            "diagnostics": [],
            "cursors": self.cursors,
            "deleted": False,
            "options": self.options,
        }
        payload.update(extra)
        return payload

    async def run(self) -> AsyncIterator[TriggerEvent]:
        # Airflow's triggerer routes a log call by the context of the task that makes it (see
        # hooks/waits.py): this run's context, kept so that the follow's lines reach this trigger's log
        # whichever task writes them (the namespace's position book flushes pending lines on its saves).
        self._log_context = contextvars.copy_context()
        await load_run_modules()
        from airflow_tfjob.follow.core import FollowTap, follow_job, reads_logs
        from airflow_tfjob.follow.outcome import FollowOptions
        from airflow_tfjob.integrations.parts import PARTS
        from airflow_tfjob.triggers.positions import entry_key, remote_task_logs, take_over

        hook = self._hook()
        ref = f"{self.kind.kind} {self.namespace}/{self.name}"
        # from_dict ignores unknown keys: a trigger serialized by another provider version still runs.
        options = FollowOptions.from_dict(self.options)
        entry = entry_key(self.kind.plural, self.name)
        cursors, window, known, replay = self.cursors, None, False, None
        async with start_turn():
            await self._mask_secrets(hook)
            restarted = await self._is_restart(hook)
            book = await self._book(hook) if reads_logs(options, PARTS) else None
            if restarted:
                saved = await self._saved_position(book, entry)
                known = saved is not None
                deferred_at = None if self.deferred_at is None else float(self.deferred_at)
                plan = take_over(saved, remote_task_logs(), self.cursors, self.kind.kind, deferred_at)
                cursors, window = plan.cursors, plan.window
                if cursors != self.cursors:
                    # Resumed after what the stopped triggerer showed: its trackers' state went with
                    # it, so the master's lines since the deferral are read again for them.
                    replay = self.cursors
                self.log.info("%s", plan.marker)
            self._resume_startup_clock(options, restarted)
            self._job_at_start = None  # read what it had to say: the watch holds the job from here on

        # A tap only where something reads the follow's lines or positions (a take-over's window, the
        # position book of a follow that reads logs): not for every job that waits in silence.
        tap: FollowTap | None = None
        if window is not None or book is not None:
            on_line: LineHook | None = window.on_line if window is not None else None
            if book is not None:  # its first shown line saves the position early (triggers/positions.py)
                on_line = book.on_first_line(entry, on_line)
            tapped = tap = FollowTap(on_line=on_line)
            if window is not None:
                window.sink = lambda line: (tapped.sink or self._info)(line)
            if book is not None:
                book.track(entry, self.deferred_at, lambda: tapped.positions())
        ended = False
        # The follow runs in this run's own task (no second task per waiting job), under a timeout at
        # the deadline plus a grace in which follow_job reports the timeout itself; a cancellation of
        # the run (the triggerer's) reaches it directly and it cleans up as it unwinds.
        wait_for = None if self.deadline is None else self.deadline + DEADLINE_GRACE - time.time()
        limit = asyncio.timeout(None if wait_for is None else max(wait_for, 0))
        try:
            try:
                async with limit:
                    outcome = await follow_job(
                        hook, self.name, self.namespace, options, self._info, cursors, tap=tap, replay=replay,
                        parts=PARTS,
                    )
            except Exception as exc:
                if limit.expired():
                    payload = self._payload("timeout", f"{ref} did not finish before its deadline.")
                else:
                    # Reported, not raised: a crashed trigger would resume the task with a bare
                    # "__fail__" and no message; the operator decides what to do with the job.
                    self.log.exception("Following %s failed", ref)
                    payload = self._payload("error", f"Following {ref} failed: {exc!r}")
            else:
                payload = {**self._payload(outcome.event, outcome.message), **outcome.to_dict()}
            ended = True
        finally:
            if book is not None:
                if ended:
                    book.ended(entry, known)
                else:
                    # Stopped (triggerer shutdown, trigger moved, user action): save where this
                    # follow stopped writing, for whichever triggerer runs the trigger next.
                    await self._save_stopped(book, entry)
        if window is not None:
            window.sink = self.log.info
            window.finish()

        if payload["event"] == "timeout":
            payload["deleted"] = await self._delete(hook, "its deadline passed")
        self._fired = True
        yield TriggerEvent(payload)

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

    async def _book(self, hook: AsyncKubeflowJobHook) -> PositionBook | None:
        from airflow_tfjob.triggers.positions import book_for

        try:
            return await book_for(hook, self.namespace)
        except Exception as error:  # no cluster key (bad connection): the follow reports it
            self.log.debug("no log position book: %s", error)
            return None

    async def _saved_position(self, book: PositionBook | None, entry: str) -> SavedPosition | None:
        """This deferral's saved position (an entry of an earlier deferral of the job is not), or None."""
        if book is None:
            return None
        try:
            saved = await book.read(entry)
        except Exception as error:
            self.log.warning("Could not read the saved log position of %s %s/%s: %s",
                             self.kind.kind, self.namespace, self.name, error)  # fmt: skip
            return None
        if saved is None or self.deferred_at is None or saved.deferred_at != float(self.deferred_at):
            return None
        return saved

    async def _save_stopped(self, book: PositionBook, entry: str) -> None:
        try:
            await asyncio.wait_for(book.stopped(entry), STOP_SAVE_TIMEOUT)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self.log.debug("log position of %s not saved on stop: %s", entry, error)

    async def _mask_secrets(self, hook: AsyncKubeflowJobHook) -> None:
        """The job's secret_env values masked in the trigger's log (a replica may print them)."""
        from airflow_tfjob.build.secrets import MIN_MASKED_LENGTH, secret_values
        from airflow_tfjob.hooks import supervisor

        try:
            # The trigger's kwargs are stored in the metadata database, so they never carry the values:
            # the job object in the cluster does.
            for value in secret_values(await self._read_job(hook) or {}):
                if len(value) >= MIN_MASKED_LENGTH:
                    await supervisor.mask(value)
        except Exception as error:  # the follow reports real API trouble
            self.log.warning(
                "Could not read %s %s/%s to mask its secrets: %s",
                self.kind.kind,
                self.namespace,
                self.name,
                error,
            )

    async def _read_job(self, hook: AsyncKubeflowJobHook) -> dict[str, Any] | None:
        """The job at the run's start, read once: from the shared watch of its namespace and kind,
        which the follow uses next (one LIST for every trigger there, no request per job); by a GET
        only if that watch has not listed within :data:`JOB_READ_TIMEOUT`."""
        from airflow_tfjob.hooks.jobwatch import decode, encode, shared_watch

        if not self._job_read:
            try:
                raw = await shared_watch(hook, self.namespace, kind=self.kind).current_encoded(
                    self.name, timeout=JOB_READ_TIMEOUT
                )
            except TimeoutError:
                found = await hook.find_job(self.kind, self.name, self.namespace)
                raw = None if found is None else encode(found)
            self._job_at_start, self._job_read = raw, True
        return decode(self._job_at_start)

    async def _is_restart(self, hook: AsyncKubeflowJobHook) -> bool:
        """Whether a trigger of this same deferral already ran (then the triggerer restarted).

        The first run stamps the job; a failure to read or stamp it (RBAC without patch, API
        trouble) counts as a first run: the follow itself reports real API problems.
        """
        if self.deferred_at is None:
            return False
        stamp = repr(float(self.deferred_at))
        try:
            job = await self._read_job(hook)
            if job is None:
                return False
            annotations = (job.get("metadata") or {}).get("annotations") or {}
            if annotations.get(ANNOTATION_TRIGGER_STARTED) == stamp:
                return True
            del job, annotations  # a decoded copy, not held while the stamp waits for its turn
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
        if options.startup_timeout is None:
            return
        if restarted and self._had_started():
            options.startup_timeout = None  # held to it once already; pods restarting now are not a start-up
            return
        if restarted and self._was_suspended():
            # A queued (e.g. Kueue) job's start-up window opens when it is admitted, and the follow core
            # restarts it while the job is suspended: the deferral's clock says nothing about it, so
            # keep the whole window rather than fail the moment the job is admitted.
            options.startup_from = None
            return
        if options.startup_from is None:
            options.startup_from = self.deferred_at

    def _was_suspended(self) -> bool:
        """The job has been suspended at some point (a Suspended condition, True or False, stays)."""
        conditions = (self._start_view().get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Suspended" for c in conditions)

    def _had_started(self) -> bool:
        """The job reached its running phase at some point (its API's adapter reads the history)."""
        from airflow_tfjob.jobs.adapter import adapter_for

        return adapter_for(self.kind).ever_started(self._start_view())

    def _start_view(self) -> dict[str, Any]:
        """The job as the run's start read it (a decoded copy; empty if it did not exist)."""
        from airflow_tfjob.hooks.jobwatch import decode

        return decode(self._job_at_start) or {}

    async def _delete(self, hook: AsyncKubeflowJobHook, why: str) -> bool:
        """Delete the TFJob and its pods (:func:`cleanup.kill_async`); False if that could not be done."""
        from airflow_tfjob.follow.cleanup import kill_async
        from airflow_tfjob.integrations.kueue.multikueue import WorkerCopyCheck

        worker = WorkerCopyCheck(self.options.get("multikueue_connections"), warn=self._warn, info=self._info)
        try:
            gone = await kill_async(
                hook,
                self.name,
                self.namespace,
                on_kill_action="delete",
                log=self._info,
                grace_period_seconds=self.kill_grace_period,
                why=why,
                wait_timeout=DELETE_WAIT,
                kind=self.kind,
                elsewhere=worker,
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
        await load_run_modules()
        if not self.delete_on_kill:
            self.log.info(
                "Task killed; keeping %s %s/%s (delete_on_kill=False)",
                self.kind.kind,
                self.namespace,
                self.name,
            )
            return
        from airflow_tfjob.triggers.positions import entry_key

        hook = self._hook()
        book = await self._book(hook)
        if book is not None:
            book.ended(entry_key(self.kind.plural, self.name), known=True)
        task = asyncio.get_running_loop().create_task(
            self._delete(hook, "the task was killed"), name=f"tfjob-kill-{self.name}"
        )
        _KILLS.add(task)
        task.add_done_callback(_KILLS.discard)
        await asyncio.shield(task)

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
        from airflow_tfjob.version_compat import AIRFLOW_V_3_3_PLUS, AIRFLOW_VERSION

        if AIRFLOW_V_3_3_PLUS:
            return
        state = await self._task_state()
        if state is None or state == "deferred":
            return
        self._info(f"The task is {state}: it was killed while deferred (Airflow {AIRFLOW_VERSION}: no on_kill)")
        await self.on_kill()

    async def _task_state(self) -> str | None:
        """The state of this trigger's task instance as the API server has it (None: unknown)."""
        ti = getattr(self, "task_instance", None)
        if ti is None:
            return None
        from airflow_tfjob.hooks import supervisor

        try:
            return await supervisor.task_state(ti)
        except Exception:
            self.log.warning("Could not read the state of %s: keeping %s", ti.task_id, self.name, exc_info=True)
            return None


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
        from airflow_tfjob.jobs.kinds import kind_named

        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "name": self.name,
                "namespace": self.namespace,
                "target_condition": self.target_condition,
                **self._connection(),
                "kind": kind_named(self.kind).kind,
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
        told = None
        try:
            await load_run_modules()
            from airflow_tfjob.hooks.jobwatch import shared_watch
            from airflow_tfjob.integrations.kueue.note import aqueue_note
            from airflow_tfjob.jobs.kinds import kind_named
            from airflow_tfjob.jobs.status import (
                JobState,
                condition_reached,
                failure_message,
                interpret,
                summarise,
            )

            hook = self._hook()
            kind = kind_named(self.kind)
            watch = shared_watch(hook, self.namespace, kind=kind)
            async with watch.subscribe(self.name) as sub:
                async for obj in sub:
                    if obj is None:
                        continue  # not created yet (or deleted and maybe re-created): keep waiting
                    status = interpret(obj)
                    note = await aqueue_note(hook, obj)  # a job with a Kueue queue: where it stands
                    if note is not None and note != told:
                        told = note
                        self.log.info("%s %s/%s: %s", kind.kind, self.namespace, self.name, note)
                    if status.state is JobState.FAILED:
                        yield self._event(
                            "failed", failure_message(self.name, self.namespace, status, kind.kind), status
                        )
                        return
                    if condition_reached(status, self.target_condition):
                        yield self._event("reached", summarise(status), status)
                        return
        except Exception as error:  # reported to the task, which fails with the message
            yield self._event("error", f"{type(error).__name__}: {error}")
