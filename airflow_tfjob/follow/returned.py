"""The returned value's capture (``@task.tfjob``): a follow part that keeps the value the master replica
prints after the return marker.

Lines that start with the marker are taken out of the shown log by the log follower (one long line may
carry a whole value, read with more room than a shown line gets); the last one's text is the value. A
drain starts from the trigger's capture, so a value printed before the deferral is not lost.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_tfjob.follow.outcome import FollowOptions
from airflow_tfjob.follow.parts import Follow, FollowPart


@dataclass(frozen=True)
class ReturnOptions:
    """The capture's option: master-replica lines starting with it carry the value (the operator's
    ``return_marker``, ``@task.tfjob``'s)."""

    return_marker: str | None = None


class ReturnCapturePart(FollowPart):
    """Keeps the text after ``return_marker`` on the master's last such line."""

    __slots__ = ("capture_prefix", "payload")
    section = "return_payload"
    options_type = ReturnOptions

    def __init__(self, marker: str, payload: str | None) -> None:
        self.capture_prefix = marker
        self.payload = payload

    @classmethod
    def start(cls, follow: Follow) -> ReturnCapturePart | None:
        marker = follow.options.read(ReturnOptions).return_marker
        return cls(marker, cls.earlier_section(follow)) if marker else None

    @classmethod
    def reads_logs(cls, options: FollowOptions) -> bool:
        return bool(options.read(ReturnOptions).return_marker)

    def captured(self, payload: str) -> None:
        self.payload = payload

    def save(self) -> str | None:
        return self.payload
