"""The API server's own validation of a Pod on create (`ValidatePodCreate` in k8s.io/kubernetes).

Only the rules a client of this cluster can plausibly break are checked, each with the field path,
reason and message text of the real server, so that a 422 read here reads the same as on a real cluster
(and the training-operator's `FailedCreatePod` event carries the same message):

* `spec.containers` has at least one entry;
* container names (containers and init containers together) are non-empty, unique, DNS-1123 labels;
* `image` is required (for Pods; pod templates may omit it);
* container ports: `containerPort` in 1..65535, `hostPort` (when set) in 1..65535, port names
  IANA service names unique within the container, `protocol` TCP, UDP or SCTP;
* `spec.restartPolicy` is Always, OnFailure or Never (the API server's default, Always, fills it when
  absent, so an empty one never gets here).

The order of the causes follows the Go code: containers, then init containers, then restartPolicy.
"""

from __future__ import annotations

import re
from typing import Any

Cause = tuple[str, str, str]  # (field, reason, message) as in a Status' details.causes

RESTART_POLICIES = ("Always", "OnFailure", "Never")
PROTOCOLS = ("SCTP", "TCP", "UDP")

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_IANA_CHARS = re.compile(r"^[-a-z0-9]+$")
_HAS_LETTER = re.compile(r"[a-z]")


def _quote(value: Any) -> str:
    """Go's %q for strings, %v for numbers: how field.Invalid prints the bad value."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def _required(field: str) -> Cause:
    return (field, "FieldValueRequired", "Required value")


def _invalid(field: str, value: Any, detail: str) -> Cause:
    return (field, "FieldValueInvalid", f"Invalid value: {_quote(value)}: {detail}")


def _duplicate(field: str, value: Any) -> Cause:
    return (field, "FieldValueDuplicate", f"Duplicate value: {_quote(value)}")


def _not_supported(field: str, value: Any, supported: tuple[str, ...]) -> Cause:
    values = ", ".join(_quote(v) for v in supported)
    return (field, "FieldValueNotSupported", f"Unsupported value: {_quote(value)}: supported values: {values}")


def _iana_svc_name_errors(name: str) -> list[str]:
    """IsValidPortName: the IANA service-name rules, one message per broken rule."""
    errors = []
    if len(name) > 15:
        errors.append("must be no more than 15 characters")
    if not _IANA_CHARS.match(name):
        errors.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in name:
        errors.append("must not contain consecutive hyphens")
    if not _HAS_LETTER.search(name):
        errors.append("must contain at least one letter (a-z)")
    if name.startswith("-") or name.endswith("-"):
        errors.append("must not begin or end with a hyphen")
    return errors


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _port_errors(ports: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, port in enumerate(ports if isinstance(ports, list) else []):
        if not isinstance(port, dict):
            continue
        ppath = f"{path}[{i}]"
        name = port.get("name")
        if isinstance(name, str) and name:
            for detail in _iana_svc_name_errors(name):
                causes.append(_invalid(f"{ppath}.name", name, detail))
            if name in seen:
                causes.append(_duplicate(f"{ppath}.name", name))
            seen.add(name)
        container_port = port.get("containerPort")
        if not container_port:
            causes.append(_required(f"{ppath}.containerPort"))
        elif not _is_int(container_port) or not 1 <= container_port <= 65535:
            causes.append(_invalid(f"{ppath}.containerPort", container_port,
                                   "must be between 1 and 65535, inclusive"))
        host_port = port.get("hostPort")
        if host_port and (not _is_int(host_port) or not 1 <= host_port <= 65535):
            causes.append(_invalid(f"{ppath}.hostPort", host_port, "must be between 1 and 65535, inclusive"))
        protocol = port.get("protocol")
        if not protocol:
            causes.append(_required(f"{ppath}.protocol"))
        elif protocol not in PROTOCOLS:
            causes.append(_not_supported(f"{ppath}.protocol", protocol, PROTOCOLS))
    return causes


def _container_errors(containers: list[Any], group: str, names: set[str]) -> list[Cause]:
    causes: list[Cause] = []
    for i, container in enumerate(containers):
        if not isinstance(container, dict):
            continue
        cpath = f"spec.{group}[{i}]"
        name = container.get("name")
        if not name:
            causes.append(_required(f"{cpath}.name"))
        elif not isinstance(name, str):
            causes.append(_invalid(f"{cpath}.name", name, _DNS1123_LABEL_MSG))
        else:
            if not _DNS1123_LABEL.match(name):
                causes.append(_invalid(f"{cpath}.name", name, _DNS1123_LABEL_MSG))
            if len(name) > 63:
                causes.append(_invalid(f"{cpath}.name", name, "must be no more than 63 characters"))
            if name in names:
                causes.append(_duplicate(f"{cpath}.name", name))
            names.add(name)
        if not container.get("image"):
            causes.append(_required(f"{cpath}.image"))
        causes.extend(_port_errors(container.get("ports"), f"{cpath}.ports"))
    return causes


def pod_errors(pod: dict[str, Any]) -> list[Cause]:
    """Every violation of the rules above in a (defaulted) Pod, in the API server's order."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return [_required("spec.containers")]
    causes: list[Cause] = []
    names: set[str] = set()
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append(_required("spec.containers"))
    else:
        causes.extend(_container_errors(containers, "containers", names))
    init = spec.get("initContainers")
    if isinstance(init, list):
        causes.extend(_container_errors(init, "initContainers", names))
    policy = spec.get("restartPolicy")
    if not policy:
        causes.append(_required("spec.restartPolicy"))
    elif policy not in RESTART_POLICIES:
        causes.append(_not_supported("spec.restartPolicy", policy, RESTART_POLICIES))
    return causes
