"""The position book's saves of a follow's first lines (airflow_tfjob/triggers/positions.py), against a
recording stand-in for the hook: first lines that arrive while an earlier capture settles are captured
at once, not after the earlier save's request (issue 39: in the production-shaped failover test, the
follows of jobs that started together showed their first lines a few milliseconds after the first
follow's, and a kill 0.5 s later repeated all of them)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest

from airflow_tfjob.triggers import positions
from airflow_tfjob.triggers.positions import PositionBook, entry_key


class _Events(list[str]):
    """What happened, in order; ``changed`` is set at each addition."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Event()

    def append(self, event: str) -> None:
        super().append(event)
        self.changed.set()

    async def until(self, what: str, done: Any, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                while not done():
                    self.changed.clear()
                    await self.changed.wait()
        except TimeoutError:
            raise AssertionError(f"{what}: not within {timeout} s ({list(self)})") from None


class _Hook:
    """Records each merge patch (its entries) in ``events``, beside the follows' captures."""

    def __init__(self, events: _Events) -> None:
        self.events = events
        self.patches: list[dict[str, Any]] = []

    async def merge_config_map_data(self, name: str, namespace: str, changes: dict[str, Any], labels: Any) -> None:
        self.events.append("request " + " ".join(sorted(changes)))
        self.patches.append(changes)


class _Follow:
    """A follow's positions: none until its first line, then a cursor; each read with lines is recorded."""

    def __init__(self, name: str, events: _Events) -> None:
        self.name = name
        self.events = events
        self.cursors: dict[str, Any] = {}

    def __call__(self) -> dict[str, Any]:
        if self.cursors:
            self.events.append(f"capture {self.name}")
        return dict(self.cursors)


async def test_first_lines_arriving_while_a_capture_settles_are_captured_before_its_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Follow a's first line starts a save; b's first line comes during that capture's settling. b is
    captured at once and sent SETTLE after its own capture, in a second request after a's (one request
    at a time); not captured only once a's request is done (then a kill SETTLE after b's first lines
    found nothing of b saved)."""
    monkeypatch.setattr(positions, "SAVE_INTERVAL", 3600.0)  # every save seen is an early one
    events = _Events()
    hook = _Hook(events)
    book = PositionBook(("cluster", "ns", 0), hook, "ns")
    follows = {name: _Follow(name, events) for name in ("a", "b")}
    hooks = {}
    for name, follow in follows.items():
        entry = entry_key("tfjobs", name)
        hooks[name] = book.on_first_line(entry)
        book.track(entry, 1700000000.0, follow)
    try:
        follows["a"].cursors = {"worker-0": {"uid": "a", "instance": 0, "ts": "2026-12-06T10:00:00.1Z", "n": 1}}
        hooks["a"]("worker-0", True, 1)
        await events.until("a captured", lambda: "capture a" in events, 5)
        follows["b"].cursors = {"worker-0": {"uid": "b", "instance": 0, "ts": "2026-12-06T10:00:00.2Z", "n": 1}}
        hooks["b"]("worker-0", True, 2)
        await events.until("two requests", lambda: len(hook.patches) == 2, positions.SETTLE * 4 + 5)
    finally:
        for name in follows:
            book.ended(entry_key("tfjobs", name))
        if book._task is not None:  # waiting an hour for its next save
            book._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await book._task
    first_request = events.index(f"request {entry_key('tfjobs', 'a')}")
    assert "capture b" in events[:first_request], f"b captured only after a's request: {events}"
    assert events[first_request + 1 :] == [f"request {entry_key('tfjobs', 'b')}"], events
    sent = json.loads(str(hook.patches[1][entry_key("tfjobs", "b")]))
    assert sent["cursors"] == follows["b"].cursors and sent["final"] is False
    assert book.early_saves == 2

