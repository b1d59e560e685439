"""The hooks' Kueue calls, described once (as hooks/calls.py describes the others): a job's Workloads
and its LocalQueue's pending workloads (positions). Ground truth: docs/reference/kueue-behaviour.md
§1 (versions), §4.3 (the Workload's owner and label), §8 (visibility API).

- Workloads: ``kueue.x-k8s.io/v1beta2``, falling back to ``v1beta1`` when the group-version is not
  served (404; Kueue before 0.15); ``None`` when neither is (no Kueue). The version that answered is
  remembered by the hook (:class:`WorkloadVersion`). Found by the ``kueue.x-k8s.io/job-uid`` label and
  kept only if the label or an ownerReference names the job's UID (never by a computed name: it
  hashes the UID).
- Pending workloads: the visibility API, an aggregated API that may be absent, refused or down. A
  404 or 403 means "no positions" (``None``); other failures are retried for a few seconds only,
  so that a position, which is a nicety, never holds up following the job.

What the API calls things (group, versions, the job-uid label, a Workload's owner) lives here, in the
API room; the Kueue integration (airflow_tfjob/kueue/) reads Workloads and imports these from here,
never the other way round, so the hooks load without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_tfjob.hooks.calls import Call, Request
from airflow_tfjob.hooks.retry import api_status_code

GROUP = "kueue.x-k8s.io"
#: Served versions of the Workload API, preferred first (v1beta2 is the storage version since
#: Kueue 0.16; 0.13/0.14 serve only v1beta1: §1).
VERSIONS = ("v1beta2", "v1beta1")
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
#: The label the job reconciler puts on a Workload: the owning job's UID (§4.3).
LABEL_JOB_UID = "kueue.x-k8s.io/job-uid"
#: Seconds a pending-workloads read is retried in all (the hook's api_retry_timeout, if shorter).
VISIBILITY_RETRY_TIMEOUT = 5.0


@dataclass
class WorkloadVersion:
    """The Workload API version that last answered a hook: from then on the only one it asks."""

    served: str | None = None


def owned_by(workload: Mapping[str, Any], job_uid: str) -> bool:
    """Whether the Workload is the job's: its ownerReference (or the job-uid label) names the UID."""
    meta = workload.get("metadata") or {}
    if (meta.get("labels") or {}).get(LABEL_JOB_UID) == job_uid:
        return True
    return any(
        ref.get("uid") == job_uid for ref in meta.get("ownerReferences") or () if isinstance(ref, Mapping)
    )


def list_workloads(namespace: str, job_uid: str, version: WorkloadVersion) -> Call[list[dict] | None]:
    """The Kueue Workloads of the job with UID ``job_uid``; None when Kueue's API is not served."""
    for served in (version.served,) if version.served else VERSIONS:
        data = yield Request(
            "GET",
            f"/apis/{GROUP}/{served}/namespaces/{namespace}/workloads",
            f"list Workloads ({served}) of job {job_uid} in {namespace}",
            (("labelSelector", f"{LABEL_JOB_UID}={job_uid}"),),
            absent=frozenset({404}),  # this version is not served: the next one is asked
        )
        if data is not None:
            version.served = served
            return [w for w in data.get("items") or () if isinstance(w, dict) and owned_by(w, job_uid)]
    return None


def pending_workloads(namespace: str, local_queue: str) -> Call[dict | None]:
    """The LocalQueue's PendingWorkloadsSummary (positions); None when the visibility API gives none."""
    for served in VERSIONS:
        path = f"/apis/{VISIBILITY_GROUP}/{served}/namespaces/{namespace}/localqueues/{local_queue}/pendingworkloads"
        what = f"read pending workloads of {namespace}/{local_queue}"
        try:
            # 404: not served (the next version is asked), or no such queue.
            data = yield Request(
                "GET", path, what, absent=frozenset({404}), retry_timeout=VISIBILITY_RETRY_TIMEOUT
            )
        except Exception as exc:
            if api_status_code(exc) == 403:
                return None  # refused: no other version is asked
            raise
        if data is not None:
            return dict(data)
    return None


def multikueue_cluster(name: str) -> Call[dict | None]:
    """MultiKueue's cluster object ``name`` on the manager (cluster-scoped; its ``Active`` condition says
    whether the manager reaches that worker); None when absent, not served, or refused (403): whoever
    reads it (the follow's lost-worker clock, preflight) then judges nothing by it."""
    for served in VERSIONS:
        try:
            data = yield Request(
                "GET",
                f"/apis/{GROUP}/{served}/multikueueclusters/{name}",
                f"read MultiKueueCluster {name} ({served})",
                absent=frozenset({404}),
            )
        except Exception as exc:
            if api_status_code(exc) == 403:
                return None
            raise
        if data is not None:
            return dict(data)
    return None
