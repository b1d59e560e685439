"""The local cluster's Kubernetes REST API (aiohttp) over the object store.

It speaks the wire protocol that kubectl and the official Python clients rely on: discovery documents,
the verbs on namespaced and cluster-scoped resources, the status subresource, newline-delimited JSON
watch streams (with bookmarks and the 410 ERROR event), pods/log as text/plain, and every error as a
`Status` object with the code and reason a real API server uses. Authentication, authorisation and
fault injection are optional aiohttp middlewares in front of the routes (auth.py, rbac.py, faults.py);
without them the kubeconfig's token is accepted and ignored.

Handlers stay lean for throughput: GET and LIST answer the store's cached JSON bytes without copying.
"""

from __future__ import annotations

import asyncio
import bisect
import datetime as dt
import json
import logging
import re
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import yaml
from aiohttp import web

from airflow_tfjob.local.podlogs import ContainerLog, PodLogs
from airflow_tfjob.local.requestmetrics import RequestMetrics, classify
from airflow_tfjob.local.store import (
    RESOURCES,
    ApiError,
    Entry,
    JsonDict,
    ResourceType,
    Store,
    bad_request,
)

log = logging.getLogger(__name__)

KUBERNETES_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0+tfjob-local",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
MAX_BODY = 3 * 1024 * 1024  # the real API server's request size limit
DEFAULT_WATCH_TIMEOUT = 1800.0
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
}
_JSON = "application/json"


def parse_bool(query: Mapping[str, str], name: str) -> bool:
    """Go's strconv.ParseBool, which is what the real API server uses for query booleans."""
    value = query.get(name)
    if value is None or value == "":
        return False
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise bad_request(f'strconv.ParseBool: parsing "{value}": invalid syntax')


def parse_int(query: Mapping[str, str], name: str) -> int | None:
    value = query.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise bad_request(f'strconv.ParseInt: parsing "{value}": invalid syntax') from None


def format_log_time(ns: int) -> str:
    """Kubelet log timestamps: RFC3339 with exactly nine fractional digits, UTC."""
    seconds, frac = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{frac:09d}Z"


_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def parse_since_time(value: str) -> int:
    """sinceTime as whole seconds since the epoch (the API server drops the fraction)."""
    m = _RFC3339.match(value)
    if not m:
        raise bad_request(f'parsing time "{value}" as "2006-01-02T15:04:05Z07:00": cannot parse')
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    try:
        when = dt.datetime.fromisoformat(m.group(1) + zone)
    except ValueError:
        raise bad_request(f'parsing time "{value}": out of range') from None
    return int(when.timestamp())


def _status_body(error: ApiError) -> bytes:
    return json.dumps(error.status()).encode()


def error_response(error: ApiError) -> web.Response:
    return web.Response(status=error.code, body=_status_body(error), content_type=_JSON)


def _decode_json(raw: bytes, content_type: str) -> Any:
    if not raw.strip():
        raise bad_request("the body of the request was empty")
    try:
        if content_type in ("application/yaml", "application/x-yaml"):
            return yaml.safe_load(raw)
        return json.loads(raw)
    except (ValueError, yaml.YAMLError) as exc:
        raise bad_request(f"couldn't get version/kind; json parse error: {exc}") from None


class _Path:
    """A parsed resource URL: /api/v1/namespaces/ns/pods/name/log and the like."""

    __slots__ = ("info", "name", "namespace", "subresource", "watch_prefix")

    def __init__(self, info: ResourceType, namespace: str | None, name: str | None, sub: str | None,
                 watch_prefix: bool) -> None:
        self.info = info
        self.namespace = namespace
        self.name = name
        self.subresource = sub
        self.watch_prefix = watch_prefix


def _not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def parse_resource_path(group: str, version: str, parts: list[str]) -> _Path:
    watch_prefix = bool(parts) and parts[0] == "watch"
    if watch_prefix:
        parts = parts[1:]
    namespace: str | None = None
    if len(parts) >= 3 and parts[0] == "namespaces" and parts[2] != "status":
        namespace, parts = parts[1], parts[2:]
    if not parts or len(parts) > 3 or not all(parts):
        raise _not_found()
    info = RESOURCES.get(parts[0])
    if info is None or info.group != group or info.version != version:
        raise _not_found()
    if namespace is not None and not info.namespaced:
        raise _not_found()
    name = parts[1] if len(parts) > 1 else None
    sub = parts[2] if len(parts) > 2 else None
    if name is not None and info.namespaced and namespace is None:
        raise _not_found()
    if sub is not None and not (sub == "status" and info.status_subresource) and not (
        sub == "log" and info.plural == "pods"
    ):
        raise _not_found()
    return _Path(info, namespace, name, sub, watch_prefix)


# --------------------------------------------------------------------------------------------------
# Discovery documents


def _api_resource_list(group: str, version: str) -> JsonDict:
    resources: list[JsonDict] = []
    for info in RESOURCES.values():
        if info.group != group or info.version != version:
            continue
        entry: JsonDict = {
            "name": info.plural,
            "singularName": info.singular,
            "namespaced": info.namespaced,
            "kind": info.kind,
            "verbs": list(_VERBS),
        }
        if info.short_names:
            entry["shortNames"] = list(info.short_names)
        if info.plural in ("pods", "services", "deployments"):
            entry["categories"] = ["all"]
        resources.append(entry)
        if info.status_subresource:
            resources.append({"name": f"{info.plural}/status", "singularName": "", "namespaced": info.namespaced,
                              "kind": info.kind, "verbs": ["get", "patch", "update"]})
        if info.plural == "pods":
            resources.append({"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod",
                              "verbs": ["get"]})
    group_version = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def _groups() -> list[str]:
    seen: list[str] = []
    for info in RESOURCES.values():
        if info.group and info.group not in seen:
            seen.append(info.group)
    return seen


def _api_group(group: str) -> JsonDict:
    gv = {"groupVersion": f"{group}/v1", "version": "v1"}
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": [gv], "preferredVersion": gv}


# --------------------------------------------------------------------------------------------------
# Server-side tables for kubectl (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`)


def wants_table(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    return "as=Table" in accept.split(",", 1)[0]


def human_duration(seconds: float) -> str:
    """Go's duration.HumanDuration, which kubectl's AGE column shows."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 8760}y" if days == 0 else f"{hours // 8760}y{days}d"
    return f"{hours // 8760}y"


def _age(timestamp: Any) -> str:
    if not isinstance(timestamp, str) or not timestamp:
        return "<unknown>"
    try:
        when = dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    return human_duration((dt.datetime.now(dt.timezone.utc) - when).total_seconds())


def _pod_cells(pod: JsonDict) -> list[Any]:
    """READY, STATUS, RESTARTS as kubectl's pod printer computes them (simplified: no init containers)."""
    status = pod.get("status") or {}
    statuses = [c for c in status.get("containerStatuses") or [] if isinstance(c, dict)]
    total = len((pod.get("spec") or {}).get("containers") or [])
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for c in reversed(statuses):
        state = c.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            term = state["terminated"] or {}
            reason = term.get("reason") or (
                f"Signal:{term['signal']}" if term.get("signal") else f"ExitCode:{term.get('exitCode', 0)}")
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    return [f"{ready}/{total}", reason, restarts]


def _service_cells(svc: JsonDict) -> list[Any]:
    spec = svc.get("spec") or {}
    ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    external = ",".join(str(i.get("ip") or i.get("hostname")) for i in ingress if isinstance(i, dict))
    if not external:
        external = "<pending>" if spec.get("type") == "LoadBalancer" else "<none>"
    ports = ",".join(
        f"{p.get('port')}{':' + str(p['nodePort']) if p.get('nodePort') else ''}/{p.get('protocol', 'TCP')}"
        for p in spec.get("ports") or [] if isinstance(p, dict)
    ) or "<none>"
    return [spec.get("type", "ClusterIP"), spec.get("clusterIP", "<none>"), external, ports]


def _tfjob_state(job: JsonDict) -> str:
    conditions = (job.get("status") or {}).get("conditions") or []
    last = conditions[-1] if conditions and isinstance(conditions[-1], dict) else {}
    return str(last.get("type", ""))


_COLUMNS: dict[str, list[tuple[str, str]]] = {
    "pods": [("Ready", "string"), ("Status", "string"), ("Restarts", "integer")],
    "tfjobs": [("State", "string")],
    "services": [("Type", "string"), ("Cluster-IP", "string"), ("External-IP", "string"), ("Port(s)", "string")],
    "namespaces": [("Status", "string")],
    "configmaps": [("Data", "integer")],
    "secrets": [("Type", "string"), ("Data", "integer")],
}


def _cells(info: ResourceType, obj: JsonDict) -> list[Any]:
    meta = obj.get("metadata") or {}
    if info.plural == "events":
        involved = obj.get("involvedObject") or {}
        return [_age(obj.get("lastTimestamp") or meta.get("creationTimestamp")), obj.get("type", ""),
                obj.get("reason", ""), f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
                obj.get("message", "")]
    extra: list[Any] = []
    if info.plural == "pods":
        extra = _pod_cells(obj)
    elif info.plural == "tfjobs":
        extra = [_tfjob_state(obj)]
    elif info.plural == "services":
        extra = _service_cells(obj)
    elif info.plural == "namespaces":
        extra = [(obj.get("status") or {}).get("phase", "")]
    elif info.plural == "configmaps":
        extra = [len(obj.get("data") or {}) + len(obj.get("binaryData") or {})]
    elif info.plural == "secrets":
        extra = [obj.get("type", ""), len(obj.get("data") or {})]
    cells = [meta.get("name", ""), *extra, _age(meta.get("creationTimestamp"))]
    if info.plural == "pods":  # the -o wide columns
        status, spec = obj.get("status") or {}, obj.get("spec") or {}
        cells += [status.get("podIP") or "<none>", spec.get("nodeName") or "<none>", "<none>", "<none>"]
    return cells


def to_table(info: ResourceType, objects: list[JsonDict], rv: str, include_object: str | None) -> JsonDict:
    if info.plural == "events":
        columns = [("Last Seen", "string"), ("Type", "string"), ("Reason", "string"), ("Object", "string"),
                   ("Message", "string")]
    else:
        columns = [("Name", "string"), *_COLUMNS.get(info.plural, []), ("Age", "string")]
    definitions = [
        {"name": name, "type": type_, "format": "name" if name == "Name" else "", "description": "", "priority": 0}
        for name, type_ in columns
    ]
    if info.plural == "pods":
        definitions += [{"name": name, "type": "string", "format": "", "description": "", "priority": 1}
                        for name in ("IP", "Node", "Nominated Node", "Readiness Gates")]
    rows = []
    for obj in objects:
        row: JsonDict = {"cells": _cells(info, obj)}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": obj.get("metadata", {})}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
            "columnDefinitions": definitions, "rows": rows}


# --------------------------------------------------------------------------------------------------
# The server


class ApiServer:
    """aiohttp application serving the store; `start()` returns the base URL."""

    def __init__(
        self,
        store: Store,
        podlogs: PodLogs,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        bookmark_interval: float = 60.0,
        middlewares: Sequence[Callable[..., Awaitable[web.StreamResponse]]] = (),
        metrics_sources: Sequence[Callable[[], str]] = (),
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.store = store
        self.podlogs = podlogs
        self.host = host
        self.port = port
        self.bookmark_interval = bookmark_interval
        self._runner: web.AppRunner | None = None
        self._streams: set[asyncio.Task[Any]] = set()
        self.metrics = RequestMetrics()
        # Counted first, so that requests refused or faulted by the middlewares are counted too.
        self.middlewares = [self._observe, *middlewares]
        self.metrics_sources = [self.metrics.render, *metrics_sources]
        self.ssl_context = ssl_context
        self.url = ""

    async def start(self) -> str:
        app = web.Application(client_max_size=MAX_BODY, middlewares=self.middlewares)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        # handler_cancellation: a client that hangs up ends its watch or log stream at once.
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024, ssl_context=self.ssl_context)
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1]
        scheme = "https" if self.ssl_context is not None else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"{scheme}://{host}:{self.port}"
        return self.url

    async def stop(self) -> None:
        for task in list(self._streams):
            task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ---- dispatch

    @web.middleware
    async def _observe(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.path != "/metrics":
            self.metrics.observe(classify(request.method, request.path, request.query))
        return await handler(request)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/metrics":
            text = "".join(source() for source in self.metrics_sources)
            return web.Response(text=text, content_type="text/plain", charset="utf-8")
        try:
            return await self._route(request)
        except ApiError as exc:
            return error_response(exc)
        except web.HTTPRequestEntityTooLarge:
            return error_response(ApiError(413, "RequestEntityTooLarge",
                                           f"Request entity too large: limit is {MAX_BODY}"))
        except (asyncio.CancelledError, ConnectionResetError):
            raise
        except Exception as exc:  # a bug must not take the server down: answer 500 and keep serving
            log.exception("internal error on %s %s", request.method, request.path)
            return error_response(ApiError(500, "InternalError", f"Internal error occurred: {exc!r}"))

    async def _route(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        if parts and parts[0] == "api":
            if len(parts) == 1:
                return self._json({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{self.host}:{self.port}"}]})
            if parts[1] != "v1":
                raise _not_found()
            if len(parts) == 2:
                return self._json(_api_resource_list("", "v1"))
            return await self._resource(request, parse_resource_path("", "v1", parts[2:]))
        if parts and parts[0] == "apis":
            if len(parts) == 1:
                return self._json({"kind": "APIGroupList", "apiVersion": "v1",
                                   "groups": [_api_group(g) for g in _groups()]})
            group = parts[1]
            if group not in _groups():
                raise _not_found()
            if len(parts) == 2:
                return self._json(_api_group(group))
            if parts[2] != "v1":
                raise _not_found()
            if len(parts) == 3:
                return self._json(_api_resource_list(group, "v1"))
            return await self._resource(request, parse_resource_path(group, "v1", parts[3:]))
        if path == "/version":
            return self._json(KUBERNETES_VERSION)
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        raise _not_found()

    @staticmethod
    def _json(obj: Any, status: int = 200) -> web.Response:
        return web.Response(status=status, body=json.dumps(obj).encode(), content_type=_JSON)

    @staticmethod
    def _bytes(body: bytes, status: int = 200) -> web.Response:
        return web.Response(status=status, body=body, content_type=_JSON)

    async def _resource(self, request: web.Request, p: _Path) -> web.StreamResponse:
        method = request.method
        query = request.query
        rtype = p.info.plural
        if p.name is None:
            if method == "GET":
                if p.watch_prefix or parse_bool(query, "watch"):
                    return await self._watch(request, p)
                return self._list(p, query, wants_table(request))
            if method == "POST":
                body = await self._body(request)
                obj = self.store.create(rtype, p.namespace, body, dry_run=self._dry_run(query, None))
                return self._json(obj, 201)
            if method == "DELETE":
                return await self._delete_collection(request, p)
            raise self._method_not_allowed(method)
        if p.subresource == "log":
            if method != "GET":
                raise self._method_not_allowed(method)
            return await self._pod_log(request, p)
        if method == "GET":
            if p.watch_prefix:
                return await self._watch(request, p)
            entry = self.store.get_entry(rtype, p.namespace, p.name)
            if wants_table(request):
                return self._json(to_table(p.info, [entry.obj], str(entry.rv), query.get("includeObject")))
            return self._bytes(entry.json)
        if method == "PUT":
            body = await self._body(request)
            return self._json(self.store.replace(rtype, p.namespace, p.name, body, p.subresource))
        if method == "PATCH":
            patch_type = self._patch_type(request, p.info)
            body = await self._body(request, allow_any=True)
            return self._json(self.store.patch(rtype, p.namespace, p.name, body, patch_type, p.subresource))
        if method == "DELETE":
            if p.subresource is not None:
                raise self._method_not_allowed(method)
            return await self._delete(request, p)
        raise self._method_not_allowed(method)

    @staticmethod
    def _method_not_allowed(method: str) -> ApiError:
        return ApiError(405, "MethodNotAllowed", f"the server does not allow this method on the requested resource ({method})")

    @staticmethod
    def _patch_type(request: web.Request, info: ResourceType) -> str:
        content_type = request.content_type
        patch_type = _PATCH_TYPES.get(content_type)
        if patch_type is None or (patch_type == "strategic" and not info.is_core):
            accepted = ["application/json-patch+json", "application/merge-patch+json"]
            if info.is_core:
                accepted.append("application/strategic-merge-patch+json")
            accepted.append("application/apply-patch+yaml")
            detail = (" (server-side apply is not implemented by the local cluster)"
                      if content_type == "application/apply-patch+yaml" else "")
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{', '.join(accepted)}{detail}",
            )
        return patch_type

    @staticmethod
    async def _body(request: web.Request, *, allow_any: bool = False) -> Any:
        raw = await request.read()
        content_type = request.content_type
        if not allow_any and content_type not in (_JSON, "application/yaml", "application/x-yaml",
                                                  "application/octet-stream", "", "*/*", "text/plain"):
            raise ApiError(415, "UnsupportedMediaType",
                           f'the body of the request was in an unknown format - accepted media types include: '
                           f'application/json, application/yaml (got "{content_type}")')
        body = _decode_json(raw, content_type)
        if not allow_any and not isinstance(body, dict):
            raise bad_request("the body of the request must be a JSON object")
        return body

    @staticmethod
    def _dry_run(query: Mapping[str, str], options: JsonDict | None) -> bool:
        values = list(getattr(query, "getall", lambda _k, _d: [])("dryRun", []))
        if options and isinstance(options.get("dryRun"), list):
            values += options["dryRun"]
        for v in values:
            if v != "All":
                raise bad_request(f'dryRun: Unsupported value: "{v}": supported values: "All"')
        return bool(values)

    # ---- list

    def _list(self, p: _Path, query: Mapping[str, str], table: bool = False) -> web.Response:
        entries, rv = self.store.list_entries(
            p.info.plural,
            p.namespace,
            query.get("labelSelector"),
            query.get("fieldSelector"),
            query.get("resourceVersion"),
        )
        if table:
            return self._json(to_table(p.info, [e.obj for e in entries], str(rv), query.get("includeObject")))
        head = (
            f'{{"kind":"{p.info.kind}List","apiVersion":"{p.info.api_version}",'
            f'"metadata":{{"resourceVersion":"{rv}"}},"items":['
        ).encode()
        return self._bytes(head + b",".join(e.json for e in entries) + b"]}")

    # ---- delete

    async def _delete_options(self, request: web.Request) -> JsonDict:
        raw = await request.read()
        options: JsonDict = {}
        if raw.strip():
            decoded = _decode_json(raw, request.content_type)
            if not isinstance(decoded, dict):
                raise bad_request("DeleteOptions: expected a JSON object")
            options = decoded
        query = request.query
        if "propagationPolicy" in query:
            options["propagationPolicy"] = query["propagationPolicy"]
        grace = parse_int(query, "gracePeriodSeconds")
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        if "orphanDependents" in query:
            options["orphanDependents"] = parse_bool(query, "orphanDependents")
        policy = options.get("propagationPolicy")
        orphan = options.get("orphanDependents")
        if policy is None and orphan is not None:
            policy = "Orphan" if orphan else "Background"
        if policy is not None and not isinstance(policy, str):
            raise bad_request("propagationPolicy: expected a string")
        grace_value = options.get("gracePeriodSeconds")
        if grace_value is not None and (not isinstance(grace_value, int) or isinstance(grace_value, bool)):
            raise bad_request("gracePeriodSeconds: expected an integer")
        preconditions = options.get("preconditions")
        if preconditions is not None and not isinstance(preconditions, dict):
            raise bad_request("preconditions: expected an object")
        options["propagationPolicy"] = policy
        return options

    async def _delete(self, request: web.Request, p: _Path) -> web.Response:
        assert p.name is not None
        options = await self._delete_options(request)
        dry_run = self._dry_run(request.query, options)
        obj = self.store.delete(
            p.info.plural,
            p.namespace,
            p.name,
            options.get("propagationPolicy"),
            options.get("gracePeriodSeconds"),
            preconditions=options.get("preconditions"),
            dry_run=dry_run,
        )
        still_there = self._exists(p.info, p.namespace, p.name) and not dry_run
        if still_there or p.info.plural == "pods" or dry_run:
            status = 202 if still_there and options.get("orphanDependents") is False else 200
            return self._json(obj, status)
        meta = obj.get("metadata", {})
        return self._json({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": p.name, "group": p.info.group, "kind": p.info.plural, "uid": meta.get("uid")},
        })

    def _exists(self, info: ResourceType, namespace: str | None, name: str) -> bool:
        try:
            self.store.get_entry(info.plural, namespace, name)
        except ApiError:
            return False
        return True

    async def _delete_collection(self, request: web.Request, p: _Path) -> web.Response:
        options = await self._delete_options(request)
        dry_run = self._dry_run(request.query, options)
        entries, rv = self.store.list_entries(
            p.info.plural, p.namespace, request.query.get("labelSelector"), request.query.get("fieldSelector")
        )
        items = []
        for entry in entries:
            meta = entry.obj["metadata"]
            try:
                items.append(self.store.delete(
                    p.info.plural, meta.get("namespace"), meta["name"], options.get("propagationPolicy"),
                    options.get("gracePeriodSeconds"), dry_run=dry_run,
                ))
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return self._json({"kind": f"{p.info.kind}List", "apiVersion": p.info.api_version,
                           "metadata": {"resourceVersion": str(rv)}, "items": items})

    # ---- watch

    async def _watch(self, request: web.Request, p: _Path) -> web.StreamResponse:
        query = request.query
        timeout = parse_int(query, "timeoutSeconds")
        bookmarks = parse_bool(query, "allowWatchBookmarks")
        initial = parse_bool(query, "sendInitialEvents")
        field_selector = query.get("fieldSelector")
        if p.name is not None:  # /watch/namespaces/ns/pods/name
            field_selector = ",".join(x for x in (field_selector, f"metadata.name={p.name}") if x)
        rv = None if initial else query.get("resourceVersion")
        expired: ApiError | None = None
        watcher = None
        try:
            watcher = self.store.watch(p.info.plural, p.namespace, rv, label_selector=query.get("labelSelector"),
                                       field_selector=field_selector)
        except ApiError as exc:
            if exc.code != 410:
                raise
            expired = exc
        response = web.StreamResponse(status=200, headers={"Content-Type": _JSON, "Cache-Control": "no-cache, private"})
        response.enable_chunked_encoding()
        try:
            await response.prepare(request)
        except BaseException:
            if watcher is not None:
                watcher.close()  # the client is gone before the stream started: unregister from the store
            raise
        if expired is not None or watcher is None:
            if expired is not None:
                await response.write(b'{"type":"ERROR","object":' + _status_body(expired) + b"}\n")
            await response.write_eof()
            return response
        task = asyncio.current_task()
        if task is not None:
            self._streams.add(task)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout if timeout is not None and timeout > 0 else DEFAULT_WATCH_TIMEOUT)
        next_bookmark = loop.time() + self.bookmark_interval
        kind, api_version = p.info.kind, p.info.api_version
        table = wants_table(request)
        include = query.get("includeObject")

        async def write(batch: list[tuple[str, Entry]]) -> None:
            if not table:
                await self._write_events(response, batch)
            elif batch:
                await response.write(b"".join(
                    json.dumps({"type": t, "object": to_table(p.info, [e.obj], str(e.rv), include)}).encode() + b"\n"
                    for t, e in batch
                ))

        self.metrics.watch_opened(p.info.plural)
        try:
            if initial:
                batch = await watcher.next_batch(0)
                await write(batch)
                await response.write(self._bookmark(kind, api_version, watcher.bookmark_rv(), initial_end=True))
            while True:
                now = loop.time()
                if now >= deadline:
                    if bookmarks:
                        await response.write(self._bookmark(kind, api_version, watcher.bookmark_rv()))
                    break
                wait = deadline - now
                if bookmarks:
                    wait = min(wait, max(0.0, next_bookmark - now))
                batch = await watcher.next_batch(wait)
                if batch:
                    await write(batch)
                elif watcher.closed:
                    break
                if bookmarks and loop.time() >= next_bookmark:
                    next_bookmark = loop.time() + self.bookmark_interval
                    await response.write(self._bookmark(kind, api_version, watcher.bookmark_rv()))
            await response.write_eof()
        except (ConnectionResetError, RuntimeError):
            pass  # the client went away
        finally:
            watcher.close()
            self.metrics.watch_closed(p.info.plural)
            if task is not None:
                self._streams.discard(task)
        return response

    @staticmethod
    async def _write_events(response: web.StreamResponse, batch: list[tuple[str, Entry]]) -> None:
        if batch:
            await response.write(b"".join(
                b'{"type":"' + t.encode() + b'","object":' + e.json + b"}\n" for t, e in batch
            ))

    @staticmethod
    def _bookmark(kind: str, api_version: str, rv: int, *, initial_end: bool = False) -> bytes:
        meta: JsonDict = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": kind, "apiVersion": api_version, "metadata": meta}
        return json.dumps({"type": "BOOKMARK", "object": obj}, separators=(",", ":")).encode() + b"\n"

    # ---- pods/log

    def _select_log(self, pod: JsonDict, name: str, query: Mapping[str, str]) -> tuple[str, ContainerLog]:
        spec = pod.get("spec") or {}
        containers = [c.get("name") for c in spec.get("containers") or [] if isinstance(c, dict)]
        init = [c.get("name") for c in spec.get("initContainers") or [] if isinstance(c, dict)]
        container = query.get("container") or ""
        if not container:
            if len(containers) != 1:
                raise bad_request(
                    f"a container name must be specified for pod {name}, choose one of: [{' '.join(map(str, containers))}]"
                )
            container = str(containers[0])
        elif container not in containers and container not in init:
            raise bad_request(f"container {container} is not valid for pod {name}")
        namespace = pod["metadata"]["namespace"]
        if parse_bool(query, "previous"):
            previous = self.podlogs.previous(namespace, name, container)
            if previous is None:
                raise bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
            return container, previous
        current = self.podlogs.current(namespace, name, container)
        if current is None:
            reason = "ContainerCreating"
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                if isinstance(status, dict) and status.get("name") == container:
                    reason = (status.get("state") or {}).get("waiting", {}).get("reason") or reason
            if (pod.get("status") or {}).get("phase") == "Pending" and not spec.get("nodeName"):
                reason = "ContainerCreating"
            raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
        return container, current

    async def _pod_log(self, request: web.Request, p: _Path) -> web.StreamResponse:
        assert p.name is not None
        query = request.query
        pod = self.store.get_entry("pods", p.namespace, p.name).obj
        _, container_log = self._select_log(pod, p.name, query)
        follow = parse_bool(query, "follow")
        timestamps = parse_bool(query, "timestamps")
        tail = parse_int(query, "tailLines")
        since_seconds = parse_int(query, "sinceSeconds")
        limit_bytes = parse_int(query, "limitBytes")
        since_time = query.get("sinceTime")
        if since_seconds is not None and since_time:
            raise bad_request("at most one of sinceTime or sinceSeconds may be specified")
        if since_seconds is not None and since_seconds < 1:
            raise ApiError(422, "Invalid", f"sinceSeconds: Invalid value: {since_seconds}: must be greater than 0")
        if tail is not None and tail < 0:
            raise ApiError(422, "Invalid", f"tailLines: Invalid value: {tail}: must be greater than or equal to 0")
        if limit_bytes is not None and limit_bytes < 1:
            raise ApiError(422, "Invalid", f"limitBytes: Invalid value: {limit_bytes}: must be greater than 0")
        start = 0
        entries = container_log.entries
        if since_time:
            cutoff = parse_since_time(since_time) * 1_000_000_000
            start = bisect.bisect_left(entries, cutoff, key=lambda e: e[0])
        elif since_seconds is not None:
            cutoff = time.time_ns() - since_seconds * 1_000_000_000
            start = bisect.bisect_left(entries, cutoff, key=lambda e: e[0])
        if tail is not None:
            start = max(start, len(entries) - tail)

        def render(chunk: list[tuple[int, bytes]]) -> bytes:
            if timestamps:
                return b"".join(format_log_time(ts).encode() + b" " + line + b"\n" for ts, line in chunk)
            return b"".join(line + b"\n" for _, line in chunk)

        if not follow:
            body = render(entries[start:])
            if limit_bytes is not None:
                body = body[:limit_bytes]
            return web.Response(body=body, content_type="text/plain", charset="utf-8")
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain; charset=utf-8"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        task = asyncio.current_task()
        if task is not None:
            self._streams.add(task)
        sent = 0
        position = start
        try:
            while True:
                end = len(container_log.entries)
                if end > position:
                    body = render(container_log.entries[position:end])
                    position = end
                    if limit_bytes is not None:
                        body = body[: max(0, limit_bytes - sent)]
                    sent += len(body)
                    if body:
                        await response.write(body)
                    if limit_bytes is not None and sent >= limit_bytes:
                        break
                    continue
                if container_log.closed:
                    break
                await container_log.wait_beyond(position)
            await response.write_eof()
        except (ConnectionResetError, RuntimeError):
            pass
        finally:
            if task is not None:
                self._streams.discard(task)
        return response
