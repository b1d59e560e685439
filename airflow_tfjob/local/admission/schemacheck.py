"""An object checked against a structural OpenAPI v3 schema, as the API server checks custom resources.

One walk answers three questions the real server answers at different stages:
- the fields the schema does not declare (what decoding reports under `fieldValidation` and pruning
  drops), as paths like `spec.tfReplicaSpecs.Worker.template.spec.containers[0].imagePull`;
- wrong types and missing required fields (the CRD validation's 422 causes);
- the schema's defaults, written into the object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_tfjob.local.model.resources import JsonDict

Path = tuple[str | int, ...]
_PY_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}


@dataclass
class Findings:
    unknown: list[Path] = field(default_factory=list)
    # (field path, reason, detail) in document order, as the 422's causes.
    invalid: list[tuple[str, str, str]] = field(default_factory=list)


def field_path(path: Path) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"


def _type_ok(value: Any, schema: JsonDict) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return _json_type(value) in ("integer", "string")
    expected = schema.get("type")
    if expected is None:
        return True
    if expected == "integer":
        return _json_type(value) == "integer"
    if expected == "number":
        return _json_type(value) in ("integer", "number")
    return isinstance(value, _PY_TYPES[expected])


def _expected(schema: JsonDict) -> str:
    return "integer,string" if schema.get("x-kubernetes-int-or-string") else str(schema.get("type"))


def check(value: Any, schema: JsonDict, *, types_from: Path | None = None, defaults: bool = False) -> Findings:
    """Walk `value`; type and required errors only at or below `types_from` (the API server checks
    metadata itself, so callers pass ("spec",); None: unknown fields only); write the schema's defaults
    when `defaults`."""
    findings = Findings()
    depth = len(types_from) if types_from is not None else 0

    def typed(path: Path) -> bool:
        return types_from is not None and path[:depth] == types_from

    def walk(node: Any, sch: JsonDict, path: Path) -> None:
        if node is None:
            return  # nulls of non-nullable fields are dropped by the API server, not refused
        typing = typed(path)
        if typing and not _type_ok(node, sch):
            name, given = field_path(path), _json_type(node)
            findings.invalid.append((name, "FieldValueTypeInvalid", f'Invalid value: "{given}": {name} in body '
                                                                   f'must be of type {_expected(sch)}: "{given}"'))
            return
        if isinstance(node, dict):
            props = sch.get("properties")
            extra = sch.get("additionalProperties")
            if typing:
                for key in sch.get("required", ()):
                    if key not in node:
                        findings.invalid.append((field_path((*path, key)), "FieldValueRequired", "Required value"))
            for key, child in node.items():
                if props is not None and key in props:
                    child_schema = props[key]
                elif isinstance(extra, dict):
                    child_schema = extra
                else:
                    if props is not None and not sch.get("x-kubernetes-preserve-unknown-fields"):
                        findings.unknown.append((*path, key))
                    continue
                if typing or isinstance(child, (dict, list)) or typed((*path, key)):
                    walk(child, child_schema, (*path, key))
            if defaults and props:
                for key, prop in props.items():
                    if "default" in prop and key not in node:
                        node[key] = prop["default"]
        elif isinstance(node, list) and isinstance(sch.get("items"), dict):
            for index, child in enumerate(node):
                if typing or isinstance(child, (dict, list)):
                    walk(child, sch["items"], (*path, index))

    walk(value, schema, ())
    return findings


def prune(obj: JsonDict, paths: list[Path]) -> None:
    """Drop the fields at `paths` (as the API server drops unknown fields it was told to ignore)."""
    for path in paths:
        node: Any = obj
        for part in path[:-1]:
            node = node[part]
        node.pop(path[-1], None)
