"""What following a job takes and gives: its options and its outcome, both JSON-serialisable.

Apart from ``follow.py`` so that the operator, the trigger and the decorator can name them without
loading the follow core.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol, TypeVar

from airflow_tfjob.constants import STARTUP_TIMEOUT
from airflow_tfjob.follow.logs_parsing import LogSelection
from airflow_tfjob.jobs.kinds import JobKind, kind_named
from airflow_tfjob.jobs.status import JobStatus


@functools.lru_cache(maxsize=256)
def _parsed_selection(spec: str) -> LogSelection:
    """One (immutable) LogSelection per spelling: a triggerer's jobs share a few, it holds thousands."""
    return LogSelection.parse(spec)


class _Options(Protocol):
    """A part's options: a dataclass whose fields have defaults (follow/parts.py)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


class _Part(Protocol):
    """What the options ask of a part (follow/parts.py's FollowPart): which options it declares."""

    options_type: ClassVar[type[Any] | None]


T = TypeVar("T", bound=_Options)


@dataclass(slots=True, eq=False)
class FollowOptions:
    """How to follow a job; JSON-serialisable through to_dict (it travels in the trigger's kwargs).

    The fields a DAG author sets are the follow rows of the operators' parameter table
    (operators/params.py: one row each, with its default and check); the others are the task's. The
    fields below are the core's; every other option belongs to a follow part, which declares it (with
    its default) in a dataclass of its own and reads it with :meth:`read` (follow/parts.py): the options
    do not grow with the parts. On the wire all are flat keys, as before parts had options of their own.
    """

    # Text is parsed here, once (a direct caller's, or the trigger's kwargs); the operator hands on
    # the selection its parameter check parsed.
    log_replicas: LogSelection | str = "master"
    # Seconds, from the follow's start or `startup_from`; one form from the parameter to the check.
    startup_timeout: float | None = STARTUP_TIMEOUT
    # Epoch seconds the start-up clock counts from (a deferred follow's: when the task deferred, so
    # that a triggerer restart does not start it over); None: when the follow starts.
    startup_from: float | None = None
    deadline: float | None = None  # epoch seconds; past it the outcome is "timeout"
    log_rate_per_replica: int = 1000
    log_total_cap: int = 1_000_000
    get_logs: bool = True
    log_events: bool = True
    drain_grace: float = 5.0  # seconds after completionTime that still-running containers are read
    diagnostics_tail: int = 20
    # The job's kind by name (JSON-serialisable): its plural, spec key and container are read from it.
    kind: str = "TFJob"
    # The parts' options by name (and possibly the core's too, which are ignored here): the trigger's
    # kwargs are held as they came, not copied, since a triggerer holds one follow per waiting job.
    parts: Mapping[str, Any] = field(default_factory=dict)
    # Read back from the wire (from_dict: a trigger's kwargs, its event), whose keys another provider
    # version may have written: those are carried unread. Options a caller builds are its own, so a
    # key that no part of the follow declares is a mistake the core refuses (FollowOptions.unread).
    from_wire: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.log_replicas, str):
            self.log_replicas = _parsed_selection(self.log_replicas)
        elif not isinstance(self.log_replicas, LogSelection):
            self.log_replicas = LogSelection.parse(self.log_replicas)

    @classmethod
    def of(cls, **values: Any) -> FollowOptions:
        """Options from flat names: the core's fields, every other name a part's option."""
        return cls(**{k: v for k, v in values.items() if k in _CORE_FIELDS}, parts=values)

    def read(self, kind: type[T]) -> T:
        """A part's options (``kind``, its dataclass): the values given under its fields' names, the
        others its defaults."""
        names = kind.__dataclass_fields__
        return kind(**{k: v for k, v in self.parts.items() if k in names})

    def unread(self, parts: Iterable[type[_Part]]) -> list[str]:
        """The options given that neither the core nor any of ``parts`` declares (none from the wire)."""
        if self.from_wire:
            return []
        known = set(_CORE_FIELDS)
        for part in parts:
            if part.options_type is not None:
                known.update(part.options_type.__dataclass_fields__)
        return sorted(k for k in self.parts if k not in known)

    def with_parts(self, **values: Any) -> FollowOptions:
        """These options with some of the parts' options set (``values``: flat names)."""
        return replace(self, parts={**self._part_values(), **values})

    def _part_values(self) -> dict[str, Any]:
        core = _CORE_FIELDS
        return {k: v for k, v in self.parts.items() if k not in core}

    @property
    def selection(self) -> LogSelection:
        """Whose logs reach the task log (``log_replicas``, parsed)."""
        assert isinstance(self.log_replicas, LogSelection)  # __post_init__
        return self.log_replicas

    def for_drain(self) -> FollowOptions:
        """The options of the worker's drain after a deferred follow: the job has ended, so no clock
        holds it."""
        return replace(self, startup_timeout=None, deadline=None)

    @property
    def job_kind(self) -> JobKind:
        return kind_named(self.kind)

    def to_dict(self) -> dict[str, Any]:
        core = {name: getattr(self, name) for name in _CORE_FIELDS}
        return {**self._part_values(), **core, "log_replicas": self.selection.spec}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FollowOptions) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass was

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> FollowOptions:
        """The options ``to_dict`` wrote. Every key not the core's is kept for the parts (``data``
        itself, not a copy); a part's option that is absent takes the part's default, and a key no
        part reads (another provider version's) is carried along unread."""
        data = data if data is not None else {}
        core = _CORE_FIELDS
        return cls(**{k: v for k, v in data.items() if k in core}, parts=data, from_wire=True)


_CORE_FIELDS = frozenset(f for f in FollowOptions.__dataclass_fields__ if f not in ("parts", "from_wire"))


@dataclass
class FollowOutcome:
    """How following ended; JSON-serialisable through to_dict (the trigger's event payload).

    What the follow's parts saved (metrics, progress, the captured value, Kueue's summary...) is in
    ``parts``, by each part's section name (follow/parts.py): the outcome does not know them.
    """

    # "succeeded" | "failed" | "timeout" | "startup_timeout" | "cannot_start" | "error", or a part's own
    # (Kueue's: "queue_timeout" | "preempted" | "kueue_ignored" | "kueue_inadmissible")
    event: str
    status: JobStatus | None = None
    message: str = ""
    diagnostics: list[str] = field(default_factory=list)
    cursors: dict[str, Any] = field(default_factory=dict)
    # The failing replicas' diagnoses as data (diagnostics.ReplicaDiagnosis.to_dict()): what the
    # failure's cause is read from (follow/failure.py), in both modes.
    failures: list[dict[str, Any]] = field(default_factory=list)
    # Replica lines not shown, by replica and why (JobLogFollower.dropped): XCom log_lines_dropped.
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)
    # Every replica's container had exited and its log was read to the end: a drain of this follow
    # would read nothing (the worker's drain after a deferred follow is then left out).
    logs_read: bool = False
    # Each part's saved section (FollowPart.save), by its section name; JSON.
    parts: dict[str, Any] = field(default_factory=dict)

    def part(self, section: str, default: Any = None) -> Any:
        """What the part of that section saved (``default`` when it saved nothing, or was not made)."""
        value = self.parts.get(section)
        return default if value is None else value

    def to_dict(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "status": self.status.to_dict() if self.status else None,
            "message": self.message,
            "diagnostics": list(self.diagnostics),
            "cursors": self.cursors,
            "failures": list(self.failures),
            "dropped": self.dropped,
            "logs_read": self.logs_read,
            "parts": dict(self.parts),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FollowOutcome:
        status = data.get("status")
        return cls(
            event=str(data["event"]),
            status=JobStatus.from_dict(status) if status else None,
            message=str(data.get("message") or ""),
            diagnostics=list(data.get("diagnostics") or []),
            cursors=dict(data.get("cursors") or {}),
            failures=list(data.get("failures") or []),
            dropped={str(k): dict(v) for k, v in (data.get("dropped") or {}).items()},
            logs_read=bool(data.get("logs_read")),
            parts=dict(data.get("parts") or {}),
        )
