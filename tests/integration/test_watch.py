"""The shared TFJob watch against the local cluster over HTTP: fan-out, resume, reconnect, relist."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from watch_support import (
    Api,
    TcpProxy,
    cluster_role,
    running_status,
    succeeded_status,
    tfjob_manifest,
    unique,
    wait_until,
)

from airflow_tfjob.hooks import jobwatch as watch
from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook
from airflow_tfjob.jobs.kinds import TFJOB

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]


def _conditions(obj: dict[str, Any] | None) -> list[str]:
    if obj is None:
        return []
    return [c["type"] for c in (obj.get("status") or {}).get("conditions", []) if c.get("status") == "True"]


async def _next_matching(sub: watch.Subscription, predicate: Any, timeout: float = 15.0) -> Any:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        value = await sub.next(timeout=max(end - loop.time(), 0.01))
        if predicate(value):
            return value


@pytest.fixture
def hook(k8s_conn: str) -> AsyncKubeflowJobHook:
    # Overrides the shared synchronous `hook`: these tests drive the async side.
    return AsyncKubeflowJobHook(conn_id=k8s_conn)


async def test_current_state_then_updates_then_deletion(api: Api, hook: AsyncKubeflowJobHook) -> None:
    ns = await api.namespace(unique("w"))
    name = unique("job")
    await api.create(ns, tfjob_manifest(name))
    async with watch.shared_watch(hook, ns, kind=TFJOB).subscribe(name) as sub:
        first = await sub.next(timeout=10)
        assert first is not None and first["metadata"]["name"] == name
        await api.set_status(ns, name, running_status(name, ns))
        running = await _next_matching(sub, lambda o: "Running" in _conditions(o))
        assert running["status"]["replicaStatuses"] == {"Worker": {"active": 1}}
        await api.set_status(ns, name, succeeded_status(name, ns))
        done = await _next_matching(sub, lambda o: "Succeeded" in _conditions(o))
        assert done["status"]["completionTime"] == "2025-01-01T00:01:00Z"
        await api.delete(ns, name)
        assert await _next_matching(sub, lambda o: o is None) is None


async def test_absent_job_is_none_until_created(api: Api, hook: AsyncKubeflowJobHook) -> None:
    ns = await api.namespace(unique("w"))
    name = unique("later")
    async with watch.shared_watch(hook, ns, kind=TFJOB).subscribe(name) as sub:
        assert await sub.next(timeout=10) is None
        assert sub.synced
        await api.create(ns, tfjob_manifest(name))
        created = await _next_matching(sub, lambda o: o is not None)
        assert created["metadata"]["name"] == name


async def test_subscribers_share_one_stream_and_leave_independently(api: Api, hook: AsyncKubeflowJobHook) -> None:
    ns = await api.namespace(unique("w"))
    names = [unique("a"), unique("b"), unique("c")]
    for n in names:
        await api.create(ns, tfjob_manifest(n))
    handle = watch.shared_watch(hook, ns, kind=TFJOB)

    async def crashing_consumer() -> None:
        async with watch.shared_watch(AsyncKubeflowJobHook(conn_id=hook.conn_id), ns, kind=TFJOB).subscribe(
            names[2]
        ) as sub:
            await sub.next(timeout=10)
            raise RuntimeError("subscriber bug")

    async with handle.subscribe(names[0]) as sub_a:
        async with watch.shared_watch(AsyncKubeflowJobHook(conn_id=hook.conn_id), ns, kind=TFJOB).subscribe(
            names[1]
        ) as sub_b:
            assert (await sub_a.next(timeout=10))["metadata"]["name"] == names[0]
            assert (await sub_b.next(timeout=10))["metadata"]["name"] == names[1]
            with pytest.raises(RuntimeError, match="subscriber bug"):
                await crashing_consumer()
            await api.set_status(ns, names[1], running_status(names[1], ns))
            await _next_matching(sub_b, lambda o: "Running" in _conditions(o))
        # b left; a still follows its job on the same stream.
        await api.set_status(ns, names[0], succeeded_status(names[0], ns))
        await _next_matching(sub_a, lambda o: "Succeeded" in _conditions(o))
        stats = handle.stats
        assert stats is not None
        assert stats.lists == 1
        assert stats.watches == 1
        assert stats.subscribers == 1
        # b's update reached nobody but b: a got no value for it (coalesced values are per job).
        assert not sub_a._pending


async def test_stream_ends_every_second_and_resumes_without_relist(api: Api, hook: AsyncKubeflowJobHook) -> None:
    ns = await api.namespace(unique("w"))
    name = unique("job")
    await api.create(ns, tfjob_manifest(name))
    handle = watch.shared_watch(hook, ns, kind=TFJOB, watch_timeout=(1, 1))
    async with handle.subscribe(name) as sub:
        await sub.next(timeout=10)
        stats = handle.stats
        assert stats is not None
        await wait_until(lambda: stats.watches >= 4, timeout=30)
        await api.set_status(ns, name, running_status(name, ns, message="after several server timeouts"))
        obj = await _next_matching(sub, lambda o: "Running" in _conditions(o))
        assert obj["status"]["conditions"][-1]["message"] == "after several server timeouts"
        assert stats.lists == 1
        assert stats.relists == 0


async def test_connections_cut_mid_run_resume_from_resource_version(
    api: Api, proxied_hook: AsyncKubeflowJobHook, proxy: TcpProxy
) -> None:
    ns = await api.namespace(unique("w"))
    name = unique("job")
    await api.create(ns, tfjob_manifest(name))
    handle = watch.shared_watch(proxied_hook, ns, kind=TFJOB)
    async with handle.subscribe(name) as sub:
        await sub.next(timeout=10)
        stats = handle.stats
        assert stats is not None
        await wait_until(lambda: stats.connected)
        await proxy.refuse()  # cut the stream and refuse reconnection for a while
        await api.set_status(ns, name, running_status(name, ns, message="written while cut off"))
        await wait_until(lambda: stats.errors >= 2)  # at least one failed reconnect
        await proxy.start()
        obj = await _next_matching(sub, lambda o: "Running" in _conditions(o))
        assert obj["status"]["conditions"][-1]["message"] == "written while cut off"
        assert stats.lists == 1, "a cut stream resumes from its resourceVersion, no relist"
        assert stats.relists == 0
        assert stats.watches >= 2


async def test_gone_relists_and_delivers_fresh_state(
    api: Api, proxied_hook: AsyncKubeflowJobHook, proxy: TcpProxy, local_cluster: Any
) -> None:
    ns = await api.namespace(unique("w"))
    name, churn = unique("job"), unique("churn")
    await api.create(ns, tfjob_manifest(name))
    await api.create(ns, tfjob_manifest(churn))
    handle = watch.shared_watch(proxied_hook, ns, kind=TFJOB)
    async with handle.subscribe(name) as sub:
        await sub.next(timeout=10)
        stats = handle.stats
        assert stats is not None
        await wait_until(lambda: stats.connected)
        await proxy.refuse()
        await api.set_status(ns, name, succeeded_status(name, ns))
        # Push the watched resourceVersion out of the server's TFJob history window (an etcd compaction).
        history = int(getattr(local_cluster, "history_limit", 1000))
        for i in range(history + 10):
            await api.set_status(ns, churn, running_status(churn, ns, message=f"churn {i}"))
        await proxy.start()
        obj = await _next_matching(sub, lambda o: "Succeeded" in _conditions(o), timeout=30)
        assert obj["metadata"]["name"] == name
        assert stats.relists >= 1
        assert stats.lists >= 2


async def test_event_of_several_megabytes(api: Api, hook: AsyncKubeflowJobHook) -> None:
    """A watch event carries the whole object: 5 MB must pass (aiohttp's line reader would refuse it)."""
    ns = await api.namespace(unique("w"))
    name = unique("big")
    body = tfjob_manifest(name)
    chunk = 2_500_000  # the server takes at most 3 MiB per request: grow the object in two writes
    container = body["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "BIG", "value": "s" * chunk}]
    await api.create(ns, body)
    async with watch.shared_watch(hook, ns, kind=TFJOB).subscribe(name) as sub:
        await sub.next(timeout=10)
        await api.set_status(ns, name, running_status(name, ns, message="m" * chunk))
        obj = await _next_matching(sub, lambda o: "Running" in _conditions(o), timeout=30)
        assert len(json.dumps(obj)) > 2 * chunk
        assert len(obj["status"]["conditions"][-1]["message"]) == chunk


async def test_stream_stops_after_last_subscriber_leaves(api: Api, hook: AsyncKubeflowJobHook) -> None:
    ns = await api.namespace(unique("w"))
    name = unique("job")
    await api.create(ns, tfjob_manifest(name))
    handle = watch.shared_watch(hook, ns, kind=TFJOB, linger=0.2)
    async with handle.subscribe(name) as sub:
        await sub.next(timeout=10)
        assert any(w["namespace"] == ns for w in watch.active_watchers())
    await wait_until(lambda: not any(w["namespace"] == ns for w in watch.active_watchers()), timeout=10)
    stats = handle.stats
    assert stats is not None and not stats.connected
    # A new subscriber starts a new stream and still gets the current state.
    async with watch.shared_watch(hook, ns, kind=TFJOB).subscribe(name) as sub2:
        assert (await sub2.next(timeout=10))["metadata"]["name"] == name


def test_each_event_loop_gets_its_own_stream(local_cluster: Any, k8s_conn: str) -> None:
    """Sync mode and `airflow dags test` run a fresh loop per task: nothing may leak between loops."""

    async def once(name: str, ns: str) -> tuple[int, str]:
        async with Api(Path(local_cluster.kubeconfig_path)) as api:
            await api.namespace(ns)
            await api.create(ns, tfjob_manifest(name))
            hook = AsyncKubeflowJobHook(conn_id=k8s_conn)
            handle = watch.shared_watch(hook, ns, kind=TFJOB)
            async with handle.subscribe(name) as sub:
                obj = await sub.next(timeout=10)
                assert handle.stats is not None
                return id(handle._watcher), obj["metadata"]["name"] if obj else ""

    ns = unique("w")
    first = asyncio.run(once(unique("l1"), ns))
    second = asyncio.run(once(unique("l2"), ns))
    assert first[1] and second[1]
    assert not watch._REGISTRY or all(k[1] != ns for k in watch._REGISTRY)


async def test_a_watch_refused_403_fails_subscribers_and_is_logged_at_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A user who may list TFJobs but not watch them: no retry cures that, so no retry is made."""
    from airflow_tfjob.local import LocalCluster

    role = cluster_role(tmp_path / "tfjob-lister.yaml", "kubeflow.org", "tfjobs", ["list"])
    with LocalCluster(controller=False, runner=False, auth=True, roles={"lister": [role]}) as cluster:
        hook = AsyncKubeflowJobHook(config_file=str(cluster.kubeconfig_for("lister")))
        with caplog.at_level("WARNING", logger="airflow_tfjob.hooks.watching"):
            async with watch.shared_watch(hook, "default", kind=TFJOB).subscribe("any") as sub:
                assert await sub.next(timeout=15) is None  # the LIST was allowed: no such job
                # Were a 403 retried, the stream would go on and this would time out instead.
                with pytest.raises(watch.WatchError) as refused:
                    await sub.next(timeout=15)
        assert cluster.request_count("WATCH", "tfjobs") == 1, "a refused watch is not retried"
    assert refused.value.code == 403
    warnings = [r.getMessage() for r in caplog.records if r.name == "airflow_tfjob.hooks.watching"]
    assert any("watch of TFJobs in default refused" in m and "403" in m for m in warnings), warnings


async def _server_requests(local_cluster: Any) -> dict[str, int]:
    """Requests the local API server received, by "VERB resource" (its /metrics, which is not counted)."""
    import aiohttp

    from airflow_tfjob.local.apiserver.requestmetrics import REQUESTS, parse_text

    async with aiohttp.ClientSession() as http, http.get(f"{local_cluster.url}/metrics", ssl=False) as resp:
        text = await resp.text()
    counts: dict[str, int] = {}
    for name, labels, value in parse_text(text):
        if name == REQUESTS:
            key = f"{labels['verb']} {labels['resource']}"
            counts[key] = counts.get(key, 0) + int(value)
    return counts


async def test_waiting_triggers_start_with_one_list_and_no_request_per_job(
    api: Api, hook: AsyncKubeflowJobHook, local_cluster: Any
) -> None:
    """Issue 23: triggers of one namespace read their jobs from the shared watch (one LIST, no GET of
    their own); the stamps of their start are their only writes."""
    from airflow_tfjob.triggers.deferral import KubeflowJobTrigger

    ns = await api.namespace(unique("many"))
    names = [unique(f"j{i}") for i in range(8)]
    for name in names:
        await api.create(ns, tfjob_manifest(name))
    before = await _server_requests(local_cluster)
    triggers = [
        KubeflowJobTrigger(
            name=name, namespace=ns, options={"get_logs": False, "startup_timeout": None}, deferred_at=1.0
        )
        for name in names
    ]
    runs = [asyncio.ensure_future(t.run().__anext__()) for t in triggers]
    try:
        await wait_until(lambda: all(t._job_read for t in triggers), timeout=30)
        watcher = next(w for w in watch.active_watchers() if w["namespace"] == ns)
        await wait_until(
            lambda: next(w for w in watch.active_watchers() if w["namespace"] == ns)["subscribers"] == len(names)
            and next(w for w in watch.active_watchers() if w["namespace"] == ns)["events"] >= len(names),
            timeout=30,
        )
        started = await _server_requests(local_cluster)
    finally:
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
    grew = {k: started.get(k, 0) - before.get(k, 0) for k in started if started.get(k, 0) != before.get(k, 0)}
    assert watcher["lists"] == 1
    assert grew.get("GET tfjobs", 0) == 0, grew  # no trigger read its job by itself
    assert grew.get("LIST tfjobs", 0) == 1, grew
    assert grew.get("PATCH tfjobs", 0) == len(names), grew  # the start stamps, one per deferral


async def test_triggers_deferred_together_take_turns_to_start(
    api: Api, hook: AsyncKubeflowJobHook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 23: a sweep's triggers start at most STARTS_AT_ONCE at a time per loop (each start holds a
    decoded job and a request while it waits), and every one of them still follows its job."""
    from airflow_tfjob.triggers import deferral, runs

    monkeypatch.setattr(runs, "STARTS_AT_ONCE", 3)
    monkeypatch.setattr(runs, "_STARTS", runs.weakref.WeakKeyDictionary())
    starting, most = 0, 0
    is_restart = runs.is_restart

    async def counted(self: Any, hook: Any) -> bool:  # observes the start's stamp, which it runs as is
        nonlocal starting, most
        starting += 1
        most = max(most, starting)
        try:
            return await is_restart(self, hook)
        finally:
            starting -= 1

    monkeypatch.setattr(runs, "is_restart", counted)
    ns = await api.namespace(unique("turns"))
    names = [unique(f"t{i}") for i in range(12)]
    for name in names:
        await api.create(ns, tfjob_manifest(name))
    triggers = [
        deferral.KubeflowJobTrigger(
            name=name, namespace=ns, options={"get_logs": False, "startup_timeout": None}, deferred_at=2.0
        )
        for name in names
    ]
    runs = [asyncio.ensure_future(t.run().__anext__()) for t in triggers]
    try:
        await wait_until(lambda: all(t._job_read and t._job_at_start is None for t in triggers), timeout=30)
        for name in names:
            await api.set_status(ns, name, succeeded_status(name, ns))
        events = await asyncio.wait_for(asyncio.gather(*runs), 30)
    finally:
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
    assert [e.payload["event"] for e in events] == ["succeeded"] * len(names)
    assert 1 < most <= 3
