"""Pure parts of the log follower: timestamps, line splitting, cursor de-duplication, selection,
and how lines are grouped into task-log records."""

from __future__ import annotations

import asyncio

import pytest

from airflow_tfjob.follow.logs_parsing import (
    Cursor,
    LineSplitter,
    LogBatcher,
    LogSelection,
    RateLimiter,
    ResumeFilter,
    format_timestamp,
    parse_timestamp,
    split_timestamp,
)

BASE = 1_735_689_600  # 2025-01-01T00:00:00Z


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("2025-01-01T00:00:00Z", BASE * 10**9),
        ("2025-01-01T00:00:00.5Z", BASE * 10**9 + 500_000_000),
        ("2025-01-01T00:00:00.123456789Z", BASE * 10**9 + 123_456_789),
        ("2025-01-01T00:00:00.1234567891Z", BASE * 10**9 + 123_456_789),  # beyond ns: dropped
        ("2025-01-01T02:00:00+02:00", BASE * 10**9),
        ("2024-12-31T23:30:00-00:30", BASE * 10**9),
    ],
)
def test_parse_timestamp(text: str, ns: int) -> None:
    assert parse_timestamp(text) == ns
    assert parse_timestamp(text.encode()) == ns


@pytest.mark.parametrize(
    "bad",
    ["", "hello", "2025-01-01", "2025-01-01T00:00:00", "2025-01-01T00:00:00.Z", "2025-01-01T00:00:00+0200"],
)
def test_parse_timestamp_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_timestamp(bad)


def test_trimmed_fractions_compare_as_numbers() -> None:
    # Go trims trailing zeros: ".1" is 100 ms and must sort before ".12", which string order gets wrong.
    assert parse_timestamp("2025-01-01T00:00:05.1Z") < parse_timestamp("2025-01-01T00:00:05.12Z")


def test_format_round_trip_and_since_time() -> None:
    ns = BASE * 10**9 + 42
    assert format_timestamp(ns) == "2025-01-01T00:00:00.000000042Z"
    assert parse_timestamp(format_timestamp(ns)) == ns
    assert format_timestamp(ns, fraction=False) == "2025-01-01T00:00:00Z"
    assert Cursor(uid="u", ts=ns, n=2).since_time == "2025-01-01T00:00:00Z"
    assert Cursor().since_time is None


def test_split_timestamp() -> None:
    assert split_timestamp(b"2025-01-01T00:00:00.5Z hello world") == (
        BASE * 10**9 + 500_000_000,
        b"hello world",
    )
    assert split_timestamp(b"2025-01-01T00:00:00Z") == (BASE * 10**9, b"")
    assert split_timestamp(b"no stamp here") == (None, b"no stamp here")
    assert split_timestamp(b"\xff\xfe garbage") == (None, b"\xff\xfe garbage")


def test_line_splitter_across_chunks_and_flush() -> None:
    s = LineSplitter(max_line=100)
    assert s.feed(b"ab") == []
    assert s.feed(b"c\nde\n\nf") == [(b"abc", 0), (b"de", 0), (b"", 0)]
    assert s.flush() == (b"f", 0)
    assert s.flush() is None


def test_line_splitter_truncates_long_lines_with_bounded_memory() -> None:
    s = LineSplitter(max_line=10)
    out = []
    for _ in range(1000):
        out += s.feed(b"x" * 1000)
        assert len(s._buf) <= 10
    out += s.feed(b"tail\nnext\n")
    assert out == [(b"x" * 10, 1_000_000 - 10 + 4), (b"next", 0)]


def test_line_splitter_reset_drops_partial_line() -> None:
    s = LineSplitter()
    s.feed(b"partial")
    s.reset()
    assert s.feed(b"whole\n") == [(b"whole", 0)]


def _stamps(seconds: list[float]) -> list[int]:
    return [int((BASE + s) * 10**9) for s in seconds]


def test_resume_filter_drops_replayed_lines_exactly() -> None:
    # Lines (several per timestamp) read up to the second line at t=1.0, then the stream is cut.
    stream = _stamps([0.5, 1.0, 1.0, 1.0, 1.2, 2.0])
    cursor = Cursor(uid="u")
    first = ResumeFilter(cursor)
    shown = [i for i, ts in enumerate(stream[:3]) if first.accept(ts)]
    assert shown == [0, 1, 2]
    assert (cursor.ts, cursor.n) == (stream[1], 2)
    # Reconnect with sinceTime = whole second of t=1.0: the server replays from t=1.0 on.
    saved = Cursor.from_dict(cursor.to_dict())
    second = ResumeFilter(saved)
    replay = stream[1:]
    shown2 = [i + 1 for i, ts in enumerate(replay) if second.accept(ts)]
    assert shown2 == [3, 4, 5]


def test_resume_filter_many_cuts_show_every_line_once() -> None:
    stream = _stamps([i // 7 * 0.3 for i in range(200)])  # runs of 7 equal timestamps
    cursor = Cursor(uid="u")
    shown: list[int] = []
    pos = 0
    for cut in (5, 13, 14, 40, 41, 42, 99, 150, 199, 200):
        filt = ResumeFilter(cursor)
        since = (cursor.ts // 10**9) * 10**9 if cursor.ts >= 0 else -1
        start = next(i for i, ts in enumerate(stream) if ts >= since)
        assert start <= pos
        for i in range(start, cut):
            if filt.accept(stream[i]):
                shown.append(i)
        pos = cut
        cursor = Cursor.from_dict(cursor.to_dict())
    assert shown == list(range(200))


def test_log_selection() -> None:
    default = LogSelection.parse(None)
    assert default.matches("master", 0, True) and default.matches("worker", 0, True)
    assert not default.matches("worker", 1, False)
    assert LogSelection.parse("all").matches("ps", 3, False)
    sel = LogSelection.parse("worker:1, ps")
    assert sel.matches("worker", 1, False) and sel.matches("ps", 0, False)
    assert not sel.matches("worker", 0, True) and not sel.matches("chief", 0, True)
    assert LogSelection.parse("Worker").matches("worker", 5, False)
    assert not LogSelection().matches("worker", 0, True)


@pytest.mark.parametrize("bad", ["", "foo", "worker:x", "wrk:1", "worker:-1", " , "])
def test_log_selection_errors_name_the_entry(bad: str) -> None:
    with pytest.raises(ValueError, match="log_replicas"):
        LogSelection.parse(bad)


def test_rate_limiter() -> None:
    now = [0.0]
    limiter = RateLimiter(10, clock=lambda: now[0])
    assert sum(limiter.allow() for _ in range(100)) == 50  # a burst of 5 s worth
    now[0] = 0.5
    assert sum(limiter.allow() for _ in range(100)) == 5
    now[0] = 100.0
    assert sum(limiter.allow() for _ in range(100)) == 50  # the bucket does not grow beyond the burst
    assert all(RateLimiter(0).allow() for _ in range(1000))


async def test_batcher_one_record_per_loop_iteration_in_order() -> None:
    records: list[str] = []
    out = LogBatcher(records.append)

    async def replica(name: str, n: int) -> None:
        for i in range(n):
            out(f"[{name}] line {i}")

    # Both tasks run in the same loop iteration, before the flush the first line scheduled.
    await asyncio.gather(replica("worker-0", 3), replica("worker-1", 2))
    assert records == [
        "[worker-0] line 0\n[worker-0] line 1\n[worker-0] line 2\n[worker-1] line 0\n[worker-1] line 1"
    ]
    out("[events] later")
    await asyncio.sleep(0)
    assert records[1:] == ["[events] later"] and out.records == 2


async def test_batcher_bounds_records_by_lines_and_bytes() -> None:
    records: list[str] = []
    out = LogBatcher(records.append, max_lines=500, max_bytes=64 * 1024)
    for i in range(1200):
        out(f"[w-0] {i}")
    await asyncio.sleep(0)
    assert [r.count("\n") + 1 for r in records] == [500, 500, 200]
    assert "\n".join(records).split("\n") == [f"[w-0] {i}" for i in range(1200)]
    records.clear()
    big = "x" * 10_000
    for _ in range(10):
        out(big)
    await asyncio.sleep(0)
    # Cut as soon as a record reaches 64 KiB: 7 lines of 10,001 characters, then the other 3.
    assert [r.count("\n") + 1 for r in records] == [7, 3]


async def test_batcher_flush_writes_pending_lines_at_once() -> None:
    records: list[str] = []
    out = LogBatcher(records.append)
    out("a")
    out("b")
    out.flush()  # e.g. the follow is cancelled: what was accepted reaches the log before it returns
    assert records == ["a\nb"]
    await asyncio.sleep(0)
    assert records == ["a\nb"]  # the scheduled flush finds nothing left


def test_batcher_outside_a_loop_writes_each_line() -> None:
    records: list[str] = []
    out = LogBatcher(records.append)
    out("a")
    out("b")
    assert records == ["a", "b"]
