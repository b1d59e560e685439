"""Job status as the training-operator keeps it, for every kind: conditions with its setCondition /
filterOutCondition rules (pkg/util/status.go), replica counts recounted from pods (zero counts omitted, as
Go's omitempty does), container exit codes, and the time helpers the limits use."""

from __future__ import annotations

import datetime as dt

from airflow_tfjob.local.resources import JsonDict, now_rfc3339


def parse_time(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def now_seconds() -> float:
    return dt.datetime.now(dt.timezone.utc).timestamp()


def get_condition(status: JsonDict, ctype: str) -> JsonDict | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None


def has_true(status: JsonDict, ctype: str) -> bool:
    cond = get_condition(status, ctype)
    return cond is not None and cond.get("status") == "True"


def is_finished(status: JsonDict) -> bool:
    return has_true(status, "Succeeded") or has_true(status, "Failed")


def set_condition(status: JsonDict, ctype: str, cstatus: str, reason: str, message: str) -> None:
    """UpdateJobConditions: frozen after Failed=True; no-op when status and reason are unchanged;
    otherwise the old entry is removed and the new one appended (Running/Restarting exclusive,
    Succeeded/Failed flip Running to False in place)."""
    if has_true(status, "Failed"):
        return
    now = now_rfc3339()
    current = get_condition(status, ctype)
    if current is not None and current.get("status") == cstatus and current.get("reason") == reason:
        return
    transition = now
    if current is not None and current.get("status") == cstatus:
        transition = current.get("lastTransitionTime", now)
    kept = []
    for cond in status.get("conditions") or []:
        other = cond.get("type")
        if other == ctype or {ctype, other} == {"Running", "Restarting"}:
            continue
        if ctype in ("Failed", "Succeeded") and other == "Running":
            cond = {**cond, "status": "False"}
        kept.append(cond)
    kept.append(
        {
            "type": ctype,
            "status": cstatus,
            "reason": reason,
            "message": message,
            "lastUpdateTime": now,
            "lastTransitionTime": transition,
        }
    )
    status["conditions"] = kept


# --------------------------------------------------------------------------------------------------
# Replica statuses (zero counts omitted, as Go's omitempty does)


def count(status: JsonDict, rtype: str, field: str, n: int = 1) -> None:
    entry = status.setdefault("replicaStatuses", {}).setdefault(rtype, {})
    entry[field] = entry.get(field, 0) + n


def counts(status: JsonDict, rtype: str) -> tuple[int, int, int]:
    entry = (status.get("replicaStatuses") or {}).get(rtype) or {}
    return int(entry.get("active", 0)), int(entry.get("succeeded", 0)), int(entry.get("failed", 0))


def normalise(status: JsonDict) -> JsonDict:
    """The status as it reads back from the API: zero counts and empty fields gone, stable key order."""
    out: JsonDict = {}
    if status.get("conditions"):
        out["conditions"] = status["conditions"]
    if status.get("replicaStatuses"):
        out["replicaStatuses"] = {
            rt: {k: entry[k] for k in ("active", "succeeded", "failed", "selector") if entry.get(k)}
            for rt, entry in status["replicaStatuses"].items()
        }
    for key in ("startTime", "completionTime", "lastReconcileTime"):
        if status.get(key):
            out[key] = status[key]
    return out


def update_replica_status(status: JsonDict, rtype: str, pod: JsonDict) -> None:
    """core.UpdateJobReplicaStatuses: a terminating Running pod counts as failed."""
    phase = pod.get("status", {}).get("phase")
    if phase == "Running":
        deleting = bool(pod.get("metadata", {}).get("deletionTimestamp"))
        count(status, rtype, "failed" if deleting else "active")
    elif phase == "Succeeded":
        count(status, rtype, "succeeded")
    elif phase == "Failed":
        count(status, rtype, "failed")


def container_exit_code(pod: JsonDict, container: str) -> int | None:
    for cs in pod.get("status", {}).get("containerStatuses") or []:
        if cs.get("name") == container:
            terminated = (cs.get("state") or {}).get("terminated")
            if terminated is not None:
                return int(terminated.get("exitCode", 0))
    return None


def is_retryable_exit_code(code: int) -> bool:
    return code >= 128


def is_active(pod: JsonDict) -> bool:
    return pod.get("status", {}).get("phase") not in ("Succeeded", "Failed") and not pod["metadata"].get(
        "deletionTimestamp"
    )
