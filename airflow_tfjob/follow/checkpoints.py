"""The checkpoints a job's training code reports in its log (``checkpoint saved: <path> epoch=<n>``),
the newest kept; the checkpoint part (pure).

The provider never reads the checkpoint store itself while a job runs (a PersistentVolumeClaim is out
of the Airflow worker's reach), so the training code tells it, one line per checkpoint written, from
the master replica (the one metrics are read from)::

    checkpoint saved: <path> epoch=<n>

``<path>`` is the checkpoint as the replicas address it (a file or a directory under
``CHECKPOINT_DIR``, or an object-storage URI); ``epoch=<n>`` is optional (any ``step=<n>`` is kept
too). The last such line names the newest checkpoint: the follow core keeps it, the task records it in
its durable state, and the next try (or the job after Kueue resumed it) resumes from it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_tfjob.follow.parts import Follow, FollowPart

if TYPE_CHECKING:
    from airflow_tfjob.follow.outcome import FollowOptions

#: What a line must hold (after an optional timestamp or prefix) to report a checkpoint.
MARKER = "checkpoint saved:"
_LINE = re.compile(r"checkpoint saved:\s*(?P<path>\S+)(?P<rest>.*)$")
_FIELD = re.compile(r"\b(epoch|step)\s*=\s*(\d+)\b")


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint the training reported: where, and how far the training had come."""

    path: str
    epoch: int | None = None
    step: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "epoch": self.epoch, "step": self.step}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Checkpoint | None:
        """The checkpoint ``to_dict`` wrote (None for nothing, or for a value of another shape)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("path"), str) or not data["path"]:
            return None
        return cls(data["path"], _whole(data.get("epoch")), _whole(data.get("step")))

    def describe(self) -> str:
        """``<path> (epoch 7)``: how the task log names it."""
        progress = ", ".join(
            f"{name} {value}"
            for name, value in (("epoch", self.epoch), ("step", self.step))
            if value is not None
        )
        return f"{self.path} ({progress})" if progress else self.path

    def resuming_line(self) -> str:
        return f"resuming from {self.describe()}"


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_line(line: str) -> Checkpoint | None:
    """The checkpoint a log line reports, or None."""
    if MARKER not in line:
        return None
    match = _LINE.search(line)
    if match is None:
        return None
    fields = {name: int(value) for name, value in _FIELD.findall(match.group("rest"))}
    return Checkpoint(match.group("path"), fields.get("epoch"), fields.get("step"))


class CheckpointTracker:
    """The newest checkpoint of a job: the one it started from, then each the master replica reports."""

    def __init__(self, start: Mapping[str, Any] | None = None) -> None:
        self.newest: Checkpoint | None = Checkpoint.from_dict(start)
        self.reported = 0  # how many lines reported one during this follow

    def feed(self, line: str) -> Checkpoint | None:
        """Read one master line; the checkpoint it reports (now the newest), or None."""
        found = parse_line(line)
        if found is not None:
            self.newest = found
            self.reported += 1
        return found

    def state(self) -> dict[str, Any] | None:
        return self.newest.to_dict() if self.newest is not None else None


@dataclass(frozen=True)
class CheckpointOptions:
    """The checkpoint part's options (``checkpoint=``): read the master's "checkpoint saved:" lines,
    starting from the newest checkpoint known when the job was created (Checkpoint.to_dict(), or None)."""

    checkpoints: bool = False
    resume_from: Mapping[str, Any] | None = None


class CheckpointPart(FollowPart):
    """``checkpoint=``: the newest checkpoint the master reports, from the one the job started from (a
    drain: the trigger's); told when the job's pods start over (admitted again after a preemption)."""

    __slots__ = ("sink", "tracker")
    section = "checkpoint"
    options_type = CheckpointOptions
    reads_master_lines = True

    def __init__(self, tracker: CheckpointTracker, sink: Callable[[str], None]) -> None:
        self.tracker = tracker
        self.sink = sink

    @classmethod
    def start(cls, follow: Follow) -> CheckpointPart | None:
        options = follow.options.read(CheckpointOptions)
        if not options.checkpoints:
            return None
        start = cls.earlier_section(follow) if follow.earlier is not None else options.resume_from
        return cls(CheckpointTracker(start), follow.sink)

    @classmethod
    def reads_logs(cls, options: FollowOptions) -> bool:
        return options.read(CheckpointOptions).checkpoints

    def on_master_line(self, ts: int, text: str, *, shown: bool) -> None:
        self.tracker.feed(text)

    def restarted(self) -> None:
        newest = self.tracker.newest
        self.sink(f"[checkpoint] {newest.resuming_line() if newest else 'no checkpoint yet: starting over'}")

    def save(self) -> dict[str, Any] | None:
        return self.tracker.state()
