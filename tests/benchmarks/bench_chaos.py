"""Chaos run: TFJob tasks against a local cluster that throttles, fails, loses replies and cuts streams.

    python tests/benchmarks/bench_chaos.py [--tasks 20] [--rates 0.05,0.15] [--seed 7] [--parallel 4] [--job-seconds 10]
    python tests/benchmarks/bench_chaos.py --unterminated [--tasks 20] [--parallel 4]

For each fault rate, the same seeded run is made twice in one process: with the provider's retry
policy (``api_retry_timeout`` at its default) and, as the baseline, with ``api_retry_timeout=0`` (no
retries by the provider; what the kubernetes client does by itself is left as it is). Half the tasks
run synchronously, half deferred (the trigger run in-process as the triggerer would). Each task trains
nothing: two Worker replicas print numbered lines and a metric, so that what is checked is the
provider. Printed per run:

- tasks, and outcomes right (succeeded with its metric: every job here succeeds, so any failed task
  is an outcome the API's faults decided);
- duplicate jobs (more than one TFJob for a task instance);
- lost and duplicated lines (each replica's numbered lines in the task's log, counted once each);
- leftovers (pods or Services of finished jobs still there after the task: cleanPodPolicy All);
- faults met per task (the server's count of injected faults over the tasks: each one is a retry, a
  reconnect or an adoption the provider had to make).

Targets (issue 9): every outcome right, 0 duplicates, 0 lost or duplicated lines, 0 leftovers, at 5% and
at 15%. The same tasks run once without faults first; for each rate, each task's wall time with the
retry policy is printed against that run's (issue 23's target: every task within 1.5x).
``--job-seconds`` sets how long each replica runs (default 10 s, still far shorter than a training
job): a fault on the task's own path (its create, its cleanup) costs the same seconds whatever the
job's length, so the ratio depends on it; with jobs of a second or two, a single honoured
``Retry-After: 1`` on that path is already more than half the task (docs/performance.md).

``--unterminated`` (issue 23): the same tasks once without faults and once with every watch and
followed log ending without HTTP's final chunk (fault kind ``unterminated``, as some gateways and load
balancers end streams); printed beside the rows, each task's wall time against its fault-free run.
Target: every task within 1.5x of its fault-free wall time, outcomes and lines as without faults.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="bench-chaos-airflow-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
# A replica's bare `python` must be this interpreter (the local cluster runs host processes).
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
# The integration tests' stand-ins for a task instance, its state store and the triggerer.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from operator_support import StateStore, TaskInstance, first_event, rebuild_trigger

LINES = 30
PROGRAM = r"""
import json, os, time
task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {})
me = f"{task.get('type', 'worker')}-{task.get('index', 0)}"
for i in range(int(os.environ["LINES"])):
    print(f"chaos {os.environ['TAG']} {me} line {i}", flush=True)
    time.sleep(float(os.environ["INTERVAL"]))
print("accuracy=0.9", flush=True)
"""
LINE = re.compile(r"\[(worker-\d)\] chaos (t\d+) (worker-\d) line (\d+)(?!\d)")
CONN = "bench_chaos"


class Capture:
    """Stands in for a task's logger: keeps every record, as the task log file would."""

    def __init__(self) -> None:
        self.records: list[str] = []

    def _record(self, msg: Any, *args: Any, **_: Any) -> None:
        text = str(msg)
        if args:
            try:
                text = text % args
            except (TypeError, ValueError):
                text = f"{text} {args}"
        self.records.append(text)

    info = warning = error = debug = exception = critical = _record

    def text(self) -> str:
        return "\n".join(self.records)


@dataclass
class TaskRun:
    tag: str
    ti: TaskInstance
    deferrable: bool
    log: Capture
    outcome: str = ""
    wall_s: float = 0.0


def run_task(tag: str, run: str, deferrable: bool, retry_timeout: float | None, job_seconds: float) -> TaskRun:
    ti = TaskInstance(dag_id="bench_chaos", run_id=f"{run}-{tag}")
    task = TaskRun(tag, ti, deferrable, Capture())
    started = time.monotonic()
    try:
        _run_operator(task, deferrable, retry_timeout, job_seconds)
    finally:
        task.wall_s = time.monotonic() - started
    return task


def _run_operator(task: TaskRun, deferrable: bool, retry_timeout: float | None, job_seconds: float) -> None:
    from airflow_compat import TaskDeferred

    from airflow_tfjob.operators.tfjob import TFJobOperator

    tag, ti = task.tag, task.ti
    kwargs: dict[str, Any] = {} if retry_timeout is None else {"api_retry_timeout": retry_timeout}
    op = TFJobOperator(
        task_id="train",
        kubernetes_conn_id=CONN,
        namespace="default",
        image="local/python",
        command=[sys.executable, "-c", PROGRAM],
        env={"LINES": str(LINES), "TAG": tag, "INTERVAL": str(job_seconds / LINES)},
        worker=2,
        log_replicas="all",
        metrics=["accuracy"],
        clean_pod_policy="All",
        startup_timeout=180,
        deferrable=deferrable,
        **kwargs,
    )
    op._cached_logger = task.log  # type: ignore[assignment]
    context: dict[str, Any] = {
        "ti": ti,
        "task_instance": ti,
        "run_id": ti.run_id,
        "task_state_store": StateStore(),
    }
    try:
        if deferrable:
            try:
                op.execute(context)
                raise AssertionError("did not defer")
            except TaskDeferred as deferred:
                event = asyncio.run(_fire(deferred, task.log))
            result = op.execute_complete(context, event)
        else:
            result = op.execute(context)
        ok = result["state"] == "succeeded" and result["metrics"].get("accuracy") == 0.9
        task.outcome = "right" if ok and not result["metrics"].get("missing") else f"wrong: {result}"
    except Exception as error:
        task.outcome = f"wrong: {type(error).__name__}: {str(error)[:200]}"


async def _fire(deferred: Any, log: Capture) -> dict[str, Any]:
    trigger = rebuild_trigger(deferred)
    trigger._log = log  # the triggerer writes the trigger's lines into the task's log
    return await first_event(trigger)


def line_errors(task: TaskRun) -> tuple[int, int]:
    seen: Counter[tuple[str, int]] = Counter()
    for line in task.log.text().splitlines():
        match = LINE.search(line)
        if match and match.group(2) == task.tag and match.group(1) == match.group(3):
            seen[(match.group(1), int(match.group(4)))] += 1
    expected = {(replica, i) for replica in ("worker-0", "worker-1") for i in range(LINES)}
    lost = len(expected - set(seen))
    duplicated = sum(count - 1 for count in seen.values() if count > 1)
    return lost, duplicated


def inspect(hook: Any, task: TaskRun) -> tuple[int, int]:
    """(jobs of the task instance, leftover pods and Services), read with faults off."""
    from airflow_tfjob.build.naming import identity_selector

    ti = task.ti
    selector = identity_selector(ti.dag_id, ti.task_id, ti.run_id, ti.map_index, include_handled=True)
    jobs = hook.list_jobs("TFJob", "default", selector)
    leftovers = 0
    deadline = time.monotonic() + 60
    for job in jobs:
        name = job["metadata"]["name"]
        # Pod deletion is graceful: give the kubelet its time before calling a pod left behind.
        while hook.list_job_pods(name, "default") and time.monotonic() < deadline:
            time.sleep(0.2)
        leftovers += len(hook.list_job_pods(name, "default"))
        services = hook.core_v1_client.list_namespaced_service("default").items
        leftovers += len([s for s in services if s.metadata.name.startswith(f"{name}-")])
        hook.delete_job("TFJob", name, "default")
    return len(jobs), leftovers


def one_run(
    cluster: Any,
    label: str,
    rate: float,
    options: argparse.Namespace,
    retry: float | None,
    kinds: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook
    from airflow_tfjob.local.faults import DEFAULT_KINDS, FaultPlan

    run = f"{label.split(':')[0].replace(' ', '-')}-{int(time.time() * 1000)}"
    before = cluster.fault_counts()
    seed, tasks, parallel = options.seed, options.tasks, options.parallel
    plan = FaultPlan(seed=seed, rate=rate, kinds=kinds or DEFAULT_KINDS, stream_cut_after=(0.3, 1.5))
    cluster.set_faults(plan if rate > 0 else None)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = [pool.submit(run_task, f"t{i}", run, i % 2 == 1, retry, options.job_seconds) for i in range(tasks)]
        done = [f.result() for f in futures]
    wall = time.monotonic() - started
    cluster.set_faults(None)
    by_kind = {k: n - before.get(k, 0) for k, n in cluster.fault_counts().items() if n != before.get(k, 0)}
    faults = sum(by_kind.values())
    hook = KubeflowJobHook(conn_id=CONN)
    lost = duplicated = duplicates = leftovers = 0
    wrong = []
    for task in done:
        task_lost, task_dup = line_errors(task)
        jobs, left = inspect(hook, task)
        lost, duplicated = lost + task_lost, duplicated + task_dup
        duplicates += max(0, jobs - 1)
        leftovers += left
        if task.outcome != "right":
            wrong.append(f"{task.tag} ({'deferred' if task.deferrable else 'sync'}): {task.outcome}")
    return {
        "label": label,
        "tasks": tasks,
        "right": tasks - len(wrong),
        "duplicates": duplicates,
        "lost": lost,
        "duplicated": duplicated,
        "leftovers": leftovers,
        "faults_per_task": faults / tasks,
        "faults_by_kind": by_kind,
        "wall_s": wall,
        "wrong": wrong,
        "task_walls": {task.tag: task.wall_s for task in done},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--rates", default="0.05,0.15")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument(
        "--job-seconds",
        type=float,
        default=10.0,
        help="how long each replica runs (it prints its lines evenly over this time; default 10 s)",
    )
    parser.add_argument(
        "--unterminated",
        action="store_true",
        help="compare each task without faults and with every stream ended without its final chunk",
    )
    options = parser.parse_args()
    if options.unterminated:
        unterminated(options)
        return

    from airflow_tfjob.local import LocalCluster

    with LocalCluster() as cluster:
        extra = {"kube_config_path": str(cluster.kubeconfig_path), "namespace": "default"}
        os.environ[f"AIRFLOW_CONN_{CONN.upper()}"] = json.dumps({"conn_type": "kubernetes", "extra": extra})
        clean = one_run(cluster, "no faults", 0.0, options, None)
        rows = []
        for rate in (float(r) for r in options.rates.split(",")):
            for label, retry in (("retry policy", None), ("baseline: no retries", 0.0)):
                rows.append(
                    {"rate": rate}
                    | one_run(cluster, label, rate, options, retry)
                )
    print(
        f"chaos run: {options.tasks} tasks per row (half sync, half deferred), 2 replicas x {LINES} lines each,"
    )
    print(
        f"mixed faults (429, 503, 5xx, lost replies, cut streams), seed {options.seed}, {options.parallel} at a time"
    )
    header = (
        f"{'fault rate':>10}  {'provider':22} {'outcomes right':>15} {'dup jobs':>9} {'lost lines':>11} "
        f"{'dup lines':>10} {'leftovers':>10} {'faults/task':>12} {'wall s':>7}"
    )
    print(header)
    for row in rows:
        print(
            f"{row['rate']:>10.0%}  {row['label']:22} {row['right']:>8}/{row['tasks']:<6} {row['duplicates']:>9} "
            f"{row['lost']:>11} {row['duplicated']:>10} {row['leftovers']:>10} {row['faults_per_task']:>12.1f} "
            f"{row['wall_s']:>7.0f}"
        )
    for row in rows:
        if row["label"] == "retry policy":
            print(f"{row['rate']:.0%} faults, {_ratios(row, clean)}")
    for row in rows:
        for wrong in row["wrong"][:5]:
            print(f"  {row['rate']:.0%} {row['label']}: {wrong}")


def _ratios(faulty: dict[str, Any], clean: dict[str, Any]) -> str:
    """Each task's wall time in `faulty` against the same task's in the fault-free run."""
    base, walls = clean["task_walls"], faulty["task_walls"]
    ratios = {tag: walls[tag] / base[tag] for tag in base}
    worst = max(ratios, key=lambda tag: ratios[tag])
    within = sum(1 for r in ratios.values() if r <= 1.5)
    kinds = ", ".join(f"{k} {n / faulty['tasks']:.1f}" for k, n in sorted(faulty["faults_by_kind"].items()))
    return (
        f"per task, wall time / fault-free: max {ratios[worst]:.2f} ({worst}), "
        f"median {sorted(ratios.values())[len(ratios) // 2]:.2f}; {within}/{len(ratios)} within 1.5x (target: all); "
        f"fault-free task wall p50 {sorted(base.values())[len(base) // 2]:.1f} s; faults met per task: {kinds}"
    )


def unterminated(options: argparse.Namespace) -> None:
    """The fault-free run, then every stream ended without its final chunk: per task, the ratio."""
    from airflow_tfjob.local import LocalCluster

    with LocalCluster() as cluster:
        extra = {"kube_config_path": str(cluster.kubeconfig_path), "namespace": "default"}
        os.environ[f"AIRFLOW_CONN_{CONN.upper()}"] = json.dumps({"conn_type": "kubernetes", "extra": extra})
        rows = [
            one_run(cluster, "baseline: no faults", 0.0, options, None),
            one_run(cluster, "streams unterminated", 1.0, options, None, kinds=("unterminated",)),
        ]
    print(
        f"unterminated streams: {options.tasks} tasks per row (half sync, half deferred), 2 replicas x "
        f"{LINES} lines each, {options.parallel} at a time; every watch and followed log ends without "
        "HTTP's final chunk"
    )
    print(
        f"{'run':24} {'outcomes right':>15} {'lost lines':>11} {'dup lines':>10} {'leftovers':>10} "
        f"{'task wall s p50':>16} {'max':>6} {'streams ended badly':>20}"
    )
    for row in rows:
        walls = sorted(row["task_walls"].values())
        print(
            f"{row['label']:24} {row['right']:>8}/{row['tasks']:<6} {row['lost']:>11} {row['duplicated']:>10} "
            f"{row['leftovers']:>10} {walls[len(walls) // 2]:>16.1f} {walls[-1]:>6.1f} "
            f"{row['faults_per_task'] * row['tasks']:>20.0f}"
        )
    print(f"unterminated, {_ratios(rows[1], rows[0])}")
    for row in rows:
        for wrong in row["wrong"][:5]:
            print(f"  {row['label']}: {wrong}")


if __name__ == "__main__":
    main()
