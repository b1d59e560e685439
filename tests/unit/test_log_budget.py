"""A job's log budget (logs_parsing.JobBudget) and how a replica's reader spends it
(ReplicaFollower._handle): backpressure first, then counted drops, and turns for other work."""

from __future__ import annotations

import asyncio
import time

from airflow_tfjob.follow.logs_parsing import (
    RING_LINE_CHARS,
    SLICE_LINES,
    Cursor,
    JobBudget,
    LogLimits,
    LogSelection,
    ResumeFilter,
    format_timestamp,
)
from airflow_tfjob.follow.replica_logs import JobLogFollower, ReplicaFollower


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_budget_is_free_within_its_rate_and_burst() -> None:
    clock = Clock()
    budget = JobBudget(lines=100, nbytes=10_000, clock=clock)
    assert budget.wait(100, 5_000) == 0.0
    budget.take(100, 5_000)
    clock.now += 0.5  # half a second refills half the lines
    assert budget.wait(50, 100) == 0.0
    assert budget.wait(60, 100) > 0.0


def test_budget_wait_is_the_time_until_the_slice_fits_lines_or_bytes() -> None:
    clock = Clock()
    budget = JobBudget(lines=100, nbytes=1_000, clock=clock)
    budget.take(100, 1_000)  # the burst is spent
    assert budget.wait(50, 0) == 0.5  # lines: 50 at 100/s
    assert budget.wait(1, 2_000) == 2.0  # bytes: 2,000 at 1,000/s
    clock.now += 2.0
    assert budget.wait(50, 500) == 0.0


def test_budget_overdraw_makes_the_next_reader_wait() -> None:
    clock = Clock()
    budget = JobBudget(lines=100, nbytes=0, clock=clock)
    budget.take(300, 0)  # one slice may overdraw
    assert budget.wait(1, 0) == 2.01


def test_budget_backpressure_only_while_the_lines_are_young() -> None:
    budget = JobBudget(max_lag=10.0)
    assert budget.may_wait(lag=2.0, wait=3.0)
    assert not budget.may_wait(lag=8.0, wait=3.0)


def test_zero_budget_is_unlimited() -> None:
    budget = JobBudget(lines=0, nbytes=0)
    budget.take(10**9, 10**12)
    assert budget.wait(10**9, 10**12) == 0.0


# -- the reader ----------------------------------------------------------------------------------


def _follower(limits: LogLimits, sink: list[str]) -> ReplicaFollower:
    owner = JobLogFollower(None, "ns", LogSelection.parse("all"), sink.append, limits=limits)  # type: ignore[arg-type]
    follower = ReplicaFollower(owner, "worker-3", "job-worker-3", True, Cursor())
    owner.replicas["worker-3"] = follower
    return follower


def _lines(n: int, age: float, start: int = 0, size: int = 10) -> list[tuple[bytes, int]]:
    base = int((time.time() - age) * 1e9)
    return [(f"{format_timestamp(base + i)} {'x' * size}{start + i}".encode(), 0) for i in range(n)]


async def _handle(follower: ReplicaFollower, lines: list[tuple[bytes, int]]) -> None:
    await follower._handle(ResumeFilter(follower.cursor), lines)
    follower.owner.sink.flush()


def test_a_flood_of_old_lines_is_dropped_counted_and_announced() -> None:
    sink: list[str] = []
    limits = LogLimits(rate_per_replica=0, budget_lines=100, budget_bytes=0, budget_lag=1.0)
    follower = _follower(limits, sink)
    lines = _lines(1_000, age=30.0)  # far behind its replica: no point in holding the stream back
    asyncio.run(_handle(follower, lines))
    shown = [line for record in sink for line in record.split("\n") if "x" * 10 in line]
    dropped = follower.dropped["budget"]
    assert len(shown) + dropped == 1_000 and dropped > 0
    follower.flush_dropped()
    follower.owner.sink.flush()
    notices = [
        line
        for record in sink
        for line in record.split("\n")
        if "lines dropped from worker-3 (budget" in line
    ]
    assert sum(int(n.split("--- ")[1].split(" ")[0]) for n in notices) == dropped
    assert follower.owner.dropped() == {"worker-3": {"budget": dropped}}
    assert follower.cursor.n == 1 and follower.lines_seen == 1_000  # the cursor passed the dropped lines too


def test_young_lines_over_budget_wait_instead_of_dropping() -> None:
    sink: list[str] = []
    limits = LogLimits(rate_per_replica=0, budget_lines=2_000, budget_bytes=0, budget_lag=10.0)
    follower = _follower(limits, sink)
    lines = _lines(3_000, age=0.0)  # the burst holds 2,000: the rest waits about half a second
    asyncio.run(_handle(follower, lines))
    shown = [line for record in sink for line in record.split("\n") if "x" * 10 in line]
    assert len(shown) == 3_000 and not follower.dropped
    assert follower.owner.budget.waited > 0


def _turns_while_handled(follower: ReplicaFollower, lines: list[tuple[bytes, int]]) -> int:
    """How many turns another task of the loop had while the follower handled ``lines``."""
    turns = 0

    async def other() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    async def main() -> int:
        task = asyncio.get_running_loop().create_task(other())
        await asyncio.sleep(0)
        before = turns
        await _handle(follower, lines)
        task.cancel()
        return turns - before

    return asyncio.run(main())


def test_a_long_batch_gives_other_tasks_turns() -> None:
    follower = _follower(LogLimits(rate_per_replica=0), [])
    assert _turns_while_handled(follower, _lines(SLICE_LINES * 8, age=0.0)) >= 7  # one between every two slices


def test_a_flood_being_dropped_gives_other_tasks_turns_too() -> None:
    """Dropped slices are still split, counted and kept in the ring: a flood far over its budget (what
    the client buffered, handed on without any wait) must not hold the loop for all of it at once."""
    limits = LogLimits(rate_per_replica=0, budget_lines=1, budget_bytes=0, budget_lag=1.0)
    follower = _follower(limits, [])
    assert _turns_while_handled(follower, _lines(SLICE_LINES * 8, age=30.0)) >= 7
    assert follower.dropped["budget"] > SLICE_LINES * 7, follower.dropped


def test_the_diagnostics_ring_keeps_a_bounded_part_of_a_long_line() -> None:
    sink: list[str] = []
    follower = _follower(LogLimits(rate_per_replica=0), sink)
    asyncio.run(_handle(follower, _lines(1, age=0.0, size=10_000)))
    assert len(follower.ring[-1]) == RING_LINE_CHARS
    assert len(sink[-1]) > 10_000  # the task log still shows the line (up to max_line)
