"""Server-side field validation (`fieldValidation=Strict|Warn|Ignore`, default Warn), as a real API server
applies it while decoding a create, update or patch body, before admission.

Fields the kind's schema does not declare are refused under Strict (400, the decoder's message), sent back
as `unknown field "<path>"` warnings under Warn, and dropped in every case that is not refused (the real
server's typed decoding and the CRDs' pruning keep nothing it does not know). kubectl 1.32 sends Strict
when the v3 OpenAPI document says the kind's PATCH takes the parameter (openapi.py says so for every kind).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_tfjob.local.admission import warnings
from airflow_tfjob.local.admission.schemacheck import Path, check, field_path, prune
from airflow_tfjob.local.model.coreschema import model_schema
from airflow_tfjob.local.model.jobschema import schema_for
from airflow_tfjob.local.model.resources import ApiError, ResourceType, bad_request

DIRECTIVES = ("Ignore", "Strict", "Warn")
_OPTIONS = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions"}


def directive(query: Mapping[str, str], verb: str) -> str:
    value = query.get("fieldValidation", "")
    if value == "":
        return "Warn"
    if value not in DIRECTIVES:
        supported = ", ".join(f'"{v}"' for v in ("", *DIRECTIVES))
        raise ApiError(422, "Invalid", f'{_OPTIONS[verb]}.meta.k8s.io "" is invalid: fieldValidation: Unsupported '
                                       f'value: "{value}": supported values: {supported}')
    return value


def _value_at(obj: Any, path: Path) -> Any:
    for part in path:
        obj = obj[part]
    return obj


def validate_fields(info: ResourceType, body: Any, query: Mapping[str, str], verb: str,
                    subresource: str | None = None) -> None:
    """Check (and prune) `body`, a whole object for create/update, a merge or strategic patch for patch."""
    mode = directive(query, verb)
    if info.feature is not None:
        return  # optional parts' kinds carry no schema here: every field is kept (docs/local-cluster.md)
    if not isinstance(body, dict):
        return  # a JSON patch (a list of operations) is not checked; see docs/local-cluster.md
    kind, version = (info.kind, info.version) if subresource != "scale" else ("Scale", "v1")
    schema = schema_for(info) if subresource != "scale" else model_schema("V1Scale")
    unknown = check(body, schema).unknown
    if verb == "patch":
        # A strategic patch's directives ($patch, $setElementOrder/...) and a merge patch's deletions
        # (null) are not fields of the object.
        unknown = [p for p in unknown if not any(isinstance(k, str) and k.startswith("$") for k in p)
                   and _value_at(body, p) is not None]
    if not unknown:
        return
    messages = [f'unknown field "{field_path(p)}"' for p in unknown]
    if mode == "Strict":
        text = "strict decoding error: " + ", ".join(messages)
        if verb != "patch":
            text = f'{kind} in version "{version}" cannot be handled as a {kind}: {text}'
        raise bad_request(text)
    if mode == "Warn":
        warnings.add(*messages)
    prune(body, unknown)
