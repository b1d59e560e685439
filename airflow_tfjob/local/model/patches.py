"""The three patch kinds: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch
(core kinds only, with the core API's merge keys)."""

from __future__ import annotations

from typing import Any

import jsonpatch

from airflow_tfjob.local.model.resources import (
    ApiError,
    JsonDict,
    ResourceType,
    bad_request,
    clone,
    json_type,
)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return clone(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# List fields merged by a key in strategic merge patch (from the core API's patchMergeKey tags).
_MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
}
# Lists of scalars that strategic merge patch treats as sets.
_MERGE_SETS = frozenset({"finalizers"})


def _list_key(field: str, path: tuple[str, ...]) -> str | None:
    if field == "ports":
        # Service ports merge on port, container ports on containerPort.
        return "containerPort" if "containers" in path or "initContainers" in path else "port"
    return _MERGE_KEYS.get(field)


def strategic_merge_patch(target: Any, patch: Any, path: tuple[str, ...] = ()) -> Any:
    """Strategic merge patch for core kinds: keyed lists merge item by item, `$patch` directives apply."""
    if not isinstance(patch, dict):
        return clone(patch)
    if patch.get("$patch") == "replace":
        return {k: clone(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue  # $retainKeys, $setElementOrder/...: ordering hints we do not need
        if key.startswith("$deleteFromPrimitiveList/"):
            continue
        if value is None:
            result.pop(key, None)
            continue
        current = result.get(key)
        if isinstance(value, list):
            result[key] = _strategic_list(key, current, value, (*path, key))
        elif isinstance(value, dict):
            merged = strategic_merge_patch(current, value, (*path, key))
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/") and isinstance(value, list):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in value]
    return result


def _strategic_list(field: str, current: Any, patch: list[Any], path: tuple[str, ...]) -> list[Any]:
    if field in _MERGE_SETS and isinstance(current, list):
        merged = list(current)
        for v in patch:
            if v not in merged:
                merged.append(v)
        return merged
    key = _list_key(field, path)
    if key is None or not isinstance(current, list) or not all(isinstance(p, dict) for p in patch):
        return [clone(v) for v in patch if not (isinstance(v, dict) and v.get("$patch"))]
    if any(p.get("$patch") == "replace" for p in patch):
        return [clone(p) for p in patch if p.get("$patch") is None]
    result = [clone(item) for item in current]
    for item in patch:
        match = next(
            (i for i, old in enumerate(result) if isinstance(old, dict) and key in item and old.get(key) == item[key]),
            None,
        )
        if item.get("$patch") == "delete":
            if match is not None:
                del result[match]
        elif match is None:
            result.append(clone(item))
        else:
            result[match] = strategic_merge_patch(result[match], item, path)
    return result


def apply_patch(info: ResourceType, obj: JsonDict, patch: Any, patch_type: str) -> JsonDict:
    """Apply a patch the way the API server's patch handler does (400 body errors, 422 apply errors)."""
    if patch_type == "json":
        if not isinstance(patch, list):
            raise bad_request(
                f"json: cannot unmarshal {_json_kind(patch)} into Go value of type jsonpatch.Patch"
            )
        try:
            ops = jsonpatch.JsonPatch(patch)
        except (jsonpatch.InvalidJsonPatch, TypeError, AttributeError) as exc:
            raise bad_request(str(exc)) from exc
        try:
            result = ops.apply(clone(obj))
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, IndexError,
                TypeError, ValueError) as exc:
            raise ApiError(422, "Invalid", str(exc)) from exc
    elif patch_type == "merge":
        if not isinstance(patch, dict):
            raise bad_request(f"json: cannot unmarshal {_json_kind(patch)} into Go value of type map[string]interface {{}}")
        result = merge_patch(obj, patch)
    elif patch_type == "strategic":
        if not info.is_core:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            )
        if not isinstance(patch, dict):
            raise bad_request(f"json: cannot unmarshal {_json_kind(patch)} into Go value of type map[string]interface {{}}")
        result = strategic_merge_patch(obj, patch)
    else:
        raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {patch_type!r}")
    if not isinstance(result, dict):
        raise ApiError(422, "Invalid", "the patched object is not a JSON object")
    return result


# Go's encoding/json words for a JSON value's type (UnmarshalTypeError): one "number", and "bool".
_GO_TYPE_WORDS = {"boolean": "bool", "integer": "number"}


def _json_kind(value: Any) -> str:
    kind = json_type(value)
    return _GO_TYPE_WORDS.get(kind, kind)
