"""`GET /openapi/v2`, `/openapi/v3` and `/openapi/v3/<group-version>` (documents built in openapi.py).

Content negotiation as kube-openapi's handler: JSON when the Accept header allows it (or is absent),
406 when it asks only for what is not served (protobuf). A v3 document requested with its current
`hash` may be cached for good (`Cache-Control: public, immutable`), as on a real server; the documents
are built once per process, off the event loop (the first build imports the kubernetes client's models).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web

from airflow_tfjob.local.apiserver import openapi
from airflow_tfjob.local.apiserver.request import JSON_TYPE, route_not_found
from airflow_tfjob.local.model.resources import ApiError

_JSON_ACCEPTS = ("application/json", "application/*", "*/*")


def _accepts_json(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    if not accept.strip():
        return True
    media = [part.split(";")[0].strip().lower() for part in accept.split(",")]
    return any(m in _JSON_ACCEPTS for m in media)


async def serve_openapi(request: web.Request, parts: list[str], groups: frozenset[str] | None = None) -> web.Response:
    """`parts` is the path split on "/", starting with "openapi"; `groups`: the API groups served (None: all)."""
    build: Callable[[], bytes | None]
    if parts == ["openapi", "v2"]:
        build = lambda: openapi.v2_document(groups)  # noqa: E731
    elif parts == ["openapi", "v3"]:
        build = lambda: openapi.v3_root(groups)  # noqa: E731
    elif len(parts) > 2 and parts[1] == "v3" and openapi.served("/".join(parts[2:]), groups):
        gv = "/".join(parts[2:])
        build = lambda: openapi.v3_document(gv)  # noqa: E731
    else:
        raise route_not_found()
    if not _accepts_json(request):
        raise ApiError(406, "NotAcceptable", f"only {JSON_TYPE} is served, not {request.headers.get('Accept')}")
    body = await asyncio.get_running_loop().run_in_executor(None, build)
    if body is None:
        raise route_not_found()
    digest = openapi.document_hash(body)
    headers = {"ETag": f'"{digest}"', "Vary": "Accept"}
    if request.query.get("hash") == digest:
        headers["Cache-Control"] = "public, immutable"
    else:
        headers["Cache-Control"] = "no-cache, private"
    return web.Response(body=body, content_type=JSON_TYPE, headers=headers)
