"""Discovery documents (/version, APIGroupList, APIGroup, APIResourceList): what kubectl and the clients
read to learn which kinds, verbs and short names the local cluster serves."""

from __future__ import annotations

from functools import cache

from airflow_tfjob.local.model.resources import RESOURCES, JsonDict, ResourceType

KUBERNETES_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0+tfjob-local",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _served(info: ResourceType, features: frozenset[str]) -> bool:
    return info.feature is None or info.feature in features


def api_resource_list(group: str, version: str, features: frozenset[str] = frozenset()) -> JsonDict:
    resources: list[JsonDict] = []
    for info in RESOURCES.values():
        if info.group != group or version not in info.versions or not _served(info, features):
            continue
        entry: JsonDict = {
            "name": info.plural,
            "singularName": info.singular,
            "namespaced": info.namespaced,
            "kind": info.kind,
            "verbs": list(_VERBS),
        }
        if info.short_names:
            entry["shortNames"] = list(info.short_names)
        if info.plural in ("pods", "services", "deployments"):
            entry["categories"] = ["all"]
        resources.append(entry)
        if info.status_subresource:
            resources.append({"name": f"{info.plural}/status", "singularName": "", "namespaced": info.namespaced,
                              "kind": info.kind, "verbs": ["get", "patch", "update"]})
        if info.scale_type is not None:
            resources.append({"name": f"{info.plural}/scale", "singularName": "", "namespaced": info.namespaced,
                              "group": "autoscaling", "version": "v1", "kind": "Scale",
                              "verbs": ["get", "patch", "update"]})
        if info.plural == "pods":
            resources.append({"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod",
                              "verbs": ["get"]})
    group_version = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


@cache
def api_groups(features: frozenset[str] = frozenset(), served: frozenset[str] | None = None,
               withdrawn: frozenset[str] = frozenset()) -> dict[str, tuple[str, ...]]:
    """The served groups and their versions, preferred (storage) version first: the kinds of the optional
    parts that are on (`features`), of the groups in `served` when given (`--apis`), without the
    group/versions a version profile withdrew (`withdrawn`; a group left with none is not served)."""
    seen: dict[str, tuple[str, ...]] = {}
    for info in RESOURCES.values():
        if (info.group and info.group not in seen and _served(info, features)
                and (served is None or info.group in served)):
            versions = still_served(info.group, info.versions, withdrawn)
            if versions:
                seen[info.group] = versions
    return seen


def still_served(group: str, versions: tuple[str, ...], withdrawn: frozenset[str]) -> tuple[str, ...]:
    """`versions` of `group` but those withdrawn (``group/version``), in their order."""
    return tuple(v for v in versions if f"{group}/{v}" not in withdrawn)


def api_group(group: str, versions: tuple[str, ...] = ("v1",)) -> JsonDict:
    listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": listed,
            "preferredVersion": listed[0]}
