"""What a replica's log follower reads next, decided from the pod as the watch last showed it (pure).

A replica's follower (``replica_logs.ReplicaFollower``) loops: decide, read, decide again. The decisions
are here, apart from the requests, so that each case (no pod yet, a run read to its end, a pod recreated
under the same name, a container restarted in place, a stream cut before or after its container exited,
the last try of a drain) is a function of plain values that a test can give without a cluster, and the
I/O loop only carries them out:

- :func:`plan_read`, before a request: wait for the pod, wait after a run read to its end, stop, or read
  the container's current run (after moving the cursor to it, and bounded when the run has exited);
- :func:`after_read`, after it: what the reconnect layer does next (``hooks.watching.Next``), and
  whether the run is now known to be read to its end.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_tfjob.follow.logs_parsing import Cursor, container_status, pod_terminal, terminated_exit_code
from airflow_tfjob.hooks.watching import Next

#: A run of a replica's main container: (pod uid, restart count).
Run = tuple[str, int]


class Step(enum.Enum):
    """What the follower does before its next request, if any."""

    STOP = "stop"  # draining, and nothing to wait for: the replica is done
    WAIT_POD = "wait_pod"  # no pod, or its container has not started: wait for the watch
    WAIT_AFTER_END = "wait_after_end"  # this run was read to its end: wait for what the watch shows next
    READ = "read"  # read the current run


class Move(enum.Enum):
    """How the cursor moves to the run about to be read."""

    NONE = "none"  # the run the cursor is in
    ADOPT = "adopt"  # the first run seen: the cursor takes it
    RECREATED = "recreated"  # a new pod under the replica's name: announced, the cursor starts over
    RESTARTED = "restarted"  # the container restarted in place: the previous run is finished first


@dataclass(frozen=True, slots=True)
class ReadPlan:
    step: Step
    run: Run = ("", 0)
    exited: bool = False  # the run has terminated: a bounded read of what is left, not a follow
    running: bool = False  # WAIT_AFTER_END: the container still ran (a proxy may have closed the stream)
    move: Move = Move.NONE
    last_exit: int | None = None  # RESTARTED: the exit code of the run before this one, if the pod says
    drop_replay: bool = False  # the run a take-over's trackers missed is over: what they read next is new


def plan_read(
    pod: Mapping[str, Any] | None,
    container: str,
    cursor: Cursor,
    complete: Run | None,
    *,
    replaying: bool,
    draining: bool,
) -> ReadPlan:
    """The next step of a replica whose pod the watch shows as ``pod`` (None: none yet, or deleted).

    ``complete``: the run whose log a clean end of stream said was read; ``replaying``: a take-over's
    trackers still read again before the cursor; ``draining``: the job has ended, so nothing is waited for.
    """
    waiting = ReadPlan(Step.STOP if draining else Step.WAIT_POD)
    if pod is None:
        return waiting
    cs = container_status(pod, container)
    state, last = (cs.get("state") or {}, cs.get("lastState") or {}) if cs else ({}, {})
    if not (state.get("running") or state.get("terminated") or last.get("terminated")):
        return waiting
    assert cs is not None
    run = (str((pod.get("metadata") or {}).get("uid") or ""), int(cs.get("restartCount") or 0))
    if run == complete:
        # Reconnecting by name could reach a recreated pod (or the next run) under this run's cursor.
        return ReadPlan(Step.STOP if draining else Step.WAIT_AFTER_END, run, running=bool(state.get("running")))
    uid, instance = run
    if cursor.uid and uid != cursor.uid:
        move = Move.RECREATED
    elif not cursor.uid:
        move = Move.ADOPT
    elif instance > cursor.instance:
        move = Move.RESTARTED
    else:
        move = Move.NONE
    return ReadPlan(
        Step.READ,
        run,
        exited=bool(state.get("terminated")),
        move=move,
        last_exit=terminated_exit_code(cs, last=True) if move is Move.RESTARTED else None,
        drop_replay=replaying and (uid != cursor.uid or instance != cursor.instance),
    )


@dataclass(frozen=True, slots=True)
class AfterRead:
    next: Next
    complete: bool = False  # the stream ended cleanly: the run's log was read (as far as it knows)
    read_out: bool = False  # ...and certainly to its end: the run had exited when the read ended
    catch_up: Run | None = None  # the run a catch-up read is made at once for (the follower keeps it)


def after_read(
    run: Run,
    *,
    clean: bool,
    got: int,
    exited: bool,
    latest: Mapping[str, Any] | None,
    container: str,
    catch_up: Run | None,
    draining: bool,
    transient_error: bool,
) -> AfterRead:
    """What follows a read of ``run`` that ended ``clean`` (or not) with ``got`` lines accepted.

    ``exited``: the run had terminated when the read began (it was a bounded read); ``latest``: the pod
    as the watch shows it now; ``transient_error``: the request failed in a way worth trying again.
    """
    if clean:
        # The kubelet ends a follow stream when the container exits: this run is read to its end;
        # certainly so if the run had exited when the read ended (no proxy ended it early).
        return AfterRead(Next.FRESH, complete=True, read_out=exited or run_exited(latest, container, *run))
    if not exited and catch_up != run and run_exited(latest, container, *run):
        # The stream ended badly (a gateway that drops the connection instead of ending the stream
        # looks like this at every container exit) and the container has exited since: what is left
        # is read at once, by one bounded request, not after a reconnect delay.
        return AfterRead(Next.AGAIN, catch_up=run)
    if draining and (latest is None or pod_terminal(latest)) and not transient_error:
        # Last try of a draining replica: the previous request got nothing new. A request the API
        # failed (5xx, 429, a cut connection) read nothing at all: it is tried again.
        return AfterRead(Next.STOP, catch_up=catch_up)
    # A stream that was flowing when it was cut reconnects promptly (the delay starts again).
    return AfterRead(Next.RESET_BACK_OFF if got else Next.BACK_OFF, catch_up=catch_up)


def run_exited(pod: Mapping[str, Any] | None, container: str, uid: str, instance: int) -> bool:
    """Whether the pod watch shows this run (pod uid, restart count) of the container terminated."""
    if pod is None or (pod.get("metadata") or {}).get("uid") != uid:
        return False
    cs = container_status(pod, container)
    if cs is None or int(cs.get("restartCount") or 0) != instance:
        return False
    return bool((cs.get("state") or {}).get("terminated"))
