"""The pure parts of following replica logs: timestamps, cursors, line splitting, selection, limits.

Nothing here does I/O; ``logs_follow.py`` reads the streams and feeds these. See ``logs.py`` for why
the streams are followed the way they are.
"""

from __future__ import annotations

import asyncio
import calendar
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_tfjob.build.secrets import masked
from airflow_tfjob.constants import (
    CONTAINER_NAME,
    LABEL_JOB_ROLE,
    REPLICA_TYPES,
)
from airflow_tfjob.jobs import adapter as job_apis

MAX_LINE_BYTES = 64 * 1024
RING_LINES = 100
RECORD_MAX_LINES = 500  # one task-log record holds at most this many lines...
RECORD_MAX_BYTES = 64 * 1024  # ...and about this much text, so no single log call stalls the loop
TIMESTAMP_ROOM = 40  # "2025-01-01T00:00:00.123456789Z " and then some
TRUNCATION_MARK = " [... line truncated: {n} more bytes]"
RING_LINE_CHARS = 2048  # a line kept for diagnostics keeps this much: the ring is bounded in bytes too
SLICE_LINES = 256  # lines handled before a replica's reader lets the loop run other work
# Twice what the task log shows of one replica by default (log_rate_per_replica): a flood costs the
# process at most this much parsing, whatever its replicas print.
BUDGET_LINES = 2000  # lines per second one job's replicas may hand the triggerer together...
BUDGET_BYTES = 1024 * 1024  # ...and bytes per second
BUDGET_LAG = 10.0  # how far (s) behind its replica a reader may fall, held back, before it drops lines
# ------------------------------------------------------------------------------------------------
# Timestamps, line splitting, de-duplication, selection, rate limiting.

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

    @property
    def spec(self) -> str:
        """The selection as ``parse`` reads it back (how it travels in the trigger's kwargs)."""
        items = ["all"] if self.everything else []
        items += ["master"] if self.master else []
        items += sorted(self.types)
        items += [f"{rtype}:{index}" for rtype, index in sorted(self.replicas)]
        return ",".join(items)

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
    """(type, index) of a replica pod as its API's controller labels it (the training-operator's
    ``worker``, 1; a TrainJob's JobSet ``node-0``, 1): the job APIs' adapters say which."""
    return job_apis.pod_replica(pod)


def main_container(pod: Mapping[str, Any], default: str = CONTAINER_NAME) -> str:
    """The container whose log and exit code are the replica's: the kind's (``default``) where the pod
    has it, else the pod's first (a TensorFlow chief or PS run as a TrainJob runs ``tensorflow``, not
    ``node``: runtime patches may set env on no container named ``node``)."""
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or [] if isinstance(c, Mapping)]
    return default if default in names or not names else str(names[0])


def container_status(pod: Mapping[str, Any], container: str = CONTAINER_NAME) -> dict[str, Any] | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == container:
            return dict(cs)
    return None


def is_master_role(pod: Mapping[str, Any]) -> bool:
    return ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_JOB_ROLE) == "master"


def pod_terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def has_exited(pod: Mapping[str, Any] | None) -> bool:
    """Whether a replica's pod has finished (or is gone), so that its log stream ends by itself."""
    return pod is None or pod_terminal(pod) or bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def terminated_exit_code(cs: Mapping[str, Any] | None, last: bool = False) -> int | None:
    if not cs:
        return None
    state = (cs.get("lastState") if last else cs.get("state")) or {}
    term = state.get("terminated")
    return int(term["exitCode"]) if term and term.get("exitCode") is not None else None


# ------------------------------------------------------------------------------------------------
# Task-log records and limits.


class LogBatcher:
    """Lines for the task log, written as multi-line records: one per event-loop iteration at most.

    Lines written while the loop runs its ready callbacks (every replica chunk that arrived together,
    event lines, markers) are joined into one record when the loop gets to the flush it scheduled, so
    batching adds no waiting; a record is cut at `max_lines` lines or `max_bytes` characters so that a
    burst cannot turn into one huge log call. Outside a running loop each line is written at once.
    """

    __slots__ = ("_lines", "_scheduled", "_size", "max_bytes", "max_lines", "records", "sink")

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


class JobBudget:
    """What one job's log streams may cost the process reading them, in lines and bytes per second.

    One bucket per followed job, shared by its replicas. A reader asks :meth:`wait` before handling a
    slice of lines: while the job is within budget that is 0; past it, the seconds until the slice
    fits. The reader then waits (backpressure: its stream is not read meanwhile, so the bytes stay in
    the socket and the API server, not in this process) as long as its replica's lines stay at most
    ``max_lag`` seconds old; a replica that writes faster than that for longer has its lines dropped,
    counted and announced (:meth:`take` is not called for them) until the reader has caught up.
    A flood therefore costs a bounded rate of work and no memory beyond the streams' buffers, and
    other jobs' readers and events keep their turns on the loop.
    """

    def __init__(
        self,
        lines: float = BUDGET_LINES,
        nbytes: float = BUDGET_BYTES,
        max_lag: float = BUDGET_LAG,
        clock: Callable[[], float] = time.monotonic,
        burst_seconds: float = 1.0,
    ) -> None:
        self.lines = float(lines)
        self.bytes = float(nbytes)
        self.max_lag = max_lag
        self.clock = clock
        self.burst_seconds = burst_seconds
        self._line_tokens = self.lines * burst_seconds
        self._byte_tokens = self.bytes * burst_seconds
        self._stamp = clock()
        self.waited = 0.0  # seconds readers were held back (benchmarks report it)

    @property
    def unlimited(self) -> bool:
        return self.lines <= 0 and self.bytes <= 0

    def _refill(self) -> None:
        now = self.clock()
        elapsed, self._stamp = max(0.0, now - self._stamp), now
        if self.lines > 0:
            self._line_tokens = min(self.lines * self.burst_seconds, self._line_tokens + elapsed * self.lines)
        if self.bytes > 0:
            self._byte_tokens = min(self.bytes * self.burst_seconds, self._byte_tokens + elapsed * self.bytes)

    def wait(self, lines: int, nbytes: int) -> float:
        """Seconds until `lines` lines of `nbytes` bytes fit the budget (0: now)."""
        if self.unlimited:
            return 0.0
        self._refill()
        need = 0.0
        if self.lines > 0 and lines > self._line_tokens:
            need = max(need, (lines - self._line_tokens) / self.lines)
        if self.bytes > 0 and nbytes > self._byte_tokens:
            need = max(need, (nbytes - self._byte_tokens) / self.bytes)
        return need

    def take(self, lines: int, nbytes: int) -> None:
        """Charge handled lines (they may overdraw by one slice: the next reader waits for it)."""
        if self.unlimited:
            return
        self._refill()
        self._line_tokens -= lines
        self._byte_tokens -= nbytes

    def may_wait(self, lag: float, wait: float) -> bool:
        """Whether a reader whose replica's newest line is `lag` s old may wait `wait` s more."""
        return lag + wait <= self.max_lag


@dataclass
class LogLimits:
    rate_per_replica: int = 1000  # lines/s shown per replica (0: unlimited)
    total_cap: int = 1_000_000  # lines shown per job in total (0: unlimited)
    max_line: int = MAX_LINE_BYTES
    ring_lines: int = RING_LINES
    read_timeout: float = 300.0  # a silent stream is reopened after this (a dead peer looks the same)
    capture_max: int = 8 * 1024 * 1024  # longest captured line (master replica, capture prefix) kept whole
    budget_lines: int = BUDGET_LINES  # per job, lines/s read (JobBudget; 0: unlimited)
    budget_bytes: int = BUDGET_BYTES  # per job, bytes/s read (0: unlimited)
    budget_lag: float = BUDGET_LAG  # seconds a reader may be held back before its replica's lines drop


class TotalCap:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.shown = 0
        self.dropped = 0  # since the last announcement
        self.dropped_total = 0
        self.announced = False

    def take(self) -> bool:
        if self.cap <= 0 or self.shown < self.cap:
            self.shown += 1
            return True
        self.dropped += 1
        self.dropped_total += 1
        return False
