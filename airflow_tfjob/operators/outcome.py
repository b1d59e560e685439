"""From the way a job's follow ended to the task's result or its exception.

The same for the synchronous and the deferred path: both reach the operator's ``_report`` with a
:class:`~airflow_tfjob.follow.core.FollowOutcome` once the logs are drained.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_tfjob.build.limits import bounded, shown_json
from airflow_tfjob.build.secrets import redact
from airflow_tfjob.constants import ANNOTATION_RESULT_REPORTED, KUEUE_FAILURE_EVENTS
from airflow_tfjob.follow import cleanup
from airflow_tfjob.follow.cost import job_cost
from airflow_tfjob.follow.failure import TrainingJobFailed, classify
from airflow_tfjob.follow.summary import cost_summary
from airflow_tfjob.jobs.adapter import adapter_for
from airflow_tfjob.jobs.status import JobState, JobStatus, job_kind
from airflow_tfjob.version_compat import AirflowException, AirflowTaskTimeout

if TYPE_CHECKING:
    from airflow_tfjob.follow.outcome import FollowOutcome
    from airflow_tfjob.hooks.sync import KubeflowJobHook



def final_status(
    outcome: FollowOutcome,
    job: Mapping[str, Any] | None,
    name: str,
    namespace: str,
    *,
    startup_timeout: float | None,
    delete: Callable[[str], Any],
    kind: str = "TFJob",
) -> JobStatus:
    """The finished job's status; a follow that ended otherwise raises (after ``delete(why)``)."""
    if outcome.event == "timeout":
        if job is not None:
            delete("it did not finish within execution_timeout")
        raise AirflowTaskTimeout(
            f"{kind} {namespace}/{name} did not finish within execution_timeout and was deleted: "
            f"{outcome.message}"
        )
    specs = adapter_for(job_kind(job)).replica_specs(job) if job is not None else {}
    if outcome.event == "startup_timeout":
        # Its pods never started: keeping it would let it grab resources long after the task failed.
        delete("its pods did not start within startup_timeout")
        raise TrainingJobFailed(
            f"{kind} {namespace}/{name} did not start within startup_timeout={startup_timeout} s "
            f"and was deleted: {outcome.message}",
            classify(outcome.event, outcome.failures, specs, outcome.message),
        )
    if outcome.event == "cannot_start":
        # A pod that cannot start as it is (its image cannot be pulled): the job would wait forever.
        delete("its pods cannot start")
        raise TrainingJobFailed(
            f"{outcome.message} (the {kind} was deleted)",
            classify(outcome.event, outcome.failures, specs, outcome.message),
        )

    if outcome.event in KUEUE_FAILURE_EVENTS:
        # Kueue's verdicts (kueue/tracker.py, kueue/multikueue.py): a job left queued or suspended would
        # hold its place; one whose worker was lost would hold its quota on the manager.
        if job is not None:
            delete(KUEUE_FAILURE_EVENTS[outcome.event])
        raise TrainingJobFailed(
            f"{outcome.message} (the {kind} was deleted)", classify(outcome.event, message=outcome.message)
        )
    if outcome.event == "error" or outcome.status is None or job is None:
        raise AirflowException(
            f"Lost track of {kind} {namespace}/{name}: {outcome.message or 'the job no longer exists'}"
        )
    return outcome.status


def report_cost(
    job: Mapping[str, Any],
    queue: Mapping[str, Any] | None,
    *,
    now: float,
    log: Any,
    push: Callable[[str, Any], None],
) -> dict[str, Any]:
    """What the finished job held (``follow.cost``), succeeded or failed: one line in the task log, the
    XCom ``cost``; returned for the result and the lineage facet. ``queue``: the Kueue tracker's summary
    (its ``wait_seconds``), for a job that had a queue."""
    wait = queue.get("wait_seconds") if queue is not None else None
    cost = job_cost(job, now=now, queue_wait=wait).to_dict()
    meta = job["metadata"]
    log.info("%s", cost_summary(job_kind(job).kind, meta["namespace"], meta["name"], cost))
    push("cost", cost)
    return cost


def settle(
    hook: KubeflowJobHook,
    job: Mapping[str, Any],
    status: JobStatus,
    metrics: Mapping[str, Any],
    on_finish_action: str,
    *,
    log: Any,
    push: Callable[[str, Any], None],
    failures: Sequence[Mapping[str, Any]] = (),
    keep_failed_for: int | None = None,
    now: float | None = None,
) -> None:
    """After the final state: clean up, publish the metrics; a failed job is marked reported and raises
    :class:`TrainingJobFailed` with its cause, read from ``failures`` (the follow's diagnoses).
    ``keep_failed_for`` (seconds): a failed job's pods stay that long after it failed (``now``: the
    clock, epoch seconds), then the job goes; a succeeded job is cleaned up as ever."""
    succeeded = status.state is JobState.SUCCEEDED
    finish_cleanup(
        hook, job, succeeded=succeeded, on_finish_action=on_finish_action, log=log, push=push,
        keep_failed_for=keep_failed_for, now=now,
    )  # fmt: skip
    if metrics:
        push("metrics", metrics)
    if not succeeded:
        mark_reported(hook, job, log)
        meta = job["metadata"]
        failing = ", ".join(status.failed_replica_types) or "unknown"
        specs = adapter_for(job_kind(job)).replica_specs(job)
        raise TrainingJobFailed(
            f"{job_kind(job).kind} {meta['namespace']}/{meta['name']} failed ({status.reason}): {status.message} "
            f"[failing replicas: {failing}]",
            classify("failed", failures, specs, status.message),
        )


def finish_cleanup(
    hook: KubeflowJobHook,
    job: Mapping[str, Any],
    *,
    succeeded: bool,
    on_finish_action: str,
    log: Any,
    push: Callable[[str, Any], None],
    keep_failed_for: int | None = None,
    now: float | None = None,
) -> None:
    """Apply the on-finish action and the intended cleanup; its failure never decides the outcome.

    The job's outcome is known and its logs are read: a cleanup the API refuses even after the
    retry policy is reported (warning, XCom ``cleanup_error``) and the task keeps the job's outcome.
    """
    try:
        cleanup.finish(
            hook, job, succeeded=succeeded, on_finish_action=on_finish_action, log=log.info,
            keep_failed_for=keep_failed_for, now=now,
        )  # fmt: skip
    except Exception as error:
        meta = job["metadata"]
        left = cleanup.leftover_description(job, on_finish_action, succeeded, keep_failed_for)
        log.warning(
            "Cleanup of %s %s/%s failed (%s); left behind: %s. The task keeps the job's outcome.",
            job_kind(job).kind,
            meta["namespace"],
            meta["name"],
            error,
            left,
        )
        push("cleanup_error", {"error": str(error), "left_behind": left})


def mark_reported(hook: KubeflowJobHook, job: Mapping[str, Any], log: Any) -> None:
    """Record that a try reported this job's outcome, so that a later try trains again.

    Done just before the task returns (Airflow pushes the XCom right after): a worker dying in
    between makes the next try train again rather than report a result twice.
    """
    meta = job["metadata"]
    try:
        hook.patch_job(
            job_kind(job),
            meta["name"],
            meta["namespace"],
            {"metadata": {"annotations": {ANNOTATION_RESULT_REPORTED: "true"}}},
        )
    except Exception as error:
        # Deleted by on_finish_action or TTL 0: nobody can find it again anyway.
        log.debug("Could not mark %s/%s reported: %s", meta["namespace"], meta["name"], error)


def rendered_only(tfjob: dict[str, Any], log: Any) -> dict[str, Any]:
    """The result of ``render_only=True``: the manifest, secrets redacted, in the log and XCom."""
    shown = redact(tfjob)
    log.info("render_only=True: %s not submitted. Manifest:\n%s", job_kind(tfjob).kind, shown_json(shown))
    return {"rendered_only": True, "manifest": bounded(shown)}


def result(
    job: Mapping[str, Any],
    status: JobStatus,
    metrics: Mapping[str, Any],
    progress: Mapping[str, Any] | None = None,
    queue: Mapping[str, Any] | None = None,
    cost: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The task's result; with ``progress`` (the operator's parameter) its figures and timeline too;
    for a job queued by Kueue, the seconds it waited in the queue and how often it was preempted;
    ``cost``: what the job held (:func:`report_cost`)."""
    meta = job["metadata"]
    kind = job_kind(job)
    out = {
        "name": meta["name"],
        "namespace": meta["namespace"],
        "uid": meta.get("uid"),
        "api": kind.singular,  # "tfjob", "trainjob", "pytorchjob"...: the API the job ran on
        "state": status.state.value,
        "reason": status.reason,
        "message": status.message,
        "replica_statuses": status.replica_statuses,
        "start_time": status.start_time,
        "completion_time": status.completion_time,
        "metrics": dict(metrics),
        "cost": dict(cost) if cost is not None else None,
    }
    if progress is not None:
        out["progress"] = dict(progress)
    if queue is not None:
        out["queue_wait_seconds"] = queue.get("wait_seconds", 0.0)
        out["preemptions"] = queue.get("preemptions", 0)
    extras = adapter_for(kind).result_extras(job)  # a TrainJob's progress status, where the cluster fills it
    out.update(extras.fields)
    for key, value in extras.metrics.items():
        out["metrics"].setdefault(key, value)
    return out
