"""The deferred follows' log positions (airflow_tfjob/triggers/positions.py) against the local cluster:
one merge patch per namespace and save whatever the number of follows, nothing sent while nothing
moves, a stopped follow's exact position, an ended follow's entry removed, one read for many
take-overs, a follow's first lines saved at once (and silent follows never), and a take-over's plan in
each log setup."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from watch_support import Api, unique, wait_until

from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook
from airflow_tfjob.triggers import positions
from airflow_tfjob.triggers.positions import (
    REPEAT_BOUND,
    TAKE_OVER,
    RepeatWindow,
    SavedPosition,
    book_for,
    entry_key,
    repeat_note,
    take_over,
)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]


def _cursor(ts: str, n: int = 1) -> dict[str, Any]:
    return {"worker-0": {"uid": "u1", "instance": 0, "ts": ts, "n": n}}


class _Follow:
    """What a follow hands the book: its cursors as they stand."""

    def __init__(self) -> None:
        self.cursors: dict[str, Any] = {}

    def __call__(self) -> dict[str, Any]:
        return dict(self.cursors)


async def test_one_write_per_namespace_and_save_whatever_the_number_of_follows(
    k8s_conn: str, local_cluster: Any
) -> None:
    async with Api(Path(local_cluster.kubeconfig_path)) as api:
        ns = await api.namespace(unique("pos"))
        hook = AsyncKubeflowJobHook(conn_id=k8s_conn)
        book = await book_for(hook, ns)
        assert await book_for(hook, ns) is book, "one book per namespace and loop"
        follows = {entry_key("tfjobs", f"job-{i}"): _Follow() for i in range(200)}
        for entry, follow in follows.items():
            book.track(entry, 1700000000.0, follow)

        await book.save()
        assert book.writes == 0, "no follow has written a line: nothing to save"

        for follow in follows.values():
            follow.cursors = _cursor("2026-12-02T07:00:01.000000001Z")
        await book.save()
        assert book.writes == 1, "200 changed follows: one request (the ConfigMap is created)"
        saved = await api.saved_positions(ns)
        assert len(saved) == 200 and all(e["final"] is False for e in saved.values())
        assert saved[entry_key("tfjobs", "job-7")]["cursors"] == _cursor("2026-12-02T07:00:01.000000001Z")

        await book.save()
        assert book.writes == 1, "nothing moved: no request"

        moved = list(follows)[:3]
        for entry in moved:
            follows[entry].cursors = _cursor("2026-12-02T07:00:02.5Z", 2)
        await book.save()
        assert book.writes == 2
        saved = await api.saved_positions(ns)
        assert all(saved[e]["cursors"] == _cursor("2026-12-02T07:00:02.5Z", 2) for e in moved)

        # A follow that stops saves its exact position at once; ones stopping together share a request.
        stopping = list(follows)[3:13]
        for entry in stopping:
            follows[entry].cursors = _cursor("2026-12-02T07:00:03Z")
        await asyncio.gather(*(book.stopped(entry) for entry in stopping))
        assert book.writes == 3, "ten follows stopping together: one request"
        saved = await api.saved_positions(ns)
        assert all(saved[e]["final"] is True for e in stopping)

        # Ended follows: their entries go with the next save (one request for all of them).
        for entry in list(follows)[13:]:
            book.ended(entry)
        for entry in stopping:
            book.ended(entry, known=True)  # e.g. the user's kill after a stop
        await book.save()
        assert book.writes == 4
        assert set(await api.saved_positions(ns)) == set(moved)

        # Take-overs starting together share one read of the ConfigMap.
        reads = 0
        fetch = book._fetch

        async def counted() -> dict[str, str]:
            nonlocal reads
            reads += 1
            return await fetch()

        book._fetch = counted  # type: ignore[method-assign]
        found = await asyncio.gather(*(book.read(entry) for entry in [*moved, "tfjobs.unknown"]))
        assert reads == 1
        assert [f is not None and f.cursors == _cursor("2026-12-02T07:00:02.5Z", 2) for f in found] == [
            True,
            True,
            True,
            False,
        ]
        for entry in moved:
            book.ended(entry)
        await book.save()
        assert await api.saved_positions(ns) == {}, "nothing left behind"


async def test_the_book_saves_by_itself_every_interval_and_then_stops(
    k8s_conn: str, local_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(positions, "SAVE_INTERVAL", 0.1)
    monkeypatch.setattr(positions, "SETTLE", 0.05)
    async with Api(Path(local_cluster.kubeconfig_path)) as api:
        ns = await api.namespace(unique("pos"))
        book = await book_for(AsyncKubeflowJobHook(conn_id=k8s_conn), ns)
        follow = _Follow()
        follow.cursors = _cursor("2026-12-02T07:00:01Z")
        book.track("tfjobs.a", None, follow)
        for _ in range(100):
            if "tfjobs.a" in await api.saved_positions(ns):
                break
            await asyncio.sleep(0.05)
        assert "tfjobs.a" in await api.saved_positions(ns)
        book.ended("tfjobs.a")
        assert book._task is not None
        await asyncio.wait_for(book._task, 10)  # nothing left to save: the book's task ends
        assert await api.saved_positions(ns) == {}
        assert book.key not in positions._BOOKS


async def test_a_follow_s_first_lines_are_saved_at_once_and_silent_follows_never_wake_the_book(
    k8s_conn: str, local_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interval is an hour here, so every save seen is an early one: a follow's first shown line
    starts a save (sent SETTLE seconds later); its later lines, lines of replicas not shown, and a
    thousand follows that write nothing start none; first lines arriving together share one request."""
    monkeypatch.setattr(positions, "SAVE_INTERVAL", 3600.0)
    async with Api(Path(local_cluster.kubeconfig_path)) as api:
        ns = await api.namespace(unique("pos"))
        book = await book_for(AsyncKubeflowJobHook(conn_id=k8s_conn), ns)
        follows = {entry_key("tfjobs", f"job-{i}"): _Follow() for i in range(1000)}
        hooks = {entry: book.on_first_line(entry) for entry in follows}
        for entry, follow in follows.items():
            book.track(entry, 1700000000.0, follow)
        for hook in hooks.values():
            hook("worker-1", False, 1)  # a replica the task does not show: nothing written
        await asyncio.sleep(1.0)
        assert (book.writes, book.early_saves) == (0, 0), "nothing written: no save"

        first = entry_key("tfjobs", "job-7")
        follows[first].cursors = _cursor("2026-12-02T07:00:01Z", 40)
        started = time.monotonic()
        hooks[first]("worker-0", True, 1)
        await wait_until(lambda: book.writes == 1, timeout=10, interval=0.01)
        took = time.monotonic() - started
        # The interval is an hour: a save within seconds is the early one (slack for a loaded machine).
        assert positions.SETTLE <= took < positions.SETTLE + 3.0, took
        assert book.early_saves == 1
        assert (await api.saved_positions(ns))[first]["cursors"] == _cursor("2026-12-02T07:00:01Z", 40)

        follows[first].cursors = _cursor("2026-12-02T07:00:02Z", 41)
        for _ in range(100):
            hooks[first]("worker-0", True, 2)  # its later lines wait for the interval
        await asyncio.sleep(1.0)
        assert (book.writes, book.early_saves) == (1, 1)

        together = [entry_key("tfjobs", f"job-{i}") for i in (1, 2, 3)]
        for entry in together:
            follows[entry].cursors = _cursor("2026-12-02T07:00:03Z", 5)
            hooks[entry]("worker-0", True, 3)
        await wait_until(lambda: book.writes == 2, timeout=10, interval=0.01)
        await asyncio.sleep(positions.SETTLE + 0.5)
        assert (book.writes, book.early_saves) == (2, 2), "three follows' first lines: one request"
        saved = await api.saved_positions(ns)
        assert set(saved) == {first, *together}, "the silent thousand are not written"
        print(
            f"\nfirst-lines saves: 1000 silent follows -> 0 requests; a follow's first lines saved "
            f"{took:.2f} s after (SETTLE {positions.SETTLE} s, interval {positions.SAVE_INTERVAL:g} s); "
            "3 follows' first lines together -> 1 request"
        )
        for entry in follows:
            book.ended(entry)


def test_a_take_over_plan_for_each_log_setup() -> None:
    deferral = _cursor("2026-12-02T07:00:00Z")
    periodic = SavedPosition(1.0, 1764658800.0, False, _cursor("2026-12-02T07:00:05Z"))
    final = SavedPosition(1.0, 1764658800.0, True, _cursor("2026-12-02T07:00:05Z"))

    remote = take_over(periodic, True, deferral, "TFJob")
    assert remote.cursors == deferral and remote.window is None
    assert remote.marker.startswith(TAKE_OVER) and "with remote task logs" in remote.marker

    # None saved (killed within its first lines' save): read again from the deferral, every line up to
    # the take-over counted.
    lost = take_over(None, False, deferral, "TFJob", deferred_at=1764658790.0, now=1764658800.0)
    assert lost.cursors == deferral and lost.window is not None and "are counted" in lost.marker
    assert "saved no position" in lost.marker and lost.window.until == int(1764658800.0 * 1e9)
    written: list[str] = []
    lost.window.sink = written.append
    lost.window.on_line("worker-0", True, int(1764658799.0 * 1e9))
    lost.window.finish()
    assert written == [f"[worker-0] {repeat_note(1, 1764658790.0, lost.window.until, saved=False)}"]
    assert "before the stopped triggerer saved any position" in written[0]

    stopped = take_over(final, False, deferral, "PyTorchJob")
    assert stopped.cursors == final.cursors and stopped.window is None
    assert "PyTorchJob" in stopped.marker and "no line above is repeated" in stopped.marker

    killed = take_over(periodic, False, deferral, "TFJob")
    assert killed.cursors == periodic.cursors and killed.window is not None
    assert "07:00:00.0 UTC" in killed.marker and "are counted" in killed.marker
    assert killed.window.until == int((periodic.saved_at + REPEAT_BOUND) * 1e9)


def test_a_repeat_window_counts_each_replica_and_says_so_once() -> None:
    written: list[str] = []
    window = RepeatWindow(until=10_000, saved_at=1764658800.0)
    window.sink = written.append
    for ts in (9_000, 9_500, 10_000):
        window.on_line("worker-0", True, ts)
    window.on_line("worker-0", False, 9_999)  # not shown: not a repeat
    window.on_line("worker-1", True, 9_000)
    window.on_line("worker-0", True, 10_001)  # past the window: worker-0's count is said
    window.on_line("worker-0", True, 9_999)  # already closed
    assert written == [f"[worker-0] {repeat_note(3, 1764658800.0, 10_000)}"]
    window.finish()
    assert written[1] == f"[worker-1] {repeat_note(1, 1764658800.0, 10_000)}"
    assert "the 1 line above" in written[1]
