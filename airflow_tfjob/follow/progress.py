"""Live progress of a training job from the metrics it prints (pure: the clock is passed in); the
progress and reported-progress parts.

A training program that prints ``epoch=3 loss=...`` (Katib's StdOut format, as the examples do)
against a declared total (``progress={"metric": "epoch", "total": 10}``, or the total read from a
hyperparameter: ``"total": "epochs"``) gets a progress line in the task log: how far, how fast, and
how long is left. Lines are throttled: one on each tenth of the way and otherwise at most one every
``every`` seconds, so a program printing every step does not flood the log.

The follow core (both modes) feeds it the master replica's lines; its state is JSON
(:meth:`ProgressTracker.state`), so a deferred task's drain continues the trigger's tracker and the
task's result keeps the whole timeline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_tfjob.follow.metrics import parse_line
from airflow_tfjob.follow.outcome import FollowOptions, FollowOutcome
from airflow_tfjob.follow.parts import Follow, FollowPart
from airflow_tfjob.follow.progress_spec import DEFAULT_EVERY, ProgressSpec
from airflow_tfjob.jobs.adapter import JobAdapter, ReportedProgress
from airflow_tfjob.jobs.status import JobStatus

MAX_TIMELINE = 1000  # points kept; a program printing every step must not fill XCom


def duration(seconds: float) -> str:
    """``"45 s"``, ``"3 min 20 s"``, ``"2 h 5 min"``: what a person reads at a glance."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def _amount(value: float) -> str:
    return f"{value:g}"


class ProgressTracker:
    """Turns successive values of the metric into throttled progress lines and a timeline.

    The rate is measured from the first value seen (so a job's start-up does not count against its
    training speed) or, before a second value, from ``started`` with nothing done. A value below the
    previous one (a restarted replica training again) starts the measure over from that point.
    """

    def __init__(self, spec: ProgressSpec, clock: Callable[[], float], started: float | None = None) -> None:
        self.spec = spec
        self.clock = clock
        self.started = clock() if started is None else started
        self.timeline: list[tuple[float, float]] = []  # (epoch seconds, value)
        self.dropped = 0
        self._last_line_at: float | None = None
        self._last_tenth = -1
        self._base = 0  # index in the timeline the rate is measured from

    # -- feeding ------------------------------------------------------------------------------

    def feed_line(self, text: str) -> str | None:
        """One master-replica line: the progress line to log if the metric moved and a line is due."""
        found = parse_line(text, (self.spec.metric,))
        return self.feed(found[-1][1]) if found else None

    def feed(self, value: float) -> str | None:
        now = self.clock()
        if self.timeline and value == self.timeline[-1][1]:
            return None  # printed again (another metric on its own line): no progress
        if len(self.timeline) >= MAX_TIMELINE:
            # Keep the point the rate is measured from; drop the oldest other one.
            drop = 1 if self._base == 0 else 0
            self.timeline.pop(drop)
            self._base = max(0, self._base - (1 - drop))
            self.dropped += 1
        restarted = bool(self.timeline) and value < self.timeline[-1][1]
        self.timeline.append((now, value))
        tenth = min(10, int(self.fraction * 10))
        if restarted:
            self._base, self._last_tenth = len(self.timeline) - 1, tenth - 1  # a line at once
        due = self._last_line_at is None or now - self._last_line_at >= self.spec.every
        if tenth > self._last_tenth or due:
            self._last_line_at, self._last_tenth = now, max(tenth, self._last_tenth)
            return self.line()
        return None

    # -- figures ------------------------------------------------------------------------------

    @property
    def value(self) -> float:
        return self.timeline[-1][1] if self.timeline else 0.0

    @property
    def fraction(self) -> float:
        return max(0.0, min(1.0, self.value / self.spec.total))

    def rate(self) -> float | None:
        """Units of the metric per second, or None before there is a measure."""
        if len(self.timeline) - self._base >= 2:
            (t0, v0), (t1, v1) = self.timeline[self._base], self.timeline[-1]
        elif self.timeline and self._base == 0:
            (t0, v0), (t1, v1) = (self.started, 0.0), self.timeline[-1]
        else:
            return None
        if t1 <= t0 or v1 <= v0:
            return None
        return (v1 - v0) / (t1 - t0)

    def eta(self) -> float | None:
        """Seconds left at the current rate (0 once the total is reached)."""
        left = self.spec.total - self.value
        if left <= 0:
            return 0.0
        rate = self.rate()
        return None if rate is None else left / rate

    def line(self) -> str:
        spec = self.spec
        parts = [f"{spec.metric} {_amount(self.value)}/{_amount(spec.total)} ({self.fraction:.0%})"]
        rate = self.rate()
        if rate is not None:
            parts.append(
                f"{rate:.3g} {spec.metric}/s" if rate >= 1 else f"{duration(1 / rate)} per {spec.metric}"
            )
        eta = self.eta()
        if eta == 0:
            parts.append("done")
        elif eta is not None:
            parts.append(f"about {duration(eta)} left")
        return "progress: " + ", ".join(parts)

    # -- state: JSON, travels from the trigger to the worker's drain and into the result ------

    def state(self) -> dict[str, Any]:
        rate, eta = self.rate(), self.eta()
        return {
            **self.spec.to_dict(),
            "value": self.value,
            "percent": round(self.fraction * 100, 1),
            "rate_per_second": rate,
            "eta_seconds": None if eta is None else round(eta, 1),
            "started": self.started,
            "timeline": [[t, v] for t, v in self.timeline],
            "timeline_dropped": self.dropped,
            "last_line_at": self._last_line_at,
            "last_tenth": self._last_tenth,
            "rate_from": self._base,
        }

    @classmethod
    def for_follow(
        cls, spec: Mapping[str, Any] | None, earlier: Mapping[str, Any] | None
    ) -> ProgressTracker | None:
        """The tracker of a follow (None without ``spec``): a drain continues the earlier follow's
        (its timeline, its pace)."""
        if not spec:
            return None
        if earlier:
            return cls.restore(earlier, time.time)
        return cls(ProgressSpec.from_dict(spec), time.time)

    @classmethod
    def restore(cls, data: Mapping[str, Any], clock: Callable[[], float]) -> ProgressTracker:
        tracker = cls(ProgressSpec.from_dict(data), clock, started=float(data["started"]))
        tracker.timeline = [(float(t), float(v)) for t, v in data.get("timeline") or []]
        tracker.dropped = int(data.get("timeline_dropped") or 0)
        last = data.get("last_line_at")
        tracker._last_line_at = None if last is None else float(last)
        tracker._last_tenth = int(data.get("last_tenth", -1))
        tracker._base = int(data.get("rate_from") or 0)
        return tracker


class ReportedProgressLog:
    """Lines for the progress a job's status reports (the adapter's ReportedProgress, e.g. Trainer's
    ``trainerStatus``), throttled as the metric's: a line when it changes into a new tenth of the way,
    otherwise at most one every ``every`` seconds; the last report is logged at the end if it was held
    back. Its state is JSON, so a deferred task's drain continues the trigger's and logs nothing twice."""

    def __init__(self, clock: Callable[[], float], every: float = DEFAULT_EVERY) -> None:
        self.clock = clock
        self.every = every
        self.last: ReportedProgress | None = None  # the last report fed in this follow
        self.key = ""
        self._seen: dict[str, Any] | None = None  # the last value, as JSON (what a drain compares with)
        self._logged: dict[str, Any] | None = None
        self._last_line_at: float | None = None
        self._last_tenth = -1

    def feed(self, reported: ReportedProgress | None) -> str | None:
        """The job as it is now: the line to log, if its report changed and a line is due."""
        if reported is None or reported.value == self._seen:
            return None
        self.last, self.key, self._seen = reported, reported.key, reported.value
        now = self.clock()
        tenth = -1 if reported.percent is None else min(10, int(float(reported.percent) // 10))
        due = self._last_line_at is None or now - self._last_line_at >= self.every
        if tenth > self._last_tenth or due:
            return self._line(reported, now, tenth)
        return None

    def final(self) -> str | None:
        """The last report, if a line for it was held back."""
        if self.last is None or self.last.value == self._logged:
            return None
        return self._line(self.last, self.clock(), self._last_tenth)

    def _line(self, reported: ReportedProgress, now: float, tenth: int) -> str:
        self._logged, self._last_line_at = reported.value, now
        self._last_tenth = max(tenth, self._last_tenth)
        parts = [] if reported.percent is None else [f"{_amount(float(reported.percent))}%"]
        if reported.remaining_seconds is not None:
            left = float(reported.remaining_seconds)
            parts.append("done" if left <= 0 else f"about {duration(left)} left")
        parts.extend(f"{name}={value}" for name, value in reported.metrics.items())
        return f"{reported.source} reports " + (", ".join(parts) or "no figures")

    # -- state ----------------------------------------------------------------------------------

    def state(self) -> dict[str, Any] | None:
        """JSON: the last report (the result's ``key``: ``value``) and the throttle's place; None: none seen."""
        if self._seen is None:
            return None
        return {
            "key": self.key,
            "value": self._seen,
            "logged": self._logged,
            "last_line_at": self._last_line_at,
            "last_tenth": self._last_tenth,
        }

    @classmethod
    def for_follow(cls, earlier: Mapping[str, Any] | None) -> ReportedProgressLog:
        made = cls(time.time)
        if earlier:
            made.key, made._seen, made._logged = str(earlier.get("key") or ""), earlier.get("value"), earlier.get("logged")
            last = earlier.get("last_line_at")
            made._last_line_at = None if last is None else float(last)
            made._last_tenth = int(earlier.get("last_tenth", -1))
        return made


@dataclass(frozen=True)
class ProgressOptions:
    """The progress part's option: ``progress=`` as ProgressSpec.to_dict() (None: no progress lines)."""

    progress: Mapping[str, Any] | None = None


class ProgressPart(FollowPart):
    """``progress=``: "[progress]" lines from the master's metric, a drain continuing the trigger's pace."""

    __slots__ = ("sink", "tracker")
    section = "progress"
    options_type = ProgressOptions
    reads_master_lines = True

    def __init__(self, tracker: ProgressTracker, sink: Callable[[str], None]) -> None:
        self.tracker = tracker
        self.sink = sink

    @classmethod
    def start(cls, follow: Follow) -> ProgressPart | None:
        spec = follow.options.read(ProgressOptions).progress
        tracker = ProgressTracker.for_follow(spec, cls.earlier_section(follow))
        return None if tracker is None else cls(tracker, follow.sink)

    @classmethod
    def reads_logs(cls, options: FollowOptions) -> bool:
        return bool(options.read(ProgressOptions).progress)

    def on_master_line(self, ts: int, text: str, *, shown: bool) -> None:
        line = self.tracker.feed_line(text)
        if line is not None and shown:  # a line read again after a take-over was shown already
            self.sink(f"[progress] {line}")

    def save(self) -> dict[str, Any]:
        return self.tracker.state()


class ReportedProgressPart(FollowPart):
    """The progress the job's status reports (the adapter says where: a TrainJob's trainerStatus), as
    "[progress]" lines; its throttle made at the first report (or from the earlier follow's)."""

    __slots__ = ("adapter", "log", "sink")
    section = "reported"

    def __init__(self, adapter: JobAdapter, sink: Callable[[str], None], log: ReportedProgressLog | None) -> None:
        self.adapter = adapter
        self.sink = sink
        self.log = log

    @classmethod
    def start(cls, follow: Follow) -> ReportedProgressPart:
        earlier = cls.earlier_section(follow)
        return cls(follow.adapter, follow.sink, ReportedProgressLog.for_follow(earlier) if earlier else None)

    async def on_job(self, job: Mapping[str, Any], status: JobStatus) -> FollowOutcome | None:
        reported = self.adapter.reported_progress(job)
        if reported is not None:
            if self.log is None:
                self.log = ReportedProgressLog.for_follow(None)
            line = self.log.feed(reported)
            if line is not None:
                self.sink(f"[progress] {line}")
        return None

    def finish(self, outcome: FollowOutcome) -> None:
        line = self.log.final() if self.log is not None else None
        if line is not None:  # the last report, held back by the throttle
            self.sink(f"[progress] {line}")

    def save(self) -> dict[str, Any] | None:
        return self.log.state() if self.log is not None else None
