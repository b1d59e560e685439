"""The asynchronous hook: the calls KubeflowJobHook makes, from the same descriptions (hooks/calls.py,
hooks/kueue.py), sent through kubernetes_asyncio; plus the watch and log streams (hooks/streams.py).

One ApiClient per (cluster config, running loop), see hooks/clients.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Hashable
from typing import Any, TypeVar

import aiohttp
from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook
from kubernetes_asyncio import client as async_client
from kubernetes_asyncio.client.exceptions import ApiException as AsyncApiException

from airflow_tfjob.constants import CONTAINER_NAME
from airflow_tfjob.hooks import calls, kueue, streams
from airflow_tfjob.hooks.calls import Call, Done, Request, Step, advance
from airflow_tfjob.hooks.clients import request_slot, retire_client, shared_client
from airflow_tfjob.hooks.common import events_field_selector, filter_events, job_pod_selector
from airflow_tfjob.hooks.exec_auth import ExecTokenRefresher, load_exec_config
from airflow_tfjob.hooks.retry import RetryPolicy
from airflow_tfjob.jobs.kinds import JobKind, as_kind

T = TypeVar("T")


def _api_error(
    status: int, reason: str | None, body: bytes | str | None, headers: Any = None
) -> AsyncApiException:
    exc = AsyncApiException(status=status, reason=reason or "")
    text: Any = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    exc.body = text  # the client stores the decoded Status text there too
    exc.headers = headers  # Retry-After is read from here by the retry policy
    return exc


class AsyncKubeflowJobHook(AsyncKubernetesHook):
    """Asynchronous access to Kubeflow jobs: the same calls as KubeflowJobHook, plus raw watch and log streams.

    All instances with the same cluster configuration share one kubernetes_asyncio ApiClient per running
    event loop (an ApiClient owns an aiohttp session bound to its loop, and costs about 0.8 MB), with a
    connection pool sized for many concurrent watch and log streams. Plain requests carry a total
    timeout; streams only a connect timeout and a read-inactivity timeout, so they are never cut after a
    fixed time as the cncf hooks' 60 s total timeout would do.
    """

    hook_name = "Kubeflow training job (async)"

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
        self._workload_version = kueue.workload_version(kueue.connection_of(self))
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

    async def connection_extra(self, name: str) -> Any:
        """A field of the connection's extra (None when absent), read with Airflow's async connection
        getter: what an integration keeps there (MultiKueue's worker map) without private access."""
        return await self._get_field(name)

    def with_connection_read(self) -> AsyncKubeflowJobHook:
        """This hook with its connection's extras read now, in the calling thread: a task's own thread.

        Its event loop then never reads them from a thread of its own (the cncf.kubernetes hook reads
        them through ``sync_to_async``). Before Airflow 3.1 a task's channel to its supervisor took one
        request at a time from one thread: ``airflow dags test``'s in-process channel removes it while
        it answers, so a read from another thread made the task's own next request fail.
        """
        if self._extras is None and self.conn_id:
            self._extras = dict(self.get_connection(self.conn_id).extra_dejson)
        return self

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
        """A new client, built off the event loop (a triggerer's loop serves every trigger).

        Loading a configuration reads files (the kubeconfig, token and CA files), parses YAML and may
        run an exec credential plugin; making the client builds an SSL context, which reads the CA
        certificates. Only fetching the connection stays on the loop, where Airflow serves it
        asynchronously; the rest runs on a worker thread: the configuration on a loop of its own
        there, the client with the calling loop as its running loop (its aiohttp session only records
        which loop it belongs to when it is made; it is used on that loop alone).
        """
        await self.get_conn_extras()
        loop = asyncio.get_running_loop()
        return await asyncio.to_thread(self._build_client_off_loop, loop)

    def _build_client_off_loop(self, loop: asyncio.AbstractEventLoop) -> async_client.ApiClient:
        configuration = asyncio.run(self._load_configuration())
        asyncio.events._set_running_loop(loop)
        try:
            return async_client.ApiClient(configuration=configuration)
        finally:
            asyncio.events._set_running_loop(None)

    async def _load_configuration(self) -> async_client.Configuration:
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
        return configuration

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

    # -- the executor of described calls (hooks/calls.py) ------------------------------------------

    async def _run(self, call: Call[T]) -> T:
        """Run a described call: each request under the retry policy, each pause slept."""
        step = advance(call)
        while not isinstance(step, Done):
            step = advance(call, step, await self._outcome(step))
        return step.value

    async def _outcome(self, step: Step) -> Any:
        """The raw answer of a request (or the error it ended with); None after a pause."""
        if not isinstance(step, Request):
            await asyncio.sleep(step)
            return None
        # A partial, not a lambda: tenacity awaits only what it sees is a coroutine function, and
        # would hand back a lambda's coroutine unawaited.
        attempt = functools.partial(self._read, step)
        try:
            return await step.policy(self.retry_policy).acall(step.what, step.retry, attempt, self.log)
        except Exception as exc:
            return exc

    async def _read(self, request: Request) -> bytes:
        """One attempt of a plain request: its whole answer (one of the loop's plain slots held)."""
        async with request_slot():
            resp = await self._request(request)
            try:
                return await resp.read()
            finally:
                resp.release()

    async def _request(
        self, request: Request, timeout: aiohttp.ClientTimeout | None = None
    ) -> aiohttp.ClientResponse:
        """Send one request through the shared client (auth, host, TLS) and return the raw response.

        Raises the client's ApiException for a non-2xx answer, with the server's Status as body and the
        answer's headers (Retry-After). A 401 retires the client and the request is sent once more on a
        client built from the configuration again (fresh credentials).
        """
        for reauthenticated in (False, True):
            api = await self.get_api_client()
            resp: aiohttp.ClientResponse = await api.call_api(
                request.path,
                request.method,
                _request_timeout=timeout or self._plain_timeout(),
                **request.client_args(),
            )
            if 200 <= resp.status <= 299:
                return resp
            try:
                data = await resp.read()
            finally:
                resp.release()
            if resp.status == 401 and not reauthenticated:
                self.log.warning("Kubernetes API %s: 401 Unauthorized; reloading credentials", request.what)
                await retire_client(await self.get_cluster_key(), api)
                continue
            raise _api_error(resp.status, resp.reason, data, resp.headers)
        raise AssertionError("unreachable")

    # -- jobs of any kubeflow.org/v1 kind (`kind`: a JobKind row or its name) ------------------------

    async def create_job(self, kind: JobKind | str, body: dict, namespace: str | None = None) -> dict:
        return await self._run(calls.create_job(kind, await self._ns(namespace), body))

    async def get_job(self, kind: JobKind | str, name: str, namespace: str | None = None) -> dict:
        return await self._run(calls.get_job(kind, await self._ns(namespace), name))

    async def find_job(self, kind: JobKind | str, name: str, namespace: str | None = None) -> dict | None:
        return await self._run(calls.find_job(kind, await self._ns(namespace), name))

    async def patch_job(self, kind: JobKind | str, name: str, namespace: str | None, patch: dict) -> dict:
        return await self._run(calls.patch_job(kind, await self._ns(namespace), name, patch))

    async def delete_job(
        self,
        kind: JobKind | str,
        name: str,
        namespace: str | None = None,
        propagation: str = "Foreground",
        grace_period_seconds: int | None = None,
    ) -> None:
        await self._run(
            calls.delete_job(kind, await self._ns(namespace), name, propagation, grace_period_seconds)
        )

    async def list_jobs(
        self, kind: JobKind | str, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict]:
        return await self._run(calls.list_jobs(kind, await self._ns(namespace), label_selector))

    async def wait_for_job_deletion(
        self, kind: JobKind | str, name: str, namespace: str | None, timeout: float
    ) -> bool:
        return await self._run(calls.wait_for_job_deletion(kind, await self._ns(namespace), name, timeout))

    # -- what the cluster serves and allows (the preflight's questions) ----------------------------

    async def served_resources(self, group_version: str) -> set[str] | None:
        """The resources (plurals) an API group version serves; None where the server does not serve it."""
        return await self._run(calls.served_resources(group_version))

    async def api_group(self, group: str) -> dict | None:
        """An API group's discovery document (served versions, the preferred one); None if not served."""
        return await self._run(calls.api_group(group))

    async def find_object(
        self, api_version: str, plural: str, name: str, namespace: str | None = None
    ) -> dict | None:
        """Any object by API version, plural and name (cluster-scoped without `namespace`); None if absent."""
        return await self._run(calls.find_object(api_version, plural, name, namespace))

    async def access_review(
        self, verb: str, group: str, resource: str, namespace: str | None = None, *, cluster_scoped: bool = False
    ) -> bool:
        """Whether the connection's user may `verb` `resource` of `group` (a SelfSubjectAccessReview), in
        `namespace` or, ``cluster_scoped``, at the cluster scope (a cluster-scoped resource)."""
        scope = None if cluster_scoped else await self._ns(namespace)
        return await self._run(calls.access_review(scope, verb, group, resource))

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
        return await self._run(
            calls.list_objects(kind, await self._ns(namespace), label_selector, field_selector)
        )

    async def list_job_pods(
        self,
        name: str,
        namespace: str | None = None,
        replica_type: str | None = None,
        replica_index: int | None = None,
        kind: JobKind | str = "TFJob",
    ) -> list[dict]:
        return await self._run(
            calls.list_job_pods(kind, await self._ns(namespace), name, replica_type, replica_index)
        )

    async def list_events(
        self, namespace: str | None = None, involved_name: str | None = None, involved_uid: str | None = None
    ) -> list[dict]:
        return await self._run(calls.list_events(await self._ns(namespace), involved_name, involved_uid))

    async def delete_pod(
        self, name: str, namespace: str | None = None, grace_period_seconds: int | None = None
    ) -> None:
        await self._run(calls.delete_pod(await self._ns(namespace), name, grace_period_seconds))

    async def delete_service(self, name: str, namespace: str | None = None) -> None:
        await self._run(calls.delete_service(await self._ns(namespace), name))

    # -- ConfigMaps (the deferred follows' log positions) -------------------------------------------

    async def find_config_map(self, name: str, namespace: str | None = None) -> dict | None:
        return await self._run(calls.get_config_map(await self._ns(namespace), name))

    async def merge_config_map_data(
        self,
        name: str,
        namespace: str | None,
        data: dict[str, str | None],
        labels: dict[str, str] | None = None,
    ) -> None:
        await self._run(calls.merge_config_map_data(await self._ns(namespace), name, data, labels))

    # -- logs ------------------------------------------------------------------------------------

    async def read_pod_log(
        self,
        pod: str,
        namespace: str | None = None,
        container: str = CONTAINER_NAME,
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str:
        return await self._run(
            calls.read_pod_log(await self._ns(namespace), pod, container, tail_lines, previous)
        )

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
        request = calls.pod_log_request(
            ns, pod, container, since_time=since_time, timestamps=timestamps, previous=previous, follow=follow
        )
        resp = await self._request(request, self.stream_timeout(read_timeout))
        async with contextlib.aclosing(streams.chunks(resp)) as body:
            async for chunk in body:
                yield chunk

    # -- watches (read by hooks/streams.py) --------------------------------------------------------

    async def watch_objects(
        self,
        kind: str,
        namespace: str | None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        allow_bookmarks: bool = True,
    ) -> AsyncGenerator[tuple[str, dict], None]:
        """One watch request: yields (type, object) until the server ends the stream.

        BOOKMARK events are yielded too (their object carries only the resourceVersion to resume from).
        An ERROR event raises WatchExpired for 410 (relist) or WatchError otherwise.
        Events are split from raw chunks, so an object of any size passes.
        `namespace` None is the connection's namespace.
        """
        ns = await self._ns(namespace)
        request = calls.watch_request(
            kind, ns, resource_version, label_selector, field_selector, timeout_seconds, allow_bookmarks
        )
        opening = self._request(request, self.stream_timeout(timeout_seconds + 30))
        async with contextlib.aclosing(streams.watch_events(opening)) as events:
            async for event in events:
                yield event

    # The named watches only choose the collection and selector; watch_objects does the rest (they stay
    # lazy: nothing is sent until the caller iterates).

    def watch_job(
        self,
        kind: JobKind | str,
        name: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[tuple[str, dict]]:
        selector = f"metadata.name={name}"
        return self.watch_objects(
            as_kind(kind).plural, namespace, resource_version, None, selector, timeout_seconds
        )

    def watch_jobs(
        self,
        kind: JobKind | str,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[tuple[str, dict]]:
        return self.watch_objects(
            as_kind(kind).plural, namespace, resource_version, label_selector, None, timeout_seconds
        )

    def watch_job_pods(
        self,
        name: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
        kind: JobKind | str = "TFJob",
    ) -> AsyncIterator[tuple[str, dict]]:
        selector = job_pod_selector(name, kind=as_kind(kind))
        return self.watch_objects("pods", namespace, resource_version, selector, None, timeout_seconds)

    async def watch_events(
        self,
        namespace: str | None = None,
        resource_version: str | None = None,
        involved_name: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[tuple[str, dict]]:
        selector = events_field_selector(involved_name, None)
        watch = self.watch_objects("events", namespace, resource_version, None, selector, timeout_seconds)
        async with contextlib.aclosing(watch) as events:
            async for etype, ev in events:
                if etype == "BOOKMARK" or filter_events([ev], involved_name, None):
                    yield etype, ev

    # -- Kueue (hooks/kueue.py): the job's Workloads, its queue position -------------------------

    async def list_workloads(self, namespace: str | None, job_uid: str) -> list[dict] | None:
        """The Kueue Workloads of the job with UID ``job_uid``; None when Kueue's API is not served."""
        return await self._run(
            kueue.list_workloads(await self._ns(namespace), job_uid, self._workload_version)
        )

    async def pending_workloads(self, namespace: str | None, local_queue: str) -> dict | None:
        """The LocalQueue's PendingWorkloadsSummary (positions); None when the visibility API gives none."""
        return await self._run(kueue.pending_workloads(await self._ns(namespace), local_queue))

    async def multikueue_cluster(self, name: str) -> dict | None:
        """MultiKueue's cluster object ``name`` (its ``Active`` condition); None when absent or refused."""
        return await self._run(kueue.multikueue_cluster(name))


#: How long a hook made for one trigger is handed to the later triggers of the same connection. A new
#: one after that reads the connection again, so an edited connection reaches new triggers within it.
SHARED_HOOK_TTL = 60.0
# Per running loop (a hook's client belongs to its loop): connection kwargs -> (made at, hook).
_HOOKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], tuple[float, Any]]] = (
    weakref.WeakKeyDictionary()
)


def shared_hook(**kwargs: Any) -> AsyncKubeflowJobHook:
    """The running loop's hook for these connection arguments, shared by the triggers that ask within
    :data:`SHARED_HOOK_TTL` of each other.

    A triggerer waits on thousands of jobs of a few connections: one hook each would hold a hook, its
    connection's extras and its logger per job, and load the connection once per job (a thread hop
    and a parse). A hook keeps nothing per job (its client is the loop's shared one already), so the
    triggers of one connection can share it; each keeps the one it got for its whole run.
    """
    loop = asyncio.get_running_loop()
    hooks = _HOOKS.setdefault(loop, {})
    key = tuple(sorted(kwargs.items()))
    now = loop.time()
    found = hooks.get(key)
    if found is not None and now - found[0] < SHARED_HOOK_TTL:
        hook: AsyncKubeflowJobHook = found[1]
        return hook
    hook = AsyncKubeflowJobHook(**kwargs)
    hooks[key] = (now, hook)
    return hook
