"""Workloads as Kueue's jobframework builds and marks them (docs/reference/kueue-behaviour.md §3, §4.3):
the name, owner, labels and pod sets of a job's Workload, and the condition writes every other module
makes, with Kueue's reasons and messages."""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

from airflow_tfjob.jobs.kinds import JobKind
from airflow_tfjob.local.model.conditions import condition_is_true, find_condition
from airflow_tfjob.local.model.conditions import set_condition as write_condition
from airflow_tfjob.local.model.resources import KUEUE_GROUP, JsonDict, clone, parse_rfc3339

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PODSET_LABEL = "kueue.x-k8s.io/podset"
FINALIZER = "kueue.x-k8s.io/resource-in-use"
#: The Workload a job names as its own (a MultiKueue worker's copy): an annotation since the
#: WorkloadIdentifierAnnotations gate (on in v0.19), a label before; both are read.
PREBUILT_KEY = "kueue.x-k8s.io/prebuilt-workload-name"
#: Which MultiKueue manager made a worker's copy (its `origin`, "multikueue" by default).
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
# KubeflowJob's OrderedReplicaTypes: every kind's types sorted by this (TFJob's order).
_PODSET_ORDER = ("Chief", "Master", "PS", "Worker", "Evaluator")


# ---- reading a Workload


def condition(wl: JsonDict, type_: str) -> JsonDict | None:
    return find_condition(wl.get("status") or {}, type_)


def is_true(wl: JsonDict, type_: str) -> bool:
    return condition_is_true(wl.get("status") or {}, type_)


def has_reservation(wl: JsonDict) -> bool:
    return is_true(wl, "QuotaReserved") and bool((wl.get("status") or {}).get("admission"))


def priority(wl: JsonDict) -> int:
    value = (wl.get("spec") or {}).get("priority")
    return int(value) if isinstance(value, int) else 0


def key(wl: JsonDict) -> tuple[str, str]:
    return wl["metadata"].get("namespace", ""), wl["metadata"]["name"]


def seconds_since(timestamp: object) -> int:
    """Whole seconds from an RFC 3339 time to now (the wait times Kueue's events tell); 0 without one."""
    when = parse_rfc3339(timestamp)
    if when is None:
        return 0
    return max(0, int((dt.datetime.now(dt.timezone.utc) - when).total_seconds()))


def owner_uid(wl: JsonDict) -> str | None:
    for ref in wl["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


# ---- writing conditions (apimeta.SetStatusCondition: the transition time moves only with the status)


def set_condition(status: JsonDict, type_: str, value: str, reason: str, message: str,
                  generation: int | None = None) -> None:
    """Kueue's SetStatusCondition: the entry replaced at its place (model/conditions.py), stamped with the
    Workload's generation when there is one."""
    write_condition(status, type_, value, reason, message,
                    extra=None if generation is None else {"observedGeneration": generation})


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
    digest = hashlib.sha1(f"{kind.kind}\n{kind.group}\n{name}\n{uid}".encode()).hexdigest()[:5]
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


def priority_ref(kind: str, name: str) -> JsonDict:
    """spec.priorityClassRef: a WorkloadPriorityClass or a scheduling.k8s.io PriorityClass."""
    group = KUEUE_GROUP if kind == "WorkloadPriorityClass" else "scheduling.k8s.io"
    return {"group": group, "kind": kind, "name": name}


def new_workload(kind: JobKind, job: JsonDict, queue: str, sets: list[JsonDict], wpc: tuple[str, int] | None,
                 class_kind: str = "WorkloadPriorityClass") -> JsonDict:
    """`sets`: the job's pod sets (its adapter's); `wpc`: the priority class's (name, value), of kind
    `class_kind` (ExtractPriority's answer); `queue` "" (a job managed without a queue name, under
    manageJobsWithoutQueueName) leaves queueName out, as Kueue's omitempty does."""
    meta = job["metadata"]
    spec: dict[str, Any] = {"queueName": queue, "podSets": sets, "priority": 0}
    if not queue:
        del spec["queueName"]
    if wpc is not None:
        spec["priorityClassRef"] = priority_ref(class_kind, wpc[0])
        spec["priority"] = wpc[1]
    return {
        "apiVersion": f"{KUEUE_GROUP}/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": workload_name(kind, meta["name"], meta["uid"]),
            "namespace": meta["namespace"],
            "labels": {JOB_UID_LABEL: meta["uid"]},
            "finalizers": [FINALIZER],
            "ownerReferences": [{"apiVersion": kind.api_version, "kind": kind.kind, "name": meta["name"],
                                 "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": spec,
    }
