"""Workloads as Kueue's jobframework builds and marks them (docs/reference/kueue-behaviour.md §3, §4.3):
the name, owner, labels and pod sets of a job's Workload, and the condition writes every other module
makes, with Kueue's reasons and messages."""

from __future__ import annotations

import hashlib
from typing import Any

from airflow_tfjob.kinds import API_VERSION, GROUP, JobKind
from airflow_tfjob.local.resources import KUEUE_GROUP, JsonDict, clone, now_rfc3339

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PODSET_LABEL = "kueue.x-k8s.io/podset"
FINALIZER = "kueue.x-k8s.io/resource-in-use"
# KubeflowJob's OrderedReplicaTypes: every kind's types sorted by this (TFJob's order).
_PODSET_ORDER = ("Chief", "Master", "PS", "Worker", "Evaluator")


# ---- reading a Workload


def condition(wl: JsonDict, type_: str) -> JsonDict | None:
    for cond in (wl.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


def is_true(wl: JsonDict, type_: str) -> bool:
    cond = condition(wl, type_)
    return cond is not None and cond.get("status") == "True"


def has_reservation(wl: JsonDict) -> bool:
    return is_true(wl, "QuotaReserved") and bool((wl.get("status") or {}).get("admission"))


def priority(wl: JsonDict) -> int:
    value = (wl.get("spec") or {}).get("priority")
    return int(value) if isinstance(value, int) else 0


def key(wl: JsonDict) -> tuple[str, str]:
    return wl["metadata"].get("namespace", ""), wl["metadata"]["name"]


def owner_uid(wl: JsonDict) -> str | None:
    for ref in wl["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


# ---- writing conditions (apimeta.SetStatusCondition: the transition time moves only with the status)


def set_condition(status: JsonDict, type_: str, value: str, reason: str, message: str,
                  generation: int | None = None) -> None:
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    now = now_rfc3339()
    for i, cond in enumerate(conditions):
        if cond.get("type") == type_:
            transition = cond.get("lastTransitionTime", now) if cond.get("status") == value else now
            conditions[i] = _condition(type_, value, reason, message, transition, generation)
            break
    else:
        conditions.append(_condition(type_, value, reason, message, now, generation))
    status["conditions"] = conditions


def _condition(type_: str, value: str, reason: str, message: str, when: str, generation: int | None) -> JsonDict:
    cond: JsonDict = {"type": type_, "status": value, "lastTransitionTime": when, "reason": reason,
                      "message": message}
    if generation is not None:
        cond["observedGeneration"] = generation
    return cond


def reset_to_previously(status: JsonDict, type_: str, generation: int | None) -> None:
    """resetActiveCondition: a True Evicted/Preempted becomes False `QuotaReserved` `Previously: <msg>`."""
    for cond in status.get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == "True":
            set_condition(status, type_, "False", "QuotaReserved", f"Previously: {cond.get('message', '')}",
                          generation)
            return


def count_eviction(status: JsonDict, reason: str, cause: str = "") -> None:
    """schedulingStats.evictions[{reason, underlyingCause}].count += 1 (workloadEvictionStateInc)."""
    stats = status.setdefault("schedulingStats", {})
    evictions = stats.setdefault("evictions", [])
    for entry in evictions:
        if entry.get("reason") == reason and entry.get("underlyingCause", "") == cause:
            entry["count"] = int(entry.get("count", 0)) + 1
            return
    evictions.append({"reason": reason, "underlyingCause": cause, "count": 1})


_NOT_READY = "Not all pods are ready or succeeded"
_RECOVERING = "At least one pod has failed, waiting for recovery"


def pods_ready_condition(wl: JsonDict, job_ready: bool) -> tuple[str, str, str]:
    """generatePodsReadyCondition: (status, reason, message) of PodsReady for a Workload."""
    if not is_true(wl, "Admitted"):
        return "False", "WaitForStart", _NOT_READY
    current = condition(wl, "PodsReady")
    if job_ready:
        recovered = current is not None and current.get("reason") in ("WaitForRecovery", "Recovered")
        return "True", "Recovered" if recovered else "Started", "All pods reached readiness and the workload is running"
    if current is not None and (current.get("status") == "True" or current.get("reason") == "WaitForRecovery"):
        return "False", "WaitForRecovery", _RECOVERING
    return "False", "WaitForStart", _NOT_READY


# ---- building a job's Workload (ConstructWorkload)


def workload_name(kind: JobKind, name: str, uid: str) -> str:
    """GetWorkloadNameForOwnerWithGVK: `<lower(kind)>-<name>-<first 5 hex of sha1(kind, group, name, uid)>`."""
    digest = hashlib.sha1(f"{kind.kind}\n{GROUP}\n{name}\n{uid}".encode()).hexdigest()[:5]
    return f"{kind.kind.lower()}-{name}"[:247] + f"-{digest}"


def ordered_replica_types(kind: JobKind, replica_specs: JsonDict) -> list[tuple[str, str]]:
    """(key as written in the job, canonical type) in KubeflowJob's pod-set order."""
    found = [(k, kind.canonical_type(k) or k) for k in replica_specs]
    return sorted(found, key=lambda p: _PODSET_ORDER.index(p[1]) if p[1] in _PODSET_ORDER else len(_PODSET_ORDER))


def pod_sets(kind: JobKind, job: JsonDict) -> list[JsonDict]:
    specs = (job.get("spec") or {}).get(kind.spec_key) or {}
    sets = []
    for key_, rtype in ordered_replica_types(kind, specs):
        rspec = specs[key_] or {}
        replicas = rspec.get("replicas")
        sets.append({"name": rtype.lower(), "count": int(replicas) if isinstance(replicas, int) else 1,
                     "template": clone(rspec.get("template") or {})})
    return sets


def new_workload(kind: JobKind, job: JsonDict, queue: str, wpc: tuple[str, int] | None) -> JsonDict:
    meta = job["metadata"]
    spec: dict[str, Any] = {"queueName": queue, "podSets": pod_sets(kind, job), "priority": 0}
    if wpc is not None:
        spec["priorityClassRef"] = {"group": KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": wpc[0]}
        spec["priority"] = wpc[1]
    return {
        "apiVersion": f"{KUEUE_GROUP}/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": workload_name(kind, meta["name"], meta["uid"]),
            "namespace": meta["namespace"],
            "labels": {JOB_UID_LABEL: meta["uid"]},
            "finalizers": [FINALIZER],
            "ownerReferences": [{"apiVersion": API_VERSION, "kind": kind.kind, "name": meta["name"],
                                 "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": spec,
    }
