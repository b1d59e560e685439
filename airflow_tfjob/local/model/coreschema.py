"""OpenAPI v3 schemas of the core Kubernetes types, generated from the official `kubernetes` client's models.

Each model class lists its fields (`openapi_types`: Python type names, `attribute_map`: JSON names); its
property docstrings carry the API's field descriptions, and its setters refuse `None` for the fields the
API requires. That is enough to write the structural schema a CRD inlines for a pod template (and that
kubectl's `explain` and the API server's field validation read) without vendoring upstream text.

Where the Python client's types are looser or different from the API's, the API wins:
- `object` is Kubernetes' IntOrString (ports, rolling-update sizes) except `fieldsV1` (free-form JSON);
- quantities (`resources.limits/requests`, `overhead`, `sizeLimit`, `divisor`) are typed `str` by the
  client but accept integers on the wire (`x-kubernetes-int-or-string`), as in the CRDs;
- the two schema defaults the local cluster writes (`ports[].protocol: TCP`) come from the CRD.
The client (36.x) is newer than the Kubernetes the v1.9.4 CRDs were generated from, so a few recent
pod fields are accepted here that such a CRD would prune (docs/local-cluster.md).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from airflow_tfjob.local.model.resources import JsonDict

_INT_OR_STRING: JsonDict = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
_PRIMITIVES: dict[str, JsonDict] = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
    "object": _INT_OR_STRING,
}
_QUANTITY_FIELDS = ("limits", "requests", "overhead", "sizeLimit", "divisor", "capacity", "allocatable")
_FREE_FORM_FIELDS = ("fieldsV1",)
_DEFAULTS: dict[tuple[str, str], Any] = {("V1ContainerPort", "protocol"): "TCP"}
_LIST = re.compile(r"^list\[(.+)\]$")
_DICT = re.compile(r"^dict(?:\[str, (.+)\]|\(str, (.+)\))$")  # dict[str, X]; before client 35, dict(str, X)


def _models() -> Any:
    import kubernetes.client.models as models  # about 1 s to import: only when a schema is first needed

    return models


def _description(cls: Any, attr: str) -> str:
    doc = getattr(cls, attr).__doc__ or ""
    parts = [p.strip() for p in doc.split("\n\n")]
    text = parts[1] if len(parts) > 2 else ""
    return text.replace("# noqa: E501", "").strip()


def _required(cls: Any, attrs: list[str]) -> list[str]:
    """The fields whose setter refuses None: the ones the API marks required."""
    from kubernetes.client import Configuration  # with the models (_models), on a schema's first need

    probe = cls.__new__(cls)
    probe.local_vars_configuration = Configuration()
    required = []
    for attr in attrs:
        try:
            setattr(probe, attr, None)
        except ValueError:
            required.append(cls.attribute_map[attr])
    return required


def _type_schema(type_name: str, field: str) -> JsonDict:
    if field in _QUANTITY_FIELDS:
        if _DICT.match(type_name):
            return {"type": "object", "additionalProperties": dict(_INT_OR_STRING)}
        if type_name == "str":
            return dict(_INT_OR_STRING)
    if field in _FREE_FORM_FIELDS:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if type_name in _PRIMITIVES:
        return dict(_PRIMITIVES[type_name])
    match = _LIST.match(type_name)
    if match:
        return {"type": "array", "items": _type_schema(match.group(1), "")}
    match = _DICT.match(type_name)
    if match:
        return {"type": "object", "additionalProperties": _type_schema(match.group(1) or match.group(2), "")}
    return model_schema(type_name)


@cache
def model_schema(name: str) -> JsonDict:
    """The structural schema of one model class (`V1PodSpec`, `V1ObjectMeta`), nested types inlined.

    The result is shared between callers (cached): treat it as read-only.
    """
    cls = getattr(_models(), name)
    properties: JsonDict = {}
    for attr, type_name in cls.openapi_types.items():
        field = cls.attribute_map[attr]
        prop = _type_schema(type_name, field)
        description = _description(cls, attr)
        if description:
            prop = {"description": description, **prop}
        if (name, field) in _DEFAULTS:
            prop["default"] = _DEFAULTS[(name, field)]
        properties[field] = prop
    schema: JsonDict = {"type": "object", "properties": properties}
    required = _required(cls, list(cls.openapi_types))
    if required:
        schema["required"] = required
    return schema
