"""What a real cluster checks before it stores a TFJob.

Two separate stages, in the order the real API server runs them:
1. the CRD's OpenAPI schema (structural typing, `required: [tfReplicaSpecs]`, the schema's defaults such
   as `protocol: TCP` on container ports and `runPolicy.suspend: false`): failures are HTTP 422 Invalid
   from the API server itself;
2. the training-operator's validating webhook (v1.9): failures are HTTP 403 Forbidden with
   `admission webhook "validator.tfjob.training-operator.kubeflow.org" denied the request: ...`.

The stored TFJob is otherwise exactly what the client sent: the operator's own defaults (replicas,
restartPolicy, cleanPodPolicy, port) are applied in memory by the controller, never persisted.
"""

from __future__ import annotations

import re
from typing import Any

from airflow_tfjob.local.resources import RESOURCES, ApiError, JsonDict, invalid

WEBHOOK_NAME = "validator.tfjob.training-operator.kubeflow.org"
DEFAULT_CONTAINER = "tensorflow"
MANAGED_BY_VALUES = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)

_GO_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}


def _type_ok(value: Any, expected: str) -> bool:
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _GO_TYPES[expected])


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


def _go_value(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return "map[string]interface {}" if isinstance(value, dict) else "[]interface {}"
    return str(value)


# The parts of the CRD's schema that clients can get wrong in practice; everything below a pod template's
# containers is typed as in core/v1. Each entry: path pattern -> type ("*" matches any map key / index).
_SCHEMA_TYPES: dict[tuple[str, ...], str] = {
    ("spec",): "object",
    ("spec", "tfReplicaSpecs"): "object",
    ("spec", "tfReplicaSpecs", "*"): "object",
    ("spec", "tfReplicaSpecs", "*", "replicas"): "integer",
    ("spec", "tfReplicaSpecs", "*", "restartPolicy"): "string",
    ("spec", "tfReplicaSpecs", "*", "template"): "object",
    ("spec", "tfReplicaSpecs", "*", "template", "metadata"): "object",
    ("spec", "tfReplicaSpecs", "*", "template", "spec"): "object",
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers"): "array",
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*"): "object",
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*", "name"): "string",
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*", "image"): "string",
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*", "command"): "array",
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*", "args"): "array",
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*", "env"): "array",
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*", "env", "*"): "object",
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*", "env", "*", "name"): "string",
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*", "env", "*", "value"): "string",
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*", "ports"): "array",
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*", "ports", "*"): "object",
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*", "ports", "*", "containerPort"): "integer",
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*", "ports", "*", "name"): "string",
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*", "workingDir"): "string",
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*", "resources"): "object",
    ("spec", "runPolicy"): "object",
    ("spec", "runPolicy", "cleanPodPolicy"): "string",
    ("spec", "runPolicy", "ttlSecondsAfterFinished"): "integer",
    ("spec", "runPolicy", "activeDeadlineSeconds"): "integer",
    ("spec", "runPolicy", "backoffLimit"): "integer",
    ("spec", "runPolicy", "suspend"): "boolean",
    ("spec", "runPolicy", "managedBy"): "string",
    ("spec", "runPolicy", "schedulingPolicy"): "object",
    ("spec", "successPolicy"): "string",
    ("spec", "enableDynamicWorker"): "boolean",
}
# Required properties (the CRD marks them so): path of the object -> keys.
_SCHEMA_REQUIRED: dict[tuple[str, ...], tuple[str, ...]] = {
    (): ("spec",),
    ("spec",): ("tfReplicaSpecs",),
    ("spec", "tfReplicaSpecs", "*", "template", "spec"): ("containers",),
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*"): ("name",),
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*", "ports", "*"): ("containerPort",),
    ("spec", "tfReplicaSpecs", "*", "template", "spec", "containers", "*", "env", "*"): ("name",),
}


def _field_path(path: tuple[str | int, ...]) -> str:
    return ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in path).replace(".[", "[")


def _pattern(path: tuple[str | int, ...]) -> tuple[str, ...]:
    """Map key positions and list indexes become "*" for the schema tables."""
    out: list[str] = []
    for i, part in enumerate(path):
        if isinstance(part, int) or (i == 2 and path[:2] == ("spec", "tfReplicaSpecs")):
            out.append("*")
        else:
            out.append(part)
    return tuple(out)


def schema_errors(obj: JsonDict) -> list[tuple[str, str, str]]:
    """(field, reason, detail) for every schema violation, in document order."""
    errors: list[tuple[str, str, str]] = []

    def walk(value: Any, path: tuple[str | int, ...]) -> None:
        pattern = _pattern(path)
        expected = _SCHEMA_TYPES.get(pattern)
        if expected is not None and value is not None and not _type_ok(value, expected):
            field = _field_path(path)
            given = _json_type(value)
            errors.append((field, "FieldValueTypeInvalid",
                           f'Invalid value: "{given}": {field} in body must be of type {expected}: "{given}"'))
            return
        if isinstance(value, dict):
            for key in _SCHEMA_REQUIRED.get(pattern, ()):
                if key not in value:
                    errors.append((_field_path((*path, key)), "FieldValueRequired", "Required value"))
            for key, child in value.items():
                if path == () and key != "spec":
                    continue  # metadata is validated by the store; status has its own subresource
                walk(child, (*path, key))
        elif isinstance(value, list):
            for index, child in enumerate(value):
                walk(child, (*path, index))

    walk(obj, ())
    return errors


def apply_schema_defaults(obj: JsonDict) -> None:
    """Defaults declared in the CRD's schema, which the API server writes into the stored object."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    run_policy = spec.get("runPolicy")
    if isinstance(run_policy, dict):
        run_policy.setdefault("suspend", False)
    for replica in (spec.get("tfReplicaSpecs") or {}).values():
        if not isinstance(replica, dict):
            continue
        pod_spec = (replica.get("template") or {}).get("spec") or {}
        for group in ("initContainers", "containers"):
            for container in pod_spec.get(group) or []:
                for port in (container or {}).get("ports") or []:
                    if isinstance(port, dict):
                        port.setdefault("protocol", "TCP")


def webhook_errors(obj: JsonDict, old: JsonDict | None) -> list[str]:
    """The training-operator v1.9 validating webhook's field errors, formatted as Go's field.Error."""
    errors: list[str] = []
    name = obj.get("metadata", {}).get("name", "")
    reasons = []
    if len(name) > 63:
        reasons.append("must be no more than 63 characters")
    if not _DNS1035.match(name):
        reasons.append(_DNS1035_MSG)
    if reasons:
        errors.append(f'metadata.name: Invalid value: "{name}": should match: {",".join(reasons)}')
    spec = obj.get("spec") or {}
    new_managed = (spec.get("runPolicy") or {}).get("managedBy")
    if new_managed is not None and new_managed not in MANAGED_BY_VALUES:
        supported = ", ".join(f'"{v}"' for v in MANAGED_BY_VALUES)
        errors.append(f'spec.runPolicy.managedBy: Unsupported value: "{new_managed}": supported values: {supported}')
    if old is not None:
        old_managed = ((old.get("spec") or {}).get("runPolicy") or {}).get("managedBy")
        if old_managed != new_managed:
            errors.append(f"spec.runPolicy.managedBy: Invalid value: {_go_value(new_managed)}: field is immutable")
    replica_specs = spec.get("tfReplicaSpecs")
    base = "spec.tfReplicaSpecs"
    if replica_specs is None:
        errors.append(f"{base}: Required value: must be required")
    chief_or_master = 0
    for rtype, rspec in (replica_specs or {}).items():
        containers_path = f"{base}[{rtype}].template.spec.containers"
        containers = (((rspec or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        if not containers:
            errors.append(f"{containers_path}: Required value: must be specified")
        if rtype in ("Chief", "Master"):
            chief_or_master += 1
        has_default = False
        for index, container in enumerate(containers):
            if not (container or {}).get("image"):
                errors.append(f"{containers_path}[{index}].image: Required value: must be required")
            if (container or {}).get("name") == DEFAULT_CONTAINER:
                has_default = True
        if not has_default:
            errors.append(f"{containers_path}: Required value: must have at least one container with name "
                          f"{DEFAULT_CONTAINER}")
    if chief_or_master > 1:
        errors.append(f"{base}: Forbidden: must not have more than 1 Chief or Master role")
    return errors


def aggregate(messages: list[str]) -> str:
    """Go's utilerrors aggregate: one message as is, several de-duplicated in brackets."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


class TFJobAdmission:
    """Admission chain for the store: CRD schema (422), schema defaults, then the webhook (403)."""

    def admit(self, rtype: str, operation: str, obj: JsonDict, old: JsonDict | None) -> None:
        if rtype != "tfjobs":
            return
        name = obj.get("metadata", {}).get("name", "")
        errors = schema_errors(obj)
        if errors:
            raise invalid(RESOURCES["tfjobs"], name, errors)
        apply_schema_defaults(obj)
        denied = webhook_errors(obj, old)
        if denied:
            raise ApiError(403, "Forbidden",
                           f'admission webhook "{WEBHOOK_NAME}" denied the request: {aggregate(denied)}')
