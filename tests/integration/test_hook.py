"""KubeflowJobHook and AsyncKubeflowJobHook against the local cluster over HTTP (official clients, real server)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from watch_support import tfjob_manifest, unique, wait_until

from airflow_tfjob.hooks import clients as clients_mod
from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook
from airflow_tfjob.hooks.common import api_status
from airflow_tfjob.hooks.streams import iter_lines
from airflow_tfjob.hooks.sync import KubeflowJobHook
from airflow_tfjob.hooks.watching import WatchExpired

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]


def _poll(predicate: Callable[[], Any], timeout: float = 20.0) -> Any:
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(0.05)


def _managed_job(name: str) -> dict[str, Any]:
    """A job the local controller reconciles (pods and events), whose container the test feeds."""
    return tfjob_manifest(name, external=False)


def _write_log(cluster: Any, ns: str, pod: str, lines: list[bytes], close: bool = True) -> None:
    """Stand in for a container run: the API server serves these lines from its pod log buffers."""

    def write() -> None:
        run = cluster.podlogs.start_instance(ns, pod, "tensorflow")
        for line in lines:
            run.append(line)
        if close:
            run.close()

    cluster.call(write)


def test_sync_crud_pods_events_logs(k8s_conn: str, local_cluster: Any) -> None:
    hook = KubeflowJobHook(conn_id=k8s_conn)
    name = unique("hook")
    created = hook.create_job("TFJob", _managed_job(name), "default")
    assert created["metadata"]["name"] == name and created["metadata"]["uid"]
    assert hook.get_job("TFJob", name, "default")["metadata"]["uid"] == created["metadata"]["uid"]
    assert hook.find_job("TFJob", unique("missing"), "default") is None
    with pytest.raises(Exception) as err:
        hook.get_job("TFJob", unique("missing"), "default")
    assert api_status(err.value) == 404

    patched = hook.patch_job("TFJob", name, "default", {"metadata": {"labels": {"team": "a"}}})
    assert patched["metadata"]["labels"]["team"] == "a"
    assert [
        j["metadata"]["name"] for j in hook.list_jobs("TFJob", "default", "team=a") if j["metadata"]["name"] == name
    ]
    assert all(j["metadata"]["name"] != name for j in hook.list_jobs("TFJob", "default", "team=b"))

    pods = _poll(lambda: hook.list_job_pods(name, "default"))
    assert [p["metadata"]["name"] for p in pods] == [f"{name}-worker-0"]
    assert hook.list_job_pods(name, "default", replica_type="Worker", replica_index=0)
    assert hook.list_job_pods(name, "default", replica_type="PS") == []

    events = _poll(lambda: hook.list_events("default", involved_name=name))
    assert any(e["reason"] == "SuccessfulCreatePod" for e in events)
    assert all(e["involvedObject"]["name"] == name for e in events)

    pod = f"{name}-worker-0"
    _write_log(local_cluster, "default", pod, [b"one", b"two", b"three"])
    assert hook.read_pod_log(pod, "default") == "one\ntwo\nthree\n"
    assert hook.read_pod_log(pod, "default", tail_lines=1) == "three\n"

    hook.delete_job("TFJob", name, "default")
    hook.delete_job("TFJob", name, "default")  # a second delete (404) is not an error
    assert hook.wait_for_job_deletion("TFJob", name, "default", timeout=30)
    assert hook.list_job_pods(name, "default") == [] or _poll(lambda: not hook.list_job_pods(name, "default"))


async def test_async_crud_and_watch(k8s_conn: str) -> None:
    hook = AsyncKubeflowJobHook(conn_id=k8s_conn)
    name = unique("ahook")
    created = await hook.create_job("TFJob", _managed_job(name))  # namespace from the connection
    rv = created["metadata"]["resourceVersion"]
    assert (await hook.get_job("TFJob", name, "default"))["metadata"]["uid"] == created["metadata"]["uid"]
    assert await hook.find_job("TFJob", unique("missing"), "default") is None

    seen: list[tuple[str, dict]] = []

    async def watch() -> None:
        async for etype, obj in hook.watch_job("TFJob", name, "default", resource_version=rv, timeout_seconds=30):
            if etype == "BOOKMARK":
                continue
            seen.append((etype, obj))
            if obj["metadata"].get("labels", {}).get("step") == "2":
                return

    task = asyncio.create_task(watch())
    await hook.patch_job("TFJob", name, "default", {"metadata": {"labels": {"step": "1"}}})
    await hook.patch_job("TFJob", name, "default", {"metadata": {"labels": {"step": "2"}}})
    await asyncio.wait_for(task, 20)
    steps = [o["metadata"].get("labels", {}).get("step") for _, o in seen]
    assert steps[-2:] == ["1", "2"] and all(o["metadata"]["name"] == name for _, o in seen)

    items, list_rv = await hook.list_objects("tfjobs", "default")
    assert list_rv and any(i["metadata"]["name"] == name for i in items)
    assert [j["metadata"]["name"] for j in await hook.list_jobs("TFJob", "default", "step=2")] == [name]

    pods = await _apoll(lambda: hook.list_job_pods(name, "default"))
    assert pods[0]["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "worker"
    events = await _apoll(lambda: hook.list_events("default", involved_name=name))
    assert any(e["reason"] == "SuccessfulCreatePod" for e in events)

    await hook.delete_job("TFJob", name, "default")
    assert await hook.wait_for_job_deletion("TFJob", name, "default", timeout=30)


async def _apoll(fn: Callable[[], Any], timeout: float = 20.0) -> Any:
    end = time.monotonic() + timeout
    while True:
        value = await fn()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(0.05)


async def test_watch_from_expired_version_raises_watch_expired(k8s_conn: str) -> None:
    from airflow_tfjob.local import LocalCluster

    # A cluster of its own with a short history, so that an old resourceVersion really expires.
    with LocalCluster(history_limit=5, controller=False, runner=False) as small:
        hook = AsyncKubeflowJobHook(conn_id=k8s_conn, config_file=str(small.kubeconfig_path))
        name = unique("expire")
        first = await hook.create_job("TFJob", tfjob_manifest(name), "default")
        for i in range(10):
            await hook.patch_job("TFJob", name, "default", {"metadata": {"labels": {"i": str(i)}}})
        with pytest.raises(WatchExpired) as err:
            async for _ in hook.watch_jobs("TFJob",
                "default", resource_version=first["metadata"]["resourceVersion"], timeout_seconds=5
            ):
                pass
        assert err.value.code == 410
        await hook.delete_job("TFJob", name, "default")


async def test_stream_pod_log_big_line_bytes_and_since_time(k8s_conn: str, local_cluster: Any) -> None:
    hook = AsyncKubeflowJobHook(conn_id=k8s_conn)
    name = unique("biglog")
    await hook.create_job("TFJob", _managed_job(name), "default")
    pod = f"{name}-worker-0"
    await _apoll(lambda: hook.list_job_pods(name, "default"))
    big = b"x" * (1024 * 1024)
    _write_log(local_cluster, "default", pod, [b"first", big, b"bad \xff\xfe bytes", b"last"])
    chunks = [c async for c in hook.stream_pod_log(pod, "default")]
    lines = [line async for line in iter_lines(_aiter(chunks))]
    assert len(lines) == 4
    stamps = [line.split(b" ", 1)[0] for line in lines]
    assert all(s.endswith(b"Z") for s in stamps)
    assert lines[1].split(b" ", 1)[1] == big and lines[2].endswith(b"bad \xff\xfe bytes")
    # sinceTime is whole seconds: from the last line's second, at least that line comes back.
    since = stamps[3].decode()[:19] + "Z"
    again = b"".join([c async for c in hook.stream_pod_log(pod, "default", since_time=since)])
    assert again.endswith(b" last\n")
    text = await hook.read_pod_log(pod, "default", tail_lines=1)
    assert text == "last\n"
    await hook.delete_job("TFJob", name, "default")


async def _aiter(items: list[bytes]) -> Any:
    for item in items:
        yield item


async def test_watch_event_larger_than_aiohttp_line_limit(k8s_conn: str) -> None:
    hook = AsyncKubeflowJobHook(conn_id=k8s_conn)
    name = unique("bigobj")
    body = tfjob_manifest(name)
    created = await hook.create_job("TFJob", body, "default")
    big = "y" * (2560 * 1024)  # above the 2 MiB read buffer kubernetes_asyncio gives aiohttp

    async def first_modified() -> dict:
        async for etype, obj in hook.watch_job("TFJob",
            name, "default", resource_version=created["metadata"]["resourceVersion"], timeout_seconds=30
        ):
            if etype == "MODIFIED":
                return obj
        raise AssertionError("watch ended without the change")

    task = asyncio.create_task(first_modified())
    await hook.patch_job("TFJob", name, "default", {"metadata": {"annotations": {"big": big}}})
    obj = await asyncio.wait_for(task, 30)
    assert obj["metadata"]["annotations"]["big"] == big
    await hook.delete_job("TFJob", name, "default")


async def test_client_shared_per_cluster_and_loop(k8s_conn: str) -> None:
    a, b = AsyncKubeflowJobHook(conn_id=k8s_conn), AsyncKubeflowJobHook(conn_id=k8s_conn)
    api = await a.get_api_client()
    assert api is await b.get_api_client()
    assert api.configuration.connection_pool_maxsize == 1000
    assert await a.get_cluster_key() == await b.get_cluster_key()
    other = AsyncKubeflowJobHook(conn_id=k8s_conn, cluster_context="elsewhere")
    assert await other.get_cluster_key() != await a.get_cluster_key()


def test_client_closed_when_its_loop_ends(k8s_conn: str) -> None:
    clients: list[Any] = []

    async def use() -> None:
        hook = AsyncKubeflowJobHook(conn_id=k8s_conn)
        await hook.list_jobs("TFJob", "default")
        clients.append(await hook.get_api_client())

    asyncio.run(use())
    asyncio.run(use())
    first, second = clients
    assert first is not second  # a fresh loop gets its own client (aiohttp sessions are loop-bound)
    assert first.rest_client.pool_manager.closed and second.rest_client.pool_manager.closed
    assert not clients_mod._SHARED


def test_plain_requests_in_flight_are_bounded_per_loop(k8s_conn: str) -> None:
    """200 reads at once (a triggerer starting its triggers) share at most PLAIN_REQUESTS_IN_FLIGHT
    connections: each one opened stays idle in the pool for the keep-alive, so the pool shows them all."""
    pooled: list[int] = []

    async def burst() -> None:
        hook = AsyncKubeflowJobHook(conn_id=k8s_conn)
        found = await asyncio.gather(*(hook.find_job("TFJob", unique("absent"), "default") for _ in range(200)))
        assert found == [None] * 200
        connector = (await hook.get_api_client()).rest_client.pool_manager.connector
        pooled.append(sum(len(idle) for idle in connector._conns.values()))

    asyncio.run(burst())  # a fresh loop: a fresh client whose pool only this burst used
    assert 1 <= pooled[0] <= clients_mod.PLAIN_REQUESTS_IN_FLIGHT


async def test_stream_outlives_a_short_total_timeout(k8s_conn: str, local_cluster: Any) -> None:
    """A follow stream has no total timeout: it keeps delivering past the hook's request timeout."""
    hook = AsyncKubeflowJobHook(conn_id=k8s_conn, request_timeout=1.0)
    name = unique("longlog")
    await hook.create_job("TFJob", _managed_job(name), "default")
    pod = f"{name}-worker-0"
    await _apoll(lambda: hook.list_job_pods(name, "default"))
    _write_log(local_cluster, "default", pod, [b"start"], close=False)
    got: list[bytes] = []

    async def read() -> None:
        async for line in iter_lines(hook.stream_pod_log(pod, "default")):
            got.append(line)
            if line.endswith(b" end"):
                return

    task = asyncio.create_task(read())
    await wait_until(lambda: got)  # the stream is open: the first line was read
    await asyncio.sleep(2.5)  # the time under test: longer than request_timeout, the stream must stay open

    def finish() -> None:
        run = local_cluster.podlogs.current("default", pod, "tensorflow")
        run.append(b"end")
        run.close()

    local_cluster.call(finish)
    await asyncio.wait_for(task, 10)
    assert [g.split(b" ", 1)[1] for g in got] == [b"start", b"end"]
    await hook.delete_job("TFJob", name, "default")
