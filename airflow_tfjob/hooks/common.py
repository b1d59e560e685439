"""What both hooks share: collection paths, selectors, event filtering and ordering, error status."""

from __future__ import annotations

import json
import time
from typing import Any

from airflow_tfjob.hooks.retry import api_status_code
from airflow_tfjob.jobs.kinds import ALL_KINDS, JobKind, as_kind

MERGE_PATCH = "application/merge-patch+json"

# Paths of the collections the hooks use, by plural: every job kind's, pods, events and services.
COLLECTIONS = {
    **{k.plural: f"/apis/{k.api_version}/namespaces/{{namespace}}/{k.plural}" for k in ALL_KINDS},
    "pods": "/api/v1/namespaces/{namespace}/pods",
    "events": "/api/v1/namespaces/{namespace}/events",
    "services": "/api/v1/namespaces/{namespace}/services",
    "jobs": "/apis/batch/v1/namespaces/{namespace}/jobs",  # keep_failed_for's expiry Job (follow/cleanup.py)
    "configmaps": "/api/v1/namespaces/{namespace}/configmaps",
}


def job_path(kind: JobKind, namespace: str, name: str | None = None) -> str:
    path = COLLECTIONS[kind.plural].format(namespace=namespace)
    return f"{path}/{name}" if name else path


def job_pod_selector(
    name: str,
    replica_type: str | None = None,
    replica_index: int | None = None,
    kind: JobKind | str = "TFJob",
) -> str:
    """Label selector of a job's pods (optionally one replica type / index), as the kind's controller
    labels them (a TrainJob's: JobSet's jobset-name and replicatedjob-name, the Job's completion index).
    ``kind`` defaults as the hooks' ``list_job_pods`` does (the recorded public API)."""
    kind = as_kind(kind)
    parts = [f"{kind.pod_job_label}={name}"]
    if replica_type:
        parts.append(f"{kind.pod_type_label}={replica_type.lower()}")
    if replica_index is not None:
        parts.append(f"{kind.pod_index_label}={replica_index}")
    return ",".join(parts)


def events_field_selector(involved_name: str | None, involved_uid: str | None) -> str | None:
    parts = []
    if involved_name:
        parts.append(f"involvedObject.name={involved_name}")
    if involved_uid:
        parts.append(f"involvedObject.uid={involved_uid}")
    return ",".join(parts) or None


def filter_events(events: list[dict], involved_name: str | None, involved_uid: str | None) -> list[dict]:
    # A server that ignores an unsupported field selector must not leak other objects' events to us.
    out = []
    for ev in events:
        inv = ev.get("involvedObject") or {}
        if involved_name and inv.get("name") != involved_name:
            continue
        if involved_uid and inv.get("uid") != involved_uid:
            continue
        out.append(ev)
    return out


def poll_delay(deadline: float) -> float | None:
    """How long to sleep before looking again (at most 0.5 s, never past `deadline`); None once it has passed."""
    remaining = deadline - time.monotonic()
    return None if remaining <= 0 else min(0.5, remaining)


def event_sort_key(ev: dict) -> str:
    return str(
        ev.get("lastTimestamp")
        or ev.get("eventTime")
        or ev.get("firstTimestamp")
        or (ev.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def status_of(exc: Any) -> dict:
    """The Kubernetes Status an API error carries in its body ({} if none)."""
    try:
        data = json.loads(getattr(exc, "body", None) or "")
    except (TypeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def api_status(exc: BaseException) -> int | None:
    """HTTP status of an exception raised by either hook, None if it is not an API error.

    Also the last status of a call that kept failing under the retry policy (retry.ApiCallFailed).
    """
    return api_status_code(exc)
