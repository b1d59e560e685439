"""Bearer-token authentication for the local API server (aiohttp middleware).

With authentication on, every request but the public health and version endpoints must carry
``Authorization: Bearer <token>`` with a token from `credential.TokenAuthority`; otherwise the answer is
kube-apiserver's 401 Unauthorized Status. (A real server with anonymous auth enabled would treat a
request without any token as ``system:anonymous`` and usually answer 403; the local cluster behaves as
``--anonymous-auth=false``, the setting of most managed clusters' public endpoints.) The authenticated
user is stored on the request for the RBAC middleware.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from airflow_tfjob.local.apiserver.request import request_key
from airflow_tfjob.local.credential import TokenAuthority
from airflow_tfjob.local.model.resources import ApiError

USER_KEY = request_key("tfjob_local_user", str)
PUBLIC_PATHS = frozenset(("/healthz", "/readyz", "/livez", "/version"))  # system:public-info-viewer

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def unauthorized() -> web.Response:
    body = ApiError(401, "Unauthorized", "Unauthorized").status()
    return web.json_response(body, status=401)


class TokenAuthenticator:
    def __init__(self, authority: TokenAuthority) -> None:
        self.authority = authority
        self.rejected = 0  # requests answered 401 so far

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in PUBLIC_PATHS:
            return await handler(request)
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        user = self.authority.verify(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            self.rejected += 1
            return unauthorized()
        request[USER_KEY] = user
        return await handler(request)
