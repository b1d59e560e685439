"""In-memory object store of the local cluster: what etcd plus the generic API server registry do.

Objects are kept per (resource type, namespace, name). Every mutation takes the next value of one global
resourceVersion counter, is appended to a bounded per-type history (so that a watch from a resourceVersion
older than that window is answered 410 Expired, as after an etcd compaction) and is fanned out
synchronously to the registered watchers. Everything runs on one event loop thread, so no locks are needed.

Stored object dicts are never mutated in place: each change builds a new dict. That lets the API server
serve the cached JSON encoding of an object (`Entry.json`) to every reader and watcher without copying;
the public methods still hand out copies so that in-process callers (controller, runner) cannot corrupt
stored state by editing what they got.

This module is the core (reads, writes, watch registration and history); DELETE and garbage collection
are the `Deletion` mixin (deletion.py, ownerrefs.py), and selectors, patches, defaults, body checks and
Events have modules of their own.
"""

from __future__ import annotations

import builtins
import secrets
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from airflow_tfjob.local.model.bodies import check_name, check_shape, decoded_body, object_meta
from airflow_tfjob.local.model.defaults import apply_core_defaults
from airflow_tfjob.local.model.patches import apply_patch
from airflow_tfjob.local.model.podvalidation import pod_errors
from airflow_tfjob.local.model.resources import (
    INITIAL_NAMESPACES,
    RESOURCES,
    ApiError,
    JsonDict,
    ResourceType,
    bad_request,
    clone,
    invalid,
    not_found,
    now_rfc3339,
    parse_resource_version,
    resource_type,
)
from airflow_tfjob.local.model.scale import patched_scale, scale_of, scaled_job
from airflow_tfjob.local.model.selectors import FieldSelector, LabelSelector, selected
from airflow_tfjob.local.store.deletion import Deletion
from airflow_tfjob.local.store.watchers import Entry, Watcher, WatchEvent


class Admission(Protocol):
    """Validation and defaulting that the API server applies on create/update of the main resource."""

    def admit(self, rtype: str, operation: str, obj: JsonDict, old: JsonDict | None) -> None: ...


_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


# --------------------------------------------------------------------------------------------------
# The store


class Store(Deletion):
    """Objects, resourceVersions, reads and writes, watch fan-out; deletes and GC come from `Deletion`."""

    def __init__(self, *, history_limit: int = 1000, admission: Admission | None = None) -> None:
        self._objects: dict[str, dict[tuple[str, str], Entry]] = {r: {} for r in RESOURCES}
        self._history: dict[str, deque[WatchEvent]] = {r: deque() for r in RESOURCES}
        # A watch from a resourceVersion below this has missed events we no longer have (410 Expired).
        self._oldest_kept: dict[str, int] = dict.fromkeys(RESOURCES, 0)
        self._watchers: dict[str, set[Watcher]] = {r: set() for r in RESOURCES}
        self._history_limit = history_limit
        self._rv = 0
        self.admission = admission
        # Aggregation index of record_event: (ns, involved uid, type, reason, message, component) -> name
        self._event_index: dict[tuple[str, ...], str] = {}
        # uid -> (rtype, key) and owner uid -> dependents, so deletes and GC do not scan everything.
        self._by_uid: dict[str, tuple[str, tuple[str, str]]] = {}
        self._owned: dict[str, set[tuple[str, tuple[str, str]]]] = {}
        for ns in INITIAL_NAMESPACES:
            self.create("namespaces", None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    # ---- reading

    @property
    def resource_version(self) -> int:
        return self._rv

    def get_entry(self, rtype: str, namespace: str | None, name: str) -> Entry:
        info = resource_type(rtype)
        entry = self._objects[rtype].get((namespace or "" if info.namespaced else "", name))
        if entry is None:
            raise not_found(info, name)
        return entry

    def get(self, rtype: str, namespace: str | None, name: str) -> JsonDict:
        return clone(self.get_entry(rtype, namespace, name).obj)

    def list_entries(
        self,
        rtype: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
    ) -> tuple[list[Entry], int]:
        info, labels, fields, _ = self._read_request(rtype, label_selector, field_selector, resource_version)
        ns_key = namespace if info.namespaced else None
        items = [
            e
            for (ns, _), e in self._objects[rtype].items()
            if (ns_key is None or ns == ns_key) and selected(e.obj, labels, fields)
        ]
        items.sort(key=lambda e: (e.obj["metadata"].get("namespace", ""), e.obj["metadata"]["name"]))
        return items, self._rv

    def _read_request(
        self, rtype: str, label_selector: str | None, field_selector: str | None, resource_version: str | None
    ) -> tuple[ResourceType, LabelSelector | None, FieldSelector | None, int | None]:
        """What a list and a watch both check first: the kind, the selectors, and that `resource_version`
        (0 or none: the current state) is still in the history (410 otherwise)."""
        info = resource_type(rtype)
        labels = LabelSelector.parse(label_selector)
        fields = FieldSelector.parse(field_selector, info)
        rv = parse_resource_version(resource_version)
        if rv is not None and rv != 0 and rv < self._oldest_kept[rtype]:
            raise self._expired(rv)
        return info, labels, fields, rv

    def list(
        self,
        rtype: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[JsonDict], str]:
        entries, rv = self.list_entries(rtype, namespace, label_selector, field_selector)
        return [clone(e.obj) for e in entries], str(rv)

    # ---- writing

    def create(self, rtype: str, namespace: str | None, obj: JsonDict, *, dry_run: bool = False) -> JsonDict:
        info = resource_type(rtype)
        obj, meta = decoded_body(info, obj)
        ns_key = self._namespace_for_write(info, namespace, meta)
        name = meta.get("name")
        if not name and meta.get("generateName"):
            name = str(meta["generateName"]) + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
        if not name or not isinstance(name, str):
            raise self._invalid(info, "", [("metadata.name", "FieldValueRequired", "Required value: name or generateName is required")])
        check_name(info, name)
        key = (ns_key, name)
        if key in self._objects[rtype]:
            raise ApiError(
                409,
                "AlreadyExists",
                f'{info.qualified} "{name}" already exists',
                {"name": name, "group": info.group, "kind": info.plural},
            )
        obj["apiVersion"] = info.api_version
        obj["kind"] = info.kind
        meta["name"] = name
        if info.namespaced:
            meta["namespace"] = ns_key
        for transient in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(transient, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        apply_core_defaults(rtype, obj, name)
        if rtype == "pods":
            causes = pod_errors(obj)
            if causes:
                raise self._invalid(info, name, causes)
        if self.admission is not None:
            self.admission.admit(rtype, "CREATE", obj, None)
        if dry_run:
            return obj
        self._commit(info, key, obj, "ADDED", None)
        return clone(obj)

    def replace(
        self, rtype: str, namespace: str | None, name: str, obj: JsonDict, subresource: str | None = None
    ) -> JsonDict:
        info = resource_type(rtype)
        if subresource == "scale":
            return self._write_scale(info, namespace, name, lambda _job: obj)
        obj, meta = decoded_body(info, obj)
        if meta.get("name") not in (None, name):
            raise bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        current = self.get_entry(rtype, namespace, name)
        rv = meta.get("resourceVersion")
        if rv not in (None, "") and str(rv) != str(current.rv):
            raise self._conflict(info, name)
        return self._update(info, current, obj, subresource)

    def patch(
        self,
        rtype: str,
        namespace: str | None,
        name: str,
        patch: Any,
        patch_type: str,
        subresource: str | None = None,
    ) -> JsonDict:
        info = resource_type(rtype)
        if subresource == "scale":
            return self._write_scale(info, namespace, name, lambda job: patched_scale(info, job, patch, patch_type))
        current = self.get_entry(rtype, namespace, name)
        result = apply_patch(info, current.obj, patch, patch_type)
        meta = object_meta(result)
        check_shape(info, result)
        rv = meta.get("resourceVersion")
        if rv not in (None, "") and str(rv) != str(current.rv):
            raise self._conflict(info, name)
        if meta.get("name") != name:
            raise bad_request("metadata.name: the name of a patched object cannot change")
        return self._update(info, current, result, subresource)

    def get_scale(self, rtype: str, namespace: str | None, name: str) -> JsonDict:
        """The autoscaling/v1 Scale of a job whose CRD has a scale subresource (scale.py)."""
        info = resource_type(rtype)
        return scale_of(info, self.get_entry(rtype, namespace, name).obj)

    def _write_scale(
        self, info: ResourceType, namespace: str | None, name: str, new_scale: Callable[[JsonDict], Any]
    ) -> JsonDict:
        current = self.get_entry(info.plural, namespace, name)
        scale = new_scale(current.obj)
        rv = (scale.get("metadata") or {}).get("resourceVersion") if isinstance(scale, dict) else None
        if rv not in (None, "") and str(rv) != str(current.rv):
            raise self._conflict(info, name)
        return scale_of(info, self._update(info, current, scaled_job(info, current.obj, scale), None))

    def update_status(self, rtype: str, namespace: str | None, name: str, status: JsonDict) -> JsonDict:
        """Controller/kubelet write of the whole status, without resourceVersion check."""
        info = resource_type(rtype)
        current = self.get_entry(rtype, namespace, name)
        new = dict(current.obj)
        new["status"] = clone(status)
        return self._store_update(info, current, new)

    def _update(self, info: ResourceType, current: Entry, obj: JsonDict, subresource: str | None) -> JsonDict:
        if subresource not in (None, "status"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        old = current.obj
        old_meta = old["metadata"]
        if subresource == "status":
            # Only status changes through /status (everything else is taken from the stored object).
            new = dict(old)
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
            return self._store_update(info, current, new)
        meta = object_meta(obj)
        for immutable in ("uid", "creationTimestamp", "namespace", "deletionTimestamp",
                          "deletionGracePeriodSeconds", "generation"):
            if immutable in old_meta:
                meta[immutable] = old_meta[immutable]
            else:
                meta.pop(immutable, None)
        meta["name"] = old_meta["name"]
        obj["apiVersion"] = info.api_version
        obj["kind"] = info.kind
        if info.status_subresource:
            if "status" in old:
                obj["status"] = old["status"]
            else:
                obj.pop("status", None)
        apply_core_defaults(info.plural, obj, old_meta["name"])
        if info.plural == "namespaces":
            obj["status"] = old.get("status", {"phase": "Active"})
        if self.admission is not None:
            self.admission.admit(info.plural, "UPDATE", obj, clone(old))
        # Spec changes (anything outside metadata and status) bump generation, as for CRDs and apps.
        if _content(obj) != _content(old):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        if old_meta.get("deletionTimestamp") and not meta.get("finalizers") and old_meta.get("finalizers"):
            # Removing the last finalizer of an object being deleted completes the deletion.
            result = self._store_update(info, current, obj)
            self._remove(info, (old_meta.get("namespace", ""), old_meta["name"]))
            return result
        return self._store_update(info, current, obj)

    def _store_update(self, info: ResourceType, current: Entry, new: JsonDict) -> JsonDict:
        old = current.obj
        meta = dict(new["metadata"])
        new["metadata"] = meta
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return clone(old)  # a no-op write changes nothing and notifies no one, as on a real cluster
        key = (meta.get("namespace", "") if info.namespaced else "", meta["name"])
        self._commit(info, key, new, "MODIFIED", old)
        return clone(new)


    def _remove(self, info: ResourceType, key: tuple[str, str]) -> JsonDict:
        current = self._objects[info.plural].pop(key)
        self._index(info.plural, key, current.obj, None)
        self._rv += 1
        obj = dict(current.obj)
        obj["metadata"] = dict(obj["metadata"])
        obj["metadata"]["resourceVersion"] = str(self._rv)
        entry = Entry(obj, self._rv)
        self._publish(info, WatchEvent("DELETED", entry, None, key[0]))
        if info.plural == "events":
            self._event_index = {k: v for k, v in self._event_index.items() if not (k[0] == key[0] and v == key[1])}
        uid = obj["metadata"].get("uid")
        if uid:
            self._finish_foreground_owners(obj)
        return clone(obj)

    # ---- watching

    def watch(
        self,
        rtype: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Watcher:
        """A watcher that first gets the history after `resource_version` (or, without one, the current
        objects as ADDED), then every change."""
        info, labels, fields, rv = self._read_request(rtype, label_selector, field_selector, resource_version)
        ns = namespace if info.namespaced else None
        watcher = Watcher(self, info, ns, labels, fields)
        if rv is None or rv == 0:
            entries, _ = self.list_entries(rtype, ns)
            for entry in entries:
                watcher._offer(WatchEvent("ADDED", entry, None, entry.obj["metadata"].get("namespace", "")))
        else:
            for event in self._history[rtype]:
                if event.rv > rv:
                    watcher._offer(event)
        watcher.last_rv = rv or 0
        self._watchers[rtype].add(watcher)
        return watcher

    def unregister(self, watcher: Watcher) -> None:
        """Stop fanning changes out to `watcher` (it calls this when it is closed)."""
        self._watchers[watcher.info.plural].discard(watcher)

    def watcher_count(self, rtype: str | None = None) -> int:
        if rtype is not None:
            return len(self._watchers[resource_type(rtype).plural])
        return sum(len(w) for w in self._watchers.values())

    def _commit(self, info: ResourceType, key: tuple[str, str], obj: JsonDict, type_: str, prev: JsonDict | None) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        entry = Entry(obj, self._rv)
        old = self._objects[info.plural].get(key)
        self._objects[info.plural][key] = entry
        self._index(info.plural, key, old.obj if old is not None else None, obj)
        self._publish(info, WatchEvent(type_, entry, prev, key[0]))

    def _publish(self, info: ResourceType, event: WatchEvent) -> None:
        history = self._history[info.plural]
        history.append(event)
        while len(history) > self._history_limit:
            dropped = history.popleft()
            self._oldest_kept[info.plural] = dropped.rv
        for watcher in list(self._watchers[info.plural]):
            watcher._offer(event)

    def compact(self) -> None:
        """Forget all watch history (as an etcd compaction does): older resourceVersions now get 410."""
        for rtype, history in self._history.items():
            history.clear()
            self._oldest_kept[rtype] = self._rv

    # ---- error helpers

    def _expired(self, rv: int) -> ApiError:
        return ApiError(410, "Expired", f"too old resource version: {rv} ({self._oldest_kept_min()})")

    def _oldest_kept_min(self) -> int:
        return max(self._oldest_kept.values())

    @staticmethod
    def _conflict(info: ResourceType, name: str) -> ApiError:
        return ApiError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {info.qualified} "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again",
            {"name": name, "group": info.group, "kind": info.plural},
        )

    @staticmethod
    def _invalid(info: ResourceType, name: str, causes: builtins.list[tuple[str, str, str]]) -> ApiError:
        return invalid(info, name, causes)

    def _namespace_for_write(self, info: ResourceType, namespace: str | None, meta: JsonDict) -> str:
        if not info.namespaced:
            meta.pop("namespace", None)
            return ""
        body_ns = meta.get("namespace")
        if namespace and body_ns and body_ns != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        ns = namespace or body_ns or "default"
        if not isinstance(ns, str):
            raise bad_request("metadata.namespace: expected a string")
        if ("", ns) not in self._objects["namespaces"]:
            raise ApiError(404, "NotFound", f'namespaces "{ns}" not found',
                           {"name": ns, "group": "", "kind": "namespaces"})
        return ns

    def objects(self, rtype: str) -> Iterator[JsonDict]:
        """Copies of all stored objects of a type (diagnostics and tests)."""
        for entry in list(self._objects[resource_type(rtype).plural].values()):
            yield clone(entry.obj)


def _content(obj: JsonDict) -> JsonDict:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}
