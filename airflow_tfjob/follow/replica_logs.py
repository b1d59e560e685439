"""The I/O of following replica logs: one follower per replica, and the set of them for a job (what
to read next: next_read.py).

Each replica's stream is read across reconnects (the watches' reconnect layer,
``hooks.watching.reconnect_forever``), container restarts and pod recreation; what it reads next is
decided by ``next_read`` and what it reads is cut, filtered and limited by ``logs_parsing`` (both pure:
this module only carries out their decisions).

Why it is built this way:
- A follow stream can be cut at any time (network, API server restart, read timeout). The kubelet only
  resumes from `sinceTime`, which the API truncates to whole seconds, so a reconnect replays part of the
  last second. Each replica therefore keeps a cursor (container instance, timestamp of the last line,
  number of lines seen with exactly that timestamp) and drops what it has already shown.
- A container can restart in place (OnFailure) or its pod be recreated (ExitCode policy, same name, new
  uid); both are announced with a marker line, and the rest of the old run is read from `previous`.
- Operators up to v1.9.3 delete every pod on deadline or backoff failures before Failed is visible, so
  every replica is streamed (selected ones to the sink, all into a ring buffer) and diagnostics can show
  the last lines of a replica whose pod is gone.
- A runaway job must not flood the task log: a per-replica rate limit and a total cap drop lines with a
  line saying how many were dropped; dropped lines still feed the ring buffer and the metrics.
- Airflow's task log costs about the same per record whatever its length (the task process encodes JSON,
  the supervisor decodes it and encodes it again into the file), so lines that arrive together go out
  as one multi-line record (`LogBatcher`), each line keeping its `[replica] ` prefix.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_tfjob.constants import CONTAINER_NAME
from airflow_tfjob.follow.logs_parsing import (
    RING_LINE_CHARS,
    SLICE_LINES,
    TIMESTAMP_ROOM,
    TRUNCATION_MARK,
    Cursor,
    JobBudget,
    LineSplitter,
    LogBatcher,
    LogLimits,
    LogSelection,
    RateLimiter,
    ResumeFilter,
    TotalCap,
    container_status,
    has_exited,
    is_master_role,
    main_container,
    parse_timestamp,
    pod_replica,
    pod_terminal,
    replica_name,
    split_timestamp,
    terminated_exit_code,
)
from airflow_tfjob.follow.next_read import Move, Step, after_read, plan_read, run_exited
from airflow_tfjob.hooks.retry import is_transient
from airflow_tfjob.hooks.waits import wait_event
from airflow_tfjob.hooks.watching import Backoff, Next, error_code, reconnect_forever

# A log request refused for want of rights is not retried; a 404 is (the pod is being recreated).
REFUSED = frozenset({401, 403})

if TYPE_CHECKING:
    from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook
    from airflow_tfjob.jobs.adapter import JobAdapter

# The name the log lines of this module have always carried (before it was split from logs.py).
log = logging.getLogger("airflow_tfjob.follow.replica_logs")


@dataclass
class ReplicaState:
    """What the job's pod watch last said about one replica's pod (None: no pod right now)."""

    pod: dict[str, Any] | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    container: str = CONTAINER_NAME  # the kind's default container, whose exit codes count

    exit_codes: dict[str, int] = field(default_factory=dict)  # last exit code seen per pod uid

    def set(self, pod: dict[str, Any] | None) -> None:
        self.pod = pod
        if pod is not None:
            cs = container_status(pod, self.container)
            code = terminated_exit_code(cs)
            if code is not None:
                self.exit_codes[str((pod.get("metadata") or {}).get("uid") or "")] = code
        self.changed.set()


class ReplicaFollower:
    """Follows one replica (pod name) across reconnects, container restarts and pod recreation."""

    def __init__(
        self,
        owner: JobLogFollower,
        name: str,
        pod_name: str,
        selected: bool,
        cursor: Cursor | None,
    ) -> None:
        self.owner = owner
        self.name = name
        self.pod_name = pod_name
        self.selected = selected
        self.prefix = f"[{name}] "
        self.cursor = cursor or Cursor()
        self.container = owner.container  # the pod's main container (main_container), once it is known
        self.state = ReplicaState(container=owner.container)
        self.ring: deque[str] = deque(maxlen=owner.limits.ring_lines)
        self.rate = RateLimiter(owner.limits.rate_per_replica)
        self.rate_dropped = 0
        self.budget_dropped = 0  # lines dropped since the last notice (the job's budget)
        self.dropped: dict[str, int] = {}  # lines not shown, by why: "budget", "rate" (the outcome's)
        self.lines_seen = 0
        self.reconnects = 0
        self.finished = False
        self.task: asyncio.Task[None] | None = None
        self.drain_deadline: float | None = None  # wall clock; a still-running container stops here
        self.last_error: BaseException | None = None  # why the last request ended early, if it did
        self.master = False  # the job-role=master pod (metrics and captured values come from it)
        self.complete: tuple[str, int] | None = None  # (pod uid, run) whose log was read to its end
        # The same, known for certain: the read ended after the run had exited (see read_to_end).
        self.read_out: tuple[str, int] | None = None
        # After a take-over, where the master's trackers (metrics, progress, checkpoints, a returned
        # value) start reading, before the shown cursor: the lines in between were shown by the
        # triggerer that stopped, whose trackers are gone. They are read again, not shown again.
        self.replay: Cursor | None = None
        self._replaying: ResumeFilter | None = None  # during a read that replays
        self._catch_up: tuple[str, int] | None = None  # the run a catch-up read was made at once for

    def read_to_end(self) -> bool:
        """Whether the container's current run has exited and its log was read to its end by a read
        that ended after the exit. A follow stream that ended cleanly before the pod watch showed the
        exit is not enough: a proxy may have closed it while the container still wrote."""
        pod = self.state.pod
        return (
            pod is not None
            and self.read_out is not None
            and self.read_out == self._run_of(pod)
            and run_exited(pod, self.container, *self.read_out)
        )

    async def confirm_end(self, wait: float) -> None:
        """A run whose follow stream ended cleanly before the pod watch showed it exited: once the
        watch shows the exit (awaited up to `wait` seconds), read what is left after the cursor
        (nothing, unless a proxy ended the stream early), so that the run is known to be read to its
        end. A failed read is tried twice more."""
        until = time.monotonic() + wait
        while not self._exited_run():
            left = until - time.monotonic()
            # A pod already gone (deleted with its job) has no log left to read.
            if self.state.pod is None or left <= 0 or not await self._wait_change(left):
                return
        assert self.state.pod is not None  # _exited_run
        run = self._run_of(self.state.pod)
        if self.complete != run or self.read_out == run:
            return
        for pause in (0.2, 0.5, None):
            clean, _ = await self._read(exited=True)
            if clean:
                self.read_out = run
                return
            if pause is None or self.last_error is None or not is_transient(self.last_error):
                return
            await asyncio.sleep(pause)

    def _replayed(self, ts: int, body: bytes) -> None:
        """A line shown before a take-over, read again for the master's trackers only."""
        capture = self.owner.capture_prefix
        if capture is not None and body.startswith(capture):
            if self.owner.on_capture is not None:
                self.owner.on_capture(self, _captured(body, capture))
            return
        if self.owner.on_replay is not None:
            text = body[: self.owner.limits.max_line].decode("utf-8", errors="replace").removesuffix("\r")
            self.owner.on_replay(self, ts, text)

    def _run_of(self, pod: Mapping[str, Any]) -> tuple[str, int]:
        """The run (pod uid, restart count) of the main container that ``pod`` shows."""
        cs = container_status(pod, self.container) or {}
        return str((pod.get("metadata") or {}).get("uid") or ""), int(cs.get("restartCount") or 0)

    def _exited_run(self) -> bool:
        """Whether the pod watch shows the pod finished and its main container's run terminated."""
        pod = self.state.pod
        return pod is not None and pod_terminal(pod) and run_exited(pod, self.container, *self._run_of(pod))

    # -- emitting -----------------------------------------------------------------------------

    def _emit_raw(self, text: str) -> None:
        self.owner.sink(self.prefix + text)

    def marker(self, text: str) -> None:
        """Marker lines bypass the rate limit: they explain what happened to the stream."""
        self.ring.append(f"--- {text} ---")
        if self.selected:
            self._emit_raw(f"--- {text} ---")

    def _line(self, ts: int, text: str, dropping: bool = False) -> None:
        self.lines_seen += 1
        self.ring.append(text if len(text) <= RING_LINE_CHARS else text[:RING_LINE_CHARS])
        if self.owner.on_line is not None:
            self.owner.on_line(self, ts, text)
        if not self.selected:
            return
        if dropping:
            self.budget_dropped += 1
            self.dropped["budget"] = self.dropped.get("budget", 0) + 1
            return
        self._announce_budget_drops()
        if not self.rate.allow():
            self.rate_dropped += 1
            self.dropped["rate"] = self.dropped.get("rate", 0) + 1
            return
        if self.rate_dropped:
            n, self.rate_dropped = self.rate_dropped, 0
            self._emit_raw(f"--- {n} lines dropped (rate limit {self.rate.rate:g} lines/s) ---")
        if self.owner.total.take():
            self._emit_raw(text)
        elif not self.owner.total.announced:
            self.owner.total.announced = True
            self.owner.sink(
                f"--- log cap of {self.owner.total.cap} lines reached: further replica lines are not shown ---"
            )

    def _announce_budget_drops(self) -> None:
        if self.budget_dropped:
            n, self.budget_dropped = self.budget_dropped, 0
            budget = self.owner.budget
            self._emit_raw(
                f"--- {n} lines dropped from {self.name} (budget: the job's replicas wrote faster than "
                f"{budget.lines:g} lines/s or {budget.bytes / 1048576:g} MiB/s for over {budget.max_lag:g} s) ---"
            )

    def flush_dropped(self) -> None:
        self._announce_budget_drops()
        if self.rate_dropped and self.selected:
            n, self.rate_dropped = self.rate_dropped, 0
            self._emit_raw(f"--- {n} lines dropped (rate limit {self.rate.rate:g} lines/s) ---")

    def _process(self, filt: ResumeFilter, raw: bytes, cut: int, dropping: bool = False) -> None:
        ts, body = split_timestamp(raw)
        if ts is None:
            # Without timestamps the line cannot be placed: show it (the server did not stamp it).
            ts = filt.cursor.ts if filt.cursor.ts >= 0 else 0
            if not filt.accept(ts):
                return
        elif not filt.accept(ts):
            if self._replaying is not None and self._replaying.accept(ts):
                self._replayed(ts, body)
            return
        if self._replaying is not None:  # past what was shown: the trackers read on with the shown lines
            self._replaying = self.replay = None
        capture = self.owner.capture_prefix
        if capture is not None and self.master and body.startswith(capture):
            # A value handed back through the log (e.g. @task.tfjob's return value): kept whole, not shown.
            payload = _captured(body, capture)
            self.lines_seen += 1
            if self.owner.on_capture is not None:
                self.owner.on_capture(self, payload)
            self._emit_raw(f"return value received ({len(payload)} bytes)")
            return
        limit = self.owner.limits.max_line
        if len(body) > limit:
            cut += len(body) - limit
            body = body[:limit]
        text = body.decode("utf-8", errors="replace")
        if text.endswith("\r"):
            text = text[:-1]
        if cut:
            text += TRUNCATION_MARK.format(n=cut)
        self._line(ts, text, dropping)

    async def _handle(self, filt: ResumeFilter, lines: list[tuple[bytes, int]]) -> None:
        """Lines split from one piece of the stream, a slice at a time under the job's budget.

        After each slice the loop runs other work (other jobs' lines and events); a slice over budget
        waits (the stream is not read meanwhile) while the replica's lines are at most the budget's
        lag old, and is dropped, counted, once they are older.
        """
        budget = self.owner.budget
        if not lines:  # a piece of one long line: nothing to hand on, a turn all the same
            await asyncio.sleep(0)
            return
        for start in range(0, len(lines), SLICE_LINES):
            part = lines[start : start + SLICE_LINES]
            size = sum(len(raw) for raw, _cut in part)
            wait = budget.wait(len(part), size)
            dropping = waited = False
            if wait > 0:
                ts, _ = split_timestamp(part[-1][0][:TIMESTAMP_ROOM])
                lag = max(0.0, time.time() - ts / 1e9) if ts is not None else 0.0
                if budget.may_wait(lag, wait):
                    budget.waited += wait
                    await asyncio.sleep(wait)
                    waited = True
                else:
                    dropping = True
            if not dropping:
                budget.take(len(part), size)
            for raw, cut in part:
                self._process(filt, raw, cut, dropping)
            if not waited:
                # A turn for other work after every slice, shown or dropped, and after every piece of
                # the stream (a piece read from what the client buffered comes without any wait: 4 MiB
                # of 10 KB lines, or 100,000 short ones being dropped, would otherwise be handled in
                # one go).
                await asyncio.sleep(0)

    # -- reading ------------------------------------------------------------------------------

    async def _read(self, *, previous: bool = False, exited: bool = False) -> tuple[bool, int]:
        """One request: (ended cleanly, lines accepted).

        For a run that has ended (``previous``, or ``exited``: the pod watch shows its container
        terminated) the request does not follow: a bounded read of what is left, answered whole, which
        no proxy can leave without its end."""
        hook = self.owner.hook
        filt = ResumeFilter(self.cursor)
        replay = None if previous else self.replay
        self._replaying = ResumeFilter(replay) if replay is not None else None
        since = (replay or self.cursor).since_time
        room = self.owner.limits.max_line
        if self.master and self.owner.capture_prefix is not None:
            room = max(room, self.owner.limits.capture_max)
        splitter = LineSplitter(room + TIMESTAMP_ROOM)
        before = self.lines_seen
        clean = False
        try:
            async for chunk in hook.stream_pod_log(
                self.pod_name,
                self.owner.namespace,
                container=self.container,
                since_time=since,
                previous=previous,
                follow=not (previous or exited),
                read_timeout=self.owner.limits.read_timeout,
            ):
                await self._handle(filt, splitter.feed(chunk))
                if self._past_drain_deadline():
                    return True, self.lines_seen - before
            tail = splitter.flush()
            if tail is not None:
                self._process(filt, *tail)
            clean = True
            if self._replaying is not None:
                self.replay = None  # read to the end: nothing was left to replay
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if error_code(exc) in REFUSED:
                raise  # no rights to read logs: reconnect_forever reports it and gives up
            # A cut stream, 400/404 while the pod changes, timeouts: retried.
            log.debug("log stream of %s ended: %r", self.name, exc)
            self.last_error = exc
            splitter.reset()
        self._replaying = None
        return clean, self.lines_seen - before

    def _past_drain_deadline(self) -> bool:
        """Past the drain deadline while the container still runs (a PS never exits): stop reading.

        A container that has exited is read to its end whatever the time (drain() bounds that by its
        cap): its log is finite, and stopping early loses lines, e.g. of a replica whose pod the watch
        reported late because the API was failing.
        """
        if self.drain_deadline is None or time.time() < self.drain_deadline:
            return False
        return not has_exited(self.state.pod)

    async def _wait_change(self, timeout: float) -> bool:
        """Wait for a new pod state from the watch (or a drain); False if none came in time."""
        self.state.changed.clear()
        # Not asyncio.wait_for: on Python 3.11 it can swallow a cancellation that arrives with the event.
        return await wait_event(self.state.changed, timeout)

    async def run(self) -> None:
        """Read the replica's runs one after the other until drained (or cancelled).

        The reconnect policy is the watches' (``watching.reconnect_forever``), waking early when the
        pod changes; each step decides what comes next from the pod state the watch last reported.
        """
        try:
            await reconnect_forever(
                self._step,
                verb="log stream",
                resource=f"replica {self.name} ({self.owner.namespace}/{self.pod_name})",
                backoff=Backoff(start=0.2, cap=5.0, jitter=False),
                pause=self._wait_change,
            )
        except Exception as exc:
            if error_code(exc) not in REFUSED:
                raise
            # Refused for good (reconnect_forever logged it at WARNING): this replica is not read further.
        self.flush_dropped()
        self.finished = True

    async def _step(self) -> Next:
        """One step: what to read next (next_read.plan_read), the read, then what follows it
        (next_read.after_read); the decisions are pure, this carries them out."""
        if self._past_drain_deadline():
            return Next.STOP
        plan = plan_read(
            self.state.pod,
            self.container,
            self.cursor,
            self.complete,
            replaying=self.replay is not None,
            draining=self.owner.draining,
        )
        if plan.step is Step.STOP:
            return Next.STOP
        if plan.step is Step.WAIT_POD:
            await self._wait_change(5.0)
            return Next.AGAIN
        if plan.step is Step.WAIT_AFTER_END:
            changed = await self._wait_change(30.0)
            if not changed and plan.running:
                self.complete = None  # still running after all: the stream was closed by a proxy
            return Next.AGAIN
        uid, instance = plan.run
        if plan.drop_replay:
            self.replay = None
        if plan.move is Move.RECREATED:
            code = self.state.exit_codes.get(self.cursor.uid)
            self.marker(
                "pod recreated" + (f" (previous pod exited with code {code})" if code is not None else "")
            )
            self.cursor = Cursor(uid=uid, instance=instance)
        elif plan.move is Move.ADOPT:
            self.cursor.uid = uid
            self.cursor.instance = instance
        elif plan.move is Move.RESTARTED:
            await self._catch_up_previous(instance, plan.last_exit)
        self.last_error = None
        clean, got = await self._read(exited=plan.exited)
        self.reconnects += 1
        if self._past_drain_deadline():
            return Next.STOP
        then = after_read(
            plan.run,
            clean=clean,
            got=got,
            exited=plan.exited,
            latest=self.state.pod,
            container=self.container,
            catch_up=self._catch_up,
            draining=self.owner.draining,
            transient_error=self.last_error is not None and is_transient(self.last_error),
        )
        if then.complete:
            self.complete = plan.run
        if then.read_out:
            self.read_out = plan.run
        self._catch_up = then.catch_up
        return then.next

    async def _catch_up_previous(self, instance: int, code: int | None) -> None:
        """The container restarted since we last read: finish its previous run, then announce it (with
        the exit code of the run before ``instance``, if known)."""
        if instance == self.cursor.instance + 1:
            await self._read(previous=True)
        lost = instance - self.cursor.instance - 1
        note = f", {lost} intermediate run(s) not read" if lost > 0 else ""
        exit_part = f", exit code {code}" if code is not None else ""
        self.marker(f"container restarted (restart {instance}{exit_part}{note})")
        self.cursor = Cursor(uid=self.cursor.uid, instance=instance)


def _captured(body: bytes, prefix: bytes) -> str:
    """The value a line that starts with the capture prefix hands back."""
    return body[len(prefix) :].removeprefix(b" ").decode("utf-8", errors="replace")


#: How long the end of a follow waits for the pod watch to show the exit of a run whose stream ended
#: cleanly (seconds): the kubelet ends the stream at the exit and reports it a moment later.
CONFIRM_WAIT = 5.0


class JobLogFollower:
    """All replicas of one job: fed with pod updates, streams each replica, drains at the end."""

    def __init__(
        self,
        hook: AsyncKubeflowJobHook,
        namespace: str,
        selection: LogSelection,
        sink: Callable[[str], None],
        *,
        limits: LogLimits | None = None,
        cursors: Mapping[str, Any] | None = None,
        container: str = CONTAINER_NAME,
        on_line: Callable[[ReplicaFollower, int, str], None] | None = None,
        capture_prefix: str | None = None,
        on_capture: Callable[[ReplicaFollower, str], None] | None = None,
        adapter: JobAdapter | None = None,
        replay: Mapping[str, Any] | None = None,
        on_replay: Callable[[ReplicaFollower, int, str], None] | None = None,
    ) -> None:
        self.hook = hook
        self.namespace = namespace
        self.selection = selection
        # Shared with the caller when it passes its own batcher, so its lines keep their order with ours.
        self.sink = sink if isinstance(sink, LogBatcher) else LogBatcher(sink)
        self.limits = limits or LogLimits()
        self.container = container
        self.on_line = on_line
        self.capture_prefix = capture_prefix.encode() if capture_prefix else None
        self.on_capture = on_capture
        # The job's API: rank 0 where no pod carries job-role=master (a PaddleJob without Master), and the
        # type `log_replicas` names a replica by when not its own (a TFJob run as a TrainJob: "worker").
        self.adapter = adapter
        # The job object, once the caller knows it (its pods wait for it: rank 0 may depend on its spec).
        self.job: Mapping[str, Any] | None = None
        self.total = TotalCap(self.limits.total_cap)
        self.budget = JobBudget(self.limits.budget_lines, self.limits.budget_bytes, self.limits.budget_lag)
        self.replicas: dict[str, ReplicaFollower] = {}
        self.draining = False
        self._cursors = {k: Cursor.from_dict(v) for k, v in (cursors or {}).items() if isinstance(v, Mapping)}
        # A take-over's cursors at deferral (None: no take-over): the master's trackers read from there.
        self._replay = (
            None
            if replay is None
            else {k: Cursor.from_dict(v) for k, v in replay.items() if isinstance(v, Mapping)}
        )
        self.on_replay = on_replay

    def update_pod(self, pod: dict[str, Any]) -> None:
        ident = pod_replica(pod)
        if ident is None:
            return
        rtype, index = ident
        name = replica_name(rtype, index)
        follower = self.replicas.get(name)
        master = is_master_role(pod) or self._rank0() == (rtype, index)
        if follower is None:
            shown = self.adapter.selected_as(self.job or {}, rtype) if self.adapter is not None else rtype
            selected = self.selection.matches(shown, index, master)
            follower = ReplicaFollower(
                self, name, (pod.get("metadata") or {}).get("name", name), selected, self._cursors.get(name)
            )
            follower.master = master
            follower.container = follower.state.container = main_container(pod, self.container)
            if self._replay is not None and master and follower.cursor.ts >= 0:
                follower.replay = self._replay_start(name, follower.cursor)
            self.replicas[name] = follower
            follower.state.set(pod)
            follower.task = asyncio.get_running_loop().create_task(follower.run(), name=f"tfjob-log-{name}")
        else:
            follower.master = master
            # A recreated pod may have a name of its own (a batch Job's pods, as a TrainJob's JobSet
            # makes them, carry a random suffix; the v1 kinds reuse the name): read the current one.
            follower.pod_name = (pod.get("metadata") or {}).get("name", follower.pod_name)
            follower.state.set(pod)

    def _replay_start(self, name: str, shown: Cursor) -> Cursor:
        """Where the master's trackers read from after a take-over: its cursor at deferral when that
        is in the run shown up to now, else the start of that run."""
        start = (self._replay or {}).get(name)
        if start is not None and (start.uid, start.instance) == (shown.uid, shown.instance):
            return Cursor(uid=start.uid, instance=start.instance, ts=start.ts, n=start.n)
        return Cursor(uid=shown.uid, instance=shown.instance)

    def _rank0(self) -> tuple[str, int] | None:
        if self.adapter is None or self.job is None:
            return None
        return self.adapter.rank0(self.job)

    def pod_deleted(self, pod: dict[str, Any]) -> None:
        ident = pod_replica(pod)
        if ident is None:
            return
        follower = self.replicas.get(replica_name(*ident))
        if follower is not None and (follower.state.pod or {}).get("metadata", {}).get("uid") == (
            pod.get("metadata") or {}
        ).get("uid"):
            follower.state.set(None)

    def cursors(self) -> dict[str, Any]:
        out = {k: v.to_dict() for k, v in self._cursors.items()}
        out.update({name: f.cursor.to_dict() for name, f in self.replicas.items() if f.cursor.uid})
        return out

    def all_read(self, expected: int) -> bool:
        """Whether every one of the ``expected`` replicas (0: a count the adapter cannot tell, so never)
        has exited and had its log read to the end, so that nothing is left for anyone to read."""
        return 0 < expected <= len(self.replicas) and all(f.read_to_end() for f in self.replicas.values())

    def dropped(self) -> dict[str, dict[str, int]]:
        """Lines not shown in the task log, by replica and why ("budget", "rate"; "cap": the job's
        total cap, under the key "*"): the task's XCom ``log_lines_dropped``."""
        out = {name: dict(f.dropped) for name, f in self.replicas.items() if f.dropped}
        if self.total.dropped_total:
            out["*"] = {"cap": self.total.dropped_total}
        return out

    def ring(self, name: str) -> list[str]:
        f = self.replicas.get(name)
        return list(f.ring) if f else []

    async def drain(
        self, completion_time: str | None, grace: float = 5.0, cap: float = 60.0, *, ended: bool = False
    ) -> None:
        """Read every replica to its end; containers still running stop at completion + `grace`.

        ``ended``: the job has finished (succeeded or failed), so its replicas' exits are coming: a
        stream that ended before its exit showed is confirmed (:meth:`_confirm_ends`). A follow that
        stops otherwise (a deadline, a preemption) does not wait for exits that may never come."""
        self.draining = True
        end = time.time() + grace
        if completion_time:
            with contextlib.suppress(ValueError):
                end = max(parse_timestamp(completion_time) / 1e9 + grace, time.time() + 0.5)
        for f in self.replicas.values():
            f.drain_deadline = end
            f.state.changed.set()
        active = {f.task: f for f in self.replicas.values() if f.task is not None and not f.task.done()}
        if active:
            _done, pending = await asyncio.wait(active, timeout=max(0.0, end - time.time()))
            # At the deadline a container that is still running (a PS never exits) has nothing more to
            # wait for: its stream would only end with the server's read timeout. Containers that have
            # exited are still read to their end, within `cap`.
            running = {t for t in pending if not has_exited(active[t].state.pod)}
            if pending - running:
                _done, late = await asyncio.wait(pending - running, timeout=cap)
                running |= late
            for t in running:
                t.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)
                for t in running:
                    active[t].flush_dropped()
        if ended:
            await self._confirm_ends(cap)
        self._announce_cap()
        self.sink.flush()

    async def _confirm_ends(self, cap: float) -> None:
        """Each replica whose stream ended before its exit was seen: one read of what is left (at
        once, side by side), so that the follow ends knowing every run was read to its end."""
        confirming = [
            asyncio.get_running_loop().create_task(f.confirm_end(CONFIRM_WAIT), name=f"tfjob-log-end-{name}")
            for name, f in self.replicas.items()
            if f.complete is not None and f.read_out != f.complete
        ]
        if not confirming:
            return
        _done, late = await asyncio.wait(confirming, timeout=cap)
        for t in late:
            t.cancel()
        await asyncio.gather(*confirming, return_exceptions=True)

    def _announce_cap(self) -> None:
        if self.total.dropped:
            self.sink(
                f"--- log cap of {self.total.cap} lines reached: {self.total.dropped} replica lines were not shown ---"
            )
            self.total.dropped = 0

    async def close(self) -> None:
        tasks = [f.task for f in self.replicas.values() if f.task is not None and not f.task.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self.sink.flush()
