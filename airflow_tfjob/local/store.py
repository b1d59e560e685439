"""In-memory object store of the local cluster: what etcd plus the generic API server registry do.

Objects are kept per (resource type, namespace, name). Every mutation takes the next value of one global
resourceVersion counter, is appended to a bounded per-type history (so that a watch from a resourceVersion
older than that window is answered 410 Expired, as after an etcd compaction) and is fanned out
synchronously to the registered watchers. Everything runs on one event loop thread, so no locks are needed.

Stored object dicts are never mutated in place: each change builds a new dict. That lets the API server
serve the cached JSON encoding of an object (`Entry.json`) to every reader and watcher without copying;
the public methods still hand out copies so that in-process callers (controller, runner) cannot corrupt
stored state by editing what they got.
"""

from __future__ import annotations

import asyncio
import builtins
import datetime as dt
import json
import re
import secrets
import uuid
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import jsonpatch

from airflow_tfjob.local.podvalidation import pod_errors

JsonDict = dict[str, Any]


# --------------------------------------------------------------------------------------------------
# Errors


class ApiError(Exception):
    """An error the API server reports as a Kubernetes Status object."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> JsonDict:
        status: JsonDict = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            status["details"] = self.details
        return status


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


# --------------------------------------------------------------------------------------------------
# Resource types


@dataclass(frozen=True)
class ResourceType:
    plural: str
    singular: str
    kind: str
    group: str
    version: str
    namespaced: bool
    status_subresource: bool
    short_names: tuple[str, ...] = ()
    # Field selector keys the real API server accepts for this type (besides metadata.name/namespace).
    extra_fields: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """The name used in error messages: `pods`, `tfjobs.kubeflow.org`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def is_core(self) -> bool:
        """Built-in kinds accept strategic merge patch; custom resources do not."""
        return self.group in ("", "apps")


_POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)

RESOURCES: dict[str, ResourceType] = {
    r.plural: r
    for r in (
        ResourceType("namespaces", "namespace", "Namespace", "", "v1", False, True, ("ns",), ("status.phase",)),
        ResourceType("pods", "pod", "Pod", "", "v1", True, True, ("po",), _POD_FIELDS),
        ResourceType("services", "service", "Service", "", "v1", True, True, ("svc",)),
        ResourceType("events", "event", "Event", "", "v1", True, False, ("ev",), _EVENT_FIELDS),
        ResourceType("secrets", "secret", "Secret", "", "v1", True, False, (), ("type",)),
        ResourceType("configmaps", "configmap", "ConfigMap", "", "v1", True, False, ("cm",)),
        ResourceType("deployments", "deployment", "Deployment", "apps", "v1", True, True, ("deploy",)),
        ResourceType("tfjobs", "tfjob", "TFJob", "kubeflow.org", "v1", True, True),
    )
}

INITIAL_NAMESPACES = ("default", "kubeflow", "kube-system", "kube-public")


def resource_type(rtype: str) -> ResourceType:
    info = RESOURCES.get(rtype)
    if info is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    return info


# --------------------------------------------------------------------------------------------------
# Small helpers


def clone(value: Any) -> Any:
    """Deep copy of JSON data; much cheaper than copy.deepcopy for plain dicts and lists."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def now_rfc3339() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _encode(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def not_found(info: ResourceType, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{info.qualified} "{name}" not found',
        {"name": name, "group": info.group, "kind": info.plural},
    )


def _meta(obj: JsonDict) -> JsonDict:
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise bad_request("metadata: expected an object")
    return meta


def _decoded_body(info: ResourceType, obj: Any) -> tuple[JsonDict, JsonDict]:
    """A create/replace body as the server decodes it: a copy of the object (400 if it is not one, or not
    of the kind's shape) and its metadata."""
    if not isinstance(obj, dict):
        raise bad_request(f"the body of the request was in an unknown format: expected a {info.kind} object")
    obj = clone(obj)
    meta = _meta(obj)
    check_shape(info, obj)
    return obj, meta


def _marked_for_deletion(
    obj: JsonDict, timestamp: str, grace_seconds: int, finalizers: list[str] | None = None
) -> JsonDict:
    """A copy of a stored object that is being deleted: deletionTimestamp/GracePeriodSeconds set (and its
    finalizers replaced, when given); the stored original is not touched."""
    meta = dict(obj["metadata"])
    meta["deletionTimestamp"] = timestamp
    meta["deletionGracePeriodSeconds"] = grace_seconds
    if finalizers is not None:
        meta["finalizers"] = finalizers
    return dict(obj, metadata=meta)


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


def parse_resource_version(value: str | None) -> int | None:
    """None for "" / absent; raises 400 for a value that is not an unsigned integer."""
    if value is None or value == "":
        return None
    try:
        rv = int(value)
    except ValueError:
        rv = -1
    if rv < 0 or not value.isdigit():
        raise bad_request(f'Invalid value: "{value}": resourceVersion must be an unsigned integer')
    return rv


# --------------------------------------------------------------------------------------------------
# Selectors

_LABEL_KEY = re.compile(r"^([a-z0-9A-Z]([-a-z0-9A-Z.]*[a-z0-9A-Z])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_SET_TERM = re.compile(r"^(\S+)\s+(in|notin)\s*\((.*)\)$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas outside parentheses (set-based terms contain commas)."""
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    terms.append("".join(current).strip())
    return [t for t in terms if t]


class LabelSelector:
    """Equality- and set-based label selector, as in `kubectl get -l`."""

    def __init__(self, requirements: list[tuple[str, str, frozenset[str]]]) -> None:
        self.requirements = requirements

    @classmethod
    def parse(cls, selector: str | None) -> LabelSelector | None:
        if not selector or not selector.strip():
            return None
        reqs: list[tuple[str, str, frozenset[str]]] = []
        for term in _split_terms(selector):
            reqs.append(cls._parse_term(term))
        return cls(reqs)

    @staticmethod
    def _parse_term(term: str) -> tuple[str, str, frozenset[str]]:
        def check(key: str, values: Iterable[str]) -> None:
            if not _LABEL_KEY.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
                raise bad_request(f'unable to parse requirement: invalid label key "{key}"')
            for v in values:
                if len(v) > 63 or not _LABEL_VALUE.match(v):
                    raise bad_request(f'unable to parse requirement: invalid label value: "{v}"')

        m = _SET_TERM.match(term)
        if m:
            key, op, raw = m.group(1), m.group(2), m.group(3)
            values = frozenset(v.strip() for v in raw.split(",") if v.strip())
            check(key, values)
            return key, op, values
        if term.startswith("!"):
            key = term[1:].strip()
            check(key, ())
            return key, "!", frozenset()
        for op in ("!=", "==", "="):
            if op in term:
                key, _, value = term.partition(op)
                key, value = key.strip(), value.strip()
                check(key, (value,))
                return key, "!=" if op == "!=" else "=", frozenset((value,))
        key = term.strip()
        if not key or " " in key:
            raise bad_request(f"unable to parse requirement: found '{term}', expected: identifier")
        check(key, ())
        return key, "exists", frozenset()

    def matches(self, labels: dict[str, str] | None) -> bool:
        labels = labels or {}
        for key, op, values in self.requirements:
            present = key in labels
            if op == "=" or op == "in":
                if not present or labels[key] not in values:
                    return False
            elif op == "!=" or op == "notin":
                if present and labels[key] in values:
                    return False
            elif op == "exists":
                if not present:
                    return False
            elif op == "!" and present:
                return False
        return True


def _field_value(obj: JsonDict, path: str) -> str:
    if path == "source":
        path = "source.component"
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, dict):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


class FieldSelector:
    """`metadata.name=x,status.phase!=Running`: only the fields the real API server indexes."""

    def __init__(self, requirements: list[tuple[str, bool, str]]) -> None:
        self.requirements = requirements

    @classmethod
    def parse(cls, selector: str | None, info: ResourceType) -> FieldSelector | None:
        if not selector or not selector.strip():
            return None
        allowed = ("metadata.name", "metadata.namespace", *info.extra_fields)
        reqs: list[tuple[str, bool, str]] = []
        for term in _split_terms(selector):
            for op in ("!=", "==", "="):
                if op in term:
                    field, _, value = term.partition(op)
                    break
            else:
                raise bad_request(f"invalid selector: '{selector}'; can't understand '{term}'")
            field = field.strip()
            if field not in allowed:
                raise bad_request(
                    f'field label not supported: {field}'
                )
            reqs.append((field, op == "!=", value.strip()))
        return cls(reqs)

    def matches(self, obj: JsonDict) -> bool:
        for field, negate, value in self.requirements:
            if (_field_value(obj, field) == value) == negate:
                return False
        return True


def _selected(obj: JsonDict, labels: LabelSelector | None, fields: FieldSelector | None) -> bool:
    if labels is not None and not labels.matches(obj.get("metadata", {}).get("labels")):
        return False
    return fields is None or fields.matches(obj)


# --------------------------------------------------------------------------------------------------
# Patches


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


def _json_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "null"


# --------------------------------------------------------------------------------------------------
# API-server defaults for core kinds (what clients read back from a real cluster)


def _default_pod(pod: JsonDict) -> None:
    spec = pod.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    if not spec.get("restartPolicy"):  # Go defaults the empty string too
        spec["restartPolicy"] = "Always"
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("serviceAccountName", spec.get("serviceAccount", "default"))
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault(
        "tolerations",
        [
            {"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            for t in ("not-ready", "unreachable")
        ],
    )
    requests_any = limits_any = False
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or []:
            if not isinstance(container, dict):
                continue
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            image = str(container.get("image", ""))
            tag = image.rsplit("/", 1)[-1]
            pull = "Always" if ":" not in tag or tag.endswith(":latest") else "IfNotPresent"
            if "@" in image:
                pull = "IfNotPresent"
            container.setdefault("imagePullPolicy", pull)
            resources = container.setdefault("resources", {})
            if isinstance(resources, dict):
                requests_any = requests_any or bool(resources.get("requests"))
                limits_any = limits_any or bool(resources.get("limits"))
            for port in container.get("ports") or []:
                if isinstance(port, dict) and not port.get("protocol"):
                    port["protocol"] = "TCP"
            for env in container.get("env") or []:
                ref = env.get("valueFrom", {}).get("fieldRef") if isinstance(env, dict) else None
                if isinstance(ref, dict):
                    ref.setdefault("apiVersion", "v1")
    status = pod.setdefault("status", {})
    if isinstance(status, dict):
        status.setdefault("phase", "Pending")
        status.setdefault("qosClass", "Burstable" if requests_any or limits_any else "BestEffort")


_service_ips = iter(range(1, 1 << 16))


def _default_service(svc: JsonDict) -> None:
    spec = svc.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if "clusterIP" not in spec and spec["type"] != "ExternalName":
        n = next(_service_ips)
        spec["clusterIP"] = f"10.96.{n >> 8}.{n & 255}"
    if "clusterIP" in spec:
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            if "port" in port:
                port.setdefault("targetPort", port["port"])
    svc.setdefault("status", {"loadBalancer": {}})


def _default_namespace(ns: JsonDict, name: str) -> None:
    meta = _meta(ns)
    labels = meta.setdefault("labels", {})
    if isinstance(labels, dict):
        labels["kubernetes.io/metadata.name"] = name
    ns.setdefault("spec", {"finalizers": ["kubernetes"]})
    ns["status"] = {"phase": "Active"}


def _default_secret(secret: JsonDict) -> None:
    import base64

    secret.setdefault("type", "Opaque")
    string_data = secret.pop("stringData", None)
    if isinstance(string_data, dict):
        data = secret.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()


def apply_core_defaults(rtype: str, obj: JsonDict, name: str) -> None:
    if rtype == "pods":
        _default_pod(obj)
    elif rtype == "services":
        _default_service(obj)
    elif rtype == "namespaces":
        _default_namespace(obj, name)
    elif rtype == "secrets":
        _default_secret(obj)


# --------------------------------------------------------------------------------------------------
# Storage entries, watch events, watchers


class Entry:
    """One stored version of an object and its lazily computed JSON encoding (shared by all readers)."""

    __slots__ = ("_json", "obj", "rv")

    def __init__(self, obj: JsonDict, rv: int) -> None:
        self.obj = obj
        self.rv = rv
        self._json: bytes | None = None

    @property
    def json(self) -> bytes:
        if self._json is None:
            self._json = _encode(self.obj)
        return self._json


class WatchEvent:
    __slots__ = ("entry", "namespace", "prev", "rv", "type")

    def __init__(self, type_: str, entry: Entry, prev: JsonDict | None, namespace: str) -> None:
        self.type = type_
        self.entry = entry
        self.prev = prev
        self.rv = entry.rv
        self.namespace = namespace


class Watcher:
    """One watch: a queue of (type, Entry) filled synchronously by the store, drained by one consumer.

    As an async iterator it yields (event_type, object copy). The API server uses `next_batch()` instead,
    which hands out the shared entries so each event is encoded once for all watchers.
    """

    MAX_QUEUE = 20_000

    def __init__(
        self,
        store: Store,
        info: ResourceType,
        namespace: str | None,
        labels: LabelSelector | None,
        fields: FieldSelector | None,
    ) -> None:
        self._store = store
        self.info = info
        self.namespace = namespace
        self._labels = labels
        self._fields = fields
        self._queue: deque[tuple[str, Entry]] = deque()
        self._wakeup: asyncio.Future[None] | None = None
        self.closed = False
        # True when the store dropped us because we fell too far behind: the client must re-watch.
        self.overflowed = False
        self.last_rv = 0

    def _offer(self, event: WatchEvent) -> None:
        if self.closed or (self.namespace is not None and event.namespace != self.namespace):
            return
        obj = event.entry.obj
        type_ = event.type
        if self._labels is not None or self._fields is not None:
            now = _selected(obj, self._labels, self._fields)
            before = event.prev is not None and _selected(event.prev, self._labels, self._fields)
            if type_ == "MODIFIED":
                if now and not before:
                    type_ = "ADDED"
                elif before and not now:
                    type_ = "DELETED"
                elif not now:
                    return
            elif not now:
                return
        self._queue.append((type_, event.entry))
        if len(self._queue) > self.MAX_QUEUE:
            self.overflowed = True
            self.close()
            return
        self._wake()

    def _wake(self) -> None:
        waiter, self._wakeup = self._wakeup, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pending(self) -> bool:
        return bool(self._queue)

    def bookmark_rv(self) -> int:
        """A resourceVersion a client may resume from: everything up to it has been handed out."""
        return self._store.resource_version if not self._queue else self.last_rv

    async def next_batch(self, timeout: float | None = None) -> list[tuple[str, Entry]]:
        """Wait for events (at most `timeout` seconds); [] on timeout or once closed and drained."""
        if not self._queue and not self.closed:
            loop = asyncio.get_running_loop()
            self._wakeup = loop.create_future()
            timer = loop.call_later(timeout, self._wake) if timeout is not None else None
            try:
                await self._wakeup
            finally:
                self._wakeup = None
                if timer is not None:
                    timer.cancel()
        batch = list(self._queue)
        self._queue.clear()
        if batch:
            self.last_rv = batch[-1][1].rv
        return batch

    def __aiter__(self) -> Watcher:
        return self

    async def __anext__(self) -> tuple[str, JsonDict]:
        while True:
            if self._queue:
                type_, entry = self._queue.popleft()
                self.last_rv = entry.rv
                return type_, clone(entry.obj)
            if self.closed:
                raise StopAsyncIteration
            loop = asyncio.get_running_loop()
            self._wakeup = loop.create_future()
            try:
                await self._wakeup
            finally:
                self._wakeup = None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._store._unregister(self)
            self._wake()


class Admission(Protocol):
    """Validation and defaulting that the API server applies on create/update of the main resource."""

    def admit(self, rtype: str, operation: str, obj: JsonDict, old: JsonDict | None) -> None: ...


_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


# --------------------------------------------------------------------------------------------------
# The store


class Store:
    """Objects, resourceVersions, selectors, watch fan-out and garbage collection."""

    def __init__(self, *, history_limit: int = 1000, admission: Admission | None = None) -> None:
        self._objects: dict[str, dict[tuple[str, str], Entry]] = {r: {} for r in RESOURCES}
        self._history: dict[str, deque[WatchEvent]] = {r: deque() for r in RESOURCES}
        # A watch from a resourceVersion below this has missed events we no longer have (410 Expired).
        self._oldest_kept: dict[str, int] = dict.fromkeys(RESOURCES, 0)
        self._watchers: dict[str, set[Watcher]] = {r: set() for r in RESOURCES}
        self._history_limit = history_limit
        self._rv = 0
        self.admission = admission
        # Aggregation index of record_event: (ns, involved uid, type, reason, message, component) -> name
        self._event_index: dict[tuple[str, ...], str] = {}
        # uid -> (rtype, key) and owner uid -> dependents, so deletes and GC do not scan everything.
        self._by_uid: dict[str, tuple[str, tuple[str, str]]] = {}
        self._owned: dict[str, set[tuple[str, tuple[str, str]]]] = {}
        for ns in INITIAL_NAMESPACES:
            self.create("namespaces", None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    # ---- reading

    @property
    def resource_version(self) -> int:
        return self._rv

    def get_entry(self, rtype: str, namespace: str | None, name: str) -> Entry:
        info = resource_type(rtype)
        entry = self._objects[rtype].get((namespace or "" if info.namespaced else "", name))
        if entry is None:
            raise not_found(info, name)
        return entry

    def get(self, rtype: str, namespace: str | None, name: str) -> JsonDict:
        return clone(self.get_entry(rtype, namespace, name).obj)

    def list_entries(
        self,
        rtype: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
    ) -> tuple[list[Entry], int]:
        info, labels, fields, _ = self._read_request(rtype, label_selector, field_selector, resource_version)
        ns_key = namespace if info.namespaced else None
        items = [
            e
            for (ns, _), e in self._objects[rtype].items()
            if (ns_key is None or ns == ns_key) and _selected(e.obj, labels, fields)
        ]
        items.sort(key=lambda e: (e.obj["metadata"].get("namespace", ""), e.obj["metadata"]["name"]))
        return items, self._rv

    def _read_request(
        self, rtype: str, label_selector: str | None, field_selector: str | None, resource_version: str | None
    ) -> tuple[ResourceType, LabelSelector | None, FieldSelector | None, int | None]:
        """What a list and a watch both check first: the kind, the selectors, and that `resource_version`
        (0 or none: the current state) is still in the history (410 otherwise)."""
        info = resource_type(rtype)
        labels = LabelSelector.parse(label_selector)
        fields = FieldSelector.parse(field_selector, info)
        rv = parse_resource_version(resource_version)
        if rv is not None and rv != 0 and rv < self._oldest_kept[rtype]:
            raise self._expired(rv)
        return info, labels, fields, rv

    def list(
        self,
        rtype: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[JsonDict], str]:
        entries, rv = self.list_entries(rtype, namespace, label_selector, field_selector)
        return [clone(e.obj) for e in entries], str(rv)

    # ---- writing

    def create(self, rtype: str, namespace: str | None, obj: JsonDict, *, dry_run: bool = False) -> JsonDict:
        info = resource_type(rtype)
        obj, meta = _decoded_body(info, obj)
        ns_key = self._namespace_for_write(info, namespace, meta)
        name = meta.get("name")
        if not name and meta.get("generateName"):
            name = str(meta["generateName"]) + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
        if not name or not isinstance(name, str):
            raise self._invalid(info, "", [("metadata.name", "FieldValueRequired", "Required value: name or generateName is required")])
        _check_name(info, name)
        key = (ns_key, name)
        if key in self._objects[rtype]:
            raise ApiError(
                409,
                "AlreadyExists",
                f'{info.qualified} "{name}" already exists',
                {"name": name, "group": info.group, "kind": info.plural},
            )
        obj["apiVersion"] = info.api_version
        obj["kind"] = info.kind
        meta["name"] = name
        if info.namespaced:
            meta["namespace"] = ns_key
        for transient in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(transient, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        apply_core_defaults(rtype, obj, name)
        if rtype == "pods":
            causes = pod_errors(obj)
            if causes:
                raise self._invalid(info, name, causes)
        if self.admission is not None:
            self.admission.admit(rtype, "CREATE", obj, None)
        if dry_run:
            return obj
        self._commit(info, key, obj, "ADDED", None)
        return clone(obj)

    def replace(
        self, rtype: str, namespace: str | None, name: str, obj: JsonDict, subresource: str | None = None
    ) -> JsonDict:
        info = resource_type(rtype)
        obj, meta = _decoded_body(info, obj)
        if meta.get("name") not in (None, name):
            raise bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        current = self.get_entry(rtype, namespace, name)
        rv = meta.get("resourceVersion")
        if rv not in (None, "") and str(rv) != str(current.rv):
            raise self._conflict(info, name)
        return self._update(info, current, obj, subresource)

    def patch(
        self,
        rtype: str,
        namespace: str | None,
        name: str,
        patch: Any,
        patch_type: str,
        subresource: str | None = None,
    ) -> JsonDict:
        info = resource_type(rtype)
        current = self.get_entry(rtype, namespace, name)
        result = apply_patch(info, current.obj, patch, patch_type)
        meta = _meta(result)
        check_shape(info, result)
        rv = meta.get("resourceVersion")
        if rv not in (None, "") and str(rv) != str(current.rv):
            raise self._conflict(info, name)
        if meta.get("name") != name:
            raise bad_request("metadata.name: the name of a patched object cannot change")
        return self._update(info, current, result, subresource)

    def update_status(self, rtype: str, namespace: str | None, name: str, status: JsonDict) -> JsonDict:
        """Controller/kubelet write of the whole status, without resourceVersion check."""
        info = resource_type(rtype)
        current = self.get_entry(rtype, namespace, name)
        new = dict(current.obj)
        new["status"] = clone(status)
        return self._store_update(info, current, new)

    def _update(self, info: ResourceType, current: Entry, obj: JsonDict, subresource: str | None) -> JsonDict:
        if subresource not in (None, "status"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        old = current.obj
        old_meta = old["metadata"]
        if subresource == "status":
            # Only status changes through /status (everything else is taken from the stored object).
            new = dict(old)
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
            return self._store_update(info, current, new)
        meta = _meta(obj)
        for immutable in ("uid", "creationTimestamp", "namespace", "deletionTimestamp",
                          "deletionGracePeriodSeconds", "generation"):
            if immutable in old_meta:
                meta[immutable] = old_meta[immutable]
            else:
                meta.pop(immutable, None)
        meta["name"] = old_meta["name"]
        obj["apiVersion"] = info.api_version
        obj["kind"] = info.kind
        if info.status_subresource:
            if "status" in old:
                obj["status"] = old["status"]
            else:
                obj.pop("status", None)
        apply_core_defaults(info.plural, obj, old_meta["name"])
        if info.plural == "namespaces":
            obj["status"] = old.get("status", {"phase": "Active"})
        if self.admission is not None:
            self.admission.admit(info.plural, "UPDATE", obj, clone(old))
        # Spec changes (anything outside metadata and status) bump generation, as for CRDs and apps.
        if _content(obj) != _content(old):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        if old_meta.get("deletionTimestamp") and not meta.get("finalizers") and old_meta.get("finalizers"):
            # Removing the last finalizer of an object being deleted completes the deletion.
            result = self._store_update(info, current, obj)
            self._remove(info, (old_meta.get("namespace", ""), old_meta["name"]))
            return result
        return self._store_update(info, current, obj)

    def _store_update(self, info: ResourceType, current: Entry, new: JsonDict) -> JsonDict:
        old = current.obj
        meta = dict(new["metadata"])
        new["metadata"] = meta
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return clone(old)  # a no-op write changes nothing and notifies no one, as on a real cluster
        key = (meta.get("namespace", "") if info.namespaced else "", meta["name"])
        self._commit(info, key, new, "MODIFIED", old)
        return clone(new)

    # ---- deleting

    def delete(
        self,
        rtype: str,
        namespace: str | None,
        name: str,
        propagation: str | None = None,
        grace_period_seconds: int | None = None,
        *,
        preconditions: dict[str, Any] | None = None,
        dry_run: bool = False,
    ) -> JsonDict:
        info = resource_type(rtype)
        current = self.get_entry(rtype, namespace, name)
        obj = current.obj
        meta = obj["metadata"]
        if propagation not in (None, "", "Background", "Foreground", "Orphan"):
            raise ApiError(
                422,
                "Invalid",
                f'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "{propagation}": '
                'supported values: "Foreground", "Background", "Orphan", "nil"',
            )
        if grace_period_seconds is not None and grace_period_seconds < 0:
            grace_period_seconds = 0
        if preconditions:
            uid = preconditions.get("uid")
            prv = preconditions.get("resourceVersion")
            if (uid and uid != meta.get("uid")) or (prv and str(prv) != str(current.rv)):
                what = "UID" if uid and uid != meta.get("uid") else "ResourceVersion"
                raise ApiError(
                    409,
                    "Conflict",
                    f"Operation cannot be fulfilled on {info.qualified} \"{name}\": Precondition failed: "
                    f"{what} in precondition: {uid if what == 'UID' else prv}, {what} in object meta: "
                    f"{meta.get('uid') if what == 'UID' else current.rv}",
                    {"name": name, "group": info.group, "kind": info.plural},
                )
        if dry_run:
            return clone(obj)
        key = (meta.get("namespace", "") if info.namespaced else "", name)
        if rtype == "namespaces":
            return self._delete_namespace(name)
        if meta.get("deletionTimestamp"):
            if rtype == "pods" and self._shortens_grace(meta, grace_period_seconds):
                return self._shorten_pod_grace(info, key, current, grace_period_seconds or 0)
            return clone(obj)  # already being deleted: a repeated delete changes nothing
        if propagation == "Orphan":
            self._orphan_dependents(meta["uid"])
        elif propagation == "Foreground" and self._dependents(meta["uid"]):
            new = _marked_for_deletion(
                obj, now_rfc3339(), 0, finalizers=[*meta.get("finalizers", []), "foregroundDeletion"]
            )
            self._store_update(info, current, new)
            self._collect_dependents(meta["uid"])
            self._finish_foreground(meta["uid"])
            return clone(self._objects[rtype].get(key, current).obj)
        if rtype == "pods" and self._graceful(obj, grace_period_seconds):
            grace = grace_period_seconds
            if grace is None:
                grace = int(obj.get("spec", {}).get("terminationGracePeriodSeconds", 30))
            deadline = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=grace)
            new = _marked_for_deletion(obj, deadline.strftime("%Y-%m-%dT%H:%M:%SZ"), grace)
            self._store_update(info, current, new)
            self._collect_dependents(meta["uid"])
            return clone(new)
        if meta.get("finalizers"):
            return self._store_update(info, current, _marked_for_deletion(obj, now_rfc3339(), 0))
        removed = self._remove(info, key)
        if propagation != "Orphan":
            self._collect_dependents(meta["uid"])
        return removed

    @staticmethod
    def _shortens_grace(meta: JsonDict, grace: int | None) -> bool:
        current = meta.get("deletionGracePeriodSeconds")
        return grace is not None and isinstance(current, int) and grace < current

    def _shorten_pod_grace(self, info: ResourceType, key: tuple[str, str], current: Entry, grace: int) -> JsonDict:
        """As the API server: a repeated delete of a terminating pod may shorten its grace (never lengthen
        it); 0 removes it at once. A kill then need not wait out the grace that garbage collection gave."""
        if grace == 0:
            return self._remove(info, key)
        deadline = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=grace)
        new = _marked_for_deletion(current.obj, deadline.strftime("%Y-%m-%dT%H:%M:%SZ"), grace)
        return self._store_update(info, current, new)

    @staticmethod
    def _graceful(pod: JsonDict, grace: int | None) -> bool:
        # As the pod strategy: unscheduled or terminated pods, and grace 0, go at once.
        if grace == 0:
            return False
        if not pod.get("spec", {}).get("nodeName"):
            return False
        return pod.get("status", {}).get("phase") not in ("Succeeded", "Failed")

    def finalize_pod_deletion(self, namespace: str, name: str) -> None:
        """The kubelet confirms that a gracefully deleted pod's processes are gone."""
        entry = self._objects["pods"].get((namespace, name))
        if entry is not None:
            self._remove(RESOURCES["pods"], (namespace, name))

    def _remove(self, info: ResourceType, key: tuple[str, str]) -> JsonDict:
        current = self._objects[info.plural].pop(key)
        self._index(info.plural, key, current.obj, None)
        self._rv += 1
        obj = dict(current.obj)
        obj["metadata"] = dict(obj["metadata"])
        obj["metadata"]["resourceVersion"] = str(self._rv)
        entry = Entry(obj, self._rv)
        self._publish(info, WatchEvent("DELETED", entry, None, key[0]))
        if info.plural == "events":
            self._event_index = {k: v for k, v in self._event_index.items() if not (k[0] == key[0] and v == key[1])}
        uid = obj["metadata"].get("uid")
        if uid:
            self._finish_foreground_owners(obj)
        return clone(obj)

    def _delete_namespace(self, name: str) -> JsonDict:
        if name in ("default", "kube-system", "kube-public"):
            raise ApiError(403, "Forbidden", f'namespaces "{name}" is forbidden: this namespace may not be deleted')
        for rtype, objects in self._objects.items():
            info = RESOURCES[rtype]
            if not info.namespaced:
                continue
            for key in [k for k in objects if k[0] == name]:
                if key in objects:
                    self._remove(info, key)
        return self._remove(RESOURCES["namespaces"], ("", name))

    # ---- garbage collection through ownerReferences

    def _dependents(self, owner_uid: str) -> builtins.list[tuple[ResourceType, tuple[str, str], Entry]]:
        found = []
        for rtype, key in sorted(self._owned.get(owner_uid, ())):
            entry = self._objects[rtype].get(key)
            if entry is not None:
                found.append((RESOURCES[rtype], key, entry))
        return found

    def _index(self, rtype: str, key: tuple[str, str], old: JsonDict | None, new: JsonDict | None) -> None:
        for obj, add in ((old, False), (new, True)):
            if obj is None:
                continue
            meta = obj["metadata"]
            if add:
                self._by_uid[meta["uid"]] = (rtype, key)
            else:
                self._by_uid.pop(meta["uid"], None)
            for ref in meta.get("ownerReferences") or []:
                uid = ref.get("uid") if isinstance(ref, dict) else None
                if not isinstance(uid, str):
                    continue
                if add:
                    self._owned.setdefault(uid, set()).add((rtype, key))
                else:
                    owned = self._owned.get(uid)
                    if owned is not None:
                        owned.discard((rtype, key))
                        if not owned:
                            del self._owned[uid]

    def _collect_dependents(self, owner_uid: str) -> None:
        for info, key, entry in self._dependents(owner_uid):
            if key not in self._objects[info.plural]:
                continue
            other_owners = [
                r for r in entry.obj["metadata"].get("ownerReferences") or []
                if r.get("uid") != owner_uid and self._uid_exists(r.get("uid"))
            ]
            if other_owners:
                # Still owned by something alive: only drop the reference to the deleted owner.
                new = dict(entry.obj)
                new["metadata"] = dict(new["metadata"])
                new["metadata"]["ownerReferences"] = [
                    r for r in new["metadata"]["ownerReferences"] if r.get("uid") != owner_uid
                ]
                self._store_update(info, entry, new)
                continue
            name = key[1]
            self.delete(info.plural, key[0] or None, name, "Background")

    def _uid_exists(self, uid: str | None) -> bool:
        return uid is not None and uid in self._by_uid

    def _orphan_dependents(self, owner_uid: str) -> None:
        for info, _key, entry in self._dependents(owner_uid):
            new = dict(entry.obj)
            new["metadata"] = dict(new["metadata"])
            refs = [r for r in new["metadata"]["ownerReferences"] if r.get("uid") != owner_uid]
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                del new["metadata"]["ownerReferences"]
            self._store_update(info, entry, new)

    def _finish_foreground_owners(self, removed: JsonDict) -> None:
        for ref in removed["metadata"].get("ownerReferences") or []:
            if isinstance(ref, dict) and ref.get("uid"):
                self._finish_foreground(ref["uid"])

    def _finish_foreground(self, owner_uid: str) -> None:
        """An owner in foreground deletion goes once no blocking dependent is left."""
        where = self._by_uid.get(owner_uid)
        if where is None:
            return
        rtype, key = where
        entry = self._objects[rtype][key]
        meta = entry.obj["metadata"]
        if "foregroundDeletion" not in (meta.get("finalizers") or []):
            return
        for _info, _key, dependent in self._dependents(owner_uid):
            for ref in dependent.obj["metadata"].get("ownerReferences") or []:
                if ref.get("uid") == owner_uid and ref.get("blockOwnerDeletion"):
                    return
        finalizers = [f for f in meta["finalizers"] if f != "foregroundDeletion"]
        if finalizers:
            new = dict(entry.obj)
            new["metadata"] = dict(meta, finalizers=finalizers)
            self._store_update(RESOURCES[rtype], entry, new)
        else:
            self._remove(RESOURCES[rtype], key)

    # ---- watching

    def watch(
        self,
        rtype: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Watcher:
        """A watcher that first gets the history after `resource_version` (or, without one, the current
        objects as ADDED), then every change."""
        info, labels, fields, rv = self._read_request(rtype, label_selector, field_selector, resource_version)
        ns = namespace if info.namespaced else None
        watcher = Watcher(self, info, ns, labels, fields)
        if rv is None or rv == 0:
            entries, _ = self.list_entries(rtype, ns)
            for entry in entries:
                watcher._offer(WatchEvent("ADDED", entry, None, entry.obj["metadata"].get("namespace", "")))
        else:
            for event in self._history[rtype]:
                if event.rv > rv:
                    watcher._offer(event)
        watcher.last_rv = rv or 0
        self._watchers[rtype].add(watcher)
        return watcher

    def _unregister(self, watcher: Watcher) -> None:
        self._watchers[watcher.info.plural].discard(watcher)

    def watcher_count(self, rtype: str | None = None) -> int:
        if rtype is not None:
            return len(self._watchers[resource_type(rtype).plural])
        return sum(len(w) for w in self._watchers.values())

    def _commit(self, info: ResourceType, key: tuple[str, str], obj: JsonDict, type_: str, prev: JsonDict | None) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        entry = Entry(obj, self._rv)
        old = self._objects[info.plural].get(key)
        self._objects[info.plural][key] = entry
        self._index(info.plural, key, old.obj if old is not None else None, obj)
        self._publish(info, WatchEvent(type_, entry, prev, key[0]))

    def _publish(self, info: ResourceType, event: WatchEvent) -> None:
        history = self._history[info.plural]
        history.append(event)
        while len(history) > self._history_limit:
            dropped = history.popleft()
            self._oldest_kept[info.plural] = dropped.rv
        for watcher in list(self._watchers[info.plural]):
            watcher._offer(event)

    def compact(self) -> None:
        """Forget all watch history (as an etcd compaction does): older resourceVersions now get 410."""
        for rtype, history in self._history.items():
            history.clear()
            self._oldest_kept[rtype] = self._rv

    # ---- error helpers

    def _expired(self, rv: int) -> ApiError:
        return ApiError(410, "Expired", f"too old resource version: {rv} ({self._oldest_kept_min()})")

    def _oldest_kept_min(self) -> int:
        return max(self._oldest_kept.values())

    @staticmethod
    def _conflict(info: ResourceType, name: str) -> ApiError:
        return ApiError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {info.qualified} "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again",
            {"name": name, "group": info.group, "kind": info.plural},
        )

    @staticmethod
    def _invalid(info: ResourceType, name: str, causes: builtins.list[tuple[str, str, str]]) -> ApiError:
        return invalid(info, name, causes)

    def _namespace_for_write(self, info: ResourceType, namespace: str | None, meta: JsonDict) -> str:
        if not info.namespaced:
            meta.pop("namespace", None)
            return ""
        body_ns = meta.get("namespace")
        if namespace and body_ns and body_ns != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        ns = namespace or body_ns or "default"
        if not isinstance(ns, str):
            raise bad_request("metadata.namespace: expected a string")
        if ("", ns) not in self._objects["namespaces"]:
            raise ApiError(404, "NotFound", f'namespaces "{ns}" not found',
                           {"name": ns, "group": "", "kind": "namespaces"})
        return ns

    def objects(self, rtype: str) -> Iterator[JsonDict]:
        """Copies of all stored objects of a type (diagnostics and tests)."""
        for entry in list(self._objects[resource_type(rtype).plural].values()):
            yield clone(entry.obj)


def _content(obj: JsonDict) -> JsonDict:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def invalid(info: ResourceType, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid with the API server's message layout: `Kind.group "name" is invalid: field: detail`."""
    errors = [f"{field}: {detail}" for field, _, detail in causes]
    text = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    kind = f"{info.kind}.{info.group}" if info.group else info.kind
    return ApiError(
        422,
        "Invalid",
        f'{kind} "{name}" is invalid: {text}',
        {
            "name": name,
            "group": info.group,
            "kind": info.kind,
            "causes": [
                {"reason": reason, "message": detail, "field": field} for field, reason, detail in causes
            ],
        },
    )


_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def _check_name(info: ResourceType, name: str) -> None:
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


# --------------------------------------------------------------------------------------------------
# Events


def record_event(
    store: Store,
    involved: JsonDict,
    type_: str,
    reason: str,
    message: str,
    component: str,
) -> JsonDict:
    """Create a core/v1 Event about `involved`, or bump count/lastTimestamp of an identical recent one
    (what client-go's event recorder does with its aggregation cache)."""
    meta = involved.get("metadata", {})
    namespace = meta.get("namespace") or "default"
    index_key = (namespace, meta.get("uid", ""), type_, reason, message, component)
    now = now_rfc3339()
    existing_name = store._event_index.get(index_key)
    if existing_name is not None:
        try:
            current = store.get_entry("events", namespace, existing_name)
        except ApiError:
            current = None
        if current is not None:
            event = dict(current.obj)
            event["count"] = int(event.get("count", 1)) + 1
            event["lastTimestamp"] = now
            return store._store_update(RESOURCES["events"], current, event)
    name = f"{meta.get('name', 'object')}.{uuid.uuid4().int & ((1 << 64) - 1):x}"
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion", ""),
            "kind": involved.get("kind", ""),
            "name": meta.get("name", ""),
            "namespace": namespace,
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "type": type_,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": "",
    }
    created = store.create("events", namespace, event)
    store._event_index[index_key] = created["metadata"]["name"]
    return created
