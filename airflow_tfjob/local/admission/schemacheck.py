"""An object checked against a structural OpenAPI v3 schema, as the API server checks custom resources.

One walk answers three questions the real server answers at different stages:
- the fields the schema does not declare (what decoding reports under `fieldValidation` and pruning
  drops), as paths like `spec.tfReplicaSpecs.Worker.template.spec.containers[0].imagePull`;
- wrong types and missing required fields, and the value constraints a schema declares (`enum`,
  `minItems`/`maxItems`, `minLength`/`maxLength`, `maxProperties`, `pattern`, the range of an `int32` or
  `int64` integer): the CRD validation's 422 causes, with its reasons and wording;
- the schema's defaults, written into the object.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from airflow_tfjob.local.model.resources import JsonDict, json_type

Path = tuple[str | int, ...]
_PY_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}


@dataclass
class Findings:
    unknown: list[Path] = field(default_factory=list)
    # (field path, reason, detail) in document order, as the 422's causes.
    invalid: list[tuple[str, str, str]] = field(default_factory=list)


def field_path(path: Path) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def _type_ok(value: Any, schema: JsonDict) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return json_type(value) in ("integer", "string")
    expected = schema.get("type")
    if expected is None:
        return True
    if expected == "integer":
        return json_type(value) == "integer"
    if expected == "number":
        return json_type(value) in ("integer", "number")
    return isinstance(value, _PY_TYPES[expected])


def _expected(schema: JsonDict) -> str:
    return "integer,string" if schema.get("x-kubernetes-int-or-string") else str(schema.get("type"))


_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    # Go's `$` is the end of the text; Python's also matches before a final newline.
    if pattern.endswith("$"):
        pattern = pattern[:-1] + r"\Z"
    # RE2 takes a flag group after the anchor (Kueue's AdmissionCheck parameters.kind: `^(?i)[a-z]...`);
    # Python takes global flags only at the very start, where they mean the same.
    flags = re.match(r"\^(\(\?[a-z]+\))", pattern)
    if flags:
        pattern = flags.group(1) + "^" + pattern[flags.end():]
    return re.compile(pattern)


def _shown(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def constraint_errors(node: Any, sch: JsonDict, name: str) -> list[tuple[str, str, str]]:
    """The causes a value of the right type still earns from its schema's constraints, worded as the API
    server words them (k8s.io/apiextensions-apiserver's validation). An integer out of its `format`'s range
    is refused here although the real server's schema walk lets it through: Kueue (a Go program) cannot
    then read the object, so a real cluster breaks later; docs/local-cluster.md says so."""
    causes: list[tuple[str, str, str]] = []
    if "enum" in sch and node not in sch["enum"]:
        supported = ", ".join(_shown(v) for v in sch["enum"])
        causes.append((name, "FieldValueNotSupported", f"Unsupported value: {_shown(node)}: supported values: "
                                                       f"{supported}"))
    if isinstance(node, int) and not isinstance(node, bool) and sch.get("format") in _INT_RANGES:
        low, high = _INT_RANGES[sch["format"]]
        if not low <= node <= high:
            causes.append((name, "FieldValueInvalid", f"Invalid value: {node}: {name} in body must be of type "
                                                      f"{sch['format']} ({low} to {high})"))
    if isinstance(node, list):
        if "maxItems" in sch and len(node) > sch["maxItems"]:
            causes.append((name, "FieldValueTooMany", f"Too many: {len(node)}: must have at most {sch['maxItems']} "
                                                      "items"))
        if "minItems" in sch and len(node) < sch["minItems"]:
            causes.append((name, "FieldValueInvalid", f"Invalid value: {len(node)}: {name} in body should have at "
                                                      f"least {sch['minItems']} items"))
    if isinstance(node, dict) and "maxProperties" in sch and len(node) > sch["maxProperties"]:
        causes.append((name, "FieldValueTooMany", f"Too many: {len(node)}: must have at most "
                                                  f"{sch['maxProperties']} items"))
    if isinstance(node, str):
        if "maxLength" in sch and len(node) > sch["maxLength"]:
            causes.append((name, "FieldValueTooLong", f"Too long: may not be more than {sch['maxLength']} bytes"))
        if "minLength" in sch and len(node) < sch["minLength"]:
            causes.append((name, "FieldValueInvalid", f'Invalid value: "": {name} in body should be at least '
                                                      f"{sch['minLength']} chars long"))
        if "pattern" in sch and not _compiled(sch["pattern"]).search(node):
            causes.append((name, "FieldValueInvalid", f"Invalid value: {_shown(node)}: {name} in body should match "
                                                      f"'{sch['pattern']}'"))
    return causes


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
            name, given = field_path(path), json_type(node)
            findings.invalid.append((name, "FieldValueTypeInvalid", f'Invalid value: "{given}": {name} in body '
                                                                   f'must be of type {_expected(sch)}: "{given}"'))
            return
        if typing:
            findings.invalid.extend(constraint_errors(node, sch, field_path(path)))
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
