"""The tap: what a caller sees of a running follow besides its sink, as a follow part.

The trigger keeps its log positions durable through it (triggers/positions.py): a line hook called for
every replica line read, and the follow's ``positions`` and sink, handed over when the follow starts.
It is a part like the trackers (follow/parts.py), made only for a follow given a tap.
"""

from __future__ import annotations

from collections.abc import Callable

from airflow_tfjob.follow.parts import Follow, FollowPart


class TapPart(FollowPart):
    """Hands the caller's tap the follow's positions and sink, and calls its line hook."""

    __slots__ = ("hook", "sees_every_line")

    def __init__(self, hook: Callable[[str, bool, int], None] | None) -> None:
        self.hook = hook
        self.sees_every_line = hook is not None  # a tap without a hook costs no call per line

    @classmethod
    def start(cls, follow: Follow) -> TapPart | None:
        tap = follow.tap
        if tap is None:
            return None
        tap.positions, tap.sink = follow.positions, follow.sink
        return cls(tap.on_line)

    def on_line(self, replica: str, selected: bool, ts: int) -> None:
        assert self.hook is not None  # sees_every_line
        self.hook(replica, selected, ts)
