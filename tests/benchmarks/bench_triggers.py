"""1,000 concurrent TFJobTriggers in one event loop vs a polling baseline, against the local API server.

    .venv/bin/python tests/benchmarks/bench_triggers.py [--jobs 1000] [--wait 60] [--idle 15] [--rate 100]

Three processes, so that each figure belongs to one of them:

- server: the local cluster's store and API server (no controller, no runner: the benchmark writes the
  TFJobs' status itself through /status); its /metrics gives the requests received per verb and
  resource and the open watch streams;
- waiter (once per mode): the process that waits. It first measures itself idle (imports done, client
  warm, no triggers), then starts the triggers, lets them settle, and measures a waiting window:
  CPU seconds, RSS growth over idle, open TCP connections to the server; then it records the time of
  each trigger event;
- coordinator (this process): creates the jobs, reads the server's counters around the waiting window,
  writes each job's Succeeded condition at ``--rate`` per second, and computes the delay from that
  write to the job's trigger event.

Modes: ``watch`` runs ``TFJobTrigger.run()`` (shared watch, log following off); ``poll`` is the
KubernetesJobTrigger-style baseline: one GET per job every 10 s (start times spread over the interval).
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
from pathlib import Path
from typing import Any

POLL_INTERVAL = 10.0
EXTERNAL_MANAGER = "kueue.x-k8s.io/multikueue"  # the controller (if any) would skip these jobs


# ------------------------------------------------------------------------------------------------
# server process


async def serve() -> None:
    from airflow_tfjob.local.apiserver import ApiServer
    from airflow_tfjob.local.podlogs import PodLogs
    from airflow_tfjob.local.store import Store

    # The API server counts requests and open watch streams itself and serves them on /metrics.
    store = Store(history_limit=10000)
    server = ApiServer(store, PodLogs())
    url = await server.start()
    print(json.dumps({"url": url}), flush=True)
    await asyncio.get_running_loop().create_future()


def _server_counters(text: str) -> dict[str, Any]:
    """Requests received per "VERB resource[/subresource]" and open watch streams, from /metrics."""
    from airflow_tfjob.local.requestmetrics import LONGRUNNING, REQUESTS, parse_text

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


async def _poll_job(hook: Any, name: str, namespace: str) -> None:
    from airflow_tfjob.status import interpret

    await asyncio.sleep(random.uniform(0, POLL_INTERVAL))
    while True:
        if interpret(await hook.get_tfjob(name, namespace)).finished:
            return
        await asyncio.sleep(POLL_INTERVAL)


async def wait_jobs(
    mode: str, namespace: str, names: list[str], port: int, idle: float, window: float
) -> None:
    import gc

    from airflow_tfjob import watch
    from airflow_tfjob.hooks.tfjob import AsyncTFJobHook
    from airflow_tfjob.triggers.tfjob import TFJobTrigger

    hook = AsyncTFJobHook(conn_id="kubernetes_default")
    await hook.list_tfjobs(namespace)  # client built and connected: idle means ready, not cold
    gc.collect()
    rss0 = _rss()
    cpu0 = time.process_time()
    await asyncio.sleep(idle)
    idle_cpu = time.process_time() - cpu0

    events: dict[str, float] = {}
    outcomes: dict[str, int] = {}

    async def one(name: str) -> None:
        if mode == "watch":
            trigger = TFJobTrigger(
                name=name, namespace=namespace, options={"get_logs": False, "startup_timeout": None}
            )
            async for ev in trigger.run():
                events[name] = time.time()
                outcomes[ev.payload["event"]] = outcomes.get(ev.payload["event"], 0) + 1
        else:
            await _poll_job(AsyncTFJobHook(conn_id="kubernetes_default"), name, namespace)
            events[name] = time.time()
            outcomes["succeeded"] = outcomes.get("succeeded", 0) + 1

    tasks = [asyncio.create_task(one(n)) for n in names]
    await asyncio.sleep(POLL_INTERVAL + 2)  # every poller has made its first request; triggers subscribed
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
    )
    await asyncio.gather(*tasks)
    _emit(phase="done", events=events, outcomes=outcomes)


# ------------------------------------------------------------------------------------------------
# coordinator


def _manifest(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "None", "managedBy": EXTERNAL_MANAGER},
            "tfReplicaSpecs": {
                "Worker": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {"spec": {"containers": [{"name": "tensorflow", "image": "python:3.11"}]}},
                }
            },
        },
    }


def _succeeded(name: str, namespace: str) -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "status": {
            "conditions": [
                {
                    "type": "Created",
                    "status": "True",
                    "reason": "TFJobCreated",
                    "message": f"TFJob {name} is created.",
                    "lastUpdateTime": now,
                    "lastTransitionTime": now,
                },
                {
                    "type": "Succeeded",
                    "status": "True",
                    "reason": "TFJobSucceeded",
                    "message": f"TFJob {namespace}/{name} successfully completed.",
                    "lastUpdateTime": now,
                    "lastTransitionTime": now,
                },
            ],
            "replicaStatuses": {"Worker": {"succeeded": 1}},
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


async def run_mode(
    mode: str, args: argparse.Namespace, api: Any, url: str, env: dict[str, str], port: int
) -> dict[str, Any]:
    import aiohttp

    namespace = f"bench-{mode}"
    names = _names(args.jobs)
    await api.create_namespace({"metadata": {"name": namespace}})
    custom = _custom(api)
    sem = asyncio.Semaphore(32)

    async def create(name: str) -> None:
        async with sem:
            await custom.create_namespaced_custom_object(
                "kubeflow.org", "v1", namespace, "tfjobs", _manifest(name)
            )

    await asyncio.gather(*(create(n) for n in names))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "waiter",
        mode,
        namespace,
        str(args.jobs),
        str(port),
        str(args.idle),
        str(args.wait),
        stdout=asyncio.subprocess.PIPE,
        env=env,
        limit=2**26,
    )
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
    for i, name in enumerate(names):
        delay = start + i * gap - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        # Timed before the request: the event may reach the waiter before this side reads the response.
        written[name] = time.time()
        await custom.patch_namespaced_custom_object_status(
            "kubeflow.org",
            "v1",
            namespace,
            "tfjobs",
            name,
            _succeeded(name, namespace),
            _content_type="application/merge-patch+json",
        )
    done = await _read_json_line(proc)
    await proc.wait()
    delays = [done["events"][n] - written[n] for n in names if n in done["events"]]
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
        "cpu_s_per_min_waiting": waited["wait_cpu_per_s"] * 60,
        "cpu_s_per_min_idle": waited["idle_cpu_per_s"] * 60,
        "rss_growth_mb": (waited["rss_waiting"] - waited["rss_idle"]) / 2**20,
        "delay_p50_ms": _pct(delays, 0.50) * 1000 if delays else None,
        "delay_p99_ms": _pct(delays, 0.99) * 1000 if delays else None,
        "delay_max_ms": max(delays) * 1000 if delays else None,
        "delay_mean_ms": statistics.fmean(delays) * 1000 if delays else None,
    }


def _names(jobs: int) -> list[str]:
    return [f"job-{i:04d}" for i in range(jobs)]


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
            results = [await run_mode(mode, args, core, url, env, port) for mode in ("watch", "poll")]
    finally:
        server.terminate()
        await server.wait()

    print()
    print(
        f"{args.jobs} concurrent waits, waiting window {args.wait:.0f}s, Succeeded written at {args.rate}/s"
    )
    rows = [
        ("API requests per job per minute (server count)", "requests_per_job_per_min", "{:.4f}"),
        ("open watch streams on the server", "open_watch_streams_server", "{}"),
        ("TCP connections waiter -> server", "tcp_connections_waiter", "{}"),
        ("waiter CPU s per minute, waiting", "cpu_s_per_min_waiting", "{:.2f}"),
        ("waiter CPU s per minute, idle (no triggers)", "cpu_s_per_min_idle", "{:.2f}"),
        ("waiter RSS growth over idle (MB)", "rss_growth_mb", "{:.1f}"),
        ("delay Succeeded write -> event p50 (ms)", "delay_p50_ms", "{:.1f}"),
        ("delay Succeeded write -> event p99 (ms)", "delay_p99_ms", "{:.1f}"),
        ("delay max (ms)", "delay_max_ms", "{:.1f}"),
        ("events received", "events", "{}"),
    ]
    print(f"{'':50} {'watch (TFJobTrigger)':>22} {'poll every 10 s':>18}")
    for label, key, fmt in rows:
        cells = [fmt.format(r[key]) if r[key] is not None else "-" for r in results]
        print(f"{label:50} {cells[0]:>22} {cells[1]:>18}")
    for r in results:
        print(
            f"{r['mode']}: requests in window by kind {r['request_kinds_in_window']}; outcomes {r['outcomes']}"
        )
        if r["mode"] == "watch":
            print(f"watch: watchers {r['watchers']}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "server":
        asyncio.run(serve())
        return
    if len(sys.argv) > 1 and sys.argv[1] == "waiter":
        mode, namespace, jobs, port, idle, window = sys.argv[2:8]
        names = _names(int(jobs))
        asyncio.run(wait_jobs(mode, namespace, names, int(port), float(idle), float(window)))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--wait", type=float, default=60.0, help="waiting window measured, seconds")
    parser.add_argument("--idle", type=float, default=15.0, help="idle window measured before, seconds")
    parser.add_argument("--rate", type=float, default=100.0, help="Succeeded writes per second")
    asyncio.run(coordinate(parser.parse_args()))


if __name__ == "__main__":
    main()
