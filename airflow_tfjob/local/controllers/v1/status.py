"""Job status as the training-operator keeps it, for every kind: conditions with its setCondition /
filterOutCondition rules (pkg/util/status.go), replica counts recounted from pods (zero counts omitted, as
Go's omitempty does), container exit codes, and the time helpers the limits use."""

from __future__ import annotations

import datetime as dt

from airflow_tfjob.local.model.conditions import condition_is_true, find_condition
from airflow_tfjob.local.model.conditions import set_condition as write_condition
from airflow_tfjob.local.model.resources import JsonDict, now_rfc3339, parse_rfc3339


def parse_time(value: str | None) -> float | None:
    when = parse_rfc3339(value)
    return None if when is None else when.timestamp()


def now_seconds() -> float:
    return dt.datetime.now(dt.timezone.utc).timestamp()


def get_condition(status: JsonDict, ctype: str) -> JsonDict | None:
    return find_condition(status, ctype)


def has_true(status: JsonDict, ctype: str) -> bool:
    return condition_is_true(status, ctype)


def is_finished(status: JsonDict) -> bool:
    return has_true(status, "Succeeded") or has_true(status, "Failed")


def set_condition(status: JsonDict, ctype: str, cstatus: str, reason: str, message: str) -> None:
    """UpdateJobConditions: frozen after Failed=True; no-op when status and reason are unchanged;
    otherwise the old entry is removed and the new one appended (model/conditions.py, `to_end`), with
    Running/Restarting exclusive and Succeeded/Failed flipping Running to False in place."""
    if has_true(status, "Failed"):
        return
    current = get_condition(status, ctype)
    if current is not None and current.get("status") == cstatus and current.get("reason") == reason:
        return
    now = now_rfc3339()
    write_condition(status, ctype, cstatus, reason, message, now=now, extra={"lastUpdateTime": now},
                    to_end=True)
    exclusive = {"Running": "Restarting", "Restarting": "Running"}.get(ctype)
    stops_running = ctype in ("Failed", "Succeeded")
    status["conditions"] = [
        {**cond, "status": "False"} if stops_running and cond.get("type") == "Running" else cond
        for cond in status["conditions"]
        if cond.get("type") != exclusive
    ]


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
