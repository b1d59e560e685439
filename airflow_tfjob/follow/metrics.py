"""Training metrics from log lines in Katib's StdOut format (``name=value``); the metrics part.

Same filter and rules as Katib's metrics collector (tfjob-behaviour.md §9), so a training script
written for a Katib sweep reports the same numbers through Airflow:

- filter ``([\\w|-]+)\\s*=\\s*([+-]?\\d*(\\.\\d+)?([Ee][+-]?\\d+)?)``, every match on a line;
- only matches whose name equals a requested metric are kept;
- a line whose first space-separated token is an RFC 3339 timestamp carries that time;
- an empty value (``acc=``) is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_tfjob.follow.logs_parsing import format_timestamp
from airflow_tfjob.follow.metric_names import check_metric_names
from airflow_tfjob.follow.outcome import FollowOptions, FollowOutcome
from airflow_tfjob.follow.parts import Follow, FollowPart

METRIC_RE = re.compile(r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)")
# RFC 3339 with optional fraction (Kubernetes writes nanoseconds, which datetime cannot parse).
_TIMESTAMP_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


@dataclass(frozen=True)
class MetricPoint:
    value: float
    timestamp: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "timestamp": self.timestamp}


def line_timestamp(line: str) -> str | None:
    """The line's leading RFC 3339 timestamp, if its first token is one."""
    first = line.split(" ", 1)[0]
    return first if _TIMESTAMP_RE.match(first) else None


def parse_line(line: str, names: Iterable[str]) -> list[tuple[str, float]]:
    """Every (name, value) of a requested metric on one line, in order of appearance."""
    wanted = set(names)
    found: list[tuple[str, float]] = []
    if not any(name in line for name in wanted):
        return found
    for match in METRIC_RE.finditer(line):
        name, raw = match.group(1), match.group(2)
        if name not in wanted:
            continue
        try:
            # The filter also matches "", "+", "-" and "." as values: Katib stores them, we skip them.
            found.append((name, float(raw)))
        except ValueError:
            continue
    return found


class MetricsCollector:
    """Accumulates requested metrics from a stream of log lines (one replica's, usually the chief's).

    ``result()`` maps each metric seen to its last value, lists under ``missing`` the requested
    names never seen, and, with ``history=True``, adds every value with its timestamp under
    ``history``. Those two keys are reserved, so no metric may be named after them.
    """

    def __init__(self, names: Sequence[str], history: bool = False, max_history: int = 10_000) -> None:
        check_metric_names(names)
        self.names: tuple[str, ...] = tuple(dict.fromkeys(names))
        self.history_enabled = history
        self.max_history = max_history
        self._last: dict[str, float] = {}
        self._history: dict[str, list[MetricPoint]] = {n: [] for n in self.names}
        self._history_dropped: dict[str, int] = dict.fromkeys(self.names, 0)

    def feed(self, line: str | bytes) -> list[tuple[str, float]]:
        """Parse one line; returns what it contributed."""
        if not self.names:
            return []
        if isinstance(line, bytes):
            line = line.decode("utf-8", errors="replace")
        points = parse_line(line, self.names)
        if not points:
            return points
        stamp = line_timestamp(line) if self.history_enabled else None
        for name, value in points:
            self._last[name] = value
            if self.history_enabled:
                series = self._history[name]
                if len(series) >= self.max_history:
                    # Keep the first and the most recent values; a runaway loop must not fill XCom.
                    series.pop(1 if len(series) > 1 else 0)
                    self._history_dropped[name] += 1
                series.append(MetricPoint(value, stamp))
        return points

    def restore(self, earlier: Mapping[str, Any]) -> None:
        """Continue from an earlier collector's ``result()`` (the trigger's, when a deferred task resumes).

        The lines the earlier collector read are not read again, so its values and history are the
        starting point; what is still missing is decided from the combined view.
        """
        for name in self.names:
            value = earlier.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self._last[name] = float(value)
        history = earlier.get("history")
        if self.history_enabled and isinstance(history, Mapping):
            for name in self.names:
                points = history.get(name)
                if isinstance(points, list):
                    self._history[name] = [
                        MetricPoint(float(p["value"]), p.get("timestamp")) for p in points if isinstance(p, Mapping)
                    ]
        dropped = earlier.get("history_dropped")
        if isinstance(dropped, Mapping):
            for name in self.names:
                self._history_dropped[name] = int(dropped.get(name) or 0)

    def feed_many(self, lines: Iterable[str | bytes]) -> None:
        for line in lines:
            self.feed(line)

    @property
    def missing(self) -> list[str]:
        return [n for n in self.names if n not in self._last]

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {n: self._last[n] for n in self.names if n in self._last}
        out["missing"] = self.missing
        if self.history_enabled:
            out["history"] = {n: [p.to_dict() for p in self._history[n]] for n in self.names}
            dropped = {n: k for n, k in self._history_dropped.items() if k}
            if dropped:
                out["history_dropped"] = dropped
        return out


@dataclass(frozen=True)
class MetricsOptions:
    """The metrics part's options (operator parameters ``metrics``, ``metrics_history``)."""

    metrics: Sequence[str] = ()
    metrics_history: bool = False
    # Off in a trigger whose follow a worker continues (drain_job): the warning would be premature there,
    # as a metric may come in the lines after the trigger's last cursor; the drain reports it once.
    report_missing_metrics: bool = True


class MetricsPart(FollowPart):
    """``metrics=``: the master replica's metric lines collected, a drain continuing the trigger's."""

    __slots__ = ("collector", "history", "report_missing", "sink")
    section = "metrics"
    options_type = MetricsOptions
    reads_master_lines = True

    def __init__(self, collector: MetricsCollector, report_missing: bool, sink: Callable[[str], None]) -> None:
        self.collector = collector
        self.history = collector.history_enabled
        self.report_missing = report_missing
        self.sink = sink

    @classmethod
    def start(cls, follow: Follow) -> MetricsPart | None:
        options = follow.options.read(MetricsOptions)
        if not options.metrics:
            return None
        collector = MetricsCollector(options.metrics, history=options.metrics_history)
        if follow.earlier is not None:  # a drain: the trigger's values are the starting point
            collector.restore(cls.earlier_section(follow) or {})
        # A drain says what the trigger left unsaid (its options say not to: it is continued).
        return cls(collector, options.report_missing_metrics or follow.earlier is not None, follow.sink)

    @classmethod
    def reads_logs(cls, options: FollowOptions) -> bool:
        return bool(options.read(MetricsOptions).metrics)

    @classmethod
    def nothing_to_drain(cls, earlier: FollowOutcome, options: FollowOptions, sink: Callable[[str], None]) -> None:
        # The trigger left this warning to the drain (a metric could still come after its last cursor).
        _report_missing(earlier.part(cls.section, {}), True, sink)

    def on_master_line(self, ts: int, text: str, *, shown: bool) -> None:
        # With history, each value keeps the time its line was written (Kubernetes' timestamp).
        self.collector.feed(f"{format_timestamp(ts)} {text}" if self.history else text)

    def finish(self, outcome: FollowOutcome) -> None:
        _report_missing(self.collector.result(), self.report_missing, self.sink)

    def save(self) -> dict[str, Any]:
        return self.collector.result()


def _report_missing(result: Mapping[str, Any], report: bool, sink: Callable[[str], None]) -> None:
    if result.get("missing") and report:
        sink("metrics never reported by the master replica: " + ", ".join(result["missing"]))
