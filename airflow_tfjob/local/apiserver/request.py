"""What the API server reads from a request and how it answers an error: resource URLs, Go-style query
booleans and integers, JSON/YAML bodies, and the `Status` body every error carries.

And how a streamed answer (a watch, a followed log) ends: by itself, or with the server's stop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import yaml
from aiohttp import web

from airflow_tfjob.local.model.resources import RESOURCES, ApiError, ResourceType, bad_request

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
}
JSON_TYPE = "application/json"


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


def status_body(error: ApiError) -> bytes:
    return json.dumps(error.status()).encode()


def error_response(error: ApiError) -> web.Response:
    return web.Response(status=error.code, body=status_body(error), content_type=JSON_TYPE)


def decode_json(raw: bytes, content_type: str) -> Any:
    if not raw.strip():
        raise bad_request("the body of the request was empty")
    try:
        if content_type in ("application/yaml", "application/x-yaml"):
            return yaml.safe_load(raw)
        return json.loads(raw)
    except (ValueError, yaml.YAMLError) as exc:
        raise bad_request(f"couldn't get version/kind; json parse error: {exc}") from None


class ResourcePath:
    """A parsed resource URL: /api/v1/namespaces/ns/pods/name/log and the like."""

    __slots__ = ("info", "name", "namespace", "subresource", "version", "watch_prefix")

    def __init__(self, info: ResourceType, namespace: str | None, name: str | None, sub: str | None,
                 watch_prefix: bool, version: str | None = None) -> None:
        self.info = info
        # The version the request named: info.version (storage) or one of info.extra_versions.
        self.version = version or info.version
        self.namespace = namespace
        self.name = name
        self.subresource = sub
        self.watch_prefix = watch_prefix


def route_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def parse_resource_path(group: str, version: str, parts: list[str]) -> ResourcePath:
    watch_prefix = bool(parts) and parts[0] == "watch"
    if watch_prefix:
        parts = parts[1:]
    namespace: str | None = None
    if len(parts) >= 3 and parts[0] == "namespaces" and parts[2] != "status":
        namespace, parts = parts[1], parts[2:]
    if not parts or len(parts) > 3 or not all(parts):
        raise route_not_found()
    info = RESOURCES.get(parts[0])
    if info is None or info.group != group or (version != info.version and version not in info.extra_versions):
        raise route_not_found()
    if namespace is not None and not info.namespaced:
        raise route_not_found()
    name = parts[1] if len(parts) > 1 else None
    sub = parts[2] if len(parts) > 2 else None
    if name is not None and info.namespaced and namespace is None:
        raise route_not_found()
    if sub is not None and not (sub == "status" and info.status_subresource) and not (
        sub == "log" and info.plural == "pods"
    ) and not (sub == "scale" and info.scale_type is not None):
        raise route_not_found()
    return ResourcePath(info, namespace, name, sub, watch_prefix, version)


def request_key(name: str, kind: type) -> Any:
    """A key of a value kept on a request: aiohttp's typed ``RequestKey`` where it has one (3.14+), the
    plain name before (Airflow 3.0.6's constraints pin aiohttp 3.12, which keys request values by
    string)."""
    typed = getattr(web, "RequestKey", None)
    return typed(name, kind) if typed is not None else name


#: A request key the fault injection sets (faults.py, kind ``unterminated``): the stream it answers
#: ends by closing the connection, without HTTP's final chunk, as some gateways and proxies end them.
UNTERMINATED = request_key("tfjob_local_unterminated", bool)


#: A request key the fault injection sets (faults.py, kind ``stream_end``): the stream it answers ends
#: properly (with HTTP's final chunk) this many seconds after it started, whatever is still to come,
#: as a server or proxy that closes idle or long streams does.
ENDS_EARLY = request_key("tfjob_local_ends_early", float)


async def end_stream(request: web.Request, response: web.StreamResponse) -> None:
    """End a streamed answer (a watch, a followed log): with HTTP's final chunk, or, for a request the
    fault injection marked, by dropping the connection where that chunk would be."""
    if request.get(UNTERMINATED) and request.transport is not None:
        request.transport.abort()
        return
    await response.write_eof()


class OpenStreams:
    """The watch and log streams a server is serving, so that its stop ends them rather than waiting on
    them (aiohttp's shutdown waits up to its timeout for every handler still running).

    A stream registers only once its headers are sent, so a request that was on its way there when the
    stop began registers after `close()`: it is cancelled as it registers (a cancelled task stops at its
    next await), as a real API server going away ends every watch, however new."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closed = False

    def add(self, task: asyncio.Task[Any]) -> None:
        if self.closed:
            task.cancel()
            return
        self._tasks.add(task)

    def discard(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)

    def close(self) -> None:
        self.closed = True
        for task in list(self._tasks):
            task.cancel()
