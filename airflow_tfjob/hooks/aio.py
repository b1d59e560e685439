"""The asynchronous hook: the same calls as TFJobHook, plus raw watch and log streams (hooks/streams.py).

One ApiClient per (cluster config, running loop), see hooks/clients.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Hashable
from typing import Any

import aiohttp
from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook
from kubernetes_asyncio import client as async_client
from kubernetes_asyncio.client.exceptions import ApiException as AsyncApiException

from airflow_tfjob.hooks import kueue as kueue_calls
from airflow_tfjob.hooks import streams
from airflow_tfjob.hooks.clients import retire_client, shared_client
from airflow_tfjob.hooks.common import (
    COLLECTIONS,
    MERGE_PATCH,
    event_sort_key,
    events_field_selector,
    filter_events,
    job_path,
    job_pod_selector,
    poll_delay,
)
from airflow_tfjob.hooks.exec_auth import ExecTokenRefresher, load_exec_config
from airflow_tfjob.hooks.retry import Kind, RetryPolicy
from airflow_tfjob.kinds import TFJOB, JobKind, as_kind


def _api_error(
    status: int, reason: str | None, body: bytes | str | None, headers: Any = None
) -> AsyncApiException:
    exc = AsyncApiException(status=status, reason=reason or "")
    text: Any = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    exc.body = text  # the client stores the decoded Status text there too
    exc.headers = headers  # Retry-After is read from here by the retry policy
    return exc


class AsyncTFJobHook(AsyncKubernetesHook):
    """Asynchronous access to Kubeflow jobs: the same calls as TFJobHook, plus raw watch and log streams.

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
        configuration = async_client.Configuration()
        # An exec-plugin kubeconfig is loaded here, its plugin run once, its loader kept to run it
        # again before the token expires; the cncf hook's loading (every other case) would discard it.
        loader = await load_exec_config(
            configuration,
            in_cluster=self._coalesce_param(self.in_cluster, await self._get_field("in_cluster")),
            context=self._coalesce_param(self.cluster_context, await self._get_field("cluster_context")),
            config_dict=self.config_dict,
            kube_config_path=await self._get_field("kube_config_path"),
            kube_config=await self._get_field("kube_config"),
        )
        if loader is not None:
            configuration.refresh_api_key_hook = ExecTokenRefresher(loader)
        else:
            self.client_configuration, self._config_loaded = configuration, False
            await self._load_config()
            assert self.client_configuration is not None
            configuration = self.client_configuration
        if await self._disable_verify_ssl():
            configuration.verify_ssl = False
        configuration.connection_pool_maxsize = self.pool_maxsize
        return async_client.ApiClient(configuration=configuration)

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

    # -- jobs of any kubeflow.org/v1 kind (`kind`: a JobKind row or its name) ------------------------

    async def create_job(self, kind: JobKind | str, body: dict, namespace: str | None = None) -> dict:
        row, ns = as_kind(kind), await self._ns(namespace)
        result: dict = await self._json(
            "POST",
            job_path(row, ns),
            body=body,
            call=f"create {row.kind} {ns}/{_name_of(body)}",
            kind="create",
        )
        return result

    async def get_job(self, kind: JobKind | str, name: str, namespace: str | None = None) -> dict:
        row, ns = as_kind(kind), await self._ns(namespace)
        result: dict = await self._json("GET", job_path(row, ns, name), call=f"get {row.kind} {ns}/{name}")
        return result

    async def find_job(self, kind: JobKind | str, name: str, namespace: str | None = None) -> dict | None:
        try:
            return await self.get_job(kind, name, namespace)
        except AsyncApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def patch_job(self, kind: JobKind | str, name: str, namespace: str | None, patch: dict) -> dict:
        row, ns = as_kind(kind), await self._ns(namespace)
        result: dict = await self._json(
            "PATCH",
            job_path(row, ns, name),
            body=patch,
            content_type=MERGE_PATCH,
            call=f"patch {row.kind} {ns}/{name}",
            kind="write",
        )
        return result

    async def delete_job(
        self,
        kind: JobKind | str,
        name: str,
        namespace: str | None = None,
        propagation: str = "Foreground",
        grace_period_seconds: int | None = None,
    ) -> None:
        row, ns = as_kind(kind), await self._ns(namespace)
        await self._delete(
            job_path(row, ns, name), f"delete {row.kind} {ns}/{name}", grace_period_seconds, propagation
        )

    async def list_jobs(
        self, kind: JobKind | str, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict]:
        items, _ = await self.list_objects(as_kind(kind).plural, namespace, label_selector=label_selector)
        return items

    async def wait_for_job_deletion(
        self, kind: JobKind | str, name: str, namespace: str | None, timeout: float
    ) -> bool:
        deadline = time.monotonic() + timeout
        while await self.find_job(kind, name, namespace) is not None:
            delay = poll_delay(deadline)
            if delay is None:
                return False
            await asyncio.sleep(delay)
        return True

    # -- TFJobs: the names the provider had before other kinds (the generic calls with TFJOB) --------

    async def create_tfjob(self, body: dict, namespace: str | None = None) -> dict:
        return await self.create_job(TFJOB, body, namespace)

    async def get_tfjob(self, name: str, namespace: str | None = None) -> dict:
        return await self.get_job(TFJOB, name, namespace)

    async def find_tfjob(self, name: str, namespace: str | None = None) -> dict | None:
        return await self.find_job(TFJOB, name, namespace)

    async def patch_tfjob(self, name: str, namespace: str | None, patch: dict) -> dict:
        return await self.patch_job(TFJOB, name, namespace, patch)

    async def delete_tfjob(
        self,
        name: str,
        namespace: str | None = None,
        propagation: str = "Foreground",
        grace_period_seconds: int | None = None,
    ) -> None:
        await self.delete_job(TFJOB, name, namespace, propagation, grace_period_seconds)

    async def list_tfjobs(
        self, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict]:
        return await self.list_jobs(TFJOB, namespace, label_selector)

    async def wait_for_tfjob_deletion(self, name: str, namespace: str | None, timeout: float) -> bool:
        return await self.wait_for_job_deletion(TFJOB, name, namespace, timeout)

    # -- collections, pods, events ---------------------------------------------------------------

    async def list_objects(
        self,
        kind: str,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[dict], str]:
        """LIST of a job kind's plural ("tfjobs", "pytorchjobs"...), "pods" or "events": (items, the list's resourceVersion to watch from).

        `namespace` None is the connection's namespace.
        """
        query: list[tuple[str, Any]] = []
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        ns = await self._ns(namespace)
        data = await self._json(
            "GET", COLLECTIONS[kind].format(namespace=ns), query=query, call=f"list {kind} in {ns}"
        )
        return list(data.get("items") or []), str((data.get("metadata") or {}).get("resourceVersion") or "")

    async def list_job_pods(
        self,
        name: str,
        namespace: str | None = None,
        replica_type: str | None = None,
        replica_index: int | None = None,
        kind: JobKind | str = "TFJob",
    ) -> list[dict]:
        items, _ = await self.list_objects(
            "pods",
            namespace,
            label_selector=job_pod_selector(name, replica_type, replica_index, as_kind(kind)),
        )
        return items

    async def list_events(
        self, namespace: str | None = None, involved_name: str | None = None, involved_uid: str | None = None
    ) -> list[dict]:
        items, _ = await self.list_objects(
            "events", namespace, field_selector=events_field_selector(involved_name, involved_uid)
        )
        return sorted(filter_events(items, involved_name, involved_uid), key=event_sort_key)

    async def delete_pod(
        self, name: str, namespace: str | None = None, grace_period_seconds: int | None = None
    ) -> None:
        await self._delete_core("pods", name, namespace, grace_period_seconds)

    async def delete_service(self, name: str, namespace: str | None = None) -> None:
        await self._delete_core("services", name, namespace, None)

    async def _delete_core(self, plural: str, name: str, namespace: str | None, grace: int | None) -> None:
        ns = await self._ns(namespace)
        await self._delete(
            f"/api/v1/namespaces/{ns}/{plural}/{name}", f"delete {plural[:-1]} {ns}/{name}", grace
        )

    async def _delete(self, path: str, call: str, grace: int | None, propagation: str | None = None) -> None:
        # A retried delete whose first attempt went through meets a 404: the object is gone either way.
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation is not None:
            body["propagationPolicy"] = propagation
        if grace is not None:
            body["gracePeriodSeconds"] = grace
        try:
            await self._json("DELETE", path, body=body, call=call, kind="write")
        except AsyncApiException as exc:
            if exc.status != 404:
                raise

    # -- logs and watches (hooks/streams.py) -----------------------------------------------------

    read_pod_log = streams.read_pod_log
    stream_pod_log = streams.stream_pod_log
    watch_objects = streams.watch_objects
    watch_job = streams.watch_job
    watch_jobs = streams.watch_jobs
    watch_tfjob = streams.watch_tfjob
    watch_tfjobs = streams.watch_tfjobs
    watch_job_pods = streams.watch_job_pods
    watch_events = streams.watch_events

    # -- Kueue (hooks/kueue.py): the job's Workloads, its queue position -------------------------

    list_workloads = kueue_calls.list_workloads
    pending_workloads = kueue_calls.pending_workloads


def _name_of(body: dict) -> str:
    return str((body.get("metadata") or {}).get("name") or "")
