"""What a new try does with the jobs (any kind) an earlier try of the same task instance left behind.

Pure: :func:`airflow_tfjob.operators.submit.find_or_create` lists the task instance's jobs (its
task_state_store record, then :func:`naming.identity_selector`, which excludes jobs already marked
handled) and acts on the :class:`Decision`.

Rules:

- a job still in progress (created, running, restarting, suspended) is **reattached**: a worker
  that crashed must not lose a running job, nor start a second one;
- a job that **succeeded** but whose result was never reported (the worker died after the end) is
  **reported** without training again;
- otherwise (it failed, or its result was already reported, e.g. the task was cleared) a new job
  is **created** and the old ones are marked handled, so a cleared task trains again.

Whatever the decision, every other job found is marked handled (and those still running are to be
deleted), so a task instance never has two unhandled jobs. One exception to "failed => create":
a finished, unreported job of the *current* try is reported, because this try's name is taken and
its outcome is this try's outcome.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from airflow_tfjob.constants import ANNOTATION_RESULT_REPORTED, LABEL_HANDLED, LABEL_TRY_NUMBER
from airflow_tfjob.jobs.status import JobState, interpret

Action = Literal["create", "reattach", "report"]


@dataclass(frozen=True)
class Decision:
    action: Action
    job: Mapping[str, Any] | None = None  # the job to reattach to or report; None for "create"
    mark_handled: tuple[str, ...] = ()  # names of other jobs to label handled
    delete: tuple[str, ...] = ()  # names of other jobs still running: stop them (also in mark_handled)
    reason: str = ""  # one line for the task log

    @property
    def job_name(self) -> str | None:
        return _name(self.job) if self.job is not None else None


def _name(job: Mapping[str, Any]) -> str:
    return str((job.get("metadata") or {}).get("name") or "")


def job_try_number(job: Mapping[str, Any]) -> int | None:
    value = ((job.get("metadata") or {}).get("labels") or {}).get(LABEL_TRY_NUMBER)
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def is_handled(job: Mapping[str, Any]) -> bool:
    return ((job.get("metadata") or {}).get("labels") or {}).get(LABEL_HANDLED) == "true"


def is_result_reported(job: Mapping[str, Any]) -> bool:
    return ((job.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_RESULT_REPORTED) == "true"


def _age_key(job: Mapping[str, Any]) -> tuple[int, str, str]:
    # Oldest first: try number, then creation time (RFC 3339 strings sort chronologically), then name.
    metadata = job.get("metadata") or {}
    try_number = job_try_number(job)
    return (
        try_number if try_number is not None else -1,
        str(metadata.get("creationTimestamp") or ""),
        _name(job),
    )


def decide(found: Sequence[Mapping[str, Any]], try_number: int) -> Decision:
    """Create, reattach or report, given the task instance's jobs and the current try number."""
    jobs = sorted(
        (j for j in found if not is_handled(j) and not (j.get("metadata") or {}).get("deletionTimestamp")),
        key=_age_key,
    )
    if not jobs:
        return Decision("create", reason="no earlier job for this task instance")
    states = {id(j): interpret(j).state for j in jobs}

    def others(chosen: Mapping[str, Any] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
        rest = [j for j in jobs if j is not chosen]
        running = tuple(_name(j) for j in rest if states[id(j)] not in (JobState.SUCCEEDED, JobState.FAILED))
        return tuple(_name(j) for j in rest), running

    active = [j for j in jobs if states[id(j)] not in (JobState.SUCCEEDED, JobState.FAILED)]
    if active:
        chosen = active[-1]
        handled, delete = others(chosen)
        return Decision(
            "reattach",
            chosen,
            handled,
            delete,
            f"reattaching to {_name(chosen)} (try {job_try_number(chosen)}), still {states[id(chosen)].value}",
        )
    unreported = [j for j in jobs if not is_result_reported(j)]
    succeeded = [j for j in unreported if states[id(j)] is JobState.SUCCEEDED]
    own = [j for j in unreported if job_try_number(j) == try_number]
    if own or succeeded:
        chosen = own[-1] if own else succeeded[-1]
        handled, delete = others(chosen)
        return Decision(
            "report",
            chosen,
            handled,
            delete,
            f"{_name(chosen)} (try {job_try_number(chosen)}) already {states[id(chosen)].value}; "
            "reporting its result instead of training again",
        )
    handled, delete = others(None)
    outcomes = ", ".join(
        f"{_name(j)} {states[id(j)].value}{' (reported)' if is_result_reported(j) else ''}" for j in jobs
    )
    return Decision(
        "create", None, handled, delete, f"earlier jobs are finished ({outcomes}): training again"
    )
