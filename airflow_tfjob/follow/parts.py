"""The contract of a follow part: what the follow core offers a tracker, and what it asks of one.

The core (``core.py``) watches a job, streams its replicas' lines and gathers a failure's evidence; what
a task wants besides (metrics, progress, the job's reported progress, checkpoints, the returned value,
Kueue's queue, a trigger's tap) is a part, written against this contract alone and named in one registry
(``airflow_tfjob.integrations.parts``), which the operator and the trigger hand to the core. The core
never names a part: a new tracker is one new module and one registry line, and the core's shape does
not change with it. (Kubeflow Trainer v2's runtime framework has the same shape: small one-phase
interfaces over a base plugin, one registry that the framework receives.)

A part's phases, each a no-op here so that a part writes only those it uses:

- ``start``: whether this follow needs the part at all (a triggerer holds one follow per waiting job,
  so a part nobody asked for is not made), restoring the state the earlier follow saved (a drain
  continues the trigger's follow);
- ``on_job``: sees each value of the job; may end the follow with an outcome (Kueue's verdicts);
- ``on_master_line`` / ``on_line``: sees the master replica's lines (or every replica line read);
- ``captured``: receives the value of a master line that starts with its ``capture_prefix``;
- ``restarted``: another part said the job's pods start over (admitted again after a preemption);
- ``wake_in``, ``waiting_for``, ``startup_counts_from``: the clocks it runs and what it says of them;
- ``finish``: its last lines; ``save``: its outcome section (JSON), which a drain's ``start`` reads back.

A part owns its options too: a dataclass (``options_type``) whose fields are option names with their
defaults, read from the follow's options (``FollowOptions.read``); on the wire they are flat keys beside
the core's, as the trigger's kwargs always carried them.

Sections travel generically (``FollowOutcome.parts``, by section name): neither the outcome nor the
trigger's event knows what a part saves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from airflow_tfjob.follow.outcome import FollowOptions, FollowOutcome
    from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook
    from airflow_tfjob.jobs.adapter import JobAdapter
    from airflow_tfjob.jobs.status import JobStatus


class FollowTap:
    """What a caller may see of a running follow besides its sink: filled in by the follow when it starts.

    ``on_line`` (the caller's, optional) is called with (replica, shown, timestamp in epoch ns) for
    each replica line read, before it is written; ``positions()`` writes what is pending to the sink,
    then returns the log cursors of every line written so far; ``sink`` writes a line in order with
    the follow's own.
    """

    def __init__(self, on_line: Callable[[str, bool, int], None] | None = None) -> None:
        self.on_line = on_line
        self.positions: Callable[[], dict[str, Any]] = dict
        self.sink: Callable[[str], None] | None = None


class Follow(Protocol):
    """What a part sees of the follow it belongs to (the core's follow is one)."""

    hook: AsyncKubeflowJobHook
    name: str
    namespace: str
    options: FollowOptions
    adapter: JobAdapter
    tap: FollowTap | None

    @property
    def ref(self) -> str: ...

    @property
    def earlier(self) -> FollowOutcome | None: ...

    def sink(self, line: str) -> None: ...

    def positions(self) -> dict[str, Any]: ...

    def restarted(self) -> None: ...

    def follow_on(self, hook: AsyncKubeflowJobHook) -> None:
        """The replicas run in another cluster, reached through ``hook`` (pods, logs, events read there)."""
        ...


class FollowPart:
    """A base part that does nothing in every phase (see the module's docstring for the phases).

    Parts keep ``__slots__``: a triggerer holds one follow, and so its parts, per waiting job.
    """

    __slots__ = ()

    #: The key of its outcome section (what ``save`` returns); None: it saves nothing.
    section: ClassVar[str | None] = None
    #: Its options: a dataclass whose fields (with defaults) are flat option names, read with
    #: ``FollowOptions.read``; None: it takes none. The operators' follow rows name these fields.
    options_type: ClassVar[type[Any] | None] = None

    #: What this instance reads, decided in ``start``: the core asks the log follower for a call per
    #: line only when some part reads lines (a triggerer's silent follows read none).
    reads_master_lines: bool = False
    sees_every_line: bool = False
    #: Master lines starting with it carry a value for ``captured`` (they are not shown).
    capture_prefix: str | None = None

    @classmethod
    def start(cls, follow: Follow) -> FollowPart | None:
        """The part for this follow, or None when the follow's options do not ask for it."""
        return None

    @classmethod
    def reads_logs(cls, options: FollowOptions) -> bool:
        """Whether ``options`` make it read replica lines (so the follow reads logs even if none is shown)."""
        return False

    @classmethod
    def earlier_section(cls, follow: Follow) -> Any:
        """What the earlier follow (a drain's) saved for this part; None without one."""
        earlier = follow.earlier
        return earlier.part(cls.section) if earlier is not None and cls.section is not None else None

    @classmethod
    def nothing_to_drain(cls, earlier: FollowOutcome, options: FollowOptions, sink: Callable[[str], None]) -> None:
        """The earlier follow read every line, so its drain runs no follow: what the part still says."""

    async def on_job(self, job: Mapping[str, Any], status: JobStatus) -> FollowOutcome | None:
        return None

    def on_master_line(self, ts: int, text: str, *, shown: bool) -> None:
        """A line of the master replica (``shown``: False when a take-over reads it again)."""

    def on_line(self, replica: str, selected: bool, ts: int) -> None:
        """Any replica line read (``selected``: shown in the task log), before it is written."""

    def captured(self, payload: str) -> None:
        """The value of a master line that started with ``capture_prefix``."""

    def restarted(self) -> None:
        """The job's pods start over (a part said so through ``Follow.restarted``)."""

    def wake_in(self) -> float | None:
        """Seconds until it wants the core to wake without a job change (None: no clock of its own)."""
        return None

    def waiting_for(self) -> str | None:
        """What the job waits for, as a timeout's message says it (None: the core says the job's state)."""
        return None

    def startup_counts_from(self) -> str | None:
        """What the start-up clock counts from, if not the follow's start (for its timeout message)."""
        return None

    def finish(self, outcome: FollowOutcome) -> None:
        """The follow is over (logs drained): its last lines."""

    def save(self) -> Any:
        """Its outcome section (JSON), under ``section``."""
        return None


#: The parts a follow may be made of, in the order they are called (the registry's type).
PartTypes = tuple[type[FollowPart], ...]


def reads_logs(options: FollowOptions, parts: PartTypes) -> bool:
    """Whether a follow with these options and parts reads replica logs at all (to show them, or for a
    part): the trigger asks before it follows (a follow that reads none keeps no log position)."""
    return options.get_logs or any(p.reads_logs(options) for p in parts)
