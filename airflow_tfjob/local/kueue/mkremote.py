"""The manager's client of one MultiKueue worker (Kueue v0.19.2 multikueue/remote_client.go): reads,
writes and watches of the worker's objects over its API, with the credentials of the kubeconfig the
MultiKueueCluster names.

Why over HTTP rather than into the worker's store: a worker is another cluster. Going through its API
server keeps what MultiKueue meets there real: the worker's admission (Kueue's webhook suspends the
copy, Trainer's checks the TrainJob), its conflicts, and its absence once it is lost."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from airflow_tfjob.local.model.resources import RESOURCES, JsonDict

_TIMEOUT = 10.0
#: What reaching a worker can raise besides RemoteError: the worker is not (or no longer) there.
UNREACHABLE: tuple[type[BaseException], ...] = (aiohttp.ClientError, OSError, TimeoutError, ssl.SSLError)


class RemoteError(Exception):
    """A worker's API answered with an error status."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class Endpoint:
    """What the manager reaches a worker with: the server URL, a bearer token, the CA to trust."""

    def __init__(self, server: str, token: str | None, ca_pem: bytes | None) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.ca_pem = ca_pem

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def same(self, other: Endpoint) -> bool:
        """Whether ``other`` reaches the worker as this one does (the client config unchanged)."""
        return (self.server, self.token, self.ca_pem) == (other.server, other.token, other.ca_pem)

    def ssl_context(self) -> ssl.SSLContext | bool:
        """The CA to trust for an HTTPS server; True (the system's) without one in the kubeconfig."""
        if self.ca_pem is None:
            return True
        return ssl.create_default_context(cadata=self.ca_pem.decode())


def path(rtype: str, namespace: str | None, name: str | None = None, sub: str | None = None) -> str:
    """The API path of a kind's collection or object (`/apis/<group>/<version>/namespaces/<ns>/<plural>`)."""
    info = RESOURCES[rtype]
    base = f"/apis/{info.group}/{info.version}" if info.group else f"/api/{info.version}"
    where = f"/namespaces/{namespace}" if info.namespaced and namespace else ""
    return base + where + f"/{rtype}" + (f"/{name}" if name else "") + (f"/{sub}" if sub else "")


class Remote:
    """One worker's API. A session is held while the worker is connected (`close` when it is not)."""

    def __init__(self, name: str, endpoint: Endpoint) -> None:
        self.name = name
        self.endpoint = endpoint
        self._session: aiohttp.ClientSession | None = None
        self._ssl = endpoint.ssl_context()

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=_TIMEOUT),
                                                  headers=self.endpoint.headers())
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(self, method: str, url: str, body: JsonDict | None = None,
                    params: dict[str, str] | None = None) -> JsonDict:
        async with self._open().request(method, self.endpoint.server + url, json=body, params=params,
                                        ssl=self._ssl) as reply:
            text = await reply.text()
            if reply.status >= 400:
                try:
                    message = str(json.loads(text).get("message", text))
                except (ValueError, AttributeError):
                    message = text
                raise RemoteError(reply.status, message)
            return dict(json.loads(text)) if text else {}

    async def get(self, rtype: str, namespace: str | None, name: str) -> JsonDict | None:
        """The object, None when the worker has none of that name."""
        try:
            return await self._call("GET", path(rtype, namespace, name))
        except RemoteError as exc:
            if exc.code == 404:
                return None
            raise

    async def list(self, rtype: str, label_selector: str) -> list[JsonDict]:
        """The objects of `rtype` in all namespaces that `label_selector` selects."""
        found = await self._call("GET", path(rtype, None), params={"labelSelector": label_selector})
        return [dict(item) for item in found.get("items") or ()]

    async def create(self, rtype: str, namespace: str | None, obj: JsonDict) -> JsonDict:
        return await self._call("POST", path(rtype, namespace), obj)

    async def replace(self, rtype: str, namespace: str | None, obj: JsonDict) -> JsonDict:
        return await self._call("PUT", path(rtype, namespace, obj["metadata"]["name"]), obj)

    async def delete(self, rtype: str, namespace: str | None, name: str) -> None:
        """Deleted (dependents collected in the background, as a client's default delete); gone is fine."""
        try:
            await self._call("DELETE", path(rtype, namespace, name))
        except RemoteError as exc:
            if exc.code != 404:
                raise

    async def watch(self, rtype: str) -> AsyncIterator[tuple[str, JsonDict]]:
        """(event type, object) of every change of `rtype` in all namespaces, until the stream ends."""
        timeout = aiohttp.ClientTimeout(total=None, connect=_TIMEOUT)
        async with aiohttp.ClientSession(timeout=timeout, headers=self.endpoint.headers()) as session, \
                session.get(self.endpoint.server + path(rtype, None), params={"watch": "true"},
                            ssl=self._ssl) as reply:
            if reply.status != 200:
                raise RemoteError(reply.status, await reply.text())
            async for line in reply.content:
                if not line.strip():
                    continue
                event: Any = json.loads(line)
                if isinstance(event, dict) and isinstance(event.get("object"), dict):
                    yield str(event.get("type")), event["object"]
