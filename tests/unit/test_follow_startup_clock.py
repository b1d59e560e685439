"""A follow judges its job's start only once its pod watch has listed the pods, and keeps no clock for it
before then: a triggerer taking over thousands of follows past their start-up window would otherwise
wake each of them every 0.2 s until its pod list came back. The list's arrival wakes the follow's wait
on its job at once, so the start is judged then, not at the job's next change."""

from __future__ import annotations

import asyncio
import time
from typing import cast

from airflow_tfjob.follow.core import _JobFollow
from airflow_tfjob.follow.outcome import FollowOptions
from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook
from airflow_tfjob.hooks.jobwatch import Subscription

# The clock and the wake-up touch no hook.
NO_HOOK = cast(AsyncKubeflowJobHook, object())


def _sink(line: str) -> None:
    del line


def _taken_over() -> _JobFollow:
    """A follow whose start-up window (60 s from its deferral) passed a minute ago."""
    options = FollowOptions(startup_timeout=60, startup_from=time.time() - 120)
    return _JobFollow(NO_HOOK, "job", "ns", options, _sink, None)


async def test_no_start_up_clock_runs_until_the_pods_are_listed_and_their_list_wakes_the_follow() -> None:
    follow = _taken_over()
    assert follow.pods_synced is not None  # it reads logs, so it watches the pods
    assert follow._tick() is None, "a clock before the pod list"

    sub = Subscription("job")
    follow._sub = sub
    waiting = asyncio.ensure_future(sub.next(timeout=None))
    await asyncio.sleep(0)
    assert not waiting.done()
    follow.pods_synced.set()
    follow._pods_listed()
    done, _ = await asyncio.wait({waiting}, timeout=5)
    assert waiting in done, "the pod list did not wake the follow"
    # Woken as its timeout would wake it: the follow checks its clocks again, the start-up's now.
    assert isinstance(waiting.exception(), TimeoutError)
    assert follow._tick() == 0.2, "the window has passed: judged at once"


async def test_a_started_follow_is_not_woken_by_a_relist() -> None:
    follow = _taken_over()
    follow.started = True
    sub = Subscription("job")
    follow._sub = sub
    waiting = asyncio.ensure_future(sub.next(timeout=None))
    await asyncio.sleep(0)
    assert follow.pods_synced is not None
    follow.pods_synced.set()
    follow._pods_listed()
    await asyncio.sleep(0)
    assert not waiting.done()
    waiting.cancel()
    assert follow._tick() is None


async def test_a_pod_watch_refused_for_good_lets_the_start_be_judged_on_what_it_saw() -> None:
    """A pod watch that ended (a permanent refusal, logged where it happened) will never list: the start
    is judged without it, as before the check waited for the list, instead of never."""
    follow = _taken_over()

    async def refused() -> None:
        raise PermissionError("pods is forbidden")  # what the watch's permanent error does to its task

    watch = asyncio.ensure_future(refused())
    await asyncio.gather(watch, return_exceptions=True)
    assert follow._tick() is None
    follow._pod_watch = watch
    assert follow._tick() == 0.2
