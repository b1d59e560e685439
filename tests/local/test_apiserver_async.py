"""The local API server through `kubernetes_asyncio` (what the triggerer and the async hook use)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.apiserver.server import ApiServer
from airflow_tfjob.local.node.podlogs import PodLogs
from airflow_tfjob.local.store.core import Store

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "tfjobs"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(controller=False, runner=False, history_limit=20, bookmark_interval=0.3) as c:
        yield c


@pytest.fixture
async def api(cluster: LocalCluster) -> AsyncIterator[client.ApiClient]:
    api_client = await config.new_client_from_config(str(cluster.kubeconfig_path))
    try:
        yield api_client
    finally:
        await api_client.close()


def tfjob(name: str) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": name}, "spec": {
        "tfReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [
            {"name": "tensorflow", "image": "tf:2"}]}}}}}}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def test_custom_object_verbs(api: client.ApiClient) -> None:
    crd = client.CustomObjectsApi(api)
    name = unique("aj")
    created = await crd.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, tfjob(name))
    assert created["metadata"]["generation"] == 1
    got = await crd.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
    assert got["metadata"]["uid"] == created["metadata"]["uid"]

    # kubernetes_asyncio's default content type for a custom-object PATCH is json-patch, whatever the body:
    # a dict body must be refused, as a real API server refuses it.
    with pytest.raises(ApiException) as err:
        await crd.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name, {"metadata": {"labels": {"a": "b"}}})
    assert err.value.status == 400 and json.loads(err.value.body)["kind"] == "Status"
    patched = await crd.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, name, {"metadata": {"labels": {"a": "b"}}},
        _content_type="application/merge-patch+json")
    assert patched["metadata"]["labels"] == {"a": "b"}
    patched = await crd.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, name, [{"op": "replace", "path": "/metadata/labels/a", "value": "c"}])
    assert patched["metadata"]["labels"] == {"a": "c"}
    status = await crd.patch_namespaced_custom_object_status(
        GROUP, VERSION, "default", PLURAL, name, {"status": {"conditions": []}},
        _content_type="application/merge-patch+json")
    assert status["status"] == {"conditions": []}
    current = await crd.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
    current["spec"]["runPolicy"] = {"cleanPodPolicy": "All"}
    replaced = await crd.replace_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name, current)
    assert replaced["metadata"]["generation"] == 2 and replaced["spec"]["runPolicy"]["suspend"] is False
    with pytest.raises(ApiException) as err:
        await crd.replace_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name, current)
    assert err.value.status == 409
    listed = await crd.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, label_selector="a=c")
    assert [i["metadata"]["name"] for i in listed["items"]] == [name]
    await crd.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name,
                                              body=client.V1DeleteOptions(propagation_policy="Foreground"))
    with pytest.raises(ApiException) as err:
        await crd.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
    assert err.value.status == 404


async def test_admission_errors(api: client.ApiClient) -> None:
    crd = client.CustomObjectsApi(api)
    job = tfjob("9nine")
    with pytest.raises(ApiException) as err:
        await crd.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, job)
    assert err.value.status == 403 and "denied the request" in json.loads(err.value.body)["message"]
    del job["spec"]["tfReplicaSpecs"]
    job["metadata"]["name"] = "nine"
    with pytest.raises(ApiException) as err:
        await crd.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, job)
    assert err.value.status == 422 and json.loads(err.value.body)["reason"] == "Invalid"


async def test_core_verbs_and_watch(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    name = unique("ap")
    rv = (await core.list_namespaced_pod("default")).metadata.resource_version
    await core.create_namespaced_pod("default", {"metadata": {"name": name, "labels": {"t": name}}, "spec": {
        "containers": [{"name": "tensorflow", "image": "tf:2"}]}})
    await core.patch_namespaced_pod(name, "default", {"metadata": {"labels": {"x": "1"}}})
    await core.delete_namespaced_pod(name, "default")
    seen = []
    w = watch.Watch()
    # kubernetes_asyncio sends watch=True (capital T)
    async with w.stream(core.list_namespaced_pod, "default", resource_version=rv, label_selector=f"t={name}",
                        timeout_seconds=2) as stream:
        async for event in stream:
            seen.append((event["type"], event["object"].metadata.name))
    assert seen == [("ADDED", name), ("MODIFIED", name), ("DELETED", name)]


async def test_watch_expired_and_bookmarks(api: client.ApiClient, cluster: LocalCluster) -> None:
    core = client.CoreV1Api(api)
    old = (await core.list_namespaced_config_map("default")).metadata.resource_version
    run = unique("cm")
    for i in range(25):
        await core.create_namespaced_config_map("default", {"metadata": {"name": f"{run}-{i}"}})
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_config_map("default", resource_version=old)
    assert err.value.status == 410
    w = watch.Watch()
    with pytest.raises(ApiException) as err:
        async with w.stream(core.list_namespaced_config_map, "default", resource_version=old,
                            timeout_seconds=2) as stream:
            async for _ in stream:
                pass
    assert err.value.status == 410
    # bookmarks, raw: the stream from now on carries only BOOKMARK events
    now = str(cluster.call(lambda: cluster.store.resource_version))
    resp = await core.list_namespaced_config_map("default", watch=True, allow_watch_bookmarks=True,
                                                 resource_version=now, timeout_seconds=1, _preload_content=False)
    lines = [json.loads(line) for line in (await resp.read()).splitlines()]
    resp.release()
    assert lines and {e["type"] for e in lines} == {"BOOKMARK"}


async def test_pod_log_follow_stream(api: client.ApiClient, cluster: LocalCluster) -> None:
    core = client.CoreV1Api(api)
    name = unique("lg")
    await core.create_namespaced_pod("default", {"metadata": {"name": name}, "spec": {
        "containers": [{"name": "tensorflow", "image": "tf:2"}]}})

    def start() -> None:
        run = cluster.podlogs.start_instance("default", name, "tensorflow")
        run.append(b"first")

    cluster.call(start)
    text = await core.read_namespaced_pod_log(name, "default", container="tensorflow")
    assert text == "first\n"
    resp = await core.read_namespaced_pod_log(name, "default", follow=True, timestamps=True,
                                              _preload_content=False)

    def more() -> None:
        run = cluster.podlogs.current("default", name, "tensorflow")
        assert run is not None
        run.append(b"second " + b"x" * 200_000)  # a long line arrives in several chunks
        run.close()

    asyncio.get_running_loop().call_later(0.2, lambda: cluster.call(more))
    body = b""
    async for chunk in resp.content.iter_chunked(4096):
        body += chunk
    resp.release()
    lines = body.decode().splitlines()
    assert [line.split(" ", 1)[1][:6] for line in lines] == ["first", "second"]
    assert len(lines[1]) > 200_000


# ---- a stop never waits on a request (LocalCluster.lose_worker stops a worker's server under the manager's
# watches; aiohttp's shutdown waits up to its timeout for every handler still running, a minute by default)


class _Gate:
    """A middleware holding the requests for `path` until released, so that a test can start a stop while
    a request is on its way to its handler."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.arrived = asyncio.Event()
        self.release = asyncio.Event()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path == self.path:
            self.arrived.set()
            await self.release.wait()
        return await handler(request)


async def _held_request(server: ApiServer, gate: _Gate, query: str = "") -> asyncio.Task[Any]:
    async def get() -> None:
        async with aiohttp.ClientSession() as session:
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(f"{server.url}{gate.path}{query}") as response:
                    await response.read()

    request = asyncio.create_task(get())
    await asyncio.wait_for(gate.arrived.wait(), 30)  # bound: the request reaching the server
    return request


async def test_a_watch_that_starts_while_the_server_stops_is_ended_not_waited_for() -> None:
    """The server's streams are ended by its stop, including one whose headers go out after the stop
    began: it is ended as it registers. With the server's grace for requests in flight at a minute, a
    stop that waited on it would not return within the bound."""
    gate = _Gate("/api/v1/namespaces/default/pods")
    server = ApiServer(Store(), PodLogs(), middlewares=[gate.middleware], shutdown_timeout=60.0)
    await server.start()
    request = await _held_request(server, gate, "?watch=1")
    stopping = asyncio.create_task(server.stop())
    await asyncio.sleep(0)  # the stop runs up to its first wait: its streams are closed by then
    gate.release.set()
    try:
        await asyncio.wait_for(stopping, 20)  # bound: far below the minute a waited-for watch would take
    finally:
        request.cancel()
        await asyncio.gather(request, return_exceptions=True)


async def test_a_request_in_flight_holds_the_stop_only_for_the_servers_grace() -> None:
    """A request that is not a stream gets the default grace (2 s) to finish, then its connection is cut."""
    gate = _Gate("/api/v1/namespaces/default/configmaps")
    server = ApiServer(Store(), PodLogs(), middlewares=[gate.middleware])
    await server.start()
    request = await _held_request(server, gate)
    try:
        await asyncio.wait_for(server.stop(), 20)  # bound: far below aiohttp's default minute
        await asyncio.wait_for(request, 20)  # its connection was cut: the client is answered, not left hanging
    finally:
        request.cancel()
        await asyncio.gather(request, return_exceptions=True)
