"""Replica logs into an Airflow-like task logger: aggregate lines/s and write-to-sink delay.

Starts the local cluster as its own process (`tfjob-local serve`, as a real API server and kubelet
would be), runs a TFJob of 16 Worker replicas that print numbered lines carrying their write time, and
follows it with `follow_job(log_replicas="all")` into Airflow 3's task logger (structlog, JSON lines,
configured as the task runner configures it, writing to a file). Prints, in the same run:

- the ceiling: a plain loop of task-logger calls with lines of the same shape (one line per record);
- paced runs (the replicas together offer 7,500 lines/s, then half the ceiling): lines/s at the sink
  and the p50 / p99 / max delay from a line's write (its embedded timestamp) to the sink;
- a flat-out run (replicas print as fast as they can): lines/s at the sink, and the delays;
- the CPU seconds of the follower process and of the cluster process (API server + runner) per run:
  on a 2-core machine the 16 replica processes, the cluster and the follower share the CPUs.

Usage: .venv/bin/python tests/benchmarks/bench_logs.py [--replicas 16] [--lines 4000] [--paced-rate 7500]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any


class TaskLog:
    """Airflow 3's task logger as a task process has it: structlog, JSON lines, through its own writer.

    The task runner calls `configure_logging(json_output=True, output=<supervisor socket>,
    sending_to_supervisor=True)`; here the output is a file, which is no slower than the socket.
    """

    def __init__(self, path: Path) -> None:
        import structlog
        from airflow.sdk.log import configure_logging

        self.file = path.open("wb", buffering=0)
        configure_logging(json_output=True, output=self.file, sending_to_supervisor=True)
        self.logger = structlog.get_logger("airflow.task")

    def info(self, line: str) -> None:
        self.logger.info(line)


def ceiling(log: TaskLog, n: int) -> float:
    line = "[worker-12] bench 12 123456 1764441600123456789"
    start = time.perf_counter()
    for _ in range(n):
        log.info(line)
    return n / (time.perf_counter() - start)


class DelaySink:
    """The follow core's sink: records each line's delay, then writes it to the task logger."""

    def __init__(self, logger: TaskLog) -> None:
        self.logger = logger
        self.delays: list[float] = []
        self.count = 0
        self.first: float | None = None
        self.last = 0.0

    def __call__(self, line: str) -> None:
        now = time.time()
        if " bench " in line:
            self.delays.append(now - int(line.rsplit(" ", 1)[1]) / 1e9)
            self.count += 1
            if self.first is None:
                self.first = now
            self.last = now
        self.logger.info(line)


def replica_script(lines: int, per_second: float | None) -> str:
    """A replica printing `lines` numbered lines with their write time, paced or as fast as it can."""
    pace = f"start + (i + 1) / {per_second}" if per_second else "0"
    return textwrap.dedent(
        f"""
        import os, sys, time
        idx = os.environ["HOSTNAME"].rsplit("-", 1)[1]
        out = sys.stdout
        start = time.time()
        for i in range({lines}):
            out.write(f"bench {{idx}} {{i}} {{time.time_ns()}}\\n")
            wait = ({pace}) - time.time() if {bool(per_second)} else 0
            if wait > 0:
                out.flush()
                time.sleep(wait)
            elif i % 20 == 19:
                out.flush()
        out.flush()
        """
    )


def tfjob(name: str, replicas: int, script: str) -> dict[str, Any]:
    container = {"name": "tensorflow", "image": "python:3.11", "command": [sys.executable, "-c", script]}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {
            "successPolicy": "AllWorkers",
            "runPolicy": {"cleanPodPolicy": "None"},
            "tfReplicaSpecs": {
                "Worker": {
                    "replicas": replicas,
                    "restartPolicy": "Never",
                    "template": {"spec": {"containers": [container]}},
                }
            },
        },
    }


async def run_job(kubeconfig: str, name: str, body: dict[str, Any], sink: DelaySink) -> str:
    from airflow_tfjob.follow import FollowOptions, follow_job
    from airflow_tfjob.hooks.tfjob import AsyncTFJobHook

    hook = AsyncTFJobHook(conn_id=None, config_file=kubeconfig)
    await hook.create_tfjob(body, "default")
    try:
        options = FollowOptions(log_replicas="all", log_rate_per_replica=0, log_events=False)
        outcome = await follow_job(hook, name, "default", options, sink)
        return outcome.event
    finally:
        await hook.delete_tfjob(name, "default")


def _cpu(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of the cluster process (its replicas excluded)."""
    t = os.times()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return t.user + t.system, (int(fields[11]) + int(fields[12])) / tick


def report(label: str, sink: DelaySink, expected: int, ceiling_rate: float) -> None:
    span = max(sink.last - (sink.first or sink.last), 1e-9)
    rate = sink.count / span
    d = sorted(sink.delays)

    def p(q: float) -> float:
        return d[min(len(d) - 1, int(q * len(d)))] if d else float("nan")

    print(
        f"{label:<10} lines {sink.count}/{expected}  {rate:8.0f} lines/s at the sink "
        f"({rate / ceiling_rate:.0%} of the ceiling)  delay p50 {p(0.5) * 1000:.0f} ms  "
        f"p99 {p(0.99) * 1000:.0f} ms  max {d[-1] * 1000 if d else float('nan'):.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replicas", type=int, default=16)
    parser.add_argument("--lines", type=int, default=4000, help="lines per replica")
    parser.add_argument(
        "--paced-rate",
        type=float,
        default=7500,
        help="aggregate lines/s of the first paced run (half of 15,000)",
    )
    args = parser.parse_args()
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="bench-logs-airflow-"))
    work = Path(tempfile.mkdtemp(prefix="bench-logs-"))
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("tfjob-local")), "serve", "--workdir", str(work / "cluster")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        ready = server.stdout.readline().split()
        assert ready and ready[0] == "ready", ready
        kubeconfig = ready[2]
        log = TaskLog(work / "task.log")
        ceil = statistics.median(ceiling(log, 20_000) for _ in range(3))
        print(
            f"ceiling    {ceil:8.0f} lines/s  (loop of Airflow task-logger calls: structlog, JSON, one line per record)"
        )
        total = args.replicas * args.lines
        runs: list[tuple[str, float | None]] = [
            (f"paced {args.paced_rate:.0f}/s", args.paced_rate),
            (f"paced {ceil / 2:.0f}/s", ceil / 2),
            ("flat-out", None),
        ]
        for label, rate in runs:
            sink = DelaySink(log)
            name = f"bench-{label.split()[0]}-{int(rate or 0)}-{os.getpid()}"
            pace = None if rate is None else rate / args.replicas
            body = tfjob(name, args.replicas, replica_script(args.lines, pace))
            cpu_before = _cpu(server.pid)
            event = asyncio.run(run_job(kubeconfig, name, body, sink))
            ours, cluster = (a - b for a, b in zip(_cpu(server.pid), cpu_before, strict=True))
            offered = "as fast as the replicas can print" if rate is None else f"offered {rate:.0f} lines/s"
            print(
                f"{label} run: job {event}, {offered}; CPU s: follower process {ours:.1f}, cluster process {cluster:.1f}"
            )
            report(label, sink, total, ceil)
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
