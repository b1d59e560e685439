"""Benchmark of the local API server: GET/s, create/s, and watch delivery delay to 1,000 watchers.

The server runs as `tfjob-local serve` in its own process; the load comes from a raw aiohttp client with
several keep-alive connections in this (separate) process, as the official clients top out well below the
server here. Run:

    .venv/bin/python tests/benchmarks/bench_apiserver.py [--seconds 5] [--connections 8] [--watchers 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp


def start_server(workdir: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "airflow_tfjob.local.cli", "serve", "--kubeconfig", str(workdir / "kubeconfig")],
        stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("ready "):
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, line.split()[1]


async def rate(session: aiohttp.ClientSession, connections: int, seconds: float, request: object) -> float:
    """Requests per second over `seconds`, `connections` requests in flight at any time."""
    done = 0
    stop_at = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            await request(session)  # type: ignore[operator]
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    return done / (time.perf_counter() - started)


async def bench_requests(url: str, connections: int, seconds: float) -> tuple[float, float]:
    cm_url = f"{url}/api/v1/namespaces/default/configmaps"
    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=connector) as session:
        async with session.post(cm_url, json={"metadata": {"name": "bench-get"}, "data": {"k": "v" * 200}}) as r:
            assert r.status in (201, 409), await r.text()

        async def get(s: aiohttp.ClientSession) -> None:
            async with s.get(f"{cm_url}/bench-get") as resp:
                await resp.read()
                assert resp.status == 200

        async def create(s: aiohttp.ClientSession) -> None:
            body = {"metadata": {"name": f"bench-{uuid.uuid4().hex}", "labels": {"bench": "create"}},
                    "data": {"k": "v"}}
            async with s.post(cm_url, json=body) as resp:
                await resp.read()
                assert resp.status == 201

        await rate(session, connections, 1.0, get)  # warm-up
        gets = await rate(session, connections, seconds, get)
        creates = await rate(session, connections, seconds, create)
    return gets, creates


async def bench_watchers(url: str, watchers: int, changes: int) -> list[float]:
    """Delay from sending a create to each watcher having read its ADDED event, over several changes."""
    cm_url = f"{url}/api/v1/namespaces/default/configmaps"
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    delays: list[float] = []
    sent: dict[str, float] = {}
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        async with session.get(cm_url) as resp:
            rv = (await resp.json())["metadata"]["resourceVersion"]
        label = f"w{uuid.uuid4().hex[:8]}"
        received = [asyncio.Event() for _ in range(changes)]
        counts = [0] * changes
        ready = 0
        all_ready = asyncio.Event()

        async def watch() -> None:
            nonlocal ready
            params = {"watch": "true", "resourceVersion": rv, "labelSelector": f"bench={label}",
                      "timeoutSeconds": "600"}
            async with session.get(cm_url, params=params) as resp:
                ready += 1
                if ready == watchers:
                    all_ready.set()
                buffer = b""
                mine = 0
                async for chunk in resp.content.iter_any():
                    arrived = time.perf_counter()
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        event = json.loads(line)
                        name = event["object"]["metadata"]["name"]
                        index = int(name.rsplit("-", 1)[1])
                        delays.append(arrived - sent[name])
                        counts[index] += 1
                        mine += 1
                        if counts[index] == watchers:
                            received[index].set()
                    if mine == changes:
                        return

        tasks = [asyncio.create_task(watch()) for _ in range(watchers)]
        await asyncio.wait_for(all_ready.wait(), 120)
        for i in range(changes):
            name = f"{label}-{i}"
            sent[name] = time.perf_counter()
            async with session.post(cm_url, json={"metadata": {"name": name, "labels": {"bench": label}}}) as resp:
                assert resp.status == 201
            await asyncio.wait_for(received[i].wait(), 60)
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
    return delays


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--watchers", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-apiserver-") as tmp:
        proc, url = start_server(Path(tmp))
        try:
            gets, creates = asyncio.run(bench_requests(url, args.connections, args.seconds))
            print(f"GET    {gets:8.0f} requests/s  ({args.connections} connections, {args.seconds:.0f} s)")
            print(f"create {creates:8.0f} requests/s  ({args.connections} connections, {args.seconds:.0f} s)")
            delays = asyncio.run(bench_watchers(url, args.watchers, args.changes))
            print(f"watch delivery to {args.watchers} watchers ({args.changes} changes, {len(delays)} deliveries): "
                  f"p50 {statistics.median(delays) * 1000:.1f} ms, p99 {percentile(delays, 0.99) * 1000:.1f} ms, "
                  f"max {max(delays) * 1000:.1f} ms")
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
