"""A TrainJob object -> the provider's JobStatus, the same shape as a TFJob's (pure).

trainjob-behaviour.md §6: a TrainJob has no Created/Running conditions and no start or completion
time. Its conditions are ``Suspended`` (True/Suspended, False/Resumed), ``Complete`` (reason copied from
the JobSet, AllJobsCompleted) and ``Failed`` (FailedJobs..., DeadlineExceeded,
TrainingRuntimeNotSupported); ``jobsStatus`` counts the *Jobs* of each replicated job. So: Failed wins,
then Complete, then Suspended=True; otherwise Running once a replicated job has an active or ready
Job, else Created. Times: the deciding condition's lastTransitionTime is the completion time, the
TrainJob's creation (or its last resume) the start time. ``trainerStatus`` (the progress status,
§7) is read by :func:`trainer_progress`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_tfjob.jobs.status import COUNT_KEYS, JobState, JobStatus, true_conditions
from airflow_tfjob.jobs.trainjob.pods import ANNOTATION_TF_REPLICAS

# "jobset failed due to one or more job failures (first failed job: mnist-node-0)"
_FIRST_FAILED_RE = re.compile(r"first failed job: ([-a-z0-9.]+)\)")


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def replica_statuses(job: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """Per replicated job, its Jobs counted active / succeeded / failed (``jobsStatus``, in its order).

    A TFJob the provider runs as a TrainJob (annotated with its replica types, from_tfjob.py) is counted
    as a TFJob is, by TensorFlow replica type and pod: a complete Job's pods all succeeded, an active
    Job's pods are active, a failed Job counts one failed pod (the one that failed it).
    """
    counts: dict[str, dict[str, int]] = {}
    for entry in (job.get("status") or {}).get("jobsStatus") or ():
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
            counts[entry["name"]] = {key: _count(entry.get(key)) for key in COUNT_KEYS}
    tf_types = tf_replicas(job)
    if not tf_types:
        return counts
    result = {}
    for rtype, (rjob, replicas) in tf_types.items():
        jobs = counts.get(rjob, dict.fromkeys(COUNT_KEYS, 0))
        result[rtype] = {
            "active": jobs["active"] * replicas,
            "succeeded": jobs["succeeded"] * replicas,
            "failed": jobs["failed"],
        }
    return result


def tf_replicas(job: Mapping[str, Any]) -> dict[str, tuple[str, int]]:
    """TFJob replica type -> (replicated job, replicas) of a TFJob run as a TrainJob; {} otherwise."""
    raw = ((job.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_TF_REPLICAS)
    try:
        value = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): (str(v[0]), int(v[1])) for k, v in value.items() if isinstance(v, list) and len(v) == 2}


def _failed_jobs(
    job: Mapping[str, Any], counts: Mapping[str, Mapping[str, int]], message: str
) -> tuple[str, ...]:
    """The failed Jobs as the task log names their replicas' type (``node-0``: ``<rJob>-<jobIdx>``)."""
    match = _FIRST_FAILED_RE.search(message)
    if match:
        # The first failed Job, "<tj>-<rJob>-<jobIdx>", without the TrainJob's name.
        prefix = f"{(job.get('metadata') or {}).get('name', '')}-"
        return (match.group(1).removeprefix(prefix),)
    # The trainer forces one Job per replicated job (replicas: 1): job index 0.
    failed = [name for name, c in counts.items() if c["failed"] > 0]
    rjobs = {rtype: rjob for rtype, (rjob, _) in tf_replicas(job).items()}
    return tuple(f"{rjobs.get(name, name)}-0" for name in failed)


def _start_time(job: Mapping[str, Any]) -> str | None:
    for cond in (job.get("status") or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "Suspended" and cond.get("status") == "False":
            return str(cond.get("lastTransitionTime") or "") or None  # the deadline clock restarts here too
    created = (job.get("metadata") or {}).get("creationTimestamp")
    return str(created) if created else None


def interpret(job: Mapping[str, Any]) -> JobStatus:
    conditions = true_conditions(job)
    counts = replica_statuses(job)
    deciding: Mapping[str, Any] | None = None
    if "Failed" in conditions:
        state, deciding = JobState.FAILED, conditions["Failed"]
    elif "Complete" in conditions:
        state, deciding = JobState.SUCCEEDED, conditions["Complete"]
    elif "Suspended" in conditions:
        state, deciding = JobState.SUSPENDED, conditions["Suspended"]
    elif any(c["active"] for c in counts.values()) or any(
        _count(e.get("ready"))
        for e in (job.get("status") or {}).get("jobsStatus") or ()
        if isinstance(e, Mapping)
    ):
        state = JobState.RUNNING
    else:
        state = JobState.CREATED
    message = str((deciding or {}).get("message") or "")
    finished = state in (JobState.SUCCEEDED, JobState.FAILED)
    return JobStatus(
        state=state,
        reason=str((deciding or {}).get("reason") or ""),
        message=message,
        replica_statuses=counts,
        failed_replica_types=_failed_jobs(job, counts, message) if state is JobState.FAILED else (),
        start_time=_start_time(job),
        completion_time=str((deciding or {}).get("lastTransitionTime") or "") or None if finished else None,
    )


#: Pod phases that show a node has started: its TrainJob is running (or finishing) whatever its status says.
_STARTED_PHASES = frozenset({"Running", "Succeeded"})


def with_pods(status: JobStatus, pods: Sequence[Mapping[str, Any]]) -> JobStatus:
    """A TrainJob :func:`interpret` reads as Created whose live pods have started: Running.

    A TrainJob has no Running condition (§6) and its ``jobsStatus`` is copied from the JobSet's status,
    which its controller writes after the Jobs' own, after the pods': the pods are the first word that the
    job runs. A Kueue-managed TrainJob read by its conditions alone looks Created for its whole run
    (kubeflow/sdk#803); this reads neither a missing condition nor a lagging count as "not running".
    Only Created is corrected: a suspended, finished or running status already says more than pods can
    (a suspended job's pods are being deleted), and a pod being deleted counts for nothing."""
    if status.state is not JobState.CREATED:
        return status
    for pod in pods:
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        if (pod.get("status") or {}).get("phase") in _STARTED_PHASES:
            return dataclasses.replace(status, state=JobState.RUNNING)
    return status


def trainer_progress(job: Mapping[str, Any]) -> dict[str, Any] | None:
    """``status.trainerStatus`` as the result shows it (§7), None when the cluster fills none:
    ``{"percentage": 40, "remaining_seconds": 120, "metrics": {"loss": 0.23}, "updated": "..."}``
    (metric values as numbers where they parse)."""
    raw = (job.get("status") or {}).get("trainerStatus")
    if not isinstance(raw, Mapping):
        return None
    metrics: dict[str, Any] = {}
    for entry in raw.get("metrics") or ():
        if isinstance(entry, Mapping) and entry.get("name"):
            metrics[str(entry["name"])] = _number(entry.get("value"))
    return {
        "percentage": raw.get("progressPercentage"),
        "remaining_seconds": raw.get("estimatedRemainingSeconds"),
        "metrics": metrics,
        "updated": raw.get("lastUpdatedTime"),
    }


def _number(value: Any) -> Any:
    try:
        return float(value)
    except (TypeError, ValueError):
        return value
