"""What the triggers of ``triggers.deferral`` do when they run: the bodies of their entry points.

Contract: the run module of ``KubeflowJobTrigger`` (``follow``, ``on_kill``, ``cleanup``) and of
``KubeflowJobConditionTrigger`` (``reach``). It imports what a run needs at its top, so it is imported
only off the triggerer's event loop, by :func:`airflow_tfjob.triggers.loader.load_run_modules`, which
each entry point awaits before it imports this module; the trigger classes keep to declaring (their
kwargs, ``serialize``) and hold the state a run shares with the tests and benchmarks that watch it
(``_job_at_start``, ``_job_read``). See ``triggers.deferral``'s docstring for the behaviour.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any, Protocol

from airflow.triggers.base import TriggerEvent

from airflow_tfjob import version_compat
from airflow_tfjob.build.secrets import MIN_MASKED_LENGTH, secret_values
from airflow_tfjob.follow.cleanup import kill_async
from airflow_tfjob.follow.core import FollowTap, follow_job, reads_logs
from airflow_tfjob.follow.outcome import FollowOptions
from airflow_tfjob.hooks import supervisor
from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook, shared_hook
from airflow_tfjob.hooks.connection import hook_kwargs
from airflow_tfjob.hooks.jobwatch import decode, encode, shared_watch
from airflow_tfjob.integrations import parts as registry
from airflow_tfjob.integrations.kueue.multikueue import CONNECTIONS_EXTRA, WorkerCopyCheck
from airflow_tfjob.integrations.kueue.note import aqueue_note
from airflow_tfjob.jobs.adapter import adapter_for
from airflow_tfjob.jobs.kinds import JobKind, kind_named
from airflow_tfjob.jobs.status import (
    JobState,
    JobStatus,
    condition_reached,
    failure_message,
    interpret,
    summarise,
)
from airflow_tfjob.triggers.positions import (
    LineHook,
    PositionBook,
    SavedPosition,
    book_for,
    entry_key,
    remote_task_logs,
    take_over,
)


class _Trigger(Protocol):
    """What a run reads of its trigger (declared in ``triggers.deferral``, which imports this module
    only at its entry points: this module does not import it back); its connection fields are read by
    name (``hooks.connection``)."""

    name: str
    namespace: str

    @property
    def log(self) -> Any: ...


class _Follows(_Trigger, Protocol):
    """What ``follow``, ``on_kill`` and ``cleanup`` read and write of a ``KubeflowJobTrigger``."""

    options: dict[str, Any]
    cursors: dict[str, Any]
    delete_on_kill: bool
    deferred_at: float | None
    kill_grace_period: int | None
    _job_at_start: bytes | None
    _job_read: bool
    _fired: bool

    @property
    def deadline(self) -> float | None: ...

    @property
    def kind(self) -> JobKind: ...

    def _info(self, line: str) -> None: ...

    def _warn(self, line: str) -> None: ...


class _Reaches(_Trigger, Protocol):
    """What ``reach`` reads of a ``KubeflowJobConditionTrigger``."""

    target_condition: str
    kind: str

    def _event(self, event: str, message: str, status: JobStatus | None = None) -> TriggerEvent: ...

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


def hook_of(trigger: _Trigger) -> AsyncKubeflowJobHook:
    # One hook for the triggers of one connection (the loop's, renewed each minute): a triggerer
    # waiting on thousands of jobs neither holds nor loads a connection per job.
    return shared_hook(**hook_kwargs(trigger))


def payload(trigger: _Follows, event: str, message: str, **extra: Any) -> dict[str, Any]:
    """The event's payload when the follow reports nothing of its own (see ``triggers.deferral``)."""
    made: dict[str, Any] = {
        "event": event,
        "name": trigger.name,
        "namespace": trigger.namespace,
        "status": None,
        "message": message,
        "diagnostics": [],
        "cursors": trigger.cursors,
        "deleted": False,
        "options": trigger.options,
    }
    made.update(extra)
    return made


async def follow(trigger: _Follows) -> TriggerEvent:
    """``KubeflowJobTrigger.run``'s one event: the job followed to its end (or its deadline)."""
    hook = hook_of(trigger)
    kind = trigger.kind
    ref = f"{kind.kind} {trigger.namespace}/{trigger.name}"
    # from_dict ignores unknown keys: a trigger serialized by another provider version still runs.
    options = FollowOptions.from_dict(trigger.options)
    parts = registry.PARTS  # the registry's, read when the job is followed
    entry = entry_key(kind.plural, trigger.name)
    cursors, window, known, replay = trigger.cursors, None, False, None
    async with start_turn():
        await _mask_secrets(trigger, hook)
        restarted = await is_restart(trigger, hook)
        book = await _book(trigger, hook) if reads_logs(options, parts) else None
        if restarted:
            saved = await _saved_position(trigger, book, entry)
            known = saved is not None
            deferred_at = None if trigger.deferred_at is None else float(trigger.deferred_at)
            plan = take_over(saved, remote_task_logs(), trigger.cursors, kind.kind, deferred_at)
            cursors, window = plan.cursors, plan.window
            if cursors != trigger.cursors:
                # Resumed after what the stopped triggerer showed: its trackers' state went with
                # it, so the master's lines since the deferral are read again for them.
                replay = trigger.cursors
            trigger.log.info("%s", plan.marker)
        _resume_startup_clock(trigger, options, restarted)
        trigger._job_at_start = None  # read what it had to say: the watch holds the job from here on

    # A tap only where something reads the follow's lines or positions (a take-over's window, the
    # position book of a follow that reads logs): not for every job that waits in silence.
    tap: FollowTap | None = None
    if window is not None or book is not None:
        on_line: LineHook | None = window.on_line if window is not None else None
        if book is not None:  # its first shown line saves the position early (triggers/positions.py)
            on_line = book.on_first_line(entry, on_line)
        tapped = tap = FollowTap(on_line=on_line)
        if window is not None:
            window.sink = lambda line: (tapped.sink or trigger._info)(line)
        if book is not None:
            book.track(entry, trigger.deferred_at, lambda: tapped.positions())
    ended = False
    # The follow runs in this run's own task (no second task per waiting job), under a timeout at
    # the deadline plus a grace in which follow_job reports the timeout itself; a cancellation of
    # the run (the triggerer's) reaches it directly and it cleans up as it unwinds.
    deadline = trigger.deadline
    wait_for = None if deadline is None else deadline + DEADLINE_GRACE - time.time()
    limit = asyncio.timeout(None if wait_for is None else max(wait_for, 0))
    try:
        try:
            async with limit:
                outcome = await follow_job(
                    hook, trigger.name, trigger.namespace, options, trigger._info, cursors, tap=tap,
                    replay=replay, parts=parts,
                )  # fmt: skip
        except Exception as exc:
            if limit.expired():
                made = payload(trigger, "timeout", f"{ref} did not finish before its deadline.")
            else:
                # Reported, not raised: a crashed trigger would resume the task with a bare
                # "__fail__" and no message; the operator decides what to do with the job.
                trigger.log.exception("Following %s failed", ref)
                made = payload(trigger, "error", f"Following {ref} failed: {exc!r}")
        else:
            made = {**payload(trigger, outcome.event, outcome.message), **outcome.to_dict()}
        ended = True
    finally:
        if book is not None:
            if ended:
                book.ended(entry, known)
            else:
                # Stopped (triggerer shutdown, trigger moved, user action): save where this
                # follow stopped writing, for whichever triggerer runs the trigger next.
                await _save_stopped(trigger, book, entry)
    if window is not None:
        window.sink = trigger.log.info
        window.finish()

    if made["event"] == "timeout":
        made["deleted"] = await _delete(trigger, hook, "its deadline passed")
    trigger._fired = True
    return TriggerEvent(made)


async def _book(trigger: _Follows, hook: AsyncKubeflowJobHook) -> PositionBook | None:
    try:
        return await book_for(hook, trigger.namespace)
    except Exception as error:  # no cluster key (bad connection): the follow reports it
        trigger.log.debug("no log position book: %s", error)
        return None


async def _saved_position(trigger: _Follows, book: PositionBook | None, entry: str) -> SavedPosition | None:
    """This deferral's saved position (an entry of an earlier deferral of the job is not), or None."""
    if book is None:
        return None
    try:
        saved = await book.read(entry)
    except Exception as error:
        trigger.log.warning("Could not read the saved log position of %s %s/%s: %s",
                            trigger.kind.kind, trigger.namespace, trigger.name, error)  # fmt: skip
        return None
    if saved is None or trigger.deferred_at is None or saved.deferred_at != float(trigger.deferred_at):
        return None
    return saved


async def _save_stopped(trigger: _Follows, book: PositionBook, entry: str) -> None:
    try:
        await asyncio.wait_for(book.stopped(entry), STOP_SAVE_TIMEOUT)
    except asyncio.CancelledError:
        raise
    except Exception as error:
        trigger.log.debug("log position of %s not saved on stop: %s", entry, error)


async def _mask_secrets(trigger: _Follows, hook: AsyncKubeflowJobHook) -> None:
    """The job's secret_env values masked in the trigger's log (a replica may print them)."""
    try:
        # The trigger's kwargs are stored in the metadata database, so they never carry the values:
        # the job object in the cluster does.
        for value in secret_values(await _read_job(trigger, hook) or {}):
            if len(value) >= MIN_MASKED_LENGTH:
                await supervisor.mask(value)
    except Exception as error:  # the follow reports real API trouble
        trigger.log.warning(
            "Could not read %s %s/%s to mask its secrets: %s",
            trigger.kind.kind,
            trigger.namespace,
            trigger.name,
            error,
        )


async def _read_job(trigger: _Follows, hook: AsyncKubeflowJobHook) -> dict[str, Any] | None:
    """The job at the run's start, read once: from the shared watch of its namespace and kind,
    which the follow uses next (one LIST for every trigger there, no request per job); by a GET
    only if that watch has not listed within :data:`JOB_READ_TIMEOUT`."""
    if not trigger._job_read:
        kind = trigger.kind
        try:
            raw = await shared_watch(hook, trigger.namespace, kind=kind).current_encoded(
                trigger.name, timeout=JOB_READ_TIMEOUT
            )
        except TimeoutError:
            found = await hook.find_job(kind, trigger.name, trigger.namespace)
            raw = None if found is None else encode(found)
        trigger._job_at_start, trigger._job_read = raw, True
    return decode(trigger._job_at_start)


async def is_restart(trigger: _Follows, hook: AsyncKubeflowJobHook) -> bool:
    """Whether a trigger of this same deferral already ran (then the triggerer restarted).

    The first run stamps the job; a failure to read or stamp it (RBAC without patch, API
    trouble) counts as a first run: the follow itself reports real API problems.
    """
    if trigger.deferred_at is None:
        return False
    stamp = repr(float(trigger.deferred_at))
    try:
        job = await _read_job(trigger, hook)
        if job is None:
            return False
        annotations = (job.get("metadata") or {}).get("annotations") or {}
        if annotations.get(ANNOTATION_TRIGGER_STARTED) == stamp:
            return True
        del job, annotations  # a decoded copy, not held while the stamp waits for its turn
        await hook.patch_job(
            trigger.kind,
            trigger.name,
            trigger.namespace,
            {"metadata": {"annotations": {ANNOTATION_TRIGGER_STARTED: stamp}}},
        )
    except Exception as error:
        trigger.log.warning(
            "Could not record the trigger's start on %s %s/%s: %s",
            trigger.kind.kind,
            trigger.namespace,
            trigger.name,
            error,
        )
    return False


def _resume_startup_clock(trigger: _Follows, options: FollowOptions, restarted: bool) -> None:
    """Make the start-up timeout count from the deferral, not from this (re)start of the trigger."""
    if options.startup_timeout is None:
        return
    if restarted and adapter_for(trigger.kind).ever_started(_start_view(trigger)):
        # Held to it once already (the job reached its running phase): pods restarting now are not a
        # start-up.
        options.startup_timeout = None
        return
    if restarted and _was_suspended(trigger):
        # A queued (e.g. Kueue) job's start-up window opens when it is admitted, and the follow core
        # restarts it while the job is suspended: the deferral's clock says nothing about it, so
        # keep the whole window rather than fail the moment the job is admitted.
        options.startup_from = None
        return
    if options.startup_from is None:
        options.startup_from = trigger.deferred_at


def _was_suspended(trigger: _Follows) -> bool:
    """The job has been suspended at some point (a Suspended condition, True or False, stays)."""
    conditions = (_start_view(trigger).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Suspended" for c in conditions)


def _start_view(trigger: _Follows) -> dict[str, Any]:
    """The job as the run's start read it (a decoded copy; empty if it did not exist)."""
    return decode(trigger._job_at_start) or {}


async def _delete(trigger: _Follows, hook: AsyncKubeflowJobHook, why: str) -> bool:
    """Delete the TFJob and its pods (:func:`cleanup.kill_async`); False if that could not be done."""
    kind = trigger.kind
    worker = WorkerCopyCheck(trigger.options.get(CONNECTIONS_EXTRA), warn=trigger._warn, info=trigger._info)
    try:
        gone = await kill_async(
            hook,
            trigger.name,
            trigger.namespace,
            on_kill_action="delete",
            log=trigger._info,
            grace_period_seconds=trigger.kill_grace_period,
            why=why,
            wait_timeout=DELETE_WAIT,
            kind=kind,
            elsewhere=worker,
        )
    except Exception:
        trigger.log.exception("Could not delete %s %s/%s", kind.kind, trigger.namespace, trigger.name)
        return False
    if not gone:
        trigger.log.warning(
            "%s %s/%s: deletion requested, not finished yet", kind.kind, trigger.namespace, trigger.name
        )
    return True


async def on_kill(trigger: _Follows) -> None:
    """``KubeflowJobTrigger.on_kill``'s body: delete the job unless told to keep it."""
    if not trigger.delete_on_kill:
        trigger.log.info(
            "Task killed; keeping %s %s/%s (delete_on_kill=False)",
            trigger.kind.kind,
            trigger.namespace,
            trigger.name,
        )
        return
    hook = hook_of(trigger)
    book = await _book(trigger, hook)
    if book is not None:
        book.ended(entry_key(trigger.kind.plural, trigger.name), known=True)
    task = asyncio.get_running_loop().create_task(
        _delete(trigger, hook, "the task was killed"), name=f"tfjob-kill-{trigger.name}"
    )
    _KILLS.add(task)
    task.add_done_callback(_KILLS.discard)
    await asyncio.shield(task)


async def cleanup(trigger: _Follows) -> None:
    """``KubeflowJobTrigger.cleanup``'s body before Airflow 3.3: a task no longer deferred was killed."""
    if version_compat.AIRFLOW_V_3_3_PLUS:  # read when called: the release's flag, as tests set it
        return
    state = await _task_state(trigger)
    if state is None or state == "deferred":
        return
    trigger._info(f"The task is {state}: it was killed while deferred (Airflow {version_compat.AIRFLOW_VERSION}: no on_kill)")
    await on_kill(trigger)


async def _task_state(trigger: _Follows) -> str | None:
    """The state of this trigger's task instance as the API server has it (None: unknown)."""
    ti = getattr(trigger, "task_instance", None)
    if ti is None:
        return None
    try:
        return await supervisor.task_state(ti)
    except Exception:
        trigger.log.warning("Could not read the state of %s: keeping %s", ti.task_id, trigger.name, exc_info=True)
        return None


async def reach(trigger: _Reaches) -> TriggerEvent | None:
    """``KubeflowJobConditionTrigger.run``'s one event: the condition reached, the job failed, or an
    error (None: the watch ended without one)."""
    told = None
    try:
        hook = hook_of(trigger)
        kind = kind_named(trigger.kind)
        watch = shared_watch(hook, trigger.namespace, kind=kind)
        async with watch.subscribe(trigger.name) as sub:
            async for obj in sub:
                if obj is None:
                    continue  # not created yet (or deleted and maybe re-created): keep waiting
                status = interpret(obj)
                note = await aqueue_note(hook, obj)  # a job with a Kueue queue: where it stands
                if note is not None and note != told:
                    told = note
                    trigger.log.info("%s %s/%s: %s", kind.kind, trigger.namespace, trigger.name, note)
                if status.state is JobState.FAILED:
                    failed = failure_message(trigger.name, trigger.namespace, status, kind.kind)
                    return trigger._event("failed", failed, status)
                if condition_reached(status, trigger.target_condition):
                    return trigger._event("reached", summarise(status), status)
    except Exception as error:  # reported to the task, which fails with the message
        return trigger._event("error", f"{type(error).__name__}: {error}")
    return None
