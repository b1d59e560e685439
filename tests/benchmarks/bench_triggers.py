"""Concurrent deferred jobs (KubeflowJobTriggers in one event loop) vs a polling baseline, against the local API server.

    .venv/bin/python tests/benchmarks/bench_triggers.py [--jobs 1000] [--namespaces 1] \
        [--kinds TFJob[,PyTorchJob,TrainJob]] [--wait 60] [--idle 15] [--rate 100] [--sample 200]

The jobs are spread over ``--namespaces`` namespaces and, within each, over the ``--kinds`` given (job i is
in namespace i mod N, of kind (i div N) mod K), so that the triggerer holds one shared watch per
(namespace, kind).

Three processes, so that each figure belongs to one of them:

- server: the local cluster's store and API server (no controller, no runner: the benchmark writes the
  jobs' status itself through /status); its /metrics gives the requests received per verb and
  resource and the open watch streams;
- waiter (once per mode): the process that waits. It first measures itself idle (imports done, client
  warm, no triggers), then starts the triggers, lets them settle (every trigger subscribed to its
  watch, and at least one polling interval), and measures a waiting window: CPU seconds, RSS growth
  over idle, open TCP connections to the server; then it records the time of each trigger event;
- coordinator (this process): creates the jobs, reads the server's counters around the waiting window,
  writes each job's success condition at ``--rate`` per second, and computes the delay from that
  write to the job's trigger event.

Modes: ``watch`` runs ``KubeflowJobTrigger.run()`` (shared watch, log following off, deferred as the
operator defers: with ``deferred_at``); ``poll`` is the KubernetesJobTrigger-style baseline: one GET per
job every 10 s (start times spread over the interval).

Then, unless ``--sample 0``, a third waiter (``breakdown``) starts ``--sample`` more triggers in fresh
namespaces under tracemalloc and prints where each waiting job's bytes go (the per-job breakdown of
docs/performance.md): allocations grouped by the provider's room that made them, objects per job by
type, asyncio tasks per job. tracemalloc makes that waiter slow and its RSS meaningless; the figures of
the first table come from the untraced waiter.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

POLL_INTERVAL = 10.0
EXTERNAL_MANAGER = "kueue.x-k8s.io/multikueue"  # the controller (if any) would skip these jobs


# ------------------------------------------------------------------------------------------------
# server process


async def serve() -> None:
    from airflow_tfjob.local.apiserver.server import ApiServer
    from airflow_tfjob.local.node.podlogs import PodLogs
    from airflow_tfjob.local.store.core import Store

    # The API server counts requests and open watch streams itself and serves them on /metrics.
    store = Store(history_limit=10000)
    server = ApiServer(store, PodLogs())
    url = await server.start()
    print(json.dumps({"url": url}), flush=True)
    await asyncio.get_running_loop().create_future()


def _server_counters(text: str) -> dict[str, Any]:
    """Requests received per "VERB resource[/subresource]" and open watch streams, from /metrics."""
    from airflow_tfjob.local.apiserver.requestmetrics import LONGRUNNING, REQUESTS, parse_text

    counts: dict[str, int] = {}
    open_streams = 0
    for name, labels, value in parse_text(text):
        if name == REQUESTS:
            target = labels["resource"] + (f"/{labels['subresource']}" if labels["subresource"] else "")
            key = f"{labels['verb']} {target}".rstrip()
            counts[key] = counts.get(key, 0) + int(value)
        elif name == LONGRUNNING:
            open_streams += int(value)
    return {"counts": counts, "open_streams": open_streams}


# ------------------------------------------------------------------------------------------------
# waiter process


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _connections(port: int) -> int:
    import psutil

    return sum(
        1
        for c in psutil.Process().net_connections(kind="tcp")
        if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED
    )


def _emit(**data: Any) -> None:
    print(json.dumps(data), flush=True)


async def _poll_job(hook: Any, kind: str, name: str, namespace: str) -> None:
    from airflow_tfjob.jobs.status import interpret

    await asyncio.sleep(random.uniform(0, POLL_INTERVAL))
    while True:
        if interpret(await hook.get_job(kind, name, namespace)).finished:
            return
        await asyncio.sleep(POLL_INTERVAL)


def _subscribed() -> int:
    from airflow_tfjob.hooks import jobwatch

    return sum(int(w["subscribers"]) for w in jobwatch.active_watchers())


def _following(triggers: list[Any]) -> bool:
    """Every trigger is following its job: past its start (read, stamped; the run lets go of the job it
    read just before it starts the follow) and subscribed to its watch. (Not the watch's event count:
    a watch that relists after a 410 delivers what changed without counting events.)"""
    return all(t._job_read and t._job_at_start is None for t in triggers) and _subscribed() >= len(triggers)


async def _until(condition: Any, limit: float, every: float = 0.5) -> None:
    """Poll a condition of this process (no event to wait on: it reads the watches' counters)."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            return
        await asyncio.sleep(every)


async def _quiet(port: int, quiet: float = 2.0, limit: float = 900) -> None:
    """Until the server has received no request for ``quiet`` seconds: the triggers' start-up requests
    (the start stamps among them) are done, and what follows is waiting."""
    import aiohttp

    deadline = time.monotonic() + limit
    async with aiohttp.ClientSession() as http:

        async def total() -> int:
            async with http.get(f"http://127.0.0.1:{port}/metrics") as resp:  # not itself counted
                return sum(_server_counters(await resp.text())["counts"].values())

        last = await total()
        while time.monotonic() < deadline:
            await asyncio.sleep(quiet)
            now = await total()
            if now == last:
                return
            last = now


def _trigger(kind: str, name: str, namespace: str) -> Any:
    """A trigger as the operator defers it (log following off: what waiting costs, not reading)."""
    from airflow_tfjob.triggers.deferral import KubeflowJobTrigger

    return KubeflowJobTrigger(
        name=name,
        namespace=namespace,
        options={"get_logs": False, "startup_timeout": None, "kind": kind},
        deferred_at=time.time(),
    )


async def wait_jobs(
    mode: str, jobs: list[tuple[str, str, str]], port: int, idle: float, window: float
) -> None:
    import gc

    from airflow_tfjob.hooks import jobwatch as watch
    from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook
    from airflow_tfjob.jobs import status  # noqa: F401  (the poller's: imported before, as the trigger's)
    from airflow_tfjob.triggers.loader import load_run_modules

    hook = AsyncKubeflowJobHook(conn_id="kubernetes_default")
    await hook.list_jobs("TFJob", jobs[0][0])  # client built and connected: idle means ready, not cold
    await load_run_modules()  # what the first trigger imports (once per process) is not a job's cost
    gc.collect()
    rss0 = _rss()
    cpu0 = time.process_time()
    await asyncio.sleep(idle)
    idle_cpu = time.process_time() - cpu0

    events: dict[str, float] = {}
    outcomes: dict[str, int] = {}

    triggers: list[Any] = []

    async def one(namespace: str, kind: str, name: str) -> None:
        if mode == "watch":
            trigger = _trigger(kind, name, namespace)
            triggers.append(trigger)
            async for ev in trigger.run():
                events[f"{namespace}/{name}"] = time.time()
                outcomes[ev.payload["event"]] = outcomes.get(ev.payload["event"], 0) + 1
        else:
            await _poll_job(AsyncKubeflowJobHook(conn_id="kubernetes_default"), kind, name, namespace)
            events[f"{namespace}/{name}"] = time.time()
            outcomes["succeeded"] = outcomes.get("succeeded", 0) + 1

    started = time.monotonic()
    tasks = [asyncio.create_task(one(*job)) for job in jobs]
    # Every poller has made its first request; every trigger has subscribed to its watch (its start-up
    # requests are done: the window measures waiting, not starting).
    await asyncio.sleep(POLL_INTERVAL + 2)
    if mode == "watch":
        await _until(lambda: len(triggers) == len(jobs) and _following(triggers), 900)
        await _quiet(port)
    settled_after = time.monotonic() - started
    gc.collect()
    _emit(phase="settled")
    cpu1 = time.process_time()
    await asyncio.sleep(window)
    wait_cpu = time.process_time() - cpu1
    gc.collect()
    _emit(
        phase="waited",
        rss_idle=rss0,
        rss_waiting=_rss(),
        idle_cpu_per_s=idle_cpu / idle,
        wait_cpu_per_s=wait_cpu / window,
        connections=_connections(port),
        watchers=watch.active_watchers(),
        pending=sum(not t.done() for t in tasks),
        settled_after=settled_after,
    )
    await asyncio.gather(*tasks)
    _emit(phase="done", events=events, outcomes=outcomes)


# The rooms of the provider, by the file that allocated (the innermost frame inside airflow_tfjob/).
_ROOMS: tuple[tuple[str, str], ...] = (
    ("triggers/", "trigger object, its kwargs and run()"),
    ("follow/progress.py", "Kueue and progress trackers"),
    ("integrations/kueue/", "Kueue and progress trackers"),
    ("follow/", "follow state (follow/core.py and what it holds)"),
    ("hooks/jobwatch.py", "subscription to the shared watch"),
    ("hooks/waits.py", "subscription to the shared watch"),
    ("build/", "secrets masking"),
    ("jobs/", "status interpretation"),
    ("hooks/", "hook and its requests"),
)
_CACHE = "job objects in the shared watch's cache (one per job, per namespace and kind)"


def _cache_lines() -> range:
    """The lines of the shared watch's encoding of a job (what its cache and subscribers hold)."""
    import inspect

    from airflow_tfjob.hooks import jobwatch

    source, first = inspect.getsourcelines(jobwatch.encode)
    return range(first, first + len(source))


def _room(frames: list[tuple[str, int]], script: str, cache_lines: range) -> tuple[str, str]:
    """Which part of a waiting job an allocation belongs to, and the line that decided it, from its
    traceback (innermost first): the first frame in the provider, in this script (the stand-in for
    the triggerer's task per trigger) or in aiohttp (connections and their buffers) decides."""
    for index, (filename, line) in enumerate(frames):
        if "/airflow_tfjob/" in filename:
            here = filename.split("/airflow_tfjob/", 1)[1]
            site = f"{here}:{line}"
            if here == "hooks/jobwatch.py" and line in cache_lines:
                return _CACHE, site  # the encoded job the cache keeps (and its subscribers share)
            callers = [f.split("/airflow_tfjob/", 1)[1] for f, _ in frames[index:] if "/airflow_tfjob/" in f]
            if here.startswith("hooks/") and here != "hooks/jobwatch.py" and "hooks/jobwatch.py" in callers:
                return _CACHE, site  # decoded by the watch's LIST or stream: the objects its cache keeps
            for prefix, room in _ROOMS:
                if here.startswith(prefix):
                    return room, site
            return f"other provider code ({here})", site
        if filename == script:
            return "the triggerer's own task per trigger (stands in for Airflow's)", f"script:{line}"
        if "/aiohttp/" in filename:
            return "connections (aiohttp)", f"aiohttp/{filename.rsplit('/aiohttp/', 1)[1]}:{line}"
    return (
        "other (event loop, logging)",
        f"{frames[0][0].rsplit('/', 1)[-1]}:{frames[0][1]}" if frames else "?",
    )


async def breakdown(jobs: list[tuple[str, str, str]], warm: tuple[str, str, str], port: int) -> None:
    """Where the bytes of ``len(jobs)`` waiting triggers go: tracemalloc grouped by room, per job."""
    import gc
    import tracemalloc

    from airflow_tfjob.hooks import jobwatch
    from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook

    hook = AsyncKubeflowJobHook(conn_id="kubernetes_default")
    await hook.list_jobs("TFJob", warm[0])
    # One trigger first, in a namespace of its own and then cancelled: imports, class caches and the
    # client's connection are not any waiting job's cost.
    first = asyncio.create_task(_trigger(warm[1], warm[2], warm[0]).run().__anext__())
    await _until(lambda: _subscribed() >= 1, 300, 0.2)
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    await _quiet(port, 1.0)  # (and what reading the server's counters imports is not traced either)
    gc.collect()
    tracemalloc.start(40)
    before = tracemalloc.take_snapshot()
    types0 = Counter(type(o).__name__ for o in gc.get_objects())
    tasks0 = len(asyncio.all_tasks())

    triggers = [_trigger(kind, name, namespace) for namespace, kind, name in jobs]

    async def one(trigger: Any) -> None:
        async for _ in trigger.run():
            pass

    tasks = [asyncio.create_task(one(trigger)) for trigger in triggers]
    await _until(lambda: _following(triggers), 900)
    await _quiet(port)  # (the start-up's connections left idle are still open: counted under aiohttp)
    gc.collect()
    after = tracemalloc.take_snapshot()
    types = Counter(type(o).__name__ for o in gc.get_objects()) - types0
    n_tasks = len(asyncio.all_tasks()) - tasks0
    tracemalloc.stop()
    script = __file__  # absolute for a script run as __main__, as the tracebacks name it
    cache = _cache_lines()
    rooms: dict[str, int] = {}
    sites: dict[str, Counter[str]] = {}
    for stat in after.compare_to(before, "traceback"):
        # tracemalloc orders a traceback from the oldest frame
        room, site = _room([(f.filename, f.lineno) for f in reversed(stat.traceback)], script, cache)
        rooms[room] = rooms.get(room, 0) + stat.size_diff
        sites.setdefault(room, Counter())[site] += stat.size_diff
    _emit(
        phase="breakdown",
        jobs=len(jobs),
        rooms=rooms,
        sites={room: dict(counter.most_common(4)) for room, counter in sites.items()},
        types=dict(types.most_common(14)),
        objects=sum(types.values()),
        tasks=n_tasks,
        watch_events=sum(int(w["events"]) for w in jobwatch.active_watchers()),
    )
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# ------------------------------------------------------------------------------------------------
# coordinator


def _manifest(kind: str, name: str) -> dict[str, Any]:
    """A job of ``kind`` that no controller runs (managed elsewhere): the benchmark writes its status."""
    from airflow_tfjob.jobs.kinds import TRAINJOB, kind_named

    row = kind_named(kind)
    if row is TRAINJOB:
        return {
            "apiVersion": row.api_version,
            "kind": row.kind,
            "metadata": {"name": name},
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {"numNodes": 1, "image": "python:3.11"},
                "managedBy": EXTERNAL_MANAGER,
            },
        }
    rtype = "Worker" if "Worker" in row.replica_types and row.kind == "TFJob" else row.replica_types[0]
    return {
        "apiVersion": row.api_version,
        "kind": row.kind,
        "metadata": {"name": name},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "None", "managedBy": EXTERNAL_MANAGER},
            row.spec_key: {
                rtype: {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {"spec": {"containers": [{"name": row.container, "image": "python:3.11"}]}},
                }
            },
        },
    }


def _succeeded(kind: str, name: str, namespace: str) -> dict[str, Any]:
    """The status a finished job of ``kind`` has, as its controller writes it."""
    from airflow_tfjob.jobs.kinds import TRAINJOB, kind_named

    row = kind_named(kind)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if row is TRAINJOB:
        return {
            "status": {
                "conditions": [
                    {
                        "type": "Complete",
                        "status": "True",
                        "reason": "AllJobsCompleted",
                        "message": "jobset completed successfully",
                        "lastTransitionTime": now,
                    }
                ],
                "jobsStatus": [{"name": "node", "active": 0, "succeeded": 1, "failed": 0}],
            }
        }
    rtype = "Worker" if row.kind == "TFJob" else row.replica_types[0]
    return {
        "status": {
            "conditions": [
                {
                    "type": "Created",
                    "status": "True",
                    "reason": f"{row.kind}Created",
                    "message": f"{row.kind} {name} is created.",
                    "lastUpdateTime": now,
                    "lastTransitionTime": now,
                },
                {
                    "type": "Succeeded",
                    "status": "True",
                    "reason": f"{row.kind}Succeeded",
                    "message": f"{row.kind} {namespace}/{name} successfully completed.",
                    "lastUpdateTime": now,
                    "lastTransitionTime": now,
                },
            ],
            "replicaStatuses": {rtype: {"succeeded": 1}},
            "startTime": now,
            "completionTime": now,
        }
    }


async def _read_json_line(proc: asyncio.subprocess.Process) -> dict[str, Any]:
    assert proc.stdout is not None
    while True:
        line = await proc.stdout.readline()
        if not line:
            raise RuntimeError(f"process {proc.pid} ended early (exit {await proc.wait()})")
        if line.startswith(b"{"):
            data: dict[str, Any] = json.loads(line)
            return data


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _jobs(prefix: str, args: argparse.Namespace, count: int) -> list[tuple[str, str, str]]:
    """(namespace, kind, name) of each job: spread over the namespaces, then over the kinds."""
    kinds = args.kinds
    return [
        (f"{prefix}-{i % args.namespaces}", kinds[(i // args.namespaces) % len(kinds)], f"job-{i:05d}")
        for i in range(count)
    ]


async def _create(api: Any, jobs: list[tuple[str, str, str]]) -> None:
    from airflow_tfjob.jobs.kinds import kind_named

    custom = _custom(api)
    for namespace in sorted({ns for ns, _, _ in jobs}):
        await api.create_namespace({"metadata": {"name": namespace}})
    sem = asyncio.Semaphore(32)

    async def create(namespace: str, kind: str, name: str) -> None:
        row = kind_named(kind)
        async with sem:
            await custom.create_namespaced_custom_object(
                row.group, row.version, namespace, row.plural, _manifest(kind, name)
            )

    await asyncio.gather(*(create(*job) for job in jobs))


async def _waiter(env: dict[str, str], *argv: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, __file__, "waiter", *argv, stdout=asyncio.subprocess.PIPE, env=env, limit=2**26
    )


def _jobs_file(work: Path, label: str, jobs: list[tuple[str, str, str]]) -> str:
    path = work / f"jobs-{label}.json"
    path.write_text(json.dumps(jobs))
    return str(path)


async def run_mode(
    mode: str, args: argparse.Namespace, api: Any, url: str, env: dict[str, str], port: int, work: Path
) -> dict[str, Any]:
    import aiohttp

    from airflow_tfjob.jobs.kinds import kind_named

    jobs = _jobs(f"bench-{mode}", args, args.jobs)
    await _create(api, jobs)
    custom = _custom(api)
    proc = await _waiter(env, mode, _jobs_file(work, mode, jobs), str(port), str(args.idle), str(args.wait))
    async with aiohttp.ClientSession() as http:

        async def counters() -> dict[str, Any]:
            async with http.get(f"{url}/metrics") as resp:  # reading /metrics is not itself counted
                return _server_counters(await resp.text())

        settled = await _read_json_line(proc)
        assert settled["phase"] == "settled", settled
        before = await counters()
        waited = await _read_json_line(proc)
        after = await counters()
    requests = sum(after["counts"].values()) - sum(before["counts"].values())

    written: dict[str, float] = {}
    gap = 1.0 / args.rate
    start = time.monotonic()
    for i, (namespace, kind, name) in enumerate(jobs):
        delay = start + i * gap - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        row = kind_named(kind)
        # Timed before the request: the event may reach the waiter before this side reads the response.
        written[f"{namespace}/{name}"] = time.time()
        await custom.patch_namespaced_custom_object_status(
            row.group,
            row.version,
            namespace,
            row.plural,
            name,
            _succeeded(kind, name, namespace),
            _content_type="application/merge-patch+json",
        )
    done = await _read_json_line(proc)
    await proc.wait()
    delays = [done["events"][key] - written[key] for key in written if key in done["events"]]
    return {
        "mode": mode,
        "jobs": args.jobs,
        "events": len(done["events"]),
        "outcomes": done["outcomes"],
        "requests_per_job_per_min": requests / args.jobs / (args.wait / 60.0),
        "requests_in_window": requests,
        "request_kinds_in_window": {
            k: after["counts"].get(k, 0) - before["counts"].get(k, 0)
            for k in after["counts"]
            if after["counts"].get(k, 0) != before["counts"].get(k, 0)
        },
        "open_watch_streams_server": after["open_streams"],
        "tcp_connections_waiter": waited["connections"],
        "watchers": waited["watchers"],
        "settled_after_s": waited["settled_after"],
        "cpu_s_per_min_waiting": waited["wait_cpu_per_s"] * 60,
        "cpu_s_per_min_idle": waited["idle_cpu_per_s"] * 60,
        "rss_growth_mb": (waited["rss_waiting"] - waited["rss_idle"]) / 2**20,
        "delay_p50_ms": _pct(delays, 0.50) * 1000 if delays else None,
        "delay_p99_ms": _pct(delays, 0.99) * 1000 if delays else None,
        "delay_max_ms": max(delays) * 1000 if delays else None,
        "delay_mean_ms": statistics.fmean(delays) * 1000 if delays else None,
    }


async def run_breakdown(
    args: argparse.Namespace, api: Any, env: dict[str, str], work: Path, port: int
) -> dict[str, Any]:
    jobs = _jobs("bench-sample", args, args.sample)
    warm = ("bench-warm", args.kinds[0], "job-warm")
    await _create(api, [*jobs, warm])
    proc = await _waiter(env, "breakdown", _jobs_file(work, "sample", jobs), json.dumps(warm), str(port))
    result = await _read_json_line(proc)
    await proc.wait()
    return result


def _print_breakdown(b: dict[str, Any]) -> None:
    n = b["jobs"]
    total = sum(b["rooms"].values())
    print()
    print(
        f"per waiting job, {n} triggers sampled under tracemalloc: {total / n / 1024:.1f} KB traced, "
        f"{b['objects'] / n:.1f} objects, {b['tasks'] / n:.2f} asyncio tasks; {b['watch_events']} watch events"
    )
    for room, size in sorted(b["rooms"].items(), key=lambda kv: -kv[1]):
        if abs(size) / n >= 16:
            sites = ", ".join(
                f"{site} {part / n:.0f}" for site, part in b["sites"][room].items() if part / n >= 16
            )
            print(f"  {size / n:8.0f} B  {room}  [{sites}]")
    print("  objects per job by type: " + ", ".join(f"{t} {c / n:.2f}" for t, c in b["types"].items()))


def _custom(api: Any) -> Any:
    from kubernetes_asyncio import client

    return client.CustomObjectsApi(api.api_client)


async def coordinate(args: argparse.Namespace) -> None:
    import yaml
    from kubernetes_asyncio import client, config

    server = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "server", stdout=asyncio.subprocess.PIPE
    )
    try:
        url = (await _read_json_line(server))["url"]
        port = int(url.rsplit(":", 1)[1])
        work = Path(tempfile.mkdtemp(prefix="bench-triggers-"))
        kubeconfig = work / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "bench",
                    "clusters": [{"name": "bench", "cluster": {"server": url}}],
                    "users": [{"name": "bench", "user": {}}],
                    "contexts": [
                        {
                            "name": "bench",
                            "context": {"cluster": "bench", "user": "bench", "namespace": "default"},
                        }
                    ],
                }
            )
        )
        env = dict(os.environ)
        env.update(
            {
                "AIRFLOW_HOME": str(work / "airflow"),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
                "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps(
                    {
                        "conn_type": "kubernetes",
                        "extra": {"kube_config_path": str(kubeconfig), "namespace": "default"},
                    }
                ),
            }
        )
        conf = client.Configuration()
        await config.load_kube_config(config_file=str(kubeconfig), client_configuration=conf)
        async with client.ApiClient(configuration=conf) as api_client:
            core = client.CoreV1Api(api_client)
            results = [await run_mode(mode, args, core, url, env, port, work) for mode in ("watch", "poll")]
            sample = await run_breakdown(args, core, env, work, port) if args.sample else None
    finally:
        server.terminate()
        await server.wait()

    print()
    print(
        f"{args.jobs} concurrent waits over {args.namespaces} namespace(s) and kinds {','.join(args.kinds)}, "
        f"waiting window {args.wait:.0f}s, success written at {args.rate:g}/s"
    )
    rows = [
        ("API requests per job per minute (server count)", "requests_per_job_per_min", "{:.4f}"),
        ("open watch streams on the server", "open_watch_streams_server", "{}"),
        ("TCP connections waiter -> server", "tcp_connections_waiter", "{}"),
        ("waiter CPU s per minute, waiting", "cpu_s_per_min_waiting", "{:.2f}"),
        ("waiter CPU s per minute, idle (no triggers)", "cpu_s_per_min_idle", "{:.2f}"),
        ("waiter RSS growth over idle (MB)", "rss_growth_mb", "{:.1f}"),
        ("started and settled after (s)", "settled_after_s", "{:.1f}"),
        ("delay Succeeded write -> event p50 (ms)", "delay_p50_ms", "{:.1f}"),
        ("delay Succeeded write -> event p99 (ms)", "delay_p99_ms", "{:.1f}"),
        ("delay max (ms)", "delay_max_ms", "{:.1f}"),
        ("events received", "events", "{}"),
    ]
    print(f"{'':50} {'watch (KubeflowJobTrigger)':>22} {'poll every 10 s':>18}")
    for label, key, fmt in rows:
        cells = [fmt.format(r[key]) if r[key] is not None else "-" for r in results]
        print(f"{label:50} {cells[0]:>22} {cells[1]:>18}")
    for r in results:
        print(
            f"{r['mode']}: requests in window by kind {r['request_kinds_in_window']}; outcomes {r['outcomes']}"
        )
        if r["mode"] == "watch":
            watchers = r["watchers"]
            totals = {
                k: sum(int(w[k]) for w in watchers)
                for k in ("lists", "watches", "relists", "events", "subscribers")
            }
            print(f"watch: {len(watchers)} shared watches (namespace x kind), in all {totals}")
    if sample is not None:
        _print_breakdown(sample)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "server":
        asyncio.run(serve())
        return
    if len(sys.argv) > 1 and sys.argv[1] == "waiter":
        mode, path = sys.argv[2:4]
        jobs = [tuple(job) for job in json.loads(Path(path).read_text())]
        if mode == "breakdown":
            warm = tuple(json.loads(sys.argv[4]))
            asyncio.run(breakdown(jobs, warm, int(sys.argv[5])))  # type: ignore[arg-type]
            return
        port, idle, window = sys.argv[4:7]
        asyncio.run(wait_jobs(mode, jobs, int(port), float(idle), float(window)))  # type: ignore[arg-type]
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--wait", type=float, default=60.0, help="waiting window measured, seconds")
    parser.add_argument("--idle", type=float, default=15.0, help="idle window measured before, seconds")
    parser.add_argument("--rate", type=float, default=100.0, help="success writes per second")
    parser.add_argument("--namespaces", type=int, default=1, help="namespaces the jobs are spread over")
    parser.add_argument(
        "--kinds",
        type=lambda text: [k.strip() for k in text.split(",") if k.strip()],
        default=["TFJob"],
        help="job kinds, comma-separated (e.g. TFJob,PyTorchJob,TrainJob), mixed in each namespace",
    )
    parser.add_argument(
        "--sample", type=int, default=200, help="triggers of the per-job breakdown (tracemalloc); 0: none"
    )
    args = parser.parse_args()
    from airflow_tfjob.jobs.kinds import kind_named

    args.kinds = [kind_named(k).kind for k in args.kinds]  # a clear error for an unknown kind, at once
    asyncio.run(coordinate(args))


if __name__ == "__main__":
    main()
