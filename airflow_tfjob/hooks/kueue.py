"""The hooks' Kueue calls, described once (as hooks/calls.py describes the others): a job's Workloads
and its LocalQueue's pending workloads (positions). Ground truth: docs/reference/kueue-behaviour.md
§1 (versions), §4.3 (the Workload's owner and label), §8 (visibility API).

- Workloads: read at the version the cluster serves, a discovered fact (:class:`WorkloadVersion`):
  the group's discovery document (``GET /apis/kueue.x-k8s.io``) names the versions served, and the
  first of :data:`VERSIONS` among them is used: ``v1beta2`` wherever served (Kueue 0.15 on; the only
  one from 0.20, kubernetes-sigs/kueue#14558), ``v1beta1`` on older releases; ``None`` when the group
  is not served (no Kueue). The fact is kept per connection (:func:`workload_version`), found through
  the hook that asks (the async hook on the triggerer, so nothing blocks its loop), and found again
  when the remembered version answers 404 (Kueue upgraded or removed meanwhile). Every Workload is
  handed on in the v1beta2 shape (:func:`as_v1beta2`), so readers know one shape. Found by the
  ``kueue.x-k8s.io/job-uid`` label and kept only if the label or an ownerReference names the job's
  UID (never by a computed name: it hashes the UID).
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
    """The Workload API version the cluster serves, once discovered: from then on the only one asked.

    ``served`` is None until discovered and while the group is not served; a cluster without Kueue is
    asked again next time (it may get Kueue), a served version is kept until it answers 404.
    """

    served: str | None = None


#: Discovered versions by connection (conn_id, kubeconfig file, context, in-cluster): every hook on the
#: same connection shares one fact, so a triggerer discovers it once, not once per trigger.
_BY_CONNECTION: dict[tuple[object, ...], WorkloadVersion] = {}


def connection_of(hook: Any) -> tuple[object, ...] | None:
    """What names a hook's cluster: its connection and the arguments that override it; None when
    the configuration is given inline (config_dict), which names no connection."""
    if getattr(hook, "config_dict", None):
        return None
    return tuple(getattr(hook, a, None) for a in ("conn_id", "config_file", "cluster_context", "in_cluster"))


def workload_version(connection: tuple[object, ...] | None) -> WorkloadVersion:
    """The discovered Workload version shared by the hooks of ``connection`` (None: the hook's own,
    for a configuration given inline, which names no connection to share it with)."""
    if connection is None:
        return WorkloadVersion()
    return _BY_CONNECTION.setdefault(connection, WorkloadVersion())


def discover_workload_version(version: WorkloadVersion) -> Call[str | None]:
    """Which Workload version the cluster serves, from the group's discovery document (kept in ``version``)."""
    doc = yield Request("GET", f"/apis/{GROUP}", f"discover {GROUP}", absent=frozenset({404}))
    served = {str(v.get("version")) for v in (doc or {}).get("versions") or () if isinstance(v, Mapping)}
    version.served = next((v for v in VERSIONS if v in served), None)
    return version.served


#: The Workload fields whose name or shape differ between v1beta1 and v1beta2, read from Kueue's own
#: conversion (apis/kueue/v1beta1/workload_conversion.go at v0.19.2; the types in
#: apis/kueue/v1beta{1,2}/workload_types.go):
#: - spec.priorityClassSource + spec.priorityClassName (v1beta1) became spec.priorityClassRef
#:   {group, kind, name} (v1beta2), the source "kueue.x-k8s.io/workloadpriorityclass" naming a
#:   WorkloadPriorityClass and "scheduling.k8s.io/priorityclass" a pod PriorityClass;
#: - status.accumulatedPastExexcutionTimeSeconds (sic, v1beta1) became
#:   status.accumulatedPastExecutionTimeSeconds;
#: - a pod set's topologyRequest and its admission's topologyAssignment changed shape (TAS); the
#:   provider reads neither, so they are passed on as served.
#: Everything the provider reads (spec.queueName, status.conditions, status.admission.clusterQueue,
#: status.schedulingStats.evictions, status.clusterName) has the same name and shape in both.
_PRIORITY_SOURCES = {
    "kueue.x-k8s.io/workloadpriorityclass": {"group": GROUP, "kind": "WorkloadPriorityClass"},
    "scheduling.k8s.io/priorityclass": {"group": "scheduling.k8s.io", "kind": "PriorityClass"},
}
_PAST_V1BETA1 = "accumulatedPastExexcutionTimeSeconds"  # sic: v1beta1's JSON name
_PAST_V1BETA2 = "accumulatedPastExecutionTimeSeconds"


def as_v1beta2(workload: dict[str, Any]) -> dict[str, Any]:
    """The Workload in v1beta2's shape, whichever version served it: the one place the two differ."""
    if workload.get("apiVersion") != f"{GROUP}/v1beta1":
        return workload
    converted = {**workload, "apiVersion": f"{GROUP}/v1beta2"}
    spec = dict(workload.get("spec") or {})
    name = spec.pop("priorityClassName", None)
    source = spec.pop("priorityClassSource", None)
    if name and source in _PRIORITY_SOURCES:
        spec["priorityClassRef"] = {**_PRIORITY_SOURCES[source], "name": name}
    converted["spec"] = spec
    status = workload.get("status")
    if isinstance(status, Mapping) and _PAST_V1BETA1 in status:
        status = {k: v for k, v in status.items() if k != _PAST_V1BETA1}
        converted["status"] = {**status, _PAST_V1BETA2: workload["status"][_PAST_V1BETA1]}
    return converted


def owned_by(workload: Mapping[str, Any], job_uid: str) -> bool:
    """Whether the Workload is the job's: its ownerReference (or the job-uid label) names the UID."""
    meta = workload.get("metadata") or {}
    if (meta.get("labels") or {}).get(LABEL_JOB_UID) == job_uid:
        return True
    return any(
        ref.get("uid") == job_uid for ref in meta.get("ownerReferences") or () if isinstance(ref, Mapping)
    )


def list_workloads(namespace: str, job_uid: str, version: WorkloadVersion) -> Call[list[dict] | None]:
    """The Kueue Workloads of the job with UID ``job_uid``, in v1beta2's shape; None when Kueue's API
    is not served. The version is discovered first if not known; a 404 at a known one (Kueue upgraded
    or removed since) discovers it again, once."""
    for _ in range(2):
        known = version.served is not None
        served = version.served or (yield from discover_workload_version(version))
        if served is None:
            return None
        data = yield Request(
            "GET",
            f"/apis/{GROUP}/{served}/namespaces/{namespace}/workloads",
            f"list Workloads ({served}) of job {job_uid} in {namespace}",
            (("labelSelector", f"{LABEL_JOB_UID}={job_uid}"),),
            absent=frozenset({404}),  # no longer served: discovered again
        )
        if data is not None:
            listed = data.get("items") or ()
            # A list's items carry no apiVersion: the list's own names it.
            stamp = {"apiVersion": data.get("apiVersion") or f"{GROUP}/{served}"}
            return [
                as_v1beta2({**stamp, **w}) for w in listed if isinstance(w, dict) and owned_by(w, job_uid)
            ]
        version.served = None
        if not known:
            return None
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
