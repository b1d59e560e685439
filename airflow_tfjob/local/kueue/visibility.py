"""Kueue's visibility API (`visibility.kueue.x-k8s.io` v1beta2 and v1beta1, an aggregated API in a real
cluster): the pending Workloads of a ClusterQueue or a LocalQueue with their positions
(pkg/visibility/storage/pending_workloads_{cq,lq}.go; docs/reference/kueue-behaviour.md §8)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from airflow_tfjob.local.apiserver.request import JSON_TYPE, parse_int, route_not_found
from airflow_tfjob.local.kueue.scheduler import Scheduler, snapshot
from airflow_tfjob.local.kueue.workloads import priority
from airflow_tfjob.local.model.resources import ApiError, JsonDict
from airflow_tfjob.local.store.core import Store

GROUP = "visibility.kueue.x-k8s.io"
DEFAULT_LIMIT, MAX_LIMIT = 1000, 100000
_SUMMARY = "PendingWorkloadsSummary"


def _not_found(resource: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{resource}.{GROUP} "{name}" not found',
                    {"name": name, "group": GROUP, "kind": resource})


def _entry(wl: JsonDict, in_cq: int, in_lq: int) -> JsonDict:
    meta = wl["metadata"]
    refs = [{k: r[k] for k in ("apiVersion", "kind", "name", "uid") if k in r}
            for r in meta.get("ownerReferences") or []]
    out_meta: JsonDict = {"name": meta["name"], "namespace": meta.get("namespace", ""),
                          "creationTimestamp": meta.get("creationTimestamp")}
    if refs:
        out_meta["ownerReferences"] = refs
    return {"metadata": out_meta, "priority": priority(wl), "localQueueName": wl["spec"].get("queueName", ""),
            "positionInClusterQueue": in_cq, "positionInLocalQueue": in_lq}


class VisibilityApi:
    """The AggregatedApi (extensions.py) the API server hands /apis/visibility.kueue.x-k8s.io/... to."""

    def __init__(self, store: Store, scheduler: Scheduler) -> None:
        self.group: str = GROUP
        self.versions: tuple[str, ...] = ("v1beta2", "v1beta1")
        self.store = store
        self.scheduler = scheduler

    async def handle(self, request: web.Request, parts: list[str]) -> web.StreamResponse:
        if not parts:
            listed = [{"groupVersion": f"{GROUP}/{v}", "version": v} for v in self.versions]
            return _json({"kind": "APIGroup", "apiVersion": "v1", "name": GROUP, "versions": listed,
                          "preferredVersion": listed[0]})
        version, rest = parts[0], parts[1:]
        if version not in self.versions:
            raise route_not_found()
        if not rest:
            return _json(self.resource_list(version))
        if request.method != "GET":
            raise ApiError(405, "MethodNotAllowed",
                           f"the server does not allow this method on the requested resource ({request.method})")
        limit = parse_int(request.query, "limit")
        offset = parse_int(request.query, "offset")
        limit = min(max(DEFAULT_LIMIT if limit is None else limit, 0), MAX_LIMIT)
        offset = max(offset or 0, 0)
        if len(rest) == 3 and rest[0] == "clusterqueues" and rest[2] == "pendingworkloads":
            items = self.cluster_queue(rest[1], limit, offset)
        elif len(rest) == 5 and rest[0] == "namespaces" and rest[2] == "localqueues" and rest[4] == "pendingworkloads":
            items = self.local_queue(rest[1], rest[3], limit, offset)
        else:
            raise route_not_found()
        return _json({"kind": _SUMMARY, "apiVersion": f"{GROUP}/{version}", "metadata": {}, "items": items})

    @staticmethod
    def resource_list(version: str) -> JsonDict:
        """pkg/visibility/storage/storage.go: the queues themselves serve no verb, only their subresource."""
        resources = []
        for plural, namespaced in (("clusterqueues", False), ("localqueues", True)):
            resources += [
                {"name": plural, "singularName": plural[:-1], "namespaced": namespaced, "kind": _SUMMARY,
                 "verbs": []},
                {"name": f"{plural}/pendingworkloads", "singularName": "", "namespaced": namespaced,
                 "kind": _SUMMARY, "verbs": ["get"]},
            ]
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{GROUP}/{version}",
                "resources": resources}

    def _ordered(self, cq: str) -> list[JsonDict]:
        return self.scheduler.ordered(snapshot(self.store), cq)

    def cluster_queue(self, name: str, limit: int, offset: int) -> list[JsonDict]:
        try:
            self.store.get("clusterqueues", None, name)
        except ApiError:
            raise _not_found("clusterqueue", name) from None
        items: list[JsonDict] = []
        per_lq: dict[tuple[str, str], int] = {}
        for index, wl in enumerate(self._ordered(name)[: offset + limit]):
            lq_key = (wl["metadata"].get("namespace"), wl["spec"].get("queueName"))
            position = per_lq.get(lq_key, 0)
            per_lq[lq_key] = position + 1
            if index >= offset:
                items.append(_entry(wl, index, position))
        return items

    def local_queue(self, namespace: str, name: str, limit: int, offset: int) -> list[JsonDict]:
        try:
            lq = self.store.get("localqueues", namespace, name)
        except ApiError:
            raise _not_found("localqueue", name) from None
        cq = (lq.get("spec") or {}).get("clusterQueue", "")
        mine = [(index, wl) for index, wl in enumerate(self._ordered(cq))
                if wl["metadata"].get("namespace") == namespace and wl["spec"].get("queueName") == name]
        return [_entry(wl, index, offset + i) for i, (index, wl) in enumerate(mine[offset: offset + limit])]


def _json(obj: Any) -> web.Response:
    return web.Response(body=json.dumps(obj).encode(), content_type=JSON_TYPE)
