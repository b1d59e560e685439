"""Replica logs into Airflow 3's task log: aggregate lines/s and delay from a line's write to the log file.

The log path is Airflow 3.3's own, in two processes as on a worker:

- this process is the task: its logging is set up by the task runner's own function
  (`supervisor._configure_logs_over_json_channel`: structlog, JSON, one record per log call, written to
  a socket), and the follow core's sink is a structlog logger as `BaseOperator.log` returns it;
- a separate process is the supervisor: Airflow's `make_buffered_socket_reader` +
  `process_log_messages_from_subprocess` read that socket, decode each record and log it again through
  the logger `supervisor._configure_logging` opens on the task's log file (JSON lines). That file is
  what the log view reads; a line's delay is measured to the moment the supervisor had written it.
  This is the path of every executor's worker (and of `airflow dags test --use-executor`); a plain
  `airflow dags test` runs the task inside the CLI process and prints to its console, with no file.

The local cluster runs as its own process too (`tfjob-local serve`, as an API server and kubelet would),
with a TFJob of 16 Worker replicas printing numbered lines that carry their write time; the follow core
(`follow_job(log_replicas="all")`, no rate limit) writes them to the task log. Printed, in the same run:

- the ceiling: a plain loop of task-logger calls, one line per record, timed until the last record is
  in the file (the supervisor decodes and re-encodes every record: it, not the task, sets the pace);
  beside it the same loop with 100 lines per record;
- paced runs (the replicas together offer 7,500 lines/s, then half the ceiling) and a flat-out run
  (replicas print as fast as they can): lines/s into the file, lines per record, and the p50 / p99 / max
  delay from a line's write (its embedded timestamp) to the file;
- CPU seconds per run of the follower (task) process, the supervisor and the cluster process: on a
  2-core machine the 16 replica processes, the cluster, the follower and the supervisor share the CPUs.

Usage: .venv/bin/python tests/benchmarks/bench_logs.py [--replicas 16] [--lines 4000] [--paced-rate 7500]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import os
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

SYNC = "bench-sync"


def supervisor_main(fd: int, relative_path: str) -> None:
    """The supervisor's side of the task log, with Airflow's own functions; reports when bytes landed.

    After each socket read it notes (time, file size): a record's appearance time is the first note at
    or past its end. On a `samples` request (stdin) it prints the notes taken since the last one.
    """
    from airflow.sdk.execution_time.supervisor import (
        _configure_logging,
        make_buffered_socket_reader,
        process_log_messages_from_subprocess,
    )

    logger, handle = _configure_logging(relative_path, None)  # type: ignore[arg-type]
    sock = socket.socket(fileno=fd)
    sel = selectors.DefaultSelector()
    closed: list[bool] = []
    reader = make_buffered_socket_reader(
        process_log_messages_from_subprocess((logger,)), on_close=lambda s: closed.append(True)
    )
    sel.register(sock, selectors.EVENT_READ, reader)
    sel.register(sys.stdin, selectors.EVENT_READ, None)
    notes: list[tuple[float, int]] = []
    print("ready", os.path.realpath(handle.name), flush=True)
    while not closed:
        for key, _ in sel.select(1.0):
            if key.data is None:
                request = sys.stdin.readline()
                if not request:
                    return
                cpu = os.times()
                print(json.dumps({"notes": notes, "cpu": cpu.user + cpu.system}), flush=True)
                notes = []
                continue
            handler, on_close = key.data
            if not handler(key.fileobj):
                sel.unregister(key.fileobj)
                on_close(key.fileobj)
            notes.append((time.time(), handle.tell()))


class TaskLog:
    """The task process's end of the log, plus what the bench needs to read the file back."""

    def __init__(self, work: Path) -> None:
        import structlog
        from airflow.sdk.execution_time.supervisor import _configure_logs_over_json_channel

        ours, theirs = socket.socketpair()
        self.supervisor = subprocess.Popen(
            [sys.executable, __file__, "--supervisor", str(theirs.fileno()), "bench/task.log"],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        theirs.close()
        assert self.supervisor.stdout is not None and self.supervisor.stdin is not None
        ready = self.supervisor.stdout.readline().split()
        assert ready and ready[0] == "ready", ready
        self.path = Path(ready[1])
        self.fd = ours.detach()
        _configure_logs_over_json_channel(self.fd)
        # What `self.log` of an operator (or trigger) is in Airflow 3: a structlog logger by class name.
        self.logger = structlog.get_logger(
            "airflow.task.operators.airflow_tfjob.operators.tfjob.TFJobOperator"
        )
        self.offset = 0
        self.syncs = 0

    def info(self, line: str) -> None:
        self.logger.info(line)

    def collect(self) -> tuple[list[tuple[float, list[str]]], float]:
        """Records written since the last call, each with the time it was in the file; supervisor CPU s.

        Writes a sync record and reads the file until it is there, so everything before it is included.
        """
        self.syncs += 1
        marker = f"{SYNC} {self.syncs}"
        self.info(marker)
        deadline = time.time() + 120
        records: list[tuple[int, str]] = []
        with self.path.open("rb") as f:
            f.seek(self.offset)
            pending = b""
            pos = self.offset
            while True:
                chunk = f.read()
                if not chunk:
                    if time.time() > deadline:
                        raise TimeoutError(f"{marker} never reached {self.path}")
                    time.sleep(0.05)
                    continue
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for raw in complete:
                    pos += len(raw) + 1
                    records.append((pos, json.loads(raw)["event"]))
                if records and records[-1][1] == marker:
                    break
        self.offset = pos
        assert self.supervisor.stdin is not None and self.supervisor.stdout is not None
        self.supervisor.stdin.write("samples\n")
        self.supervisor.stdin.flush()
        answer = json.loads(self.supervisor.stdout.readline())
        notes = answer["notes"]
        stamps = [n[1] for n in notes]
        out = []
        for end, event in records[:-1]:
            i = bisect.bisect_left(stamps, end)
            out.append((notes[min(i, len(notes) - 1)][0], event.split("\n")))
        return out, float(answer["cpu"])

    def close(self) -> None:
        os.close(self.fd)
        assert self.supervisor.stdin is not None
        self.supervisor.stdin.close()
        self.supervisor.wait(30)


def ceiling(log: TaskLog, lines: int, per_record: int) -> float:
    """Lines/s from a loop of log calls until the last record is in the file."""
    line = "[worker-12] bench 12 123456 1764441600123456789"
    record = "\n".join([line] * per_record)
    log.collect()
    start = time.time()
    for _ in range(lines // per_record):
        log.info(record)
    records, _cpu = log.collect()
    return (lines // per_record * per_record) / (records[-1][0] - start)


class Result:
    """Delays and rate of one run, from the records as they landed in the file.

    Also checks what the tests check, on this volume: each replica's lines exactly once and in order,
    and every line of a record with its own `[worker-N] ` prefix. The first line of each replica
    shows the start-up part of the delay (pod running, watch event, stream opened): a replica that
    prints its whole output at once waits that long whatever the throughput.
    """

    def __init__(self, records: list[tuple[float, list[str]]]) -> None:
        self.delays: list[float] = []
        self.first_delays: list[float] = []
        self.records = 0
        self.out_of_order = 0
        next_seq: dict[str, int] = {}
        first = last = 0.0
        for landed, lines in records:
            got = 0
            for line in lines:
                if " bench " not in line:
                    continue
                prefix, _, idx, seq, written = line.split(" ")
                delay = landed - int(written) / 1e9
                self.delays.append(delay)
                want = next_seq.get(prefix, 0)
                if want == 0:
                    self.first_delays.append(delay)
                if int(seq) != want or prefix != f"[worker-{idx}]":
                    self.out_of_order += 1
                next_seq[prefix] = int(seq) + 1
                got += 1
            if got:
                self.records += 1
                first = first or landed
                last = landed
        self.count = len(self.delays)
        self.rate = self.count / max(last - first, 1e-9)


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


async def run_job(kubeconfig: str, name: str, body: dict[str, Any], sink: Any) -> str:
    from airflow_tfjob.follow.core import FollowOptions, follow_job
    from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook

    hook = AsyncKubeflowJobHook(conn_id=None, config_file=kubeconfig)
    await hook.create_job("TFJob", body, "default")
    try:
        options = FollowOptions(log_replicas="all", log_rate_per_replica=0, log_events=False)
        outcome = await follow_job(hook, name, "default", options, sink)
        return outcome.event
    finally:
        await hook.delete_job("TFJob", name, "default")


def _cpu(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of the cluster process (its replicas excluded)."""
    t = os.times()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return t.user + t.system, (int(fields[11]) + int(fields[12])) / tick


def report(label: str, res: Result, expected: int, ceiling_rate: float) -> None:
    d = sorted(res.delays)

    def p(q: float) -> float:
        return d[min(len(d) - 1, int(q * len(d)))] if d else float("nan")

    print(
        f"{label:<16} lines {res.count}/{expected}  {res.rate:8.0f} lines/s into the task log "
        f"({res.rate / ceiling_rate:.0%} of the ceiling), {res.count / max(res.records, 1):.0f} lines/record  "
        f"delay p50 {p(0.5) * 1000:.0f} ms  p99 {p(0.99) * 1000:.0f} ms  max {d[-1] * 1000 if d else float('nan'):.0f} ms"
    )
    starts = sorted(res.first_delays)
    print(
        f"{'':<16} out of order or repeated: {res.out_of_order}; first line of each replica: delay "
        f"median {statistics.median(starts) * 1000 if starts else float('nan'):.0f} ms, "
        f"max {starts[-1] * 1000 if starts else float('nan'):.0f} ms"
    )


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--supervisor":
        supervisor_main(int(sys.argv[2]), sys.argv[3])
        return
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
    log: TaskLog | None = None
    try:
        assert server.stdout is not None
        ready = server.stdout.readline().split()
        assert ready and ready[0] == "ready", ready
        kubeconfig = ready[2]
        log = TaskLog(work)
        ceil = statistics.median(ceiling(log, 30_000, 1) for _ in range(3))
        batched = statistics.median(ceiling(log, 100_000, 100) for _ in range(3))
        print(
            f"ceiling          {ceil:8.0f} lines/s  (loop of task-logger calls, one line per record, "
            f"task process -> supervisor -> log file); {batched:.0f} lines/s at 100 lines per record"
        )
        total = args.replicas * args.lines
        runs: list[tuple[str, float | None]] = [
            (f"paced {args.paced_rate:.0f}/s", args.paced_rate),
            (f"paced {ceil / 2:.0f}/s", ceil / 2),
            ("flat-out", None),
        ]
        for label, rate in runs:
            name = f"bench-{label.split()[0]}-{int(rate or 0)}-{os.getpid()}"
            pace = None if rate is None else rate / args.replicas
            body = tfjob(name, args.replicas, replica_script(args.lines, pace))
            _, sup_before = log.collect()
            cpu_before = _cpu(server.pid)
            event = asyncio.run(run_job(kubeconfig, name, body, log.info))
            ours, cluster = (a - b for a, b in zip(_cpu(server.pid), cpu_before, strict=True))
            records, sup_after = log.collect()
            offered = "as fast as the replicas can print" if rate is None else f"offered {rate:.0f} lines/s"
            print(
                f"{label} run: job {event}, {offered}; CPU s: follower {ours:.1f}, "
                f"supervisor {sup_after - sup_before:.1f}, cluster {cluster:.1f}"
            )
            report(label, Result(records), total, ceil)
    finally:
        if log is not None:
            log.close()
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
