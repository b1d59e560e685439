"""Resumable, de-duplicated log streams of a TFJob's replicas, written line by line to a sink.

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
import calendar
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_tfjob.aio import wait_event
from airflow_tfjob.constants import (
    CONTAINER_NAME,
    LABEL_JOB_ROLE,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    REPLICA_TYPES,
)
from airflow_tfjob.secrets import masked

if TYPE_CHECKING:
    from airflow_tfjob.hooks.tfjob import AsyncTFJobHook

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 64 * 1024
RING_LINES = 100
RECORD_MAX_LINES = 500  # one task-log record holds at most this many lines...
RECORD_MAX_BYTES = 64 * 1024  # ...and about this much text, so no single log call stalls the loop
_TIMESTAMP_ROOM = 40  # "2025-01-01T00:00:00.123456789Z " and then some
TRUNCATION_MARK = " [... line truncated: {n} more bytes]"

# ------------------------------------------------------------------------------------------------
# Pure parts: timestamps, line splitting, de-duplication, selection, rate limiting.

_SECONDS_CACHE: dict[str, int] = {}


def parse_timestamp(ts: str | bytes) -> int:
    """RFC 3339 (as the kubelet writes it, up to nanoseconds, `Z` or an offset) to epoch nanoseconds.

    Strings are not comparable: Go trims trailing zeros of the fraction ("…05.1Z" sorts after
    "…05.12Z"), so the cursor compares integers.
    """
    if isinstance(ts, bytes):
        ts = ts.decode("ascii")
    if len(ts) == 30 and ts[19] == "." and ts[29] == "Z" and ts[10] == "T":
        # The kubelet's own form (nine fraction digits, UTC): the common case, kept cheap.
        secs = _SECONDS_CACHE.get(ts[:19])
        if secs is not None and ts[20:29].isdigit():
            return secs * 1_000_000_000 + int(ts[20:29])
    if len(ts) < 20 or ts[10] not in "Tt ":
        raise ValueError(f"not an RFC 3339 timestamp: {ts!r}")
    head = ts[:19]
    secs = _SECONDS_CACHE.get(head)
    if secs is None:
        secs = calendar.timegm(
            time.strptime(head, "%Y-%m-%dT%H:%M:%S" if ts[10] in "Tt" else "%Y-%m-%d %H:%M:%S")
        )
        if len(_SECONDS_CACHE) > 4096:
            _SECONDS_CACHE.clear()
        _SECONDS_CACHE[head] = secs
    rest = ts[19:]
    frac = 0
    if rest.startswith("."):
        digits = 0
        i = 1
        while i < len(rest) and rest[i].isdigit():
            i += 1
        digits = i - 1
        if digits == 0:
            raise ValueError(f"not an RFC 3339 timestamp: {ts!r}")
        frac_text = rest[1:i][:9]
        frac = int(frac_text) * 10 ** (9 - len(frac_text))
        rest = rest[i:]
    offset = 0
    if rest in ("Z", "z"):
        pass
    elif len(rest) == 6 and rest[0] in "+-" and rest[3] == ":":
        offset = (int(rest[1:3]) * 3600 + int(rest[4:6]) * 60) * (1 if rest[0] == "+" else -1)
    else:
        raise ValueError(f"not an RFC 3339 timestamp: {ts!r}")
    return (secs - offset) * 1_000_000_000 + frac


def format_timestamp(ns: int, fraction: bool = True) -> str:
    """Epoch nanoseconds to RFC 3339 UTC (nanosecond fraction, or whole seconds for `sinceTime`)."""
    secs, frac = divmod(ns, 1_000_000_000)
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    return f"{base}.{frac:09d}Z" if fraction else f"{base}Z"


def split_timestamp(line: bytes) -> tuple[int | None, bytes]:
    """`<timestamp> <text>` as served with timestamps=true -> (epoch ns or None, text)."""
    sp = line.find(b" ")
    head = line if sp < 0 else line[:sp]
    try:
        ns = parse_timestamp(head)
    except (ValueError, UnicodeDecodeError):
        return None, line
    return ns, (b"" if sp < 0 else line[sp + 1 :])


class LineSplitter:
    """Bytes chunks -> complete lines, with a bounded buffer.

    A line longer than `max_line` keeps its first `max_line` bytes; the rest (up to the newline) is
    counted and reported, so one huge line costs no more memory than a normal one.
    """

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self.max_line = max_line
        self._buf = bytearray()
        self._overflow = 0  # bytes dropped from the current (unfinished) line

    def feed(self, chunk: bytes) -> list[tuple[bytes, int]]:
        """Complete lines in `chunk` (with what came before): (line, number of bytes cut off)."""
        out: list[tuple[bytes, int]] = []
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                break
            self._append(chunk, start, nl)
            out.append((bytes(self._buf), self._overflow))
            self._buf.clear()
            self._overflow = 0
            start = nl + 1
        self._append(chunk, start, len(chunk))
        return out

    def _append(self, chunk: bytes, start: int, end: int) -> None:
        room = self.max_line - len(self._buf)
        n = end - start
        if n <= room:
            self._buf += chunk[start:end]
        else:
            if room > 0:
                self._buf += chunk[start : start + room]
            self._overflow += n - max(room, 0)

    def flush(self) -> tuple[bytes, int] | None:
        """The unfinished last line, if any (used when a stream ended cleanly)."""
        if not self._buf and not self._overflow:
            return None
        line = (bytes(self._buf), self._overflow)
        self.reset()
        return line

    def reset(self) -> None:
        """Forget the unfinished line: after a cut, the reconnect serves it again in full."""
        self._buf.clear()
        self._overflow = 0


@dataclass
class Cursor:
    """Where a replica's log was read up to: enough to resume without loss or repetition.

    `ts` is the timestamp (epoch ns) of the last line shown; `n` how many lines carried exactly that
    timestamp. `instance` is the container's restartCount, `uid` the pod's uid (a recreated pod has a
    new one).
    """

    uid: str = ""
    instance: int = 0
    ts: int = -1
    n: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "instance": self.instance,
            "ts": format_timestamp(self.ts) if self.ts >= 0 else None,
            "n": self.n,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cursor:
        ts = data.get("ts")
        return cls(
            uid=str(data.get("uid") or ""),
            instance=int(data.get("instance") or 0),
            ts=parse_timestamp(ts) if ts else -1,
            n=int(data.get("n") or 0),
        )

    @property
    def since_time(self) -> str | None:
        """The `sinceTime` to resume from (whole seconds, as the API truncates it anyway)."""
        return format_timestamp(self.ts, fraction=False) if self.ts >= 0 else None


class ResumeFilter:
    """Drops the lines a resumed stream replays; advances the cursor over the new ones.

    A resumed stream starts at the whole second of `cursor.ts` or earlier: lines before `cursor.ts` were
    shown, and so were the first `cursor.n` lines at exactly `cursor.ts` (a stream serves a container's
    lines in order, so those come first).
    """

    def __init__(self, cursor: Cursor) -> None:
        self.cursor = cursor
        self._skip = cursor.n

    def accept(self, ts: int) -> bool:
        c = self.cursor
        if ts > c.ts:
            c.ts = ts
            c.n = 1
            self._skip = 0
            return True
        if ts < c.ts:
            return False
        if self._skip > 0:
            self._skip -= 1
            return False
        c.n += 1
        return True


def replica_name(replica_type: str, index: int | str) -> str:
    return f"{replica_type.lower()}-{index}"


@dataclass(frozen=True)
class LogSelection:
    """Which replicas go to the task log: `all`, `master` (the job-role=master pod), a type (`worker`,
    `ps`, `chief`, ...), a single replica (`worker:0`), or a comma-separated list of these.

    Replicas outside the selection are still read into the ring buffer, so a failing one can be shown.
    """

    everything: bool = False
    master: bool = False
    types: frozenset[str] = frozenset()
    replicas: frozenset[tuple[str, int]] = frozenset()

    @classmethod
    def parse(cls, spec: str | Iterable[str] | None) -> LogSelection:
        if spec is None:
            spec = "master"
        items = spec.split(",") if isinstance(spec, str) else list(spec)
        known = {t.lower() for t in REPLICA_TYPES}
        everything = master = False
        types: set[str] = set()
        replicas: set[tuple[str, int]] = set()
        for raw in items:
            item = raw.strip().lower()
            if not item:
                continue
            if item in ("all", "*"):
                everything = True
            elif item == "master" and ":" not in item:
                master = True
            elif ":" in item:
                rtype, _, idx = item.partition(":")
                rtype = rtype.strip()
                if rtype not in known or not idx.strip().isdigit():
                    raise ValueError(
                        f"log_replicas: {raw.strip()!r} is not '<type>:<index>' with type one of "
                        f"{sorted(known)} and a non-negative index"
                    )
                replicas.add((rtype, int(idx)))
            elif item in known:
                types.add(item)
            else:
                raise ValueError(
                    f"log_replicas: unknown entry {raw.strip()!r}; use 'all', 'master', a replica type "
                    f"({', '.join(sorted(known))}), '<type>:<index>', or a comma-separated list"
                )
        if not (everything or master or types or replicas):
            raise ValueError("log_replicas: empty selection; use 'all', 'master', a type or '<type>:<index>'")
        return cls(everything, master, frozenset(types), frozenset(replicas))

    def matches(self, replica_type: str, index: int, is_master_role: bool) -> bool:
        rtype = replica_type.lower()
        return (
            self.everything
            or (self.master and is_master_role)
            or rtype in self.types
            or (rtype, index) in self.replicas
        )


class RateLimiter:
    """Token bucket in lines per second.

    The burst (`burst_seconds` worth of lines) absorbs the backlog a reconnect delivers at once, so a
    cut stream does not cost lines that a steady stream at the same rate would have shown.
    """

    def __init__(
        self, rate: float, clock: Callable[[], float] = time.monotonic, burst_seconds: float = 5.0
    ) -> None:
        self.rate = rate
        self.clock = clock
        self.capacity = rate * burst_seconds
        self.tokens = self.capacity
        self.stamp = clock()

    def allow(self) -> bool:
        if self.rate <= 0:
            return True
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


# ------------------------------------------------------------------------------------------------
# Pod state helpers.


def pod_replica(pod: Mapping[str, Any]) -> tuple[str, int] | None:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    rtype = labels.get(LABEL_REPLICA_TYPE)
    idx = labels.get(LABEL_REPLICA_INDEX)
    if not rtype or idx is None or not str(idx).isdigit():
        return None
    return str(rtype), int(idx)


def container_status(pod: Mapping[str, Any], container: str = CONTAINER_NAME) -> dict[str, Any] | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == container:
            return dict(cs)
    return None


def is_master_role(pod: Mapping[str, Any]) -> bool:
    return ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_JOB_ROLE) == "master"


def pod_terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _has_exited(pod: Mapping[str, Any] | None) -> bool:
    """Whether a replica's pod has finished (or is gone), so that its log stream ends by itself."""
    return pod is None or pod_terminal(pod) or bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def terminated_exit_code(cs: Mapping[str, Any] | None, last: bool = False) -> int | None:
    if not cs:
        return None
    state = (cs.get("lastState") if last else cs.get("state")) or {}
    term = state.get("terminated")
    return int(term["exitCode"]) if term and term.get("exitCode") is not None else None


# ------------------------------------------------------------------------------------------------
# I/O: one follower per replica, and the set of them for a job.


class LogBatcher:
    """Lines for the task log, written as multi-line records: one per event-loop iteration at most.

    Lines written while the loop runs its ready callbacks (every replica chunk that arrived together,
    event lines, markers) are joined into one record when the loop gets to the flush it scheduled, so
    batching adds no waiting; a record is cut at `max_lines` lines or `max_bytes` characters so that a
    burst cannot turn into one huge log call. Outside a running loop each line is written at once.
    """

    def __init__(
        self,
        sink: Callable[[str], None],
        max_lines: int = RECORD_MAX_LINES,
        max_bytes: int = RECORD_MAX_BYTES,
    ) -> None:
        self.sink = sink
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.records = 0  # records written (benchmarks report lines per record)
        self._lines: list[str] = []
        self._size = 0
        self._scheduled = False

    def __call__(self, line: str) -> None:
        self._lines.append(line)
        self._size += len(line) + 1
        if len(self._lines) >= self.max_lines or self._size >= self.max_bytes:
            self._write()
        elif not self._scheduled:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self._write()
                return
            self._scheduled = True
            loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._scheduled = False
        self._write()

    def flush(self) -> None:
        """Write what is pending now (before returning an outcome, or when cancelled)."""
        self._write()

    def _write(self) -> None:
        if not self._lines:
            return
        lines, self._lines, self._size = self._lines, [], 0
        self.records += 1
        self.sink(masked(lines[0] if len(lines) == 1 else "\n".join(lines)))


@dataclass
class LogLimits:
    rate_per_replica: int = 1000  # lines/s shown per replica (0: unlimited)
    total_cap: int = 1_000_000  # lines shown per job in total (0: unlimited)
    max_line: int = MAX_LINE_BYTES
    ring_lines: int = RING_LINES
    read_timeout: float = 300.0  # a silent stream is reopened after this (a dead peer looks the same)
    capture_max: int = 8 * 1024 * 1024  # longest captured line (master replica, capture prefix) kept whole


class _TotalCap:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.shown = 0
        self.dropped = 0
        self.announced = False

    def take(self) -> bool:
        if self.cap <= 0 or self.shown < self.cap:
            self.shown += 1
            return True
        self.dropped += 1
        return False


@dataclass
class ReplicaState:
    """What the job's pod watch last said about one replica's pod (None: no pod right now)."""

    pod: dict[str, Any] | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    exit_codes: dict[str, int] = field(default_factory=dict)  # last exit code seen per pod uid

    def set(self, pod: dict[str, Any] | None) -> None:
        self.pod = pod
        if pod is not None:
            cs = container_status(pod)
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
        self.state = ReplicaState()
        self.ring: deque[str] = deque(maxlen=owner.limits.ring_lines)
        self.rate = RateLimiter(owner.limits.rate_per_replica)
        self.rate_dropped = 0
        self.lines_seen = 0
        self.reconnects = 0
        self.finished = False
        self.task: asyncio.Task[None] | None = None
        self.drain_deadline: float | None = None  # wall clock; a still-running container stops here
        self.master = False  # the job-role=master pod (metrics and captured values come from it)
        self.complete: tuple[str, int] | None = None  # (pod uid, run) whose log was read to its end

    # -- emitting -----------------------------------------------------------------------------

    def _emit_raw(self, text: str) -> None:
        self.owner.sink(self.prefix + text)

    def marker(self, text: str) -> None:
        """Marker lines bypass the rate limit: they explain what happened to the stream."""
        self.ring.append(f"--- {text} ---")
        if self.selected:
            self._emit_raw(f"--- {text} ---")

    def _line(self, ts: int, text: str) -> None:
        self.lines_seen += 1
        self.ring.append(text)
        if self.owner.on_line is not None:
            self.owner.on_line(self, ts, text)
        if not self.selected:
            return
        if not self.rate.allow():
            self.rate_dropped += 1
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

    def flush_dropped(self) -> None:
        if self.rate_dropped and self.selected:
            n, self.rate_dropped = self.rate_dropped, 0
            self._emit_raw(f"--- {n} lines dropped (rate limit {self.rate.rate:g} lines/s) ---")

    def _process(self, filt: ResumeFilter, raw: bytes, cut: int) -> None:
        ts, body = split_timestamp(raw)
        if ts is None:
            # Without timestamps the line cannot be placed: show it (the server did not stamp it).
            ts = filt.cursor.ts if filt.cursor.ts >= 0 else 0
            if not filt.accept(ts):
                return
        elif not filt.accept(ts):
            return
        capture = self.owner.capture_prefix
        if capture is not None and self.master and body.startswith(capture):
            # A value handed back through the log (e.g. @task.tfjob's return value): kept whole, not shown.
            payload = body[len(capture) :].removeprefix(b" ").decode("utf-8", errors="replace")
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
        self._line(ts, text)

    # -- reading ------------------------------------------------------------------------------

    async def _read(self, *, previous: bool = False) -> tuple[bool, int]:
        """One request: (ended cleanly, lines accepted)."""
        hook = self.owner.hook
        filt = ResumeFilter(self.cursor)
        room = self.owner.limits.max_line
        if self.master and self.owner.capture_prefix is not None:
            room = max(room, self.owner.limits.capture_max)
        splitter = LineSplitter(room + _TIMESTAMP_ROOM)
        before = self.lines_seen
        clean = False
        try:
            async for chunk in hook.stream_pod_log(
                self.pod_name,
                self.owner.namespace,
                container=self.owner.container,
                since_time=self.cursor.since_time,
                previous=previous,
                follow=not previous,
                read_timeout=self.owner.limits.read_timeout,
            ):
                for raw, cut in splitter.feed(chunk):
                    self._process(filt, raw, cut)
                if self._past_drain_deadline():
                    return True, self.lines_seen - before
            tail = splitter.flush()
            if tail is not None:
                self._process(filt, *tail)
            clean = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a cut stream, 400/404 while the pod changes, timeouts: retried
            log.debug("log stream of %s ended: %r", self.name, exc)
            splitter.reset()
        return clean, self.lines_seen - before

    def _past_drain_deadline(self) -> bool:
        return self.drain_deadline is not None and time.time() >= self.drain_deadline

    async def _wait_change(self, timeout: float) -> bool:
        """Wait for a new pod state from the watch (or a drain); False if none came in time."""
        self.state.changed.clear()
        return await wait_event(self.state.changed, timeout)

    async def run(self) -> None:
        backoff = 0.2
        while not self._past_drain_deadline():
            pod = self.state.pod
            if pod is None:
                if self.owner.draining:
                    break
                await self._wait_change(5.0)
                continue
            uid = (pod.get("metadata") or {}).get("uid") or ""
            cs = container_status(pod, self.owner.container)
            started = bool(
                cs
                and (
                    (cs.get("state") or {}).get("running")
                    or (cs.get("state") or {}).get("terminated")
                    or (cs.get("lastState") or {}).get("terminated")
                )
            )
            if not started:
                if self.owner.draining:
                    break
                await self._wait_change(5.0)
                continue
            assert cs is not None
            instance = int(cs.get("restartCount") or 0)
            if (uid, instance) == self.complete:
                # This container run's log was read to its end. Reconnecting by name could reach a
                # recreated pod (or the next run) under this run's cursor: wait until the pod watch
                # shows what happened next.
                if self.owner.draining:
                    break
                changed = await self._wait_change(30.0)
                if not changed and (cs.get("state") or {}).get("running"):
                    self.complete = None  # still running after all: the stream was closed by a proxy
                continue
            if self.cursor.uid and uid != self.cursor.uid:
                code = self.state.exit_codes.get(self.cursor.uid)
                self.marker(
                    "pod recreated" + (f" (previous pod exited with code {code})" if code is not None else "")
                )
                self.cursor = Cursor(uid=uid, instance=instance)
            elif not self.cursor.uid:
                self.cursor.uid = uid
                self.cursor.instance = instance
            elif instance > self.cursor.instance:
                await self._catch_up_previous(cs, instance)
            clean, got = await self._read()
            self.reconnects += 1
            latest = self.state.pod
            if self._past_drain_deadline():
                break
            if clean:
                # The kubelet ends a follow stream when the container exits: this run is read to its end.
                self.complete = (uid, instance)
                backoff = 0.2
                continue
            if got:
                backoff = 0.2  # the stream was flowing when it was cut: reconnect promptly
            if self.owner.draining and (latest is None or pod_terminal(latest)):
                # Last try of a draining replica: the previous request got nothing new.
                break
            await self._wait_change(backoff)
            backoff = min(backoff * 2, 5.0)
        self.flush_dropped()
        self.finished = True

    async def _catch_up_previous(self, cs: Mapping[str, Any], instance: int) -> None:
        """The container restarted since we last read: finish its previous run, then announce it."""
        code = terminated_exit_code(cs, last=True)
        if instance == self.cursor.instance + 1:
            await self._read(previous=True)
        lost = instance - self.cursor.instance - 1
        note = f", {lost} intermediate run(s) not read" if lost > 0 else ""
        exit_part = f", exit code {code}" if code is not None else ""
        self.marker(f"container restarted (restart {instance}{exit_part}{note})")
        self.cursor = Cursor(uid=self.cursor.uid, instance=instance)


class JobLogFollower:
    """All replicas of one TFJob: fed with pod updates, streams each replica, drains at the end."""

    def __init__(
        self,
        hook: AsyncTFJobHook,
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
        self.total = _TotalCap(self.limits.total_cap)
        self.replicas: dict[str, ReplicaFollower] = {}
        self.draining = False
        self._cursors = {k: Cursor.from_dict(v) for k, v in (cursors or {}).items() if isinstance(v, Mapping)}

    def update_pod(self, pod: dict[str, Any]) -> None:
        ident = pod_replica(pod)
        if ident is None:
            return
        rtype, index = ident
        name = replica_name(rtype, index)
        follower = self.replicas.get(name)
        if follower is None:
            master = is_master_role(pod)
            selected = self.selection.matches(rtype, index, master)
            follower = ReplicaFollower(
                self, name, (pod.get("metadata") or {}).get("name", name), selected, self._cursors.get(name)
            )
            follower.master = master
            self.replicas[name] = follower
            follower.state.set(pod)
            follower.task = asyncio.get_running_loop().create_task(follower.run(), name=f"tfjob-log-{name}")
        else:
            follower.state.set(pod)

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

    def ring(self, name: str) -> list[str]:
        f = self.replicas.get(name)
        return list(f.ring) if f else []

    async def drain(self, completion_time: str | None, grace: float = 5.0, cap: float = 60.0) -> None:
        """Read every replica to its end; containers still running stop at completion + `grace`."""
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
            running = {t for t in pending if not _has_exited(active[t].state.pod)}
            if pending - running:
                _done, late = await asyncio.wait(pending - running, timeout=cap)
                running |= late
            for t in running:
                t.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)
                for t in running:
                    active[t].flush_dropped()
        self._announce_cap()
        self.sink.flush()

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
