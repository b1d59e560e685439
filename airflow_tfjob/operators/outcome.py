"""From the way a job's follow ended to the task's result or its exception.

The same for the synchronous and the deferred path: both reach the operator's ``_report`` with a
:class:`~airflow_tfjob.follow.FollowOutcome` once the logs are drained.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowException, AirflowTaskTimeout

from airflow_tfjob import cleanup
from airflow_tfjob.constants import ANNOTATION_RESULT_REPORTED
from airflow_tfjob.status import JobState, JobStatus, job_kind

if TYPE_CHECKING:
    from airflow_tfjob.follow import FollowOutcome
    from airflow_tfjob.hooks.tfjob import TFJobHook

#: The keys of the task's result (XCom ``return_value``) for a succeeded job.
RESULT_KEYS = (
    "name",
    "namespace",
    "uid",
    "state",
    "reason",
    "message",
    "replica_statuses",
    "start_time",
    "completion_time",
    "metrics",
)


# The follow events of kueue/tracker.py (FAILURE_EVENTS) and why the job is deleted for each.
_KUEUE_FAILURES = {
    "queue_timeout": "it was not admitted by Kueue within queue_timeout",
    "preempted": "Kueue preempted it and on_preemption is 'fail'",
    "kueue_ignored": "Kueue did not take it in and kueue_require_admission is set",
}


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
    if outcome.event == "startup_timeout":
        # Its pods never started: keeping it would let it grab resources long after the task failed.
        delete("its pods did not start within startup_timeout")
        raise AirflowException(
            f"{kind} {namespace}/{name} did not start within startup_timeout={startup_timeout} s "
            f"and was deleted: {outcome.message}"
        )
    if outcome.event in _KUEUE_FAILURES:
        # Kueue's verdicts (kueue/tracker.py): a job left queued or suspended would hold its place.
        if job is not None:
            delete(_KUEUE_FAILURES[outcome.event])
        raise AirflowException(f"{outcome.message} (the {kind} was deleted)")
    if outcome.event == "error" or outcome.status is None or job is None:
        raise AirflowException(
            f"Lost track of {kind} {namespace}/{name}: {outcome.message or 'the job no longer exists'}"
        )
    return outcome.status


def settle(
    hook: TFJobHook,
    job: Mapping[str, Any],
    status: JobStatus,
    metrics: Mapping[str, Any],
    on_finish_action: str,
    *,
    log: Any,
    push: Callable[[str, Any], None],
) -> None:
    """After the final state: clean up, publish the metrics; a failed job is marked reported and raises."""
    succeeded = status.state is JobState.SUCCEEDED
    finish_cleanup(hook, job, succeeded=succeeded, on_finish_action=on_finish_action, log=log, push=push)
    if metrics:
        push("metrics", metrics)
    if not succeeded:
        mark_reported(hook, job, log)
        meta = job["metadata"]
        failing = ", ".join(status.failed_replica_types) or "unknown"
        raise AirflowException(
            f"{job_kind(job).kind} {meta['namespace']}/{meta['name']} failed ({status.reason}): {status.message} "
            f"[failing replicas: {failing}]"
        )


def finish_cleanup(
    hook: TFJobHook,
    job: Mapping[str, Any],
    *,
    succeeded: bool,
    on_finish_action: str,
    log: Any,
    push: Callable[[str, Any], None],
) -> None:
    """Apply the on-finish action and the intended cleanup; its failure never decides the outcome.

    The job's outcome is known and its logs are read: a cleanup the API refuses even after the
    retry policy is reported (warning, XCom ``cleanup_error``) and the task keeps the job's outcome.
    """
    try:
        cleanup.finish(hook, job, succeeded=succeeded, on_finish_action=on_finish_action, log=log.info)
    except Exception as error:
        meta = job["metadata"]
        left = cleanup.leftover_description(job, on_finish_action, succeeded)
        log.warning(
            "Cleanup of %s %s/%s failed (%s); left behind: %s. The task keeps the job's outcome.",
            job_kind(job).kind,
            meta["namespace"],
            meta["name"],
            error,
            left,
        )
        push("cleanup_error", {"error": str(error), "left_behind": left})


def mark_reported(hook: TFJobHook, job: Mapping[str, Any], log: Any) -> None:
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
    from airflow_tfjob.limits import bounded, shown_json
    from airflow_tfjob.secrets import redact

    shown = redact(tfjob)
    log.info("render_only=True: %s not submitted. Manifest:\n%s", job_kind(tfjob).kind, shown_json(shown))
    return {"rendered_only": True, "manifest": bounded(shown)}


def result(
    job: Mapping[str, Any],
    status: JobStatus,
    metrics: Mapping[str, Any],
    progress: Mapping[str, Any] | None = None,
    queue: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The task's result; with ``progress`` (the operator's parameter) its figures and timeline too;
    for a job queued by Kueue, the seconds it waited in the queue and how often it was preempted."""
    meta = job["metadata"]
    out = {
        "name": meta["name"],
        "namespace": meta["namespace"],
        "uid": meta.get("uid"),
        "state": status.state.value,
        "reason": status.reason,
        "message": status.message,
        "replica_statuses": status.replica_statuses,
        "start_time": status.start_time,
        "completion_time": status.completion_time,
        "metrics": dict(metrics),
    }
    if progress is not None:
        out["progress"] = dict(progress)
    if queue is not None:
        out["queue_wait_seconds"] = queue.get("wait_seconds", 0.0)
        out["preemptions"] = queue.get("preemptions", 0)
    return out
