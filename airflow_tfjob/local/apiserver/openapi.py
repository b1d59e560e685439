"""The OpenAPI documents kubectl reads: `/openapi/v3` (one document per group-version, listed by a root
document) and `/openapi/v2` (one Swagger 2.0 document), built from the schemas of the kinds served.

kubectl 1.32 reads them for three things:
- `create`/`apply` with validation on: it looks in the v3 document of the object's group-version for the
  PATCH operation of its kind and whether that takes the `fieldValidation` query parameter; if so, it
  leaves validation to the server (fieldvalidation.py), otherwise it would validate against the v2
  document itself;
- `apply` on an existing object: whether PATCH accepts strategic merge patches (listed for no kind here:
  kubectl then builds strategic patches for core kinds from its own compiled-in types, and merge patches
  for custom resources, as against a real server);
- `explain`: the kind's schema in its group-version's v3 document (`x-kubernetes-group-version-kind`).

Schemas: job kinds from jobschema.py (the CRDs' shape, inlined as a real server publishes CRDs), core
kinds from the kubernetes client's models (model/coreschema.py, inlined, where a real server uses $refs).
Only JSON is served: a request that accepts only protobuf gets 406, as a real server answers a type it
cannot produce (client-go's OpenAPISchema() asks for protobuf only; kubectl uses v3 first).
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from typing import Any

from airflow_tfjob.local.apiserver.discovery import KUBERNETES_VERSION
from airflow_tfjob.local.model.coreschema import model_schema
from airflow_tfjob.local.model.jobschema import schema_for
from airflow_tfjob.local.model.resources import BASE_RESOURCES, JsonDict, ResourceType

# The scale subresource's body (autoscaling/v1 Scale), described beside the kinds that have one.
_SCALE = ResourceType("scale", "scale", "Scale", "autoscaling", "v1", True, False)


def definition_name(info: ResourceType, kind: str | None = None) -> str:
    """`io.k8s.api.core.v1.Pod`, `io.k8s.api.apps.v1.Deployment`, `org.kubeflow.v1.TFJob` (CRDs: reversed group)."""
    kind = kind or info.kind
    if "." not in info.group:  # built-in groups: core, apps, autoscaling
        return f"io.k8s.api.{info.group or 'core'}.{info.version}.{kind}"
    return ".".join([*reversed(info.group.split(".")), info.version, kind])


def group_versions() -> list[str]:
    """`api/v1`, `apis/apps/v1`, ... in the order the resources are declared."""
    seen: list[str] = []
    for info in BASE_RESOURCES:
        gv = f"apis/{info.group}/{info.version}" if info.group else f"api/{info.version}"
        if gv not in seen:
            seen.append(gv)
    return seen


def _resources_of(gv: str) -> list[ResourceType]:
    return [i for i in BASE_RESOURCES if (f"apis/{i.group}/{i.version}" if i.group else f"api/{i.version}") == gv]


# --------------------------------------------------------------------------------------------------
# Paths and operations (v3 form; v2 is derived from it)


def _param(name: str, where: str = "query", type_: str = "string", required: bool = False) -> JsonDict:
    return {"name": name, "in": where, "required": required, "schema": {"type": type_}}


_WRITE = [_param("dryRun"), _param("fieldManager"), _param("fieldValidation")]
_LIST = [_param(p) for p in ("labelSelector", "fieldSelector", "resourceVersion", "continue")] + [
    _param("watch", type_="boolean"), _param("allowWatchBookmarks", type_="boolean"),
    _param("limit", type_="integer"), _param("timeoutSeconds", type_="integer")]
_DELETE = [_param("dryRun"), _param("gracePeriodSeconds", type_="integer"), _param("propagationPolicy")]
_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json")


def _ref(name: str) -> JsonDict:
    return {"$ref": f"#/components/schemas/{name}"}


def _op(info: ResourceType, action: str, verb: str, ref: str, params: list[JsonDict], body: bool = False,
        patch: bool = False) -> JsonDict:
    gvk = {"group": info.group, "version": info.version, "kind": info.kind}
    op: JsonDict = {
        "operationId": f"{verb}{info.kind}",
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": _ref(ref)}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
    }
    if body:
        types = _PATCH_TYPES if patch else ("application/json", "application/yaml")
        schema = {"type": "object"} if patch else _ref(ref)
        op["requestBody"] = {"required": True, "content": {t: {"schema": schema} for t in types}}
    return op


def _paths(info: ResourceType) -> dict[str, JsonDict]:
    prefix = f"/apis/{info.group}/{info.version}" if info.group else f"/api/{info.version}"
    scope = "/namespaces/{namespace}" if info.namespaced else ""
    ns = [_param("namespace", "path", required=True)] if info.namespaced else []
    name = [_param("name", "path", required=True)]
    obj, lst = definition_name(info), definition_name(info, info.kind + "List")
    collection = {
        "get": _op(info, "list", "list", lst, ns + _LIST),
        "post": _op(info, "post", "create", obj, ns + _WRITE, body=True),
        "delete": _op(info, "deletecollection", "deleteCollection", lst, ns + _DELETE + _LIST),
    }
    item = {
        "get": _op(info, "get", "read", obj, ns + name),
        "put": _op(info, "put", "replace", obj, ns + name + _WRITE, body=True),
        "patch": _op(info, "patch", "patch", obj, ns + name + _WRITE + [_param("force", type_="boolean")],
                     body=True, patch=True),
        "delete": _op(info, "delete", "delete", obj, ns + name + _DELETE),
    }
    paths = {f"{prefix}{scope}/{info.plural}": collection, f"{prefix}{scope}/{info.plural}/{{name}}": item}
    if info.status_subresource:
        paths[f"{prefix}{scope}/{info.plural}/{{name}}/status"] = {k: item[k] for k in ("get", "put", "patch")}
    if info.scale_type is not None:
        params = ns + name + _WRITE
        paths[f"{prefix}{scope}/{info.plural}/{{name}}/scale"] = {
            "get": _op(_SCALE, "get", "read", definition_name(_SCALE), ns + name),
            "put": _op(_SCALE, "put", "replace", definition_name(_SCALE), params, body=True),
            "patch": _op(_SCALE, "patch", "patch", definition_name(_SCALE), params, body=True, patch=True),
        }
    return paths


def _schemas(info: ResourceType) -> dict[str, JsonDict]:
    gvk = [{"group": info.group, "version": info.version, "kind": info.kind}]
    list_gvk = [{**gvk[0], "kind": info.kind + "List"}]
    items_list = {
        "description": f"A list of {info.kind} objects.",
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "items": {"type": "array", "items": _ref(definition_name(info))},
            "metadata": model_schema("V1ListMeta"),
        },
        "x-kubernetes-group-version-kind": list_gvk,
    }
    schemas = {definition_name(info): {**schema_for(info), "x-kubernetes-group-version-kind": gvk},
               definition_name(info, info.kind + "List"): items_list}
    if info.scale_type is not None:
        schemas[definition_name(_SCALE)] = {**model_schema("V1Scale"), "x-kubernetes-group-version-kind": [
            {"group": _SCALE.group, "version": _SCALE.version, "kind": _SCALE.kind}]}
    return schemas


# --------------------------------------------------------------------------------------------------
# Documents


def _info() -> JsonDict:
    return {"title": "Kubernetes (tfjob-local)", "version": KUBERNETES_VERSION["gitVersion"]}


@cache
def v3_document(gv: str) -> bytes | None:
    """The v3 document of one group-version (`api/v1`, `apis/kubeflow.org/v1`), or None if not served."""
    infos = _resources_of(gv)
    if not infos:
        return None
    paths: JsonDict = {}
    schemas: JsonDict = {}
    for info in infos:
        paths.update(_paths(info))
        schemas.update(_schemas(info))
    doc = {"openapi": "3.0.0", "info": _info(), "paths": paths, "components": {"schemas": schemas}}
    return json.dumps(doc).encode()


def document_hash(body: bytes) -> str:
    return hashlib.sha512(body).hexdigest().upper()


def served(gv: str, groups: frozenset[str] | None) -> bool:
    """Whether a group-version (`api/v1`, `apis/<group>/<version>`) is among the groups a cluster serves."""
    return groups is None or (gv.split("/")[1] if gv.startswith("apis/") else "") in groups


@cache
def v3_root(groups: frozenset[str] | None = None) -> bytes:
    """The discovery document: each group-version (of the served `groups`; None: all) with the URL of its
    document (content-hashed, so a client's HTTP cache may keep it for good, as it does against a real
    server)."""
    paths = {}
    for gv in (g for g in group_versions() if served(g, groups)):
        body = v3_document(gv)
        assert body is not None
        paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={document_hash(body)}"}
    return json.dumps({"paths": paths}).encode()


def _to_v2(node: Any) -> Any:
    """Swagger 2.0 knows neither anyOf nor components: int-or-string becomes `format: int-or-string`."""
    if isinstance(node, list):
        return [_to_v2(n) for n in node]
    if not isinstance(node, dict):
        return node
    if node.get("x-kubernetes-int-or-string"):
        return {k: v for k, v in node.items() if k not in ("anyOf", "x-kubernetes-int-or-string")} | {
            "type": "string", "format": "int-or-string"}
    if isinstance(node.get("$ref"), str):
        return {"$ref": node["$ref"].replace("#/components/schemas/", "#/definitions/")}
    return {k: _to_v2(v) for k, v in node.items()}


def _v2_operation(op: JsonDict) -> JsonDict:
    params = [{k: v for k, v in p.items() if k != "schema"} | p["schema"] for p in op["parameters"]]
    out = {k: v for k, v in op.items() if k not in ("parameters", "requestBody", "responses")}
    if "requestBody" in op:
        content = op["requestBody"]["content"]
        out["consumes"] = list(content)
        params.append({"name": "body", "in": "body", "required": True, "schema": next(iter(content.values()))["schema"]})
    out["parameters"] = params
    out["produces"] = ["application/json"]
    out["responses"] = {"200": {"description": "OK", "schema": op["responses"]["200"]["content"][
        "application/json"]["schema"]}}
    return _to_v2(out)  # type: ignore[no-any-return]


@cache
def v2_document(groups: frozenset[str] | None = None) -> bytes:
    paths: JsonDict = {}
    definitions: JsonDict = {}
    for info in BASE_RESOURCES:
        if groups is not None and info.group not in groups:
            continue
        for path, ops in _paths(info).items():
            paths[path] = {verb: _v2_operation(op) for verb, op in ops.items()}
        definitions.update(_to_v2(_schemas(info)))
    doc = {"swagger": "2.0", "info": _info(), "paths": paths, "definitions": definitions}
    return json.dumps(doc).encode()
