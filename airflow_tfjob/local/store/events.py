"""core/v1 Events written by the controller and the kubelet, aggregated as client-go's recorder does."""

from __future__ import annotations

import uuid

from airflow_tfjob.local.model.resources import RESOURCES, ApiError, JsonDict, now_rfc3339
from airflow_tfjob.local.store.core import Store


def record_event(
    store: Store,
    involved: JsonDict,
    type_: str,
    reason: str,
    message: str,
    component: str,
) -> JsonDict:
    """Create a core/v1 Event about `involved`, or bump count/lastTimestamp of an identical recent one
    (what client-go's event recorder does with its aggregation cache)."""
    meta = involved.get("metadata", {})
    namespace = meta.get("namespace") or "default"
    index_key = (namespace, meta.get("uid", ""), type_, reason, message, component)
    now = now_rfc3339()
    existing_name = store._event_index.get(index_key)
    if existing_name is not None:
        try:
            current = store.get_entry("events", namespace, existing_name)
        except ApiError:
            current = None
        if current is not None:
            event = dict(current.obj)
            event["count"] = int(event.get("count", 1)) + 1
            event["lastTimestamp"] = now
            return store._store_update(RESOURCES["events"], current, event)
    name = f"{meta.get('name', 'object')}.{uuid.uuid4().int & ((1 << 64) - 1):x}"
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion", ""),
            "kind": involved.get("kind", ""),
            "name": meta.get("name", ""),
            "namespace": namespace,
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "type": type_,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": "",
    }
    created = store.create("events", namespace, event)
    store._event_index[index_key] = created["metadata"]["name"]
    return created
