"""The sensors' view of a job's place in Kueue: one phrase per look, read through the hooks.

The operator's follow core has :class:`~airflow_tfjob.integrations.kueue.tracker.QueueTracker`; a sensor only
looks now and then (a poke, a change of the watched job), so it reads the Workload and, while the
job is queued, its position once per look, and says where the job stands. ``None`` for a job
without Kueue's queue label: nothing is read then.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_tfjob.integrations.kueue.workload import describe, newest, position_of, queue_label, view
from airflow_tfjob.jobs.status import interpret

if TYPE_CHECKING:
    from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook
    from airflow_tfjob.hooks.sync import KubeflowJobHook


def _subject(job: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(namespace, uid, LocalQueue) of a job with a queue label, else None."""
    queue = queue_label(job)
    meta = job.get("metadata") or {}
    if not queue or not meta.get("uid"):
        return None
    return str(meta.get("namespace") or ""), str(meta["uid"]), queue


def _queued(workload: Mapping[str, Any] | None) -> bool:
    conditions = ((workload or {}).get("status") or {}).get("conditions") or ()
    return workload is not None and not any(
        c.get("type") == "QuotaReserved" and c.get("status") == "True" for c in conditions
    )


def _phrase(job: Mapping[str, Any], found: list[dict] | None, summary: Mapping[str, Any] | None) -> str:
    if found is None:
        return "Kueue: the cluster serves no Kueue Workload API (the queue label is ignored)"
    workload = newest(found)
    name = ((workload or {}).get("metadata") or {}).get("name")
    uid = str((job.get("metadata") or {}).get("uid"))
    return describe(view(job, interpret(job), workload), position_of(summary, name, uid))


def queue_note(hook: KubeflowJobHook, job: Mapping[str, Any]) -> str | None:
    """Where the job stands in Kueue (synchronous hook); None for a job without a queue."""
    subject = _subject(job)
    if subject is None:
        return None
    namespace, uid, queue = subject
    try:
        found = hook.list_workloads(namespace, uid)
        summary = hook.pending_workloads(namespace, queue) if _queued(newest(found)) else None
    except Exception as error:  # a note never fails a sensor
        return f"Kueue: the job's Workload could not be read ({error})"
    return _phrase(job, found, summary)


async def aqueue_note(hook: AsyncKubeflowJobHook, job: Mapping[str, Any]) -> str | None:
    """Where the job stands in Kueue (asynchronous hook); None for a job without a queue."""
    subject = _subject(job)
    if subject is None:
        return None
    namespace, uid, queue = subject
    try:
        found = await hook.list_workloads(namespace, uid)
        summary = await hook.pending_workloads(namespace, queue) if _queued(newest(found)) else None
    except Exception as error:  # a note never fails a sensor
        return f"Kueue: the job's Workload could not be read ({error})"
    return _phrase(job, found, summary)
