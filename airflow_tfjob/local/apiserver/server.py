"""The local cluster's Kubernetes REST API (aiohttp) over the object store.

It speaks the wire protocol that kubectl and the official Python clients rely on: discovery documents,
the verbs on namespaced and cluster-scoped resources, the status subresource, newline-delimited JSON
watch streams (with bookmarks and the 410 ERROR event), pods/log as text/plain, and every error as a
`Status` object with the code and reason a real API server uses. Authentication, authorisation and
fault injection are optional aiohttp middlewares in front of the routes (auth.py, rbac.py, faults.py);
without them the kubeconfig's token is accepted and ignored.

Handlers stay lean for throughput: GET and LIST answer the store's cached JSON bytes without copying.

This module holds the routes and verbs; request parsing (request.py), discovery documents
(discovery.py), kubectl tables (tables.py) and the two streaming endpoints (watchendpoint.py,
logendpoint.py) are apart.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any

from aiohttp import web

from airflow_tfjob.local.admission import warnings
from airflow_tfjob.local.admission.fieldvalidation import validate_fields
from airflow_tfjob.local.apiserver.discovery import (
    KUBERNETES_VERSION,
    api_group,
    api_groups,
    api_resource_list,
    still_served,
)
from airflow_tfjob.local.apiserver.extensions import Extensions, VersionView
from airflow_tfjob.local.apiserver.logendpoint import serve_pod_log
from airflow_tfjob.local.apiserver.openapi import v3_root
from airflow_tfjob.local.apiserver.openapiendpoint import serve_openapi
from airflow_tfjob.local.apiserver.rbac import ACCESS_REVIEW_PATH, access_review
from airflow_tfjob.local.apiserver.request import (
    JSON_TYPE,
    PATCH_TYPES,
    OpenStreams,
    ResourcePath,
    decode_json,
    error_response,
    parse_bool,
    parse_int,
    parse_resource_path,
    route_not_found,
)
from airflow_tfjob.local.apiserver.requestmetrics import RequestMetrics, classify
from airflow_tfjob.local.apiserver.tables import to_table, wants_table
from airflow_tfjob.local.apiserver.watchendpoint import serve_watch
from airflow_tfjob.local.model.resources import ApiError, JsonDict, ResourceType, bad_request
from airflow_tfjob.local.node.podlogs import PodLogs
from airflow_tfjob.local.store.core import Store

log = logging.getLogger(__name__)

MAX_BODY = 3 * 1024 * 1024  # the real API server's request size limit

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
        extensions: Extensions | None = None,
        served_groups: Collection[str] | None = None,
        withdrawn_versions: Collection[str] = (),
        shutdown_timeout: float = 2.0,
    ) -> None:
        self.store = store
        self.shutdown_timeout = shutdown_timeout
        self.extensions = extensions or Extensions()
        # The API groups answered (`--apis`); the others are 404 and absent from discovery.
        self.served_groups = frozenset(served_groups) if served_groups is not None else None
        # ``group/version``s a version profile withdrew (e.g. kueue.x-k8s.io/v1beta1 on Kueue 0.20): absent
        # from discovery and 404, whether a CRD's or an aggregated API's version.
        self.withdrawn_versions = frozenset(withdrawn_versions)
        self.podlogs = podlogs
        self.host = host
        self.port = port
        self.bookmark_interval = bookmark_interval
        self._runner: web.AppRunner | None = None
        self._warmup: asyncio.Future[bytes] | None = None
        self._streams = OpenStreams()
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
        # shutdown_timeout: a stop gives the requests in flight that long to finish (streams end at once),
        # then cuts their connections, as a server that goes away does; aiohttp's default is a minute.
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True,
                                     shutdown_timeout=self.shutdown_timeout)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024, ssl_context=self.ssl_context)
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1]
        # Build the schemas and OpenAPI documents off the event loop now (the first build imports the
        # kubernetes client's models, about 2 s) rather than inside the first job create or kubectl call.
        self._warmup = asyncio.get_running_loop().run_in_executor(None, v3_root, self.served_groups)
        scheme = "https" if self.ssl_context is not None else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"{scheme}://{host}:{self.port}"
        return self.url

    async def stop(self) -> None:
        self._streams.close()
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
        token = warnings.collect()
        try:
            response = await self._respond(request)
        finally:
            collected = warnings.take(token)
        if not response.prepared:  # streams have sent their headers already
            for text in collected:
                response.headers.add("Warning", warnings.header_value(text))
        return response

    async def _respond(self, request: web.Request) -> web.StreamResponse:
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
                raise route_not_found()
            if len(parts) == 2:
                return self._json(api_resource_list("", "v1"))
            return await self._resource(request, parse_resource_path("", "v1", parts[2:]))
        if path == ACCESS_REVIEW_PATH:
            return await access_review(request, lambda _attrs: True)  # no roles: everyone may do anything
        if parts and parts[0] == "apis":
            features, aggregated = self.extensions.features, self.extensions.aggregated
            withdrawn = self.withdrawn_versions
            groups = api_groups(features, self.served_groups, withdrawn)
            if len(parts) == 1:
                listed = [api_group(g, v) for g, v in groups.items()]
                listed += [api_group(a.group, kept) for a in aggregated.values()
                           if (kept := still_served(a.group, a.versions, withdrawn))]
                return self._json({"kind": "APIGroupList", "apiVersion": "v1", "groups": listed})
            group = parts[1]
            if group in aggregated:
                api = aggregated[group]
                kept = still_served(group, api.versions, withdrawn)
                if kept == api.versions:
                    return await api.handle(request, parts[2:])
                if not kept or (len(parts) > 2 and parts[2] not in kept):
                    raise route_not_found()
                if len(parts) == 2:
                    return self._json(api_group(group, kept))
                return await api.handle(request, parts[2:])
            versions = groups.get(group)
            if versions is None:
                raise route_not_found()
            if len(parts) == 2:
                return self._json(api_group(group, versions))
            if parts[2] not in versions:
                raise route_not_found()
            if len(parts) == 3:
                return self._json(api_resource_list(group, parts[2], features))
            p = parse_resource_path(group, parts[2], parts[3:])
            if p.info.feature is not None and p.info.feature not in features:
                raise route_not_found()
            return await self._resource(request, p)
        if parts and parts[0] == "openapi":
            return await serve_openapi(request, parts, self.served_groups)
        if path == "/version":
            return self._json(KUBERNETES_VERSION)
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        raise route_not_found()

    @staticmethod
    def _json(obj: Any, status: int = 200, out: Callable[[JsonDict], JsonDict] | None = None) -> web.Response:
        if out is not None and isinstance(obj, dict) and obj.get("kind") != "Status":
            obj = out(obj)
        return web.Response(status=status, body=json.dumps(obj).encode(), content_type=JSON_TYPE)

    @staticmethod
    def _bytes(body: bytes, status: int = 200) -> web.Response:
        return web.Response(status=status, body=body, content_type=JSON_TYPE)

    async def _resource(self, request: web.Request, p: ResourcePath) -> web.StreamResponse:
        method = request.method
        query = request.query
        rtype = p.info.plural
        view = self._view(p)
        out = view.from_storage if view is not None else None
        if p.name is None:
            if method == "GET":
                if p.watch_prefix or parse_bool(query, "watch"):
                    return await serve_watch(request, p, self.store, self.metrics, self._streams,
                                             self.bookmark_interval, out)
                return self._list(p, query, wants_table(request), out)
            if method == "POST":
                body = self._to_storage(view, await self._body(request))
                validate_fields(p.info, body, query, "create")
                obj = self.store.create(rtype, p.namespace, body, dry_run=self._dry_run(query, None))
                return self._json(obj, 201, out)
            if method == "DELETE":
                return await self._delete_collection(request, p)
            raise self._method_not_allowed(method)
        if p.subresource == "log":
            if method != "GET":
                raise self._method_not_allowed(method)
            return await serve_pod_log(request, p, self.store, self.podlogs, self._streams)
        if method == "GET":
            if p.watch_prefix:
                return await serve_watch(request, p, self.store, self.metrics, self._streams,
                                         self.bookmark_interval, out)
            if p.subresource == "scale":
                return self._json(self.store.get_scale(rtype, p.namespace, p.name))
            entry = self.store.get_entry(rtype, p.namespace, p.name)
            if wants_table(request):
                return self._json(to_table(p.info, [entry.obj], str(entry.rv), query.get("includeObject")))
            return self._json(entry.obj, 200, out) if out is not None else self._bytes(entry.json)
        if method == "PUT":
            body = self._to_storage(view, await self._body(request))
            validate_fields(p.info, body, query, "update", p.subresource)
            return self._json(self.store.replace(rtype, p.namespace, p.name, body, p.subresource), 200, out)
        if method == "PATCH":
            patch_type = self._patch_type(request, p.info)
            body = self._to_storage(view, await self._body(request, allow_any=True))
            validate_fields(p.info, body, query, "patch", p.subresource)
            return self._json(self.store.patch(rtype, p.namespace, p.name, body, patch_type, p.subresource),
                              200, out)
        if method == "DELETE":
            if p.subresource is not None:
                raise self._method_not_allowed(method)
            return await self._delete(request, p, out)
        raise self._method_not_allowed(method)

    def _view(self, p: ResourcePath) -> VersionView | None:
        """The conversion of a request at a version other than the storage one (and its warning)."""
        if p.version == p.info.version:
            return None
        view = self.extensions.view(p.info.group, p.version) or VersionView()
        if view.warning:
            warnings.add(view.warning)
        return view

    @staticmethod
    def _to_storage(view: VersionView | None, body: Any) -> Any:
        # A JSON patch (a list of operations) is applied as sent: its paths are not converted.
        return view.to_storage(body) if view is not None and isinstance(body, dict) else body

    @staticmethod
    def _method_not_allowed(method: str) -> ApiError:
        return ApiError(405, "MethodNotAllowed", f"the server does not allow this method on the requested resource ({method})")

    @staticmethod
    def _patch_type(request: web.Request, info: ResourceType) -> str:
        content_type = request.content_type
        patch_type = PATCH_TYPES.get(content_type)
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
        if not allow_any and content_type not in (JSON_TYPE, "application/yaml", "application/x-yaml",
                                                  "application/octet-stream", "", "*/*", "text/plain"):
            raise ApiError(415, "UnsupportedMediaType",
                           f'the body of the request was in an unknown format - accepted media types include: '
                           f'application/json, application/yaml (got "{content_type}")')
        body = decode_json(raw, content_type)
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

    def _list(self, p: ResourcePath, query: Mapping[str, str], table: bool = False,
              out: Callable[[JsonDict], JsonDict] | None = None) -> web.Response:
        entries, rv = self.store.list_entries(
            p.info.plural,
            p.namespace,
            query.get("labelSelector"),
            query.get("fieldSelector"),
            query.get("resourceVersion"),
        )
        if table:
            return self._json(to_table(p.info, [e.obj for e in entries], str(rv), query.get("includeObject")))
        if out is not None:
            return self._json({"kind": f"{p.info.kind}List", "apiVersion": f"{p.info.group}/{p.version}",
                               "metadata": {"resourceVersion": str(rv)}, "items": [out(e.obj) for e in entries]})
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
            decoded = decode_json(raw, request.content_type)
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

    async def _delete(self, request: web.Request, p: ResourcePath,
                      out: Callable[[JsonDict], JsonDict] | None = None) -> web.Response:
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
            return self._json(obj, status, out)
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

    async def _delete_collection(self, request: web.Request, p: ResourcePath) -> web.Response:
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
