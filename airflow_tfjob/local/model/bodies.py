"""Request bodies as the API server decodes them: the object's shape (400 when the Go types could not hold
it) and metadata.name rules (422), checked before defaulting and admission."""

from __future__ import annotations

import re
from typing import Any

from airflow_tfjob.local.model.resources import ApiError, JsonDict, ResourceType, bad_request, clone, invalid


def object_meta(obj: JsonDict) -> JsonDict:
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise bad_request("metadata: expected an object")
    return meta


def decoded_body(info: ResourceType, obj: Any) -> tuple[JsonDict, JsonDict]:
    """A create/replace body as the server decodes it: a copy of the object (400 if it is not one, or not
    of the kind's shape) and its metadata."""
    if not isinstance(obj, dict):
        raise bad_request(f"the body of the request was in an unknown format: expected a {info.kind} object")
    obj = clone(obj)
    meta = object_meta(obj)
    check_shape(info, obj)
    return obj, meta


def check_shape(info: ResourceType, obj: JsonDict) -> None:
    """Reject what the real server could not even decode into its Go types (HTTP 400): such objects would
    otherwise break selectors, GC or the controller later."""

    def fail(field: str, expected: str) -> ApiError:
        return bad_request(f"json: cannot unmarshal into Go struct field {info.kind}.{field} of type {expected}")

    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise fail("metadata", "v1.ObjectMeta")
    for key in ("name", "generateName", "namespace", "resourceVersion", "uid"):
        if key in meta and meta[key] is not None and not isinstance(meta[key], str):
            raise fail(f"metadata.{key}", "string")
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is not None and not (
            isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        ):
            raise fail(f"metadata.{key}", "map[string]string")
    refs = meta.get("ownerReferences")
    if refs is not None and not (
        isinstance(refs, list) and all(isinstance(r, dict) and isinstance(r.get("uid"), str) for r in refs)
    ):
        raise fail("metadata.ownerReferences", "[]v1.OwnerReference")
    finalizers = meta.get("finalizers")
    if finalizers is not None and not (isinstance(finalizers, list) and all(isinstance(f, str) for f in finalizers)):
        raise fail("metadata.finalizers", "[]string")
    for key in ("spec", "status") if info.is_core else ("status",):
        if key in obj and obj[key] is not None and not isinstance(obj[key], dict):
            raise fail(key, "object")
    if info.plural == "pods":
        spec = obj.get("spec") or {}
        for group in ("containers", "initContainers"):
            items = spec.get(group)
            if items is not None and not (isinstance(items, list) and all(isinstance(c, dict) for c in items)):
                raise fail(f"spec.{group}", "[]v1.Container")
            for container in items or []:
                ports = container.get("ports")
                if ports is not None and not (isinstance(ports, list) and all(isinstance(p, dict) for p in ports)):
                    raise fail(f"spec.{group}.ports", "[]v1.ContainerPort")
                for port in ports or []:
                    for key in ("containerPort", "hostPort"):
                        value = port.get(key)
                        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                            raise fail(f"spec.{group}.ports.{key}", "int32")
    if info.plural in ("configmaps", "secrets"):
        for key in ("data", "stringData", "binaryData"):
            value = obj.get(key)
            if value is not None and not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
                raise fail(key, "map[string]string")


_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def check_name(info: ResourceType, name: str) -> None:
    """The API server's own metadata.name validation (before any admission webhook runs)."""
    if info.plural == "services":
        ok, limit = bool(_DNS1035_LABEL.match(name)), 63
        msg = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
               "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
               "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
    elif info.plural == "namespaces":
        ok, limit = bool(_DNS1123_LABEL.match(name)), 63
        msg = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
               "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
               "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
    elif info.plural == "events":
        return  # event names are "<object>.<hex>" and are only checked loosely by the real server too
    else:
        ok, limit = bool(_DNS1123_SUBDOMAIN.match(name)), 253
        msg = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
               "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
               "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
    causes = []
    if not ok:
        causes.append(("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": {msg}'))
    if len(name) > limit:
        causes.append(("metadata.name", "FieldValueInvalid",
                       f'Invalid value: "{name}": must be no more than {limit} characters'))
    if causes:
        raise invalid(info, name, causes)
