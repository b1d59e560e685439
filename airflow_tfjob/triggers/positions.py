"""Where each deferred follow has written its replica lines up to, kept durable in the cluster, so that
another triggerer taking a trigger over resumes from there instead of from the task's deferral.

Why: a trigger is rebuilt from the kwargs the task deferred with, whose log cursors say where the
*worker* stopped. A triggerer that dies after following a job for a while leaves a new trigger that
knows nothing of the lines it wrote; re-reading them all showed every one twice (local task logs).

How, cheaply: every follow of a namespace on one triggerer registers with that namespace's
:class:`PositionBook`; every :data:`SAVE_INTERVAL` seconds the book asks each follow for its cursors
(the follow writes what it has pending to the task log first, so a cursor never runs ahead of what was
written) and sends the ones that changed in ONE merge patch of the ConfigMap :data:`CONFIG_MAP`, one
data entry per job (``<plural>.<name>``). Nothing is written for a follow whose cursors did not move;
the patch runs on the loop as any request does (async, no file, no thread). A follow that stops
(triggerer SIGTERM, the trigger moved elsewhere) saves its exact position at once, marked ``final``;
an ended follow's entry is removed with the book's next write.

A follow's first lines do not wait for the next interval: a replica that starts prints its backlog at
once (a framework's start-up, tens of lines), and a kill in the seconds before the next save would show
all of it twice. So the first line a follow writes wakes the book (:meth:`PositionBook.on_first_line`):
its next save starts then, capturing those lines and sending them :data:`SETTLE` seconds later. Only a
follow that writes lines does this, once per follow; a job that waits in silence never wakes the book,
and a book has one request in flight at a time, so first lines arriving together share one request.
First lines that arrive while an earlier capture settles (follows of jobs that started together, their
lines a few milliseconds apart) are captured at once too, and sent :data:`SETTLE` seconds after their
own capture, after the earlier one's request: they do not wait for that request before being captured.

What a take-over can promise depends on where task logs live, because Airflow 3.3 uploads a trigger's
log to remote storage only when the trigger finishes in that triggerer (the supervisor's
``upload_to_remote`` on the trigger's end):

- local (or shared) task logs keep what the stopped triggerer wrote, so the new trigger resumes from
  the saved position; after a SIGKILL the lines written after the last save (at most about
  :data:`SAVE_INTERVAL` seconds of them; a follow's first lines are saved :data:`SETTLE` seconds after
  they were written) are read again, and counted and labelled as such; a trigger killed before any save
  of its follow is read again from the deferral, and the lines up to the take-over are counted too;
- remote task logs lose what the stopped triggerer wrote: the new trigger reads again from the
  deferral's position, and nothing above that point is in the log it uploads.

The ConfigMap's entries are small (about 120 bytes per followed replica); its 1 MiB limit holds the
positions of several thousand multi-replica jobs of one namespace. A write that fails (no RBAC right,
API trouble) is logged once per book and the follow goes on: a take-over then re-reads from the
deferral, as without this module.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from airflow_tfjob.constants import LABEL_MANAGED
from airflow_tfjob.hooks.waits import shared_task
from airflow_tfjob.version_compat import conf

log = logging.getLogger(__name__)

#: The ConfigMap, in each namespace where deferred jobs are followed, that holds their log positions.
CONFIG_MAP = "airflow-tfjob-log-positions"
#: Seconds between two saves of a namespace's changed positions (a SIGKILL repeats at most about this).
SAVE_INTERVAL = 2.0
#: How long a captured position waits before it is saved: by then the lines it covers have left the
#: trigger for the triggerer's log file, so a SIGKILL right after the save loses none of them.
SETTLE = 0.5
#: Past the last save, how long (s) a killed triggerer may have gone on writing lines: its next
#: capture, that capture's settling, two requests' worth of slack.
REPEAT_BOUND = SAVE_INTERVAL + 2 * SETTLE + 2.0
#: The start of every take-over marker line (tests and people look for it).
TAKE_OVER = "----- triggerer take-over:"
#: How long one read of the ConfigMap serves the take-overs that start together (a dead triggerer's
#: triggers are all picked up at once: one GET for all of them).
READ_REUSE = 5.0
LABELS = {LABEL_MANAGED: "true"}


def remote_task_logs() -> bool:
    """Whether Airflow writes task logs to remote storage (``[logging] remote_logging``), read from the
    configuration the triggerer has loaded (no I/O)."""
    return conf.getboolean("logging", "remote_logging", fallback=False)


def entry_key(plural: str, name: str) -> str:
    """The ConfigMap data key of a job (a job name is a DNS subdomain: a valid key as it is)."""
    return f"{plural}.{name}"


@dataclass(frozen=True)
class SavedPosition:
    """One job's entry: the cursors of the lines written up to ``saved_at`` by the deferral
    ``deferred_at``; ``final`` when saved by a follow that stopped (nothing was written after it)."""

    deferred_at: float | None
    saved_at: float
    final: bool
    cursors: dict[str, Any]

    def to_text(self) -> str:
        return json.dumps(
            {
                "deferred_at": self.deferred_at,
                "saved_at": self.saved_at,
                "final": self.final,
                "cursors": self.cursors,
            },
            sort_keys=True,
        )

    @classmethod
    def from_text(cls, text: str) -> SavedPosition | None:
        """The entry, or None for one this release cannot read (written by another, or damaged)."""
        try:
            data = json.loads(text)
            cursors = data["cursors"]
            if not isinstance(cursors, dict):
                return None
            deferred_at = data.get("deferred_at")
            return cls(
                deferred_at=None if deferred_at is None else float(deferred_at),
                saved_at=float(data["saved_at"]),
                final=bool(data.get("final")),
                cursors=cursors,
            )
        except (ValueError, KeyError, TypeError):
            return None


Positions = Callable[[], dict[str, Any]]
#: A follow's per-line hook: (replica, shown in the task log, timestamp in epoch ns).
LineHook = Callable[[str, bool, int], None]


class PositionBook:
    """The log positions of one namespace's deferred follows on this triggerer's loop: one ConfigMap,
    written at most once per :data:`SAVE_INTERVAL` with what changed (see the module's docstring)."""

    def __init__(self, key: tuple[Hashable, str, int], hook: Any, namespace: str) -> None:
        self.key = key
        self.hook = hook
        self.namespace = namespace
        self.sources: dict[str, tuple[float | None, Positions]] = {}
        self.saved: dict[str, str] = {}  # entry -> the cursors (JSON) it was last saved with
        self.finals: dict[str, str] = {}  # entry -> a stopped follow's final position, not yet sent
        self.removals: set[str] = set()
        self.writes = 0  # merge patches sent (benchmarks and tests read it)
        self._task: asyncio.Task[None] | None = None
        self._soon: asyncio.Future[None] | None = None
        self._read: tuple[float, asyncio.Future[dict[str, str]]] | None = None
        self._warned = False
        # Set by a follow's first written line: the periodic loop saves at once instead of at its interval.
        self._early = asyncio.Event()
        self.early_saves = 0  # saves a follow's first lines started (tests and benchmarks read it)

    # -- follows ---------------------------------------------------------------------------------

    def track(self, entry: str, deferred_at: float | None, positions: Positions) -> None:
        """Save this follow's positions from now on (each time they changed, at the next save)."""
        self.sources[entry] = (deferred_at, positions)
        self.removals.discard(entry)
        self._ensure_running()

    def on_first_line(self, entry: str, then: LineHook | None = None) -> LineHook:
        """The follow's line hook (``FollowTap.on_line``: replica, shown, timestamp): the first line it
        shows wakes the book for an early save (:meth:`wrote`); every line goes on to ``then``."""
        first = True

        def on_line(replica: str, shown: bool, ts: int) -> None:
            nonlocal first
            if first and shown:
                first = False
                self.wrote(entry)
            if then is not None:
                then(replica, shown, ts)

        return on_line

    def wrote(self, entry: str) -> None:
        """A tracked follow is writing its first lines: start the next save now. Its positions are
        captured once the lines being handled are written (the save runs in a later turn of the loop),
        so the lines of a replica's start-up are saved :data:`SETTLE` seconds after, not at the next
        interval."""
        if entry in self.sources:
            self._early.set()
            self._ensure_running()

    async def stopped(self, entry: str) -> None:
        """The follow stopped before its job ended: save its exact position now (batched with the
        other follows stopping at the same time, as on a triggerer's shutdown)."""
        source = self.sources.pop(entry, None)
        if source is None:
            return
        deferred_at, positions = source
        cursors = positions()
        if not cursors:
            return
        self.finals[entry] = SavedPosition(deferred_at, time.time(), True, cursors).to_text()
        if self._soon is None or self._soon.done():
            self._soon = shared_task(self._save_soon(), name=f"tfjob-log-positions-save-{self.namespace}")
        await asyncio.shield(self._soon)

    def ended(self, entry: str, known: bool = False) -> None:
        """The follow ended (its event was yielded, or the job killed): its entry goes with the next
        save, if this book wrote it or ``known`` (it was read at a take-over)."""
        self.sources.pop(entry, None)
        self.finals.pop(entry, None)
        if known or entry in self.saved:
            self.saved.pop(entry, None)
            self.removals.add(entry)
            self._ensure_running()

    # -- take-overs ------------------------------------------------------------------------------

    async def read(self, entry: str) -> SavedPosition | None:
        """The saved position of a job, from one read of the ConfigMap shared by the take-overs that
        start within :data:`READ_REUSE` seconds of each other."""
        now = time.monotonic()
        if self._read is None or now - self._read[0] > READ_REUSE:
            self._read = (now, shared_task(self._fetch(), name=f"tfjob-log-positions-read-{self.namespace}"))
        data = await asyncio.shield(self._read[1])
        text = data.get(entry)
        return None if text is None else SavedPosition.from_text(text)

    async def _fetch(self) -> dict[str, str]:
        config_map = await self.hook.find_config_map(CONFIG_MAP, self.namespace)
        return dict((config_map or {}).get("data") or {})

    # -- saving ----------------------------------------------------------------------------------

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = shared_task(self._run(), name=f"tfjob-log-positions-{self.namespace}")

    async def _run(self) -> None:
        try:
            queued: _Capture | None = None  # captured while the previous capture settled
            while self.sources or self.removals or self.finals:
                if queued is None:
                    if await self._next_save():
                        self.early_saves += 1
                    current = self._capture()
                else:
                    current, queued = queued, None
                if current is None:
                    continue
                queued = await self._settle(current)
                await self._send(current)
        finally:
            if not (self.sources or self.removals or self.finals) and _BOOKS.get(self.key) is self:
                del _BOOKS[self.key]

    async def _next_save(self) -> bool:
        """Wait for the next periodic save, or less when a follow wrote its first lines (then True).
        Cleared before the save captures: lines that wake the book during a save get the next one."""
        early = self._early.is_set()
        if not early:
            try:
                async with asyncio.timeout(SAVE_INTERVAL):
                    await self._early.wait()
                early = True
            except TimeoutError:
                pass
        self._early.clear()
        return early

    async def _settle(self, current: _Capture) -> _Capture | None:
        """Wait until ``current`` has settled (:data:`SETTLE` seconds after its capture). A follow's first
        lines meanwhile are captured at once (the capture after ``current``: returned, to be sent
        :data:`SETTLE` seconds after it was taken); first lines after that wait for the next save."""
        loop = asyncio.get_running_loop()
        deadline = current.taken + SETTLE
        queued: _Capture | None = None
        while (left := deadline - loop.time()) > 0:
            if queued is not None:
                await asyncio.sleep(left)
                break
            try:
                async with asyncio.timeout(left):
                    await self._early.wait()
            except TimeoutError:
                break
            self._early.clear()
            queued = self._capture(after=current)
            if queued is not None:
                self.early_saves += 1
        return queued

    async def _save_soon(self) -> None:
        await asyncio.sleep(0)  # the follows stopping together add their finals first
        await self.save()

    async def save(self, settle: float = 0.0) -> None:
        """One merge patch with every entry that changed since the last save (none: no request),
        sent ``settle`` seconds after the positions were captured."""
        capture = self._capture()
        if capture is None:
            return
        if settle:
            await asyncio.sleep(settle)
        await self._send(capture)

    def _capture(self, after: _Capture | None = None) -> _Capture | None:
        """The entries that changed since the last save (None: none did), the positions read now (each
        follow writes what it has pending first). ``after``: a capture not sent yet, whose entries
        count as saved."""
        removals, finals = set(self.removals), dict(self.finals)
        saved = self.saved
        if after is not None:
            removals -= after.removals
            finals = {e: t for e, t in finals.items() if after.finals.get(e) != t}
            saved = {**saved, **after.fresh}
        changes: dict[str, str | None] = dict.fromkeys(removals)
        changes.update(finals)
        fresh: dict[str, str] = {}
        now = time.time()
        for entry, (deferred_at, positions) in list(self.sources.items()):
            try:
                cursors = positions()
            except Exception:  # a follow in an odd state must not stop the others' saves
                log.debug("positions of %s not read", entry, exc_info=True)
                continue
            if not cursors:
                continue
            text = json.dumps(cursors, sort_keys=True)
            if saved.get(entry) != text:
                fresh[entry] = text
                changes[entry] = SavedPosition(deferred_at, now, False, cursors).to_text()
        if not changes:
            return None
        return _Capture(asyncio.get_running_loop().time(), changes, fresh, removals, finals)

    async def _send(self, capture: _Capture) -> None:
        """Send a capture: one merge patch (none if nothing is left to send)."""
        changes, fresh, removals, finals = capture.changes, capture.fresh, capture.removals, capture.finals
        for entry in [e for e in fresh if e not in self.sources]:
            # The follow ended or stopped since the capture: an ended one's entry goes now, a stopped
            # one's final position (sent by its own save) is not overwritten.
            del fresh[entry]
            if entry in self.finals:
                del changes[entry]
            else:
                changes[entry] = None
                removals.add(entry)
        if not changes:
            return
        try:
            await self.hook.merge_config_map_data(CONFIG_MAP, self.namespace, changes, LABELS)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if not self._warned:
                self._warned = True
                log.warning(
                    "Could not save the log positions of deferred jobs in ConfigMap %s/%s (a triggerer "
                    "take-over will read their logs again from where each task deferred): %s",
                    self.namespace,
                    CONFIG_MAP,
                    error,
                )
            # Not retried: a take-over without a position re-reads from the deferral, and an entry
            # left behind is harmless (a new deferral does not match it).
            for entry in finals:
                self.finals.pop(entry, None)
            self.removals -= removals
            return
        self.writes += 1
        self.saved.update(fresh)
        for entry in finals:
            self.finals.pop(entry, None)
            self.saved.pop(entry, None)
        self.removals -= removals


@dataclass
class _Capture:
    """What one save sends: the data entries that changed (None: removed), when their positions were
    read (the loop's clock), the fresh positions' cursors (JSON) by entry, and the removals and stopped
    follows' final positions it carries."""

    taken: float
    changes: dict[str, str | None]
    fresh: dict[str, str]
    removals: set[str]
    finals: dict[str, str]


# (the hook's cluster key, namespace, id of the running loop)
_BOOKS: dict[tuple[Hashable, str, int], PositionBook] = {}


async def book_for(hook: Any, namespace: str) -> PositionBook:
    """The position book of ``namespace`` on the hook's cluster, for the running loop."""
    key = (await hook.get_cluster_key(), namespace, id(asyncio.get_running_loop()))
    book = _BOOKS.get(key)
    if book is None:
        book = _BOOKS[key] = PositionBook(key, hook, namespace)
    return book


class RepeatWindow:
    """Counts, per replica, the lines a take-over after a SIGKILL reads again up to ``until`` (epoch ns):
    written after the stopped triggerer's last save (``saved``; else since the deferral, none saved),
    some of them may already be in the log above. At the first later line of a replica (or at the end)
    it says how many, through ``sink``."""

    def __init__(self, until: int, saved_at: float | None, saved: bool = True) -> None:
        self.until = until
        self.saved_at = saved_at
        self.saved = saved
        self.counts: dict[str, int] = {}
        self.closed: set[str] = set()
        self.sink: Callable[[str], None] | None = None

    def on_line(self, replica: str, shown: bool, ts: int) -> None:
        if not shown or replica in self.closed:
            return
        if ts <= self.until:
            self.counts[replica] = self.counts.get(replica, 0) + 1
            return
        self._close(replica)

    def finish(self) -> None:
        """The follow ended: report the replicas whose window had not closed yet."""
        for replica in list(self.counts):
            self._close(replica)

    def _close(self, replica: str) -> None:
        self.closed.add(replica)
        count = self.counts.pop(replica, 0)
        if count and self.sink is not None:
            self.sink(f"[{replica}] {repeat_note(count, self.saved_at, self.until, saved=self.saved)}")


@dataclass
class TakeOver:
    """How a trigger that another triggerer was running resumes: from which cursors, with which marker
    line, counting which re-read lines (None: none may repeat)."""

    cursors: dict[str, Any]
    marker: str
    window: RepeatWindow | None = None


def take_over(
    saved: SavedPosition | None,
    remote: bool,
    deferral_cursors: dict[str, Any],
    kind: str,
    deferred_at: float | None = None,
    now: float | None = None,
) -> TakeOver:
    """The plan of a take-over (see the module's docstring): ``saved`` is the job's entry for this
    deferral (None: none was saved or it could not be read), ``remote`` whether task logs are remote,
    ``deferred_at`` the deferral's time, ``now`` the take-over's (the clock's by default).

    With none saved, the stopped triggerer may have written any line up to its end, which came before
    this take-over: the lines read again up to ``now`` are counted (a follow's first lines are saved
    within about :data:`SETTLE` seconds, so these are a start-up's few, unless saves failed)."""
    stopped = f"{TAKE_OVER} the triggerer that was following this {kind} stopped before the job ended"
    if remote:
        return TakeOver(
            deferral_cursors,
            f"{stopped}; with remote task logs, what it wrote is kept only by a triggerer that finishes "
            "the trigger, so the replicas' logs are read again here from where the task deferred -----",
        )
    if saved is None:
        until = time.time() if now is None else now
        return TakeOver(
            deferral_cursors,
            f"{stopped} and saved no position; the replicas' logs are read again from where the task "
            f"deferred, so lines written up to {_clock(until)} UTC may repeat lines shown above, and are "
            "counted -----",
            RepeatWindow(int(until * 1e9), deferred_at, saved=False),
        )
    cursors = {**deferral_cursors, **saved.cursors}
    if saved.final:
        return TakeOver(
            cursors,
            f"{stopped}; continuing from where it stopped writing ({_clock(saved.saved_at)} UTC): no "
            "line above is repeated -----",
        )
    until = saved.saved_at + REPEAT_BOUND
    return TakeOver(
        cursors,
        f"{stopped} and last saved its position at {_clock(saved.saved_at)} UTC; continuing from there: "
        f"replica lines written up to {_clock(until)} UTC may repeat lines above, and are counted -----",
        RepeatWindow(int(until * 1e9), saved.saved_at),
    )


def _clock(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(epoch)) + f".{int(epoch * 10) % 10}"


def repeat_note(count: int, saved_at: float | None, until_ns: int, saved: bool = True) -> str:
    """The line closing a counted repeat window (tests and people read it): after the stopped
    triggerer's last save at ``saved_at``, or (``saved`` False) since the deferral at ``saved_at``,
    before it saved any position."""
    lines = "line" if count == 1 else "lines"
    until = _clock(until_ns / 1e9)
    if not saved:
        since = "the deferral" if saved_at is None else f"the deferral ({_clock(saved_at)} UTC)"
        return (
            f"--- take-over: the {count} {lines} above, written between {since} and {until} UTC before "
            "the stopped triggerer saved any position, may repeat its lines ---"
        )
    return (
        f"--- take-over: the {count} {lines} above, written between {_clock(saved_at or 0.0)} and {until} "
        "UTC after the stopped triggerer last saved its position, may repeat its last lines ---"
    )


__all__ = [
    "CONFIG_MAP",
    "SAVE_INTERVAL",
    "TAKE_OVER",
    "LineHook",
    "PositionBook",
    "RepeatWindow",
    "SavedPosition",
    "TakeOver",
    "book_for",
    "entry_key",
    "remote_task_logs",
    "repeat_note",
    "take_over",
]
