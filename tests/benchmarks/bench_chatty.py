"""Quiet deferred jobs beside jobs whose replicas flood their logs, in one triggerer process.

    .venv/bin/python tests/benchmarks/bench_chatty.py [--quiet 1000] [--floods 10] [--rate 100] \
        [--flood-lines 100000] [--baseline main]

Processes, so that each figure belongs to one of them:

- coordinator (this one): the local cluster (API server, controller, runner: the flooding replicas are
  real processes), the jobs, and the quiet jobs' Succeeded conditions written at ``--rate`` per second
  while the floods run;
- waiter, once per tree: the triggerer stand-in. It runs one KubeflowJobTrigger per job in one event
  loop, quiet ones without logs and flooding ones following every replica's log into a task-log
  stand-in that counts lines and keeps none; it samples its own RSS every 50 ms.

Each flooding replica writes as fast as it can: ``--flood-lines`` short lines, 200 lines of 10 KB, a
1 MB run of text without any newline (a progress bar's carriage returns), and a last line without
newline. Printed, per tree: the waiter's peak RSS (and its growth over the process before the triggers
started), the quiet jobs' delay from the Succeeded write to their event (p50, p99, max), and for the
flooding jobs the lines written, delivered to the task log and dropped, and whether every dropped line
is accounted for: the notices in the task log add up to the counts in the event (the task's XCom
``log_lines_dropped``), and delivered + dropped = written.

``--baseline REF`` runs the same scenario with the waiter importing the provider from REF (a temporary
git worktree, as tests/benchmarks/against.py does), beside the working tree.

Targets (issue 23): 10 flooding jobs beside 1,000 quiet ones: peak RSS under the documented bound
(docs/performance.md), quiet p99 <= 1 s, every dropped line counted in the task log and the XCom.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# The integration tests' manifests and statuses.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from watch_support import succeeded_status, tfjob_manifest

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "chatty"
LONG_LINES = 200
FLOOD = r"""
import os, sys, time
while not os.path.exists(os.environ["GATE"]):  # opened once every trigger waits
    time.sleep(0.05)
w = sys.stdout.write
for i in range(int(os.environ["FLOOD_LINES"])):
    w(f"flood line {i}\n")
for i in range(200):
    w("y" * 10000 + f" long {i}\n")
for i in range(100000):
    w("progress 0123\r")
w("\nend without newline")
"""
NOTICE = re.compile(r"--- (\d+) lines dropped from (\S+) \(budget")
RATE_NOTICE = re.compile(r"--- (\d+) lines dropped \(rate limit")
CAP_NOTICE = re.compile(r"log cap of \d+ lines reached: (\d+) replica lines were not shown")


def written_lines(flood_lines: int) -> int:
    """Lines one flooding replica writes: short, long, the newline-less run (one line), the last."""
    return flood_lines + LONG_LINES + 1 + 1


# ------------------------------------------------------------------------------------------------
# waiter


class CountingLog:
    """A task log that counts: replica lines delivered and the drop notices' figures; keeps nothing."""

    def __init__(self) -> None:
        self.delivered = 0
        self.noticed = 0

    def _record(self, msg: Any, *args: Any, **_: Any) -> None:
        text = str(msg) % args if args else str(msg)
        for line in text.split("\n"):
            if line.startswith("[worker-") and "] --- " not in line:
                self.delivered += 1
                continue
            for pattern in (NOTICE, RATE_NOTICE, CAP_NOTICE):
                match = pattern.search(line)
                if match:
                    self.noticed += int(match.group(1))

    info = warning = error = debug = exception = critical = _record


async def wait(names_quiet: list[str], names_flood: list[str]) -> None:
    import psutil

    from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook
    from airflow_tfjob.triggers.deferral import KubeflowJobTrigger

    # Warm, as a triggerer that already runs triggers is: modules imported, the client built.
    await AsyncKubeflowJobHook(conn_id="kubernetes_default").list_objects("tfjobs", NAMESPACE)
    process = psutil.Process()
    rss_start = process.memory_info().rss
    peak = [rss_start]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.05):
            peak[0] = max(peak[0], process.memory_info().rss)

    threading.Thread(target=sample, daemon=True).start()
    events: dict[str, float] = {}
    floods: dict[str, dict[str, Any]] = {}

    async def quiet(name: str) -> None:
        trigger = KubeflowJobTrigger(
            name=name, namespace=NAMESPACE, options={"get_logs": False, "startup_timeout": None}
        )
        async for event in trigger.run():
            events[name] = time.time()
            assert event.payload["event"] == "succeeded", event.payload

    async def flood(name: str) -> None:
        trigger = KubeflowJobTrigger(
            name=name, namespace=NAMESPACE, options={"get_logs": True, "log_replicas": "all"}
        )
        log = CountingLog()
        trigger._log = log  # the triggerer writes the trigger's lines into the task's log
        started = time.monotonic()
        async for event in trigger.run():
            dropped = event.payload.get("dropped") or {}
            floods[name] = {
                "event": event.payload["event"],
                "delivered": log.delivered,
                "noticed": log.noticed,
                "dropped": sum(sum(reasons.values()) for reasons in dropped.values()),
                "seconds": time.monotonic() - started,
            }

    tasks = [asyncio.create_task(quiet(n)) for n in names_quiet]
    tasks += [asyncio.create_task(flood(n)) for n in names_flood]
    # Settled once every quiet trigger has made its first requests and subscribed to the shared watch
    # (a trigger still starting when its job's Succeeded is written would count its start as delay).
    from airflow_tfjob.hooks import jobwatch

    def subscribed() -> int:
        return sum(int(w.get("subscribers", 0)) for w in jobwatch.active_watchers())

    for _ in range(1500):  # at most 5 minutes
        if subscribed() >= len(names_quiet) + len(names_flood):
            break
        await asyncio.sleep(0.2)
    await asyncio.sleep(1)
    print(json.dumps({"phase": "settled"}), flush=True)
    await asyncio.gather(*tasks)
    stop.set()
    print(
        json.dumps(
            {"phase": "done", "events": events, "floods": floods, "rss_start": rss_start, "rss_peak": peak[0]}
        ),
        flush=True,
    )


# ------------------------------------------------------------------------------------------------
# coordinator


def _job(name: str, *, quiet: bool, flood_lines: int, gate: str = "") -> dict[str, Any]:
    if quiet:
        return tfjob_manifest(name)
    command = [sys.executable, "-c", FLOOD]
    env = {"FLOOD_LINES": str(flood_lines), "GATE": gate}
    return tfjob_manifest(name, external=False, command=command, env=env)


def _read_json_line(stream: Any) -> dict[str, Any]:
    """The waiter's next report (it may print other lines: Airflow's own start-up logging)."""
    for line in stream:
        if line.startswith("{"):
            data: dict[str, Any] = json.loads(line)
            return data
    raise RuntimeError("the waiter ended without reporting")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run_tree(cluster: Any, tree: Path, args: argparse.Namespace, label: str) -> dict[str, Any]:
    from airflow_tfjob.hooks.sync import KubeflowJobHook
    from airflow_tfjob.jobs.kinds import TFJOB

    hook = KubeflowJobHook(conn_id="kubernetes_default")
    stamp = int(time.time())
    quiet = [f"q{stamp}-{i:04d}" for i in range(args.quiet)]
    floods = [f"f{stamp}-{i:02d}" for i in range(args.floods)]
    gate = Path(tempfile.mkdtemp(prefix="bench-chatty-gate-")) / "open"
    for name in quiet:
        hook.create_job(TFJOB, _job(name, quiet=True, flood_lines=0), NAMESPACE)
    for name in floods:  # their replicas start, and wait for the gate
        hook.create_job(
            TFJOB, _job(name, quiet=False, flood_lines=args.flood_lines, gate=str(gate)), NAMESPACE
        )
    env = {**os.environ, "PYTHONPATH": str(tree)}
    waiter = subprocess.Popen(
        [sys.executable, __file__, "waiter", json.dumps(quiet), json.dumps(floods)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert waiter.stdout is not None
    settled = _read_json_line(waiter.stdout)
    assert settled["phase"] == "settled", settled
    gate.touch()  # every trigger waits: the floods run while the quiet jobs end
    time.sleep(args.lead)
    written: dict[str, float] = {}
    gap = 1.0 / args.rate
    start = time.monotonic()
    for i, name in enumerate(quiet):
        pause = start + i * gap - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        written[name] = time.time()
        hook.custom_object_client.patch_namespaced_custom_object_status(
            "kubeflow.org",
            "v1",
            NAMESPACE,
            "tfjobs",
            name,
            {"status": succeeded_status(name, NAMESPACE)},
            _content_type="application/merge-patch+json",
        )
    done = _read_json_line(waiter.stdout)
    waiter.wait()
    delays = [done["events"][n] - written[n] for n in quiet if n in done["events"]]
    flood_rows = list(done["floods"].values())
    expected = written_lines(args.flood_lines) * len(floods)
    delivered = sum(r["delivered"] for r in flood_rows)
    dropped = sum(r["dropped"] for r in flood_rows)
    noticed = sum(r["noticed"] for r in flood_rows)
    for name in quiet + floods:
        hook.delete_job(TFJOB, name, NAMESPACE)
    return {
        "label": label,
        "rss_peak_mb": done["rss_peak"] / 2**20,
        "rss_growth_mb": (done["rss_peak"] - done["rss_start"]) / 2**20,
        "p50_ms": _pct(delays, 0.5) * 1000,
        "p99_ms": _pct(delays, 0.99) * 1000,
        "max_ms": max(delays) * 1000,
        "quiet_events": len(delays),
        "written": expected,
        "delivered": delivered,
        "dropped": dropped,
        "noticed": noticed,
        "accounted": noticed == dropped and delivered + dropped == expected,
        "flood_seconds_max": max((r["seconds"] for r in flood_rows), default=0.0),
        "flood_events": sorted({r["event"] for r in flood_rows}),
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "waiter":
        asyncio.run(wait(json.loads(sys.argv[2]), json.loads(sys.argv[3])))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quiet", type=int, default=1000)
    parser.add_argument("--floods", type=int, default=10)
    parser.add_argument("--flood-lines", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=100.0, help="quiet jobs' Succeeded writes per second")
    parser.add_argument(
        "--lead", type=float, default=3.0, help="seconds the floods run before the first write"
    )
    parser.add_argument("--baseline", help="a commit to run the same waiter on, beside the working tree")
    args = parser.parse_args()

    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="bench-chatty-airflow-"))
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
    # A replica's bare `python` must be this interpreter (the local cluster runs host processes).
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    from airflow_tfjob.local import LocalCluster

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-chatty-baseline-") as scratch, LocalCluster() as cluster:
        extra = {"kube_config_path": str(cluster.kubeconfig_path), "namespace": NAMESPACE}
        os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = json.dumps(
            {"conn_type": "kubernetes", "extra": extra}
        )
        _namespace()
        trees = [(f"current {_head()} + working tree", ROOT)]
        if args.baseline:
            baseline = Path(scratch) / "tree"
            subprocess.run(
                ["git", "worktree", "add", "--detach", "--quiet", str(baseline), args.baseline],
                cwd=ROOT,
                check=True,
            )
            trees.insert(0, (f"baseline {args.baseline}", baseline))
        try:
            for label, tree in trees:
                rows.append(run_tree(cluster, tree, args, label))
        finally:
            if args.baseline:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(Path(scratch) / "tree")], cwd=ROOT
                )
    print(
        f"{args.floods} flooding jobs ({written_lines(args.flood_lines):,} lines each: short, 10 KB, no newline) "
        f"beside {args.quiet} quiet ones; quiet Succeeded written at {args.rate:g}/s"
    )
    figures = [
        ("waiter peak RSS (MB)", "rss_peak_mb", "{:.0f}"),
        ("waiter RSS growth to peak (MB)", "rss_growth_mb", "{:.0f}"),
        ("quiet Succeeded -> event p50 (ms)", "p50_ms", "{:.0f}"),
        ("quiet Succeeded -> event p99 (ms)", "p99_ms", "{:.0f}"),
        ("quiet Succeeded -> event max (ms)", "max_ms", "{:.0f}"),
        ("quiet events", "quiet_events", "{}"),
        ("flood lines written", "written", "{:,}"),
        ("flood lines delivered to the task log", "delivered", "{:,}"),
        ("flood lines dropped (event / XCom)", "dropped", "{:,}"),
        ("flood lines dropped (task log notices)", "noticed", "{:,}"),
        ("every line delivered or counted", "accounted", "{}"),
        ("longest flooding trigger (s)", "flood_seconds_max", "{:.0f}"),
        ("flooding jobs' events", "flood_events", "{}"),
    ]
    print(f"{'':42}" + "".join(f"{row['label']:>36}" for row in rows))
    for title, key, fmt in figures:
        print(f"{title:42}" + "".join(f"{fmt.format(row[key]):>36}" for row in rows))


def _head() -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def _namespace() -> None:
    from kubernetes.client import V1Namespace, V1ObjectMeta

    from airflow_tfjob.hooks.sync import KubeflowJobHook

    hook = KubeflowJobHook(conn_id="kubernetes_default")
    hook.core_v1_client.create_namespace(V1Namespace(metadata=V1ObjectMeta(name=NAMESPACE)))


if __name__ == "__main__":
    main()
