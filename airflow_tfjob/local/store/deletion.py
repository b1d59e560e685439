"""DELETE as the API server does it: preconditions, propagation policies, graceful pod deletion (and its
shortening by a repeated delete), finalizers, and namespace deletion. A mixin of `Store`."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from airflow_tfjob.local.model.resources import (
    RESOURCES,
    ApiError,
    JsonDict,
    ResourceType,
    clone,
    now_rfc3339,
    resource_type,
)
from airflow_tfjob.local.store.ownerrefs import GarbageCollection
from airflow_tfjob.local.store.watchers import Entry


def _marked_for_deletion(
    obj: JsonDict, timestamp: str, grace_seconds: int, finalizers: list[str] | None = None
) -> JsonDict:
    """A copy of a stored object that is being deleted: deletionTimestamp/GracePeriodSeconds set (and its
    finalizers replaced, when given); the stored original is not touched."""
    meta = dict(obj["metadata"])
    meta["deletionTimestamp"] = timestamp
    meta["deletionGracePeriodSeconds"] = grace_seconds
    if finalizers is not None:
        meta["finalizers"] = finalizers
    return dict(obj, metadata=meta)


class Deletion(GarbageCollection):
    """The delete verbs of `Store`; removal itself (`_remove`) stays in the store core."""

    if TYPE_CHECKING:
        def get_entry(self, rtype: str, namespace: str | None, name: str) -> Entry: ...

    def delete(
        self,
        rtype: str,
        namespace: str | None,
        name: str,
        propagation: str | None = None,
        grace_period_seconds: int | None = None,
        *,
        preconditions: dict[str, Any] | None = None,
        dry_run: bool = False,
    ) -> JsonDict:
        info = resource_type(rtype)
        current = self.get_entry(rtype, namespace, name)
        obj = current.obj
        meta = obj["metadata"]
        if propagation not in (None, "", "Background", "Foreground", "Orphan"):
            raise ApiError(
                422,
                "Invalid",
                f'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "{propagation}": '
                'supported values: "Foreground", "Background", "Orphan", "nil"',
            )
        if grace_period_seconds is not None and grace_period_seconds < 0:
            grace_period_seconds = 0
        if preconditions:
            uid = preconditions.get("uid")
            prv = preconditions.get("resourceVersion")
            if (uid and uid != meta.get("uid")) or (prv and str(prv) != str(current.rv)):
                what = "UID" if uid and uid != meta.get("uid") else "ResourceVersion"
                raise ApiError(
                    409,
                    "Conflict",
                    f"Operation cannot be fulfilled on {info.qualified} \"{name}\": Precondition failed: "
                    f"{what} in precondition: {uid if what == 'UID' else prv}, {what} in object meta: "
                    f"{meta.get('uid') if what == 'UID' else current.rv}",
                    {"name": name, "group": info.group, "kind": info.plural},
                )
        if dry_run:
            return clone(obj)
        key = (meta.get("namespace", "") if info.namespaced else "", name)
        if rtype == "namespaces":
            return self._delete_namespace(name)
        if meta.get("deletionTimestamp"):
            if rtype == "pods" and self._shortens_grace(meta, grace_period_seconds):
                return self._shorten_pod_grace(info, key, current, grace_period_seconds or 0)
            return clone(obj)  # already being deleted: a repeated delete changes nothing
        if propagation == "Orphan":
            self._orphan_dependents(meta["uid"])
        elif propagation == "Foreground" and self._dependents(meta["uid"]):
            new = _marked_for_deletion(
                obj, now_rfc3339(), 0, finalizers=[*meta.get("finalizers", []), "foregroundDeletion"]
            )
            self._store_update(info, current, new)
            self._collect_dependents(meta["uid"])
            self._finish_foreground(meta["uid"])
            return clone(self._objects[rtype].get(key, current).obj)
        if rtype == "pods" and self._graceful(obj, grace_period_seconds):
            grace = grace_period_seconds
            if grace is None:
                grace = int(obj.get("spec", {}).get("terminationGracePeriodSeconds", 30))
            deadline = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=grace)
            new = _marked_for_deletion(obj, deadline.strftime("%Y-%m-%dT%H:%M:%SZ"), grace)
            self._store_update(info, current, new)
            self._collect_dependents(meta["uid"])
            return clone(new)
        if meta.get("finalizers"):
            return self._store_update(info, current, _marked_for_deletion(obj, now_rfc3339(), 0))
        removed = self._remove(info, key)
        if propagation != "Orphan":
            self._collect_dependents(meta["uid"])
        return removed

    @staticmethod
    def _shortens_grace(meta: JsonDict, grace: int | None) -> bool:
        current = meta.get("deletionGracePeriodSeconds")
        return grace is not None and isinstance(current, int) and grace < current

    def _shorten_pod_grace(self, info: ResourceType, key: tuple[str, str], current: Entry, grace: int) -> JsonDict:
        """As the API server: a repeated delete of a terminating pod may shorten its grace (never lengthen
        it); 0 removes it at once. A kill then need not wait out the grace that garbage collection gave."""
        if grace == 0:
            return self._remove(info, key)
        deadline = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=grace)
        new = _marked_for_deletion(current.obj, deadline.strftime("%Y-%m-%dT%H:%M:%SZ"), grace)
        return self._store_update(info, current, new)

    @staticmethod
    def _graceful(pod: JsonDict, grace: int | None) -> bool:
        # As the pod strategy: unscheduled or terminated pods, and grace 0, go at once.
        if grace == 0:
            return False
        if not pod.get("spec", {}).get("nodeName"):
            return False
        return pod.get("status", {}).get("phase") not in ("Succeeded", "Failed")

    def finalize_pod_deletion(self, namespace: str, name: str) -> None:
        """The kubelet confirms that a gracefully deleted pod's processes are gone."""
        entry = self._objects["pods"].get((namespace, name))
        if entry is not None:
            self._remove(RESOURCES["pods"], (namespace, name))

    def _delete_namespace(self, name: str) -> JsonDict:
        if name in ("default", "kube-system", "kube-public"):
            raise ApiError(403, "Forbidden", f'namespaces "{name}" is forbidden: this namespace may not be deleted')
        for rtype, objects in self._objects.items():
            info = RESOURCES[rtype]
            if not info.namespaced:
                continue
            for key in [k for k in objects if k[0] == name]:
                if key in objects:
                    self._remove(info, key)
        return self._remove(RESOURCES["namespaces"], ("", name))
