"""Garbage collection through ownerReferences, as the garbage collector controller does it: an index from
owner uid to dependents, background collection, orphaning, and foreground deletion that completes once
no blocking dependent is left. A mixin of `Store`, which owns the objects."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from airflow_tfjob.local.model.resources import RESOURCES, JsonDict, ResourceType
from airflow_tfjob.local.store.watchers import Entry


class GarbageCollection:
    """The ownerReferences half of `Store`: its index (`_by_uid`, `_owned`) and what a delete propagates."""

    _objects: dict[str, dict[tuple[str, str], Entry]]
    _by_uid: dict[str, tuple[str, tuple[str, str]]]
    _owned: dict[str, set[tuple[str, tuple[str, str]]]]

    if TYPE_CHECKING:
        # Provided by Store (and Deletion); declared here so that the collector type-checks on its own.
        def _store_update(self, info: ResourceType, current: Entry, new: JsonDict) -> JsonDict: ...
        def _remove(self, info: ResourceType, key: tuple[str, str]) -> JsonDict: ...
        def delete(self, rtype: str, namespace: str | None, name: str, propagation: str | None = None,
                   grace_period_seconds: int | None = None, *, preconditions: dict[str, Any] | None = None,
                   dry_run: bool = False) -> JsonDict: ...

    def _dependents(self, owner_uid: str) -> builtins.list[tuple[ResourceType, tuple[str, str], Entry]]:
        found = []
        for rtype, key in sorted(self._owned.get(owner_uid, ())):
            entry = self._objects[rtype].get(key)
            if entry is not None:
                found.append((RESOURCES[rtype], key, entry))
        return found

    def _index(self, rtype: str, key: tuple[str, str], old: JsonDict | None, new: JsonDict | None) -> None:
        for obj, add in ((old, False), (new, True)):
            if obj is None:
                continue
            meta = obj["metadata"]
            if add:
                self._by_uid[meta["uid"]] = (rtype, key)
            else:
                self._by_uid.pop(meta["uid"], None)
            for ref in meta.get("ownerReferences") or []:
                uid = ref.get("uid") if isinstance(ref, dict) else None
                if not isinstance(uid, str):
                    continue
                if add:
                    self._owned.setdefault(uid, set()).add((rtype, key))
                else:
                    owned = self._owned.get(uid)
                    if owned is not None:
                        owned.discard((rtype, key))
                        if not owned:
                            del self._owned[uid]

    def _collect_dependents(self, owner_uid: str) -> None:
        for info, key, entry in self._dependents(owner_uid):
            if key not in self._objects[info.plural]:
                continue
            other_owners = [
                r for r in entry.obj["metadata"].get("ownerReferences") or []
                if r.get("uid") != owner_uid and self._uid_exists(r.get("uid"))
            ]
            if other_owners:
                # Still owned by something alive: only drop the reference to the deleted owner.
                new = dict(entry.obj)
                new["metadata"] = dict(new["metadata"])
                new["metadata"]["ownerReferences"] = [
                    r for r in new["metadata"]["ownerReferences"] if r.get("uid") != owner_uid
                ]
                self._store_update(info, entry, new)
                continue
            name = key[1]
            self.delete(info.plural, key[0] or None, name, "Background")

    def _uid_exists(self, uid: str | None) -> bool:
        return uid is not None and uid in self._by_uid

    def _orphan_dependents(self, owner_uid: str) -> None:
        for info, _key, entry in self._dependents(owner_uid):
            new = dict(entry.obj)
            new["metadata"] = dict(new["metadata"])
            refs = [r for r in new["metadata"]["ownerReferences"] if r.get("uid") != owner_uid]
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                del new["metadata"]["ownerReferences"]
            self._store_update(info, entry, new)

    def _finish_foreground_owners(self, removed: JsonDict) -> None:
        for ref in removed["metadata"].get("ownerReferences") or []:
            if isinstance(ref, dict) and ref.get("uid"):
                self._finish_foreground(ref["uid"])

    def _finish_foreground(self, owner_uid: str) -> None:
        """An owner in foreground deletion goes once no blocking dependent is left."""
        where = self._by_uid.get(owner_uid)
        if where is None:
            return
        rtype, key = where
        entry = self._objects[rtype][key]
        meta = entry.obj["metadata"]
        if "foregroundDeletion" not in (meta.get("finalizers") or []):
            return
        for _info, _key, dependent in self._dependents(owner_uid):
            for ref in dependent.obj["metadata"].get("ownerReferences") or []:
                if ref.get("uid") == owner_uid and ref.get("blockOwnerDeletion"):
                    return
        finalizers = [f for f in meta["finalizers"] if f != "foregroundDeletion"]
        if finalizers:
            new = dict(entry.obj)
            new["metadata"] = dict(meta, finalizers=finalizers)
            self._store_update(RESOURCES[rtype], entry, new)
        else:
            self._remove(RESOURCES[rtype], key)
