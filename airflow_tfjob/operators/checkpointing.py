"""``checkpoint=``: the task's side of checkpoints that survive retries and preemption (the resume
point from the durable state or a listing; the newest recorded).

Before the job is built, :func:`plan_for` fixes the task instance's checkpoint directory
(:mod:`airflow_tfjob.build.checkpoints`) and the newest checkpoint to resume from: the one an earlier
try recorded in the task's durable state (Airflow's ``task_state_store``, where the job's identity is
kept too), unless, for object storage, the worker lists a newer one in the directory (saved by a
replica preempted before the follow read its line), and the newest listed when there is no record
(state lost: the task instance cleared from the database, or an earlier try that died before
recording). A claim is never listed: the worker cannot mount it, so its checkpoints are known from the
replicas' log only.

After the follow, whatever its outcome (a failure and a Kueue preemption first of all),
:func:`record` keeps the newest checkpoint the replicas reported (``checkpoint saved: <path>
epoch=<n>``, :mod:`airflow_tfjob.follow.checkpoints`) in that state and pushes it to XCom, so the
next try (Airflow's retry, or a retry policy's) starts its job from it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# Object storage through Airflow's own client (fsspec): a run module's import (operators/runs.py and the
# builder import this module, a DAG file's parse does not), and loaded by airflow.sdk's BaseOperator
# already on the locked release (3.3).
from airflow.sdk import ObjectStoragePath

from airflow_tfjob.build.checkpoints import CheckpointStore, location, parse_store, replica_env
from airflow_tfjob.follow.checkpoints import Checkpoint
from airflow_tfjob.operators.identity import job_try_number
from airflow_tfjob.operators.submit import task_identity

if TYPE_CHECKING:
    from airflow.sdk import Context

#: The task_state_store key of the newest checkpoint (beside constants.JOB_STATE_KEY, the job's identity).
STATE_KEY = "checkpoint"
#: The XCom key the newest checkpoint is pushed under ({"path", "epoch", "step", "directory"}).
XCOM_KEY = "checkpoint"

# How a listed entry's name tells its epoch (or step): epoch-7, epoch_0007, ckpt-7.pt, step=1200...
_NUMBERED = re.compile(r"(epoch|step|ckpt|checkpoint)[-_=]?(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class CheckpointPlan:
    """The task instance's checkpoint directory, and what its job starts from."""

    store: CheckpointStore
    directory: str
    resume: Checkpoint | None = None
    source: str = ""  # how the resume point was learned: "recorded" or "listed"

    def env(self) -> dict[str, str]:
        """CHECKPOINT_DIR and RESUME_FROM, for every replica."""
        return replica_env(self.directory, self.resume.path if self.resume is not None else None)

    def follow_fields(self) -> dict[str, Any]:
        """The checkpoint part's options (follow/checkpoints.CheckpointOptions): read the checkpoint
        lines, from the resume point on."""
        return {"checkpoints": True, "resume_from": self.resume.to_dict() if self.resume else None}


def plan_for(value: Any, context: Context, log: Any, *, look: bool = True) -> CheckpointPlan | None:
    """The plan for ``checkpoint=``'s ``value`` (None: no checkpoints). ``look=False`` (render_only)
    reads the durable state but lists nothing."""
    store = value if isinstance(value, CheckpointStore) else parse_store(value)
    if store is None:
        return None
    dag_id, task_id, run_id, map_index, _ = task_identity(context)
    directory = location(store, dag_id, task_id, run_id, map_index)
    recorded = recorded_checkpoint(context, directory)
    otherwise = "resuming from the recorded one" if recorded is not None else "starting without RESUME_FROM"
    listed = newest_listed(store, directory, log, otherwise) if look and not store.is_pvc else None
    if recorded is not None and not _newer(listed, recorded):
        return CheckpointPlan(store, directory, recorded, "recorded")
    return CheckpointPlan(store, directory, listed, "listed" if listed is not None else "")


def _newer(listed: Checkpoint | None, recorded: Checkpoint) -> bool:
    """Whether the directory holds a checkpoint past the recorded one: one saved after the last line
    the earlier try's follow read (a replica preempted or killed just after saving it). Compared in
    the unit both name; a listing in other units does not overrule the record."""
    if listed is None:
        return False
    if listed.epoch is not None and recorded.epoch is not None:
        return listed.epoch > recorded.epoch
    if listed.step is not None and recorded.step is not None:
        return listed.step > recorded.step
    return False


def recorded_checkpoint(context: Context, directory: str) -> Checkpoint | None:
    """The newest checkpoint an earlier try of this task instance recorded for ``directory``."""
    store = context.get("task_state_store")
    value = store.get(STATE_KEY) if store is not None else None
    if not isinstance(value, Mapping) or value.get("directory") != directory:
        return None  # nothing, or another store's (checkpoint= changed between tries)
    return Checkpoint.from_dict(value)


def newest_listed(
    store: CheckpointStore, directory: str, log: Any, otherwise: str = "starting without RESUME_FROM"
) -> Checkpoint | None:
    """The entry of ``directory`` whose name carries the highest epoch (or step) number, through
    Airflow's ObjectStoragePath (the store's connection); None when there is none or it cannot be read
    (a warning then says what the try does instead: ``otherwise``)."""
    try:
        path = ObjectStoragePath(directory, conn_id=store.conn_id)
        if not path.exists():
            return None
        best: tuple[int, str, str] | None = None
        for entry in path.iterdir():
            found = _NUMBERED.findall(entry.name)
            if not found:
                continue
            word, number = found[-1]
            candidate = (int(number), word.lower(), entry.name)
            if best is None or candidate[0] > best[0]:
                best = candidate
    except Exception as error:  # a store the worker cannot read costs the resume point, not the task
        log.warning("Could not list the checkpoints in %s (%s): %s", directory, error, otherwise)
        return None
    if best is None:
        return None
    number, word, name = best
    where = f"{directory}/{name}"
    return Checkpoint(where, step=number) if word == "step" else Checkpoint(where, epoch=number)


def announce(plan: CheckpointPlan | None, job: Mapping[str, Any], context: Context, log: Any) -> None:
    """One line about where the job's checkpoints go and where it starts from, once the job is known:
    "resuming from ..." only for a job this try created (a reattached job goes on by itself)."""
    if plan is None:
        return
    created_now = job_try_number(job) == task_identity(context)[4]
    if plan.resume is not None and created_now:
        how = "recorded by an earlier try" if plan.source == "recorded" else "the newest in the directory"
        log.info("Checkpoints in %s; %s (%s)", plan.directory, plan.resume.resuming_line(), how)
    elif plan.resume is None and created_now:
        log.info("Checkpoints in %s; none to resume from: training from the start", plan.directory)
    else:
        log.info("Checkpoints in %s", plan.directory)


def record(plan: CheckpointPlan | None, newest: Mapping[str, Any] | None, context: Context, log: Any) -> None:
    """Keep the newest checkpoint (the follow's, else the one the job started from) in the task's
    durable state and push it to XCom; nothing when there is none yet."""
    if plan is None:
        return
    checkpoint = Checkpoint.from_dict(newest) or plan.resume
    if checkpoint is None:
        return
    value = {**checkpoint.to_dict(), "directory": plan.directory}
    store = context.get("task_state_store")
    if store is not None:
        store.set(STATE_KEY, value)
    context["ti"].xcom_push(key=XCOM_KEY, value=value)
    if checkpoint != plan.resume:
        log.info("Newest checkpoint: %s", checkpoint.describe())
