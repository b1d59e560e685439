"""The two writes every part of the Kueue emulation makes: a status (as the manager's status patches,
without resourceVersion check; a vanished object is no error) and an Event from Kueue's component
(messages cut at 1024 bytes, as TruncateEventMessage does)."""

from __future__ import annotations

import logging

from airflow_tfjob.local.model.resources import ApiError, JsonDict, resource_type
from airflow_tfjob.local.store.core import Store
from airflow_tfjob.local.store.events import record_event

log = logging.getLogger(__name__)
COMPONENT = "kueue-admission"


def write_status(store: Store, rtype: str, obj: JsonDict, status: JsonDict) -> bool:
    """Store `status` on `obj` (and in `obj`, so a caller's later decisions see it); False if it is gone."""
    meta = obj["metadata"]
    namespace = meta.get("namespace") if resource_type(rtype).namespaced else None
    try:
        store.update_status(rtype, namespace, meta["name"], status)
    except ApiError:
        return False
    obj["status"] = status
    return True


def event(store: Store, involved: JsonDict, reason: str, message: str, type_: str = "Normal") -> None:
    try:
        record_event(store, involved, type_, reason, message[:1024], COMPONENT)
    except ApiError:
        log.debug("could not record %s on %s", reason, involved["metadata"].get("name"))
