"""The log follower's pure decisions (follow/next_read.py): each case of a replica's next read from plain
pod values, with no cluster and no stream."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_tfjob.follow.logs_parsing import Cursor
from airflow_tfjob.follow.next_read import Move, Step, after_read, plan_read, run_exited
from airflow_tfjob.hooks.watching import Next

C = "tensorflow"


def pod(uid: str = "u1", restarts: int = 0, state: str | None = "running", phase: str = "Running",
        last_exit: int | None = None) -> dict[str, Any]:  # fmt: skip
    cs: dict[str, Any] = {"name": C, "restartCount": restarts, "state": {}, "lastState": {}}
    if state == "running":
        cs["state"] = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    elif state == "terminated":
        cs["state"] = {"terminated": {"exitCode": 0}}
    if last_exit is not None:
        cs["lastState"] = {"terminated": {"exitCode": last_exit}}
    return {"metadata": {"uid": uid}, "status": {"phase": phase, "containerStatuses": [cs]}}


@pytest.mark.parametrize("draining, step", [(False, Step.WAIT_POD), (True, Step.STOP)])
def test_no_pod_or_a_container_not_started_waits_unless_draining(draining: bool, step: Step) -> None:
    for p in (None, pod(state=None, phase="Pending")):
        assert plan_read(p, C, Cursor(), None, replaying=False, draining=draining).step is step


def test_the_first_run_seen_is_adopted_and_read_following() -> None:
    plan = plan_read(pod(), C, Cursor(), None, replaying=False, draining=False)
    assert (plan.step, plan.run, plan.move, plan.exited) == (Step.READ, ("u1", 0), Move.ADOPT, False)


def test_a_terminated_run_is_read_bounded() -> None:
    plan = plan_read(pod(state="terminated", phase="Succeeded"), C, Cursor(uid="u1"), None, replaying=False,
                     draining=False)  # fmt: skip
    assert (plan.step, plan.move, plan.exited) == (Step.READ, Move.NONE, True)


def test_a_run_read_to_its_end_waits_for_the_watch_and_says_whether_it_still_ran() -> None:
    plan = plan_read(pod(), C, Cursor(uid="u1"), ("u1", 0), replaying=False, draining=False)
    assert (plan.step, plan.running) == (Step.WAIT_AFTER_END, True)
    assert plan_read(pod(), C, Cursor(uid="u1"), ("u1", 0), replaying=False, draining=True).step is Step.STOP


def test_a_recreated_pod_and_a_restarted_container_move_the_cursor() -> None:
    recreated = plan_read(pod(uid="u2"), C, Cursor(uid="u1"), None, replaying=True, draining=False)
    assert (recreated.move, recreated.drop_replay) == (Move.RECREATED, True)
    restarted = plan_read(pod(restarts=2, last_exit=137), C, Cursor(uid="u1", instance=1), None,
                          replaying=False, draining=False)  # fmt: skip
    assert (restarted.move, restarted.last_exit, restarted.run) == (Move.RESTARTED, 137, ("u1", 2))
    same = plan_read(pod(), C, Cursor(uid="u1"), None, replaying=True, draining=False)
    assert (same.move, same.drop_replay) == (Move.NONE, False)  # the replay goes on in the same run


def _after(**kw: Any) -> Any:
    args: dict[str, Any] = dict(clean=False, got=0, exited=False, latest=pod(), container=C, catch_up=None,
                                draining=False, transient_error=False)  # fmt: skip
    return after_read(("u1", 0), **{**args, **kw})


def test_a_clean_end_completes_the_run_and_is_certain_only_once_it_exited() -> None:
    assert _after(clean=True) == _after(clean=True, latest=pod())
    assert (_after(clean=True).next, _after(clean=True).complete, _after(clean=True).read_out) == (
        Next.FRESH, True, False,
    )  # fmt: skip
    assert _after(clean=True, exited=True).read_out
    assert _after(clean=True, latest=pod(state="terminated", phase="Succeeded")).read_out


def test_a_cut_stream_of_an_exited_run_is_caught_up_at_once_but_only_once() -> None:
    done = pod(state="terminated", phase="Succeeded")
    first = _after(latest=done)
    assert (first.next, first.catch_up) == (Next.AGAIN, ("u1", 0))
    again = _after(latest=done, catch_up=("u1", 0))
    assert again.next is Next.BACK_OFF and again.catch_up == ("u1", 0)


def test_a_drain_stops_after_a_read_that_got_nothing_unless_the_api_failed() -> None:
    done = pod(state="terminated", phase="Succeeded")
    assert _after(latest=done, catch_up=("u1", 0), draining=True).next is Next.STOP
    assert _after(latest=None, draining=True).next is Next.STOP
    assert _after(latest=done, catch_up=("u1", 0), draining=True, transient_error=True).next is Next.BACK_OFF
    assert _after(got=5).next is Next.RESET_BACK_OFF and _after().next is Next.BACK_OFF


def test_run_exited_reads_this_run_only() -> None:
    done = pod(state="terminated", phase="Succeeded")
    assert run_exited(done, C, "u1", 0)
    assert not run_exited(done, C, "u2", 0) and not run_exited(done, C, "u1", 1) and not run_exited(None, C, "u1", 0)
