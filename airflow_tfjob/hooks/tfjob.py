"""API access for TFJobs, their pods, events and logs, through the cncf.kubernetes connection.

`TFJobHook` is synchronous (operator, sensor); `AsyncTFJobHook` is used by the follow core in both the
synchronous operator (inside `asyncio.run`) and the triggerer. Neither interprets what it reads: status
interpretation, log de-duplication and diagnostics live in their own modules.

Objects are returned as plain dicts in API form (camelCase), read from the raw JSON, so every caller sees
what `kubectl get -o json` would show whichever client fetched it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator, Callable, Hashable
from typing import Any, TypeVar

import aiohttp
from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook, KubernetesHook
from kubernetes import client as sync_client
from kubernetes.client.rest import ApiException as SyncApiException
from kubernetes_asyncio import client as async_client
from kubernetes_asyncio.client.exceptions import ApiException as AsyncApiException

from airflow_tfjob.constants import (
    CONTAINER_NAME,
    GROUP,
    LABEL_JOB_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    PLURAL,
    VERSION,
)
from airflow_tfjob.hooks.clients import ExecTokenRefresher, retire_client, shared_client
from airflow_tfjob.hooks.clients import close_shared_clients as close_shared_clients
from airflow_tfjob.hooks.retry import Kind, RetryPolicy, api_status_code

MERGE_PATCH = "application/merge-patch+json"
T = TypeVar("T")

# Paths of the collections the hooks read. Kept here so that list and watch build the same URL.
_COLLECTIONS = {
    "tfjobs": f"/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/{PLURAL}",
    "pods": "/api/v1/namespaces/{namespace}/pods",
    "events": "/api/v1/namespaces/{namespace}/events",
}


class WatchError(Exception):
    """A watch stream reported an error event (other than 410) or was refused."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"watch failed: {code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message


class WatchExpired(WatchError):
    """410 Gone: the resourceVersion is older than the server's history; the caller must relist."""


def job_pod_selector(name: str, replica_type: str | None = None, replica_index: int | None = None) -> str:
    """Label selector of a TFJob's pods (optionally one replica type / index), as the operator labels them."""
    parts = [f"{LABEL_JOB_NAME}={name}"]
    if replica_type:
        parts.append(f"{LABEL_REPLICA_TYPE}={replica_type.lower()}")
    if replica_index is not None:
        parts.append(f"{LABEL_REPLICA_INDEX}={replica_index}")
    return ",".join(parts)


def _events_field_selector(involved_name: str | None, involved_uid: str | None) -> str | None:
    parts = []
    if involved_name:
        parts.append(f"involvedObject.name={involved_name}")
    if involved_uid:
        parts.append(f"involvedObject.uid={involved_uid}")
    return ",".join(parts) or None


def _filter_events(events: list[dict], involved_name: str | None, involved_uid: str | None) -> list[dict]:
    # A server that ignores an unsupported field selector must not leak other objects' events to us.
    out = []
    for ev in events:
        inv = ev.get("involvedObject") or {}
        if involved_name and inv.get("name") != involved_name:
            continue
        if involved_uid and inv.get("uid") != involved_uid:
            continue
        out.append(ev)
    return out


def _poll_delay(deadline: float) -> float | None:
    """How long to sleep before looking again (at most 0.5 s, never past `deadline`); None once it has passed."""
    remaining = deadline - time.monotonic()
    return None if remaining <= 0 else min(0.5, remaining)


def _event_sort_key(ev: dict) -> str:
    return str(
        ev.get("lastTimestamp")
        or ev.get("eventTime")
        or ev.get("firstTimestamp")
        or (ev.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


class TFJobHook(KubernetesHook):
    """Synchronous TFJob API access over the `kubernetes_default`-style connection.

    Connection handling (kube_config_path, kube_config, in_cluster, cluster_context, namespace extras;
    explicit arguments override them) is KubernetesHook's. Every call runs under the hook's
    :class:`~airflow_tfjob.hooks.retry.RetryPolicy` (``api_retry_timeout`` seconds in all); a 401
    rebuilds the clients from the configuration once (exec-plugin and token-file credentials are read
    again) before the call is retried.
    """

    hook_name = "Kubeflow TFJob"

    def __init__(self, *args: Any, api_retry_timeout: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_policy = RetryPolicy.from_timeout(api_retry_timeout)

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.get_namespace() or self.DEFAULT_NAMESPACE

    def _raw_json(self, resp: Any) -> Any:
        return json.loads(resp.data)

    def _call(self, call: str, kind: Kind, fn: Callable[[], T]) -> T:
        """Run one API call under the retry policy; `fn` looks its client up anew on every attempt."""

        def attempt() -> T:
            try:
                return fn()
            except SyncApiException as exc:
                if exc.status != 401:
                    raise
                self.log.warning("Kubernetes API %s: 401 Unauthorized; reloading credentials", call)
                self.reset_clients()
                return fn()

        return self.retry_policy.call(call, kind, attempt, self.log)

    def reset_clients(self) -> None:
        """Forget the built clients: the next call builds them from the configuration again."""
        for attr in (
            "api_client",
            "core_v1_client",
            "custom_object_client",
            "batch_v1_client",
            "apps_v1_client",
        ):
            self.__dict__.pop(attr, None)

    def create_tfjob(self, body: dict, namespace: str | None = None) -> dict:
        """Create a TFJob; an ambiguous failure raises retry.AmbiguousCreate (the caller reads back)."""
        ns = self._ns(namespace)
        name = (body.get("metadata") or {}).get("name")
        result: dict = self._call(
            f"create TFJob {ns}/{name}",
            "create",
            lambda: self.custom_object_client.create_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, body
            ),
        )
        return result

    def get_tfjob(self, name: str, namespace: str | None = None) -> dict:
        """The TFJob; raises the client's ApiException (status 404) when it does not exist."""
        ns = self._ns(namespace)
        result: dict = self._call(
            f"get TFJob {ns}/{name}",
            "read",
            lambda: self.custom_object_client.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name),
        )
        return result

    def find_tfjob(self, name: str, namespace: str | None = None) -> dict | None:
        try:
            return self.get_tfjob(name, namespace)
        except SyncApiException as exc:
            if exc.status == 404:
                return None
            raise

    def patch_tfjob(self, name: str, namespace: str | None, patch: dict) -> dict:
        """JSON merge patch (RFC 7386): the one patch type a custom resource accepts for a dict body.

        Retried like a read: a merge patch sets absolute values, so sending it twice changes nothing.
        """
        ns = self._ns(namespace)
        result: dict = self._call(
            f"patch TFJob {ns}/{name}",
            "write",
            lambda: self.custom_object_client.patch_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, name, patch, _content_type=MERGE_PATCH
            ),
        )
        return result

    def delete_tfjob(
        self,
        name: str,
        namespace: str | None = None,
        propagation: str = "Foreground",
        grace_period_seconds: int | None = None,
    ) -> None:
        ns = self._ns(namespace)
        body = sync_client.V1DeleteOptions(
            propagation_policy=propagation, grace_period_seconds=grace_period_seconds
        )
        self._ignore_404(
            f"delete TFJob {ns}/{name}",
            lambda: self.custom_object_client.delete_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, name, body=body
            ),
        )

    def _ignore_404(self, call: str, fn: Callable[[], Any]) -> None:
        # A retried delete whose first attempt went through meets a 404: the object is gone either way.
        try:
            self._call(call, "write", fn)
        except SyncApiException as exc:
            if exc.status != 404:
                raise

    def list_tfjobs(self, namespace: str | None = None, label_selector: str | None = None) -> list[dict]:
        ns = self._ns(namespace)
        result = self._call(
            f"list TFJobs in {ns}",
            "read",
            lambda: self.custom_object_client.list_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, label_selector=label_selector or ""
            ),
        )
        return list(result.get("items") or [])

    def list_job_pods(
        self,
        name: str,
        namespace: str | None = None,
        replica_type: str | None = None,
        replica_index: int | None = None,
    ) -> list[dict]:
        ns = self._ns(namespace)
        resp = self._call(
            f"list pods of TFJob {ns}/{name}",
            "read",
            lambda: self.core_v1_client.list_namespaced_pod(
                ns, label_selector=job_pod_selector(name, replica_type, replica_index), _preload_content=False
            ),
        )
        return list(self._raw_json(resp).get("items") or [])

    def list_events(
        self, namespace: str | None = None, involved_name: str | None = None, involved_uid: str | None = None
    ) -> list[dict]:
        """Events of one object (by name and/or uid), oldest first."""
        ns = self._ns(namespace)
        resp = self._call(
            f"list events of {ns}/{involved_name or involved_uid}",
            "read",
            lambda: self.core_v1_client.list_namespaced_event(
                ns, field_selector=_events_field_selector(involved_name, involved_uid), _preload_content=False
            ),
        )
        events = _filter_events(self._raw_json(resp).get("items") or [], involved_name, involved_uid)
        return sorted(events, key=_event_sort_key)

    def read_pod_log(
        self,
        pod: str,
        namespace: str | None = None,
        container: str = CONTAINER_NAME,
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str:
        ns = self._ns(namespace)
        kwargs: dict[str, Any] = {"container": container, "previous": previous, "_preload_content": False}
        if tail_lines is not None:
            kwargs["tail_lines"] = tail_lines
        resp = self._call(
            f"read log of pod {ns}/{pod}",
            "read",
            lambda: self.core_v1_client.read_namespaced_pod_log(pod, ns, **kwargs),
        )
        return bytes(resp.data).decode("utf-8", errors="replace")

    # -- pods and services (cleanup, TensorBoard) --------------------------------------------------

    def create_core_object(self, body: dict, namespace: str | None = None) -> dict:
        """Create a Pod or a Service. Repeated on any transient failure: callers take 409 as "exists"."""
        ns = self._ns(namespace)
        kind = body["kind"]
        create = {
            "Pod": lambda: self.core_v1_client.create_namespaced_pod(ns, body, _preload_content=False),
            "Service": lambda: self.core_v1_client.create_namespaced_service(
                ns, body, _preload_content=False
            ),
        }[kind]
        resp = self._call(f"create {kind} {ns}/{body['metadata']['name']}", "write", create)
        result: dict = self._raw_json(resp)
        return result

    def get_service(self, name: str, namespace: str | None = None) -> dict | None:
        ns = self._ns(namespace)
        try:
            resp = self._call(
                f"get Service {ns}/{name}",
                "read",
                lambda: self.core_v1_client.read_namespaced_service(name, ns, _preload_content=False),
            )
        except SyncApiException as exc:
            if exc.status == 404:
                return None
            raise
        result: dict = self._raw_json(resp)
        return result

    def delete_pod(
        self, name: str, namespace: str | None = None, grace_period_seconds: int | None = None
    ) -> None:
        ns = self._ns(namespace)
        kwargs: dict[str, Any] = {}
        if grace_period_seconds is not None:
            kwargs["grace_period_seconds"] = grace_period_seconds
        self._ignore_404(
            f"delete Pod {ns}/{name}", lambda: self.core_v1_client.delete_namespaced_pod(name, ns, **kwargs)
        )

    def delete_service(self, name: str, namespace: str | None = None) -> None:
        ns = self._ns(namespace)
        self._ignore_404(
            f"delete Service {ns}/{name}", lambda: self.core_v1_client.delete_namespaced_service(name, ns)
        )

    def wait_for_tfjob_deletion(self, name: str, namespace: str | None, timeout: float) -> bool:
        """Poll until the TFJob is gone (foreground deletion waits for its pods); False on timeout."""
        deadline = time.monotonic() + timeout
        while self.find_tfjob(name, namespace) is not None:
            delay = _poll_delay(deadline)
            if delay is None:
                return False
            time.sleep(delay)
        return True


# ---------------------------------------------------------------------------------------------------
# Async side: one ApiClient per (cluster config, running loop), see hooks/clients.py.


def _api_error(
    status: int, reason: str | None, body: bytes | str | None, headers: Any = None
) -> AsyncApiException:
    exc = AsyncApiException(status=status, reason=reason or "")
    text: Any = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    exc.body = text  # the client stores the decoded Status text there too
    exc.headers = headers  # Retry-After is read from here by the retry policy
    return exc


async def iter_lines(chunks: AsyncIterator[bytes], max_line: int | None = None) -> AsyncIterator[bytes]:
    """Split a byte stream into lines (without the newline) without aiohttp's line-length limit.

    A final fragment without newline is yielded too. With `max_line`, a line longer than that is yielded
    in pieces of `max_line` bytes, so memory stays bounded whatever a replica prints.
    """
    buf = bytearray()
    async for chunk in chunks:
        buf += chunk
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            yield bytes(buf[start:nl])
            start = nl + 1
        if start:
            del buf[:start]
        while max_line is not None and len(buf) > max_line:
            yield bytes(buf[:max_line])
            del buf[:max_line]
    if buf:
        yield bytes(buf)


class AsyncTFJobHook(AsyncKubernetesHook):
    """Asynchronous TFJob API access: the same calls as TFJobHook, plus raw watch and log streams.

    All instances with the same cluster configuration share one kubernetes_asyncio ApiClient per running
    event loop (an ApiClient owns an aiohttp session bound to its loop, and costs about 0.8 MB), with a
    connection pool sized for many concurrent watch and log streams. Plain requests carry a total
    timeout; streams only a connect timeout and a read-inactivity timeout, so they are never cut after a
    fixed time as the cncf hooks' 60 s total timeout would do.
    """

    hook_name = "Kubeflow TFJob (async)"

    def __init__(
        self,
        *args: Any,
        pool_maxsize: int = 1000,
        request_timeout: float = 60.0,
        connect_timeout: float = 15.0,
        api_retry_timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.retry_policy = RetryPolicy.from_timeout(api_retry_timeout)
        self.pool_maxsize = pool_maxsize
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout

    # -- configuration and the shared client -----------------------------------------------------

    async def _get_field(self, field_name: str) -> Any:
        # The parent's async config loader reads kube_config_path from the connection only; an explicit
        # `config_file` argument must win, as it does for the synchronous hook.
        if field_name == "kube_config_path" and self.config_file:
            return self.config_file
        return await super()._get_field(field_name)

    async def get_cluster_key(self) -> Hashable:
        """Identity of the cluster configuration: hooks with equal keys may share a client and a watch."""
        extras = await self.get_conn_extras()
        material = json.dumps(
            {
                "conn_id": self.conn_id,
                "extras": extras,
                "config_file": self.config_file,
                "context": self.cluster_context,
                "in_cluster": self.in_cluster,
                "config_dict": self.config_dict,
                "disable_verify_ssl": self.disable_verify_ssl,
            },
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(material.encode()).hexdigest()

    async def get_api_client(self) -> async_client.ApiClient:
        """The shared client for this cluster configuration and the running loop; callers never close it."""
        return await shared_client(await self.get_cluster_key(), self._build_client)

    async def _build_client(self) -> async_client.ApiClient:
        self.client_configuration = async_client.Configuration()
        self._config_loaded = False
        await self._load_config()
        configuration = self.client_configuration
        assert configuration is not None
        if self._is_exec_auth:
            # Loaded once more to keep the loader, which knows how to run the plugin again.
            loader = await self._exec_loader(configuration)
            if loader is not None:
                configuration.refresh_api_key_hook = ExecTokenRefresher(loader)
        if await self._disable_verify_ssl():
            configuration.verify_ssl = False
        configuration.connection_pool_maxsize = self.pool_maxsize
        return async_client.ApiClient(configuration=configuration)

    async def _exec_loader(self, configuration: async_client.Configuration) -> Any:
        from kubernetes_asyncio import config as async_config

        context = self.cluster_context or await self._get_field("cluster_context")
        path = await self._get_field("kube_config_path")
        if path:
            return await async_config.load_kube_config(
                config_file=path, context=context, client_configuration=configuration, persist_config=False
            )
        if self.config_dict:
            return await async_config.load_kube_config_from_dict(
                self.config_dict, context=context, client_configuration=configuration
            )
        return None

    async def _disable_verify_ssl(self) -> bool:
        if self.disable_verify_ssl is not None:
            return bool(self.disable_verify_ssl)
        value = await self._get_field("disable_verify_ssl")
        return str(value).lower() in ("true", "1") if value is not None else False

    async def get_namespace_async(self) -> str:
        return str(await self._get_field("namespace") or self.DEFAULT_NAMESPACE)

    async def _ns(self, namespace: str | None) -> str:
        return namespace or await self.get_namespace_async()

    def _plain_timeout(self) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=self.request_timeout, sock_connect=self.connect_timeout)

    def stream_timeout(self, sock_read: float | None) -> aiohttp.ClientTimeout:
        """No total limit: a stream lives as long as its data flows; `sock_read` catches dead peers."""
        return aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout, sock_read=sock_read)

    async def _request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        """Send one request through the shared client (auth, host, TLS) and return the raw response.

        Raises the client's ApiException for a non-2xx answer, with the server's Status as body and the
        answer's headers (Retry-After). A 401 retires the client and the request is sent once more on a
        client built from the configuration again (fresh credentials).
        """
        for reauthenticated in (False, True):
            api = await self.get_api_client()
            headers = {"Accept": "application/json, */*"}
            if content_type:
                headers["Content-Type"] = content_type
            resp: aiohttp.ClientResponse = await api.call_api(
                path,
                method,
                query_params=query or [],
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout or self._plain_timeout(),
            )
            if 200 <= resp.status <= 299:
                return resp
            try:
                data = await resp.read()
            finally:
                resp.release()
            if resp.status == 401 and not reauthenticated:
                self.log.warning(
                    "Kubernetes API %s %s: 401 Unauthorized; reloading credentials", method, path
                )
                await retire_client(await self.get_cluster_key(), api)
                continue
            raise _api_error(resp.status, resp.reason, data, resp.headers)
        raise AssertionError("unreachable")

    async def _json(self, method: str, path: str, *, call: str, kind: Kind = "read", **kwargs: Any) -> Any:
        """One plain request under the retry policy, its JSON answer decoded."""

        async def attempt() -> Any:
            resp = await self._request(method, path, **kwargs)
            try:
                return json.loads(await resp.read())
            finally:
                resp.release()

        return await self.retry_policy.acall(call, kind, attempt, self.log)

    def _tfjob_path(self, namespace: str, name: str | None = None) -> str:
        path = _COLLECTIONS["tfjobs"].format(namespace=namespace)
        return f"{path}/{name}" if name else path

    # -- TFJobs ----------------------------------------------------------------------------------

    async def create_tfjob(self, body: dict, namespace: str | None = None) -> dict:
        ns = await self._ns(namespace)
        result: dict = await self._json(
            "POST", self._tfjob_path(ns), body=body, call=f"create TFJob {ns}/{_name_of(body)}", kind="create"
        )
        return result

    async def get_tfjob(self, name: str, namespace: str | None = None) -> dict:
        ns = await self._ns(namespace)
        result: dict = await self._json("GET", self._tfjob_path(ns, name), call=f"get TFJob {ns}/{name}")
        return result

    async def find_tfjob(self, name: str, namespace: str | None = None) -> dict | None:
        try:
            return await self.get_tfjob(name, namespace)
        except AsyncApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def patch_tfjob(self, name: str, namespace: str | None, patch: dict) -> dict:
        ns = await self._ns(namespace)
        result: dict = await self._json(
            "PATCH",
            self._tfjob_path(ns, name),
            body=patch,
            content_type=MERGE_PATCH,
            call=f"patch TFJob {ns}/{name}",
            kind="write",
        )
        return result

    async def delete_tfjob(
        self,
        name: str,
        namespace: str | None = None,
        propagation: str = "Foreground",
        grace_period_seconds: int | None = None,
    ) -> None:
        ns = await self._ns(namespace)
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        try:
            await self._json(
                "DELETE",
                self._tfjob_path(ns, name),
                body=body,
                call=f"delete TFJob {ns}/{name}",
                kind="write",
            )
        except AsyncApiException as exc:
            if exc.status != 404:
                raise

    async def list_objects(
        self,
        kind: str,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[dict], str]:
        """LIST of "tfjobs", "pods" or "events": (items, the list's resourceVersion to watch from).

        `namespace` None is the connection's namespace.
        """
        query: list[tuple[str, Any]] = []
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        ns = await self._ns(namespace)
        data = await self._json(
            "GET", _COLLECTIONS[kind].format(namespace=ns), query=query, call=f"list {kind} in {ns}"
        )
        return list(data.get("items") or []), str((data.get("metadata") or {}).get("resourceVersion") or "")

    async def list_tfjobs(
        self, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict]:
        items, _ = await self.list_objects("tfjobs", namespace, label_selector=label_selector)
        return items

    async def list_job_pods(
        self,
        name: str,
        namespace: str | None = None,
        replica_type: str | None = None,
        replica_index: int | None = None,
    ) -> list[dict]:
        items, _ = await self.list_objects(
            "pods", namespace, label_selector=job_pod_selector(name, replica_type, replica_index)
        )
        return items

    async def list_events(
        self, namespace: str | None = None, involved_name: str | None = None, involved_uid: str | None = None
    ) -> list[dict]:
        items, _ = await self.list_objects(
            "events", namespace, field_selector=_events_field_selector(involved_name, involved_uid)
        )
        return sorted(_filter_events(items, involved_name, involved_uid), key=_event_sort_key)

    async def delete_pod(
        self, name: str, namespace: str | None = None, grace_period_seconds: int | None = None
    ) -> None:
        await self._delete_core("pods", name, namespace, grace_period_seconds)

    async def delete_service(self, name: str, namespace: str | None = None) -> None:
        await self._delete_core("services", name, namespace, None)

    async def _delete_core(self, plural: str, name: str, namespace: str | None, grace: int | None) -> None:
        ns = await self._ns(namespace)
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace is not None:
            body["gracePeriodSeconds"] = grace
        try:
            await self._json(
                "DELETE",
                f"/api/v1/namespaces/{ns}/{plural}/{name}",
                body=body,
                call=f"delete {plural[:-1]} {ns}/{name}",
                kind="write",
            )
        except AsyncApiException as exc:
            if exc.status != 404:
                raise

    async def wait_for_tfjob_deletion(self, name: str, namespace: str | None, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while await self.find_tfjob(name, namespace) is not None:
            delay = _poll_delay(deadline)
            if delay is None:
                return False
            await asyncio.sleep(delay)
        return True

    # -- logs ------------------------------------------------------------------------------------

    def _log_path(self, namespace: str, pod: str) -> str:
        return f"/api/v1/namespaces/{namespace}/pods/{pod}/log"

    async def read_pod_log(
        self,
        pod: str,
        namespace: str | None = None,
        container: str = CONTAINER_NAME,
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str:
        ns = await self._ns(namespace)
        query: list[tuple[str, Any]] = [("container", container)]
        if tail_lines is not None:
            query.append(("tailLines", tail_lines))
        if previous:
            query.append(("previous", "true"))

        async def attempt() -> str:
            resp = await self._request("GET", self._log_path(ns, pod), query=query)
            try:
                return (await resp.read()).decode("utf-8", errors="replace")
            finally:
                resp.release()

        return await self.retry_policy.acall(f"read log of pod {ns}/{pod}", "read", attempt, self.log)

    async def stream_pod_log(
        self,
        pod: str,
        namespace: str | None = None,
        container: str = CONTAINER_NAME,
        since_time: str | None = None,
        timestamps: bool = True,
        previous: bool = False,
        follow: bool = True,
        read_timeout: float | None = 300.0,
    ) -> AsyncIterator[bytes]:
        """Raw chunks of a container's log, following it (unless `follow=False` or `previous`).

        `since_time` is RFC 3339; the server truncates it to whole seconds, so callers de-duplicate.
        `read_timeout` ends a stream that stays silent that long (a dead peer looks the same as a quiet
        container): callers resume from their cursor, which loses nothing.
        """
        ns = await self._ns(namespace)
        query: list[tuple[str, Any]] = [("container", container)]
        if follow and not previous:
            query.append(("follow", "true"))
        if timestamps:
            query.append(("timestamps", "true"))
        if since_time:
            query.append(("sinceTime", since_time))
        if previous:
            query.append(("previous", "true"))
        resp = await self._request(
            "GET", self._log_path(ns, pod), query=query, timeout=self.stream_timeout(read_timeout)
        )
        try:
            async for chunk in resp.content.iter_any():
                yield chunk
        finally:
            resp.close()

    # -- watches ---------------------------------------------------------------------------------

    async def watch_objects(
        self,
        kind: str,
        namespace: str | None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[tuple[str, dict]]:
        """One watch request: yields (type, object) until the server ends the stream.

        BOOKMARK events are yielded too (their object carries only the resourceVersion to resume from).
        An ERROR event raises WatchExpired for 410 (relist) or WatchError otherwise.
        Events are split from raw chunks, so an object of any size passes.
        `namespace` None is the connection's namespace.
        """
        query: list[tuple[str, Any]] = [("watch", "true"), ("timeoutSeconds", timeout_seconds)]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if allow_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        try:
            resp = await self._request(
                "GET",
                _COLLECTIONS[kind].format(namespace=await self._ns(namespace)),
                query=query,
                timeout=self.stream_timeout(timeout_seconds + 30),
            )
        except AsyncApiException as exc:
            status = _status_of(exc)
            cls = WatchExpired if exc.status == 410 else WatchError
            raise cls(exc.status or 0, status.get("reason", ""), status.get("message", str(exc))) from exc
        try:
            async for line in iter_lines(resp.content.iter_any()):
                if not line.strip():
                    continue
                event = json.loads(line)
                etype = event.get("type", "")
                obj = event.get("object") or {}
                if etype == "ERROR":
                    code = int(obj.get("code") or 0)
                    cls = WatchExpired if code == 410 else WatchError
                    raise cls(code, str(obj.get("reason", "")), str(obj.get("message", "")))
                yield etype, obj
        finally:
            resp.close()

    # The named watches only choose the collection and selector; watch_objects does the rest (they stay
    # lazy: nothing is sent until the caller iterates).

    def watch_tfjob(
        self,
        name: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[tuple[str, dict]]:
        return self.watch_objects(
            "tfjobs",
            namespace,
            resource_version,
            field_selector=f"metadata.name={name}",
            timeout_seconds=timeout_seconds,
        )

    def watch_tfjobs(
        self,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[tuple[str, dict]]:
        return self.watch_objects(
            "tfjobs", namespace, resource_version, label_selector, timeout_seconds=timeout_seconds
        )

    def watch_job_pods(
        self,
        name: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[tuple[str, dict]]:
        return self.watch_objects(
            "pods",
            namespace,
            resource_version,
            label_selector=job_pod_selector(name),
            timeout_seconds=timeout_seconds,
        )

    async def watch_events(
        self,
        namespace: str | None = None,
        resource_version: str | None = None,
        involved_name: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[tuple[str, dict]]:
        async for etype, ev in self.watch_objects(
            "events",
            namespace,
            resource_version,
            field_selector=_events_field_selector(involved_name, None),
            timeout_seconds=timeout_seconds,
        ):
            if etype == "BOOKMARK" or _filter_events([ev], involved_name, None):
                yield etype, ev


def _name_of(body: dict) -> str:
    return str((body.get("metadata") or {}).get("name") or "")


def _status_of(exc: AsyncApiException) -> dict:
    try:
        data = json.loads(exc.body or "")
    except (TypeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def api_status(exc: BaseException) -> int | None:
    """HTTP status of an exception raised by either hook, None if it is not an API error.

    Also the last status of a call that kept failing under the retry policy (retry.ApiCallFailed).
    """
    return api_status_code(exc)
