"""Jobs behind Kueue on the local cluster's Kueue emulation: what the task log tells and what the task
decides while a job is queued, admitted, running, preempted and resumed, in both modes.

One cluster for the module, Kueue on with the TFJob and TrainJob integrations enabled (PyTorchJob's left
off, as a v0.19 install ships it, for the ignored-label cases), and one ClusterQueue per situation so that
the tests do not share quota: ``one`` (1 cpu: one job at a time), ``prio`` (1 cpu, lower priorities
preempted), ``two`` (2 cpu: the sweep), ``none`` (no quota: a job waits forever).

The stories are told for a TFJob, and for Trainer v2's TrainJob (``trainjob``: TrainJobOperator;
``tfjob-on-trainjob``: TFJobOperator(api="trainjob")) where the same lines, decisions and XCom must
hold: each TrainJob case is a parameter of the TFJob test it repeats.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from operator_support import TaskInstance, context_for, defer, fire, first_event, rebuild_trigger, wait_for
from test_deferred_parity import TaskLog

from airflow_tfjob.operators.generic import KubeflowJobOperator
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.operators.trainjob import TrainJobOperator
from airflow_tfjob.version_compat import AirflowException

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

NS = "default"

# A replica that prints numbered lines, one every STEP seconds, LINES of them, then exits 0. With
# RECORD it also appends each line to that file (what the replica really printed, across runs), and
# with SPANS its start and end times (which jobs ran at the same time); with GATE it first waits until
# that file exists (a job that holds its quota until the test lets it go); with HOLD it waits after its
# numbered lines, before "done", until that file exists (a job that runs until the test has seen its lines).
COUNTER = r"""
import os, sys, time
while os.environ.get("GATE") and not os.path.exists(os.environ["GATE"]):
    time.sleep(0.05)
lines, step = int(os.environ.get("LINES", "3")), float(os.environ.get("STEP", "0.1"))
record = open(os.environ["RECORD"], "a") if os.environ.get("RECORD") else None
spans = os.environ.get("SPANS")
def say(text):
    print(text, flush=True)
    if record:
        record.write(text + "\n")
        record.flush()
if spans:
    open(spans, "a").write(f"{os.environ['JOB']} start {time.time()}\n")
for i in range(lines):
    say(f"line {i}")
    time.sleep(step)
while os.environ.get("HOLD") and not os.path.exists(os.environ["HOLD"]):
    time.sleep(0.05)
say("done")
if spans:
    open(spans, "a").write(f"{os.environ['JOB']} end {time.time()}\n")
"""


def queues() -> list[dict[str, Any]]:
    from airflow_tfjob.local.kueue.options import queue_objects

    objects: list[dict[str, Any]] = []
    for name, cpu, extra in (
        ("one", 1, {}),
        ("prio", 1, {"preemption": "LowerPriority", "priorities": {"low": 10, "high": 1000}}),
        ("two", 2, {}),
        ("none", 0, {}),
    ):
        objects += queue_objects(
            cluster_queue=f"cq-{name}", local_queue=name, namespace=NS, quota={"cpu": cpu}, flavor=f"f-{name}", **extra
        )
    return objects


@contextlib.contextmanager
def queued_cluster(profile: str | None = None) -> Iterator[Any]:
    """A cluster whose Kueue manages TFJobs and TrainJobs, with the queues above and Trainer's runtimes
    (``profile``: the local cluster's version profile, its default when None)."""
    from airflow_tfjob.jobs.trainjob.runtimes import cluster_hook, install
    from airflow_tfjob.local import LocalCluster

    integrations = ["kubeflow.org/tfjob", "trainer.kubeflow.org/trainjob"]
    with LocalCluster(kueue={"integrations": integrations, "objects": queues()}, profile=profile) as cluster:
        install(cluster_hook(str(cluster.kubeconfig_path)), log=lambda _: None)
        yield cluster


def use_cluster(cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``kubernetes_default`` points at ``cluster`` for this test."""
    extra = {"kube_config_path": str(cluster.kubeconfig_path), "namespace": NS}
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps({"conn_type": "kubernetes", "extra": extra}))


@pytest.fixture(scope="module", params=["kueue=0.19", "kueue=0.20"])
def kueue_cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The module's cluster, once per Kueue profile of the local cluster (issue 38: the provider on every
    profile)."""
    with queued_cluster(request.param) as cluster:
        yield cluster


@pytest.fixture
def conn(kueue_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    use_cluster(kueue_cluster, monkeypatch)
    return "kubernetes_default"


@pytest.fixture
def kueue_release(kueue_cluster: Any) -> str:
    """The Kueue release (``0.19``) of the module's cluster, whose reasons differ (kueue#13063)."""
    return str(kueue_cluster.runtime.profile.kueue.version)


def operator(log: TaskLog, cls: type[KubeflowJobOperator] = TFJobOperator, **kwargs: Any) -> Any:
    params: dict[str, Any] = {
        "task_id": "queued",
        "image": "local/python",
        "command": [sys.executable, "-c", COUNTER],
        "namespace": NS,
        "worker": 1,
        "container_resources": {"cpu": "1"},
        "startup_timeout": 60,
        "kueue_workload_window": 5,
        "log_replicas": "all",
        **kwargs,
    }
    return logged(log, cls(**params))


#: The job APIs a story is told for: the TFJob, TrainJobOperator, TFJobOperator(api="trainjob").
TFJOB, TRAINJOB, TF_ON_TRAINJOB = "tfjob", "trainjob", "tfjob-on-trainjob"


def job_task(log: TaskLog, api: str = TFJOB, **kwargs: Any) -> Any:
    """`operator(...)` for the API: a TrainJobOperator on the shipped tensorflow-distributed runtime (one
    node, `container_resources` as its resourcesPerNode requests), or TFJobOperator(api="trainjob")."""
    if api == TF_ON_TRAINJOB:
        kwargs["api"] = "trainjob"
    if api != TRAINJOB:
        return operator(log, **kwargs)
    resources = kwargs.pop("container_resources", {"cpu": "1"})
    params: dict[str, Any] = {
        "task_id": "queued",
        "runtime": "tensorflow-distributed",
        "image": "python:3.12",
        "command": [sys.executable, "-c", COUNTER],
        "namespace": NS,
        "num_nodes": 1,
        "resources_per_node": {"requests": resources},
        "startup_timeout": 60,
        "kueue_workload_window": 5,
        "log_replicas": "all",
        **kwargs,
    }
    return logged(log, TrainJobOperator(**params))


def kind_of(api: str) -> str:
    return "TFJob" if api == TFJOB else "TrainJob"


def replica_prefix(api: str) -> str:
    """The first replica's log prefix: the TFJob's Worker 0, the TrainJob's node 0 of Job 0."""
    return "[worker-0] " if api == TFJOB else "[node-0-0] "


def logged(log: TaskLog, task: Any) -> Any:
    """The task (any operator or sensor) writing its log to ``log``."""
    log.attach(task)  # registers the handler; a TFJobOperator is then set, other classes below
    task._cached_logger = logging.getLogger(f"test.parity.{id(log)}")
    return task


def kueue_lines(log: TaskLog) -> list[str]:
    return [line for line in log.lines if line.startswith("[kueue] ")]


def first(lines: list[str], prefix: str) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith(prefix))


def run_in_thread(op: Any, ti: TaskInstance) -> tuple[threading.Thread, dict[str, Any]]:
    """Run a synchronous task in the background; its result or its error lands in the dict."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["result"] = op.execute(context_for(ti))
        except BaseException as error:  # the test reads it
            out["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, out


@pytest.mark.parametrize("api", [TFJOB, TRAINJOB])
def test_a_job_queued_behind_another_is_told_queued_admitted_running_and_its_startup_clock_waits(
    conn: str, api: str
) -> None:
    """The second job waits longer than its startup_timeout for the first's quota: the start-up
    clock starts at admission, so it does not fire; the task log tells queued -> admitted -> running."""
    first_log, second_log = TaskLog(), TaskLog()
    blocker = job_task(first_log, api, task_id="blocker", env={"LINES": "40", "STEP": "0.1"}, kueue_queue="one")
    thread, blocked = run_in_thread(blocker, TaskInstance(task_id="blocker"))
    started = replica_prefix(api) + "line 0"
    wait_for(lambda: any(line.startswith(started) for line in first_log.lines), 60, "blocker running")
    second = job_task(second_log, api, task_id="second", kueue_queue="one", startup_timeout=2)
    result = second.execute(context_for(TaskInstance(task_id="second")))
    thread.join(60)
    assert "result" in blocked, blocked.get("error")

    lines = kueue_lines(second_log)
    queued, admitted, running = (first(lines, p) for p in ("[kueue] queued", "[kueue] admitted", "[kueue] running"))
    assert queued < admitted < running
    assert "in LocalQueue one" in lines[queued]
    assert result["state"] == "succeeded"
    assert result["queue_wait_seconds"] >= 2  # longer than the startup_timeout that did not fire
    assert result["preemptions"] == 0
    assert len(lines) == len(set(lines))  # each change once


@pytest.mark.parametrize(
    ("deferrable", "api"),
    [(False, TFJOB), (True, TFJOB), (False, TRAINJOB), (True, TF_ON_TRAINJOB)],
    ids=["sync", "deferred", "sync-trainjob", "deferred-tfjob-on-trainjob"],
)
def test_queue_timeout_fires_naming_the_queue_and_deletes_the_job(conn: str, deferrable: bool, api: str) -> None:
    from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook

    log, ti = TaskLog(), TaskInstance(task_id="starved")
    op = job_task(log, api, task_id="starved", kueue_queue="none", queue_timeout=2, deferrable=deferrable)
    with pytest.raises(AirflowException) as raised:
        if deferrable:
            event = fire(defer(op, ti))
            assert event["event"] == "queue_timeout"
            op = job_task(log, api, task_id="starved", kueue_queue="none", queue_timeout=2, deferrable=True)
            op.execute_complete(context_for(ti), event)
        else:
            op.execute(context_for(ti))
    message = str(raised.value)
    assert "not admitted within queue_timeout=2 s" in message
    assert "queued in LocalQueue none" in message and "0 workload(s) ahead" in message
    assert "insufficient quota for cpu in flavor f-none" in message  # Kueue's own message
    assert "deleted" in message
    name = op._job_ref[0]
    hook = KubeflowJobHook(conn_id=conn)
    wait_for(lambda: hook.find_job(kind_of(api), name, NS) is None, 30, "the timed-out job deleted")
    # Its Workload went with it (owner garbage collection): the task deleted nothing of Kueue's itself.
    wait_for(lambda: not workloads_of(hook, name), 30, "the job's Workload collected with it")


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferred"])
def test_a_job_kueue_can_never_admit_fails_at_once_with_kueues_words(conn: str, kueue_release: str,
                                                                     deferrable: bool) -> None:
    """Two cpus asked of a ClusterQueue whose maximum is one: Kueue says so (its NoFit message) and the
    task fails with Kueue's words, not after its queue_timeout of an hour (the module's 300 s timeout)."""
    from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook

    log, ti = TaskLog(), TaskInstance(task_id="too-big")
    params: dict[str, Any] = {"task_id": "too-big", "kueue_queue": "one", "container_resources": {"cpu": "2"},
                              "queue_timeout": 3600, "deferrable": deferrable}
    op = operator(log, **params)
    with pytest.raises(AirflowException) as raised:
        if deferrable:
            event = fire(defer(op, ti))
            assert event["event"] == "kueue_inadmissible"
            op = operator(log, **params)
            op.execute_complete(context_for(ti), event)
        else:
            op.execute(context_for(ti))
    message = str(raised.value)
    assert "can never be admitted by Kueue" in message and "LocalQueue one" in message
    reason = "ExceedsMaxQuota" if kueue_release == "0.20" else "Pending"  # kueue#13063's reasons
    assert (
        f"{reason}: couldn't assign flavors to pod set worker: insufficient quota for cpu in flavor f-one, previously "
        "considered podsets requests (0) + current podset request (2) > maximum capacity (1)"
    ) in message  # Kueue's own words
    assert "deleted" in message
    hook = KubeflowJobHook(conn_id=conn)
    wait_for(lambda: hook.find_job("TFJob", op._job_ref[0], NS) is None, 30, "the inadmissible job deleted")


def test_a_job_on_a_missing_local_queue_fails_at_once_naming_it(conn: str, kueue_release: str) -> None:
    log = TaskLog()
    op = operator(log, task_id="lost", kueue_queue="no-such-queue", queue_timeout=3600)
    reason = "Misconfigured" if kueue_release == "0.20" else "Inadmissible"  # kueue#13063's reasons
    with pytest.raises(AirflowException, match=f"{reason}: LocalQueue no-such-queue doesn't exist"):
        op.execute(context_for(TaskInstance(task_id="lost")))


def workloads_of(hook: Any, job_name: str) -> list[dict[str, Any]]:
    listed = hook.custom_object_client.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", NS, "workloads")
    return [
        w for w in listed["items"] if any(ref["name"] == job_name for ref in w["metadata"].get("ownerReferences", []))
    ]


def test_execution_timeout_while_queued_says_the_job_was_still_queued(conn: str) -> None:
    from datetime import timedelta

    from airflow_tfjob.version_compat import AirflowTaskTimeout

    op = operator(TaskLog(), task_id="deadline", kueue_queue="none", execution_timeout=timedelta(seconds=2))
    with pytest.raises(AirflowTaskTimeout, match="passed its deadline while queued in LocalQueue none"):
        op.execute(context_for(TaskInstance(task_id="deadline")))


def _replica_lines(log: TaskLog, api: str = TFJOB) -> list[str]:
    prefix = replica_prefix(api)
    return [line.removeprefix(prefix) for line in log.lines if line.startswith(prefix)]


def _low(record: Any, **more: Any) -> dict[str, Any]:
    """A low-priority job on queue prio printing 40 lines (to `record` too)."""
    return {"task_id": "low", "kueue_queue": "prio", "labels": {"kueue.x-k8s.io/priority-class": "low"},
            "env": {"LINES": "40", "STEP": "0.1", "RECORD": str(record)}, **more}  # fmt: skip


def _high(api: str) -> Any:
    return job_task(TaskLog(), api, task_id="high", kueue_queue="prio", labels={"kueue.x-k8s.io/priority-class": "high"})


def _told_the_whole_preemption(api: str, low_log: TaskLog, record: Any, result: dict[str, Any], high_name: str) -> None:
    """Preempted by the high job with Kueue's message, resumed, ran again, every printed line in the log."""
    assert result["state"] == "succeeded" and result["preemptions"] == 1
    lines = kueue_lines(low_log)
    preempted = first(lines, f"[kueue] preempted by {kind_of(api)} {NS}/{high_name}: Preempted to accommodate a")
    assert "due to prioritization in the ClusterQueue" in lines[preempted]
    assert first(lines, "[kueue] running") < preempted < first(lines, "[kueue] resumed") < first(
        lines, "[kueue] running again after a preemption"
    )
    # Every line each run of the replica printed, in order, and the recreated pod told apart.
    shown = _replica_lines(low_log, api)
    assert [line for line in shown if not line.startswith("---")] == record.read_text().splitlines()
    assert any(line.startswith("--- pod recreated") for line in shown)
    assert shown.count("done") == 1 and record.read_text().count("line 0\n") == 2


@pytest.mark.parametrize("api", [TFJOB, TRAINJOB])
def test_a_preempted_job_keeps_every_line_resumes_in_place_and_succeeds(conn: str, tmp_path: Any, api: str) -> None:
    record, low_log = tmp_path / "low.txt", TaskLog()
    low = job_task(low_log, api, **_low(record))
    thread, out = run_in_thread(low, TaskInstance(task_id="low"))
    wait_for(lambda: "line 10" in _replica_lines(low_log, api), 60, "the low-priority job half-way")
    high_result = _high(api).execute(context_for(TaskInstance(task_id="high")))
    thread.join(120)
    assert "result" in out, out.get("error")
    result = out["result"]
    assert high_result["state"] == "succeeded"
    _told_the_whole_preemption(api, low_log, record, result, high_result["name"])
    # The same job from start to end: one job of this task, never re-created.
    assert low._job_ref[0] == result["name"]


def test_a_preempted_deferred_tfjob_on_trainjob_keeps_every_line_and_succeeds(conn: str, tmp_path: Any) -> None:
    """The preemption story deferred: the trigger follows the low-priority TrainJob through its preemption,
    keeps every line of both runs, and execute_complete reports the preemption in the XCom."""
    api, record, low_log = TF_ON_TRAINJOB, tmp_path / "low.txt", TaskLog()
    ti = TaskInstance(task_id="low")
    trigger = rebuild_trigger(defer(job_task(low_log, api, **_low(record, deferrable=True)), ti))
    low_log.attach(trigger)
    out: dict[str, Any] = {}

    def follow() -> None:
        out["event"] = asyncio.run(first_event(trigger))

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    wait_for(lambda: "line 10" in _replica_lines(low_log, api), 60, "the low-priority job half-way")
    high_result = _high(api).execute(context_for(TaskInstance(task_id="high")))
    follower.join(120)
    assert high_result["state"] == "succeeded" and "event" in out
    again = job_task(low_log, api, **_low(record, deferrable=True))
    result = again.execute_complete(context_for(ti), out["event"])
    _told_the_whole_preemption(api, low_log, record, result, high_result["name"])


@pytest.mark.parametrize("api", [TFJOB, TF_ON_TRAINJOB])
def test_on_preemption_fail_fails_the_task_with_kueues_message_and_deletes_the_job(conn: str, api: str) -> None:
    from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook

    low_log, high_log = TaskLog(), TaskLog()
    low = job_task(
        low_log, api, task_id="low-fail", kueue_queue="prio", labels={"kueue.x-k8s.io/priority-class": "low"},
        env={"LINES": "200", "STEP": "0.1"}, on_preemption="fail",
    )  # fmt: skip
    thread, out = run_in_thread(low, TaskInstance(task_id="low-fail"))
    wait_for(lambda: "line 3" in _replica_lines(low_log, api), 60, "the low-priority job running")
    high = job_task(high_log, api, task_id="high", kueue_queue="prio",
                    labels={"kueue.x-k8s.io/priority-class": "high"})  # fmt: skip
    assert high.execute(context_for(TaskInstance(task_id="high-2")))["state"] == "succeeded"
    thread.join(60)
    error = out.get("error")
    assert isinstance(error, AirflowException), out
    assert "was preempted (on_preemption='fail'): Preempted to accommodate a workload" in str(error)
    # The training-aware retry policy reads it as the cluster's doing: retried after the cause's delay.
    from airflow.sdk.definitions.retry_policy import RetryAction

    from airflow_tfjob.operators.retry_policy import TrainingRetryPolicy

    decision = TrainingRetryPolicy().evaluate(error, try_number=1, max_tries=3)
    assert (decision.action, decision.retry_delay) == (RetryAction.RETRY, timedelta(seconds=60))
    assert decision.reason is not None and decision.reason.startswith("TrainingRetryPolicy: infrastructure (Preempted)")
    hook = KubeflowJobHook(conn_id=conn)
    wait_for(lambda: hook.find_job(kind_of(api), low._job_ref[0], NS) is None, 30, "the preempted job deleted")


def test_a_queue_label_kueue_ignores_is_warned_about_naming_the_integration(conn: str) -> None:
    from airflow_tfjob.operators.pytorchjob import PyTorchJobOperator

    log = TaskLog()
    op = operator(log, cls=PyTorchJobOperator, task_id="ignored", kueue_queue="one", kueue_workload_window=1,
                  env={"LINES": "30", "STEP": "0.1"})  # fmt: skip
    result = op.execute(context_for(TaskInstance(task_id="ignored")))
    assert result["state"] == "succeeded"  # Kueue let it run outside its quota
    _warned_once_naming(log, "kubeflow.org/pytorchjob")


def _warned_once_naming(log: TaskLog, framework: str) -> None:
    """One warning line: no Workload within the window, the integration to enable, no quota held."""
    warnings = [line for line in kueue_lines(log) if line.startswith("[kueue] warning:")]
    assert len(warnings) == 1
    assert "no Kueue Workload appeared for it within 1 s" in warnings[0]
    assert f'"{framework}"' in warnings[0] and "kueue-manager-config" in warnings[0]
    assert "runs outside Kueue's quota" in warnings[0]


def test_a_queue_label_kueue_ignores_fails_the_task_when_admission_is_required(conn: str) -> None:
    from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook
    from airflow_tfjob.operators.pytorchjob import PyTorchJobOperator

    log = TaskLog()
    op = operator(log, cls=PyTorchJobOperator, task_id="required", kueue_queue="one", kueue_workload_window=1,
                  kueue_require_admission=True, env={"LINES": "300", "STEP": "0.1"})  # fmt: skip
    with pytest.raises(AirflowException, match=r"kueue_require_admission=True.*was deleted"):
        op.execute(context_for(TaskInstance(task_id="required")))
    hook = KubeflowJobHook(conn_id=conn)
    wait_for(lambda: hook.find_job("PyTorchJob", op._job_ref[0], NS) is None, 30, "the ignored job deleted")


@pytest.fixture(scope="module")
def trainjob_off() -> Iterator[str]:
    """A second cluster whose Kueue has the TrainJob integration off (only TFJob's on): its kubeconfig."""

    from airflow_tfjob.jobs.trainjob.runtimes import cluster_hook, install
    from airflow_tfjob.local import LocalCluster
    from airflow_tfjob.local.kueue.options import queue_objects

    one = queue_objects(cluster_queue="cq-one", local_queue="one", namespace=NS, quota={"cpu": 1})
    with LocalCluster(kueue={"integrations": ["kubeflow.org/tfjob"], "objects": one}) as cluster:
        install(cluster_hook(str(cluster.kubeconfig_path)), log=lambda _: None)
        yield str(cluster.kubeconfig_path)


@pytest.fixture
def off_conn(trainjob_off: str, monkeypatch: pytest.MonkeyPatch) -> str:
    extra = {"kube_config_path": trainjob_off, "namespace": NS}
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps({"conn_type": "kubernetes", "extra": extra}))
    return "kubernetes_default"


@pytest.mark.parametrize("api", [TRAINJOB, TF_ON_TRAINJOB])
def test_a_queue_label_on_a_trainjob_kueue_ignores_is_warned_about_or_fails_when_admission_is_required(
    off_conn: str, api: str
) -> None:
    """The TrainJob integration off: TrainJobOperator warns naming `trainer.kubeflow.org/trainjob` and runs
    outside Kueue's quota; TFJobOperator(api="trainjob") with kueue_require_admission fails and deletes."""
    from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook

    log = TaskLog()
    required = api == TF_ON_TRAINJOB
    op = job_task(log, api, task_id="ignored", kueue_queue="one", kueue_workload_window=1,
                  kueue_require_admission=required, env={"LINES": "30" if not required else "300", "STEP": "0.1"})  # fmt: skip
    if required:
        with pytest.raises(AirflowException, match=r"kueue_require_admission=True.*was deleted"):
            op.execute(context_for(TaskInstance(task_id="ignored")))
        hook = KubeflowJobHook(conn_id=off_conn)
        wait_for(lambda: hook.find_job("TrainJob", op._job_ref[0], NS) is None, 30, "the ignored TrainJob deleted")
        return
    result = op.execute(context_for(TaskInstance(task_id="ignored")))
    assert result["state"] == "succeeded"  # Kueue let it run outside its quota
    _warned_once_naming(log, "trainer.kubeflow.org/trainjob")


def most_at_once(spans: str) -> int:
    """The largest number of replicas running at the same moment, from their start and end times."""
    moments = []
    for line in spans.splitlines():
        _job, what, at = line.split()
        moments.append((float(at), 1 if what == "start" else -1))
    running = most = 0
    for _at, step in sorted(moments):
        running += step
        most = max(most, running)
    return most


def test_a_sweep_of_six_mapped_jobs_on_a_quota_of_two_runs_two_at_a_time_deferred(conn: str, tmp_path: Any) -> None:
    """Six map indexes of one task, deferred together while a blocker holds the queue's whole quota:
    the triggers follow them in one event loop, as the triggerer does; once the blocker is let go
    Kueue admits them two at a time, and every task succeeds and tells its wait."""
    spans, gate = tmp_path / "spans.txt", tmp_path / "gate"
    blocker_log = TaskLog()
    blocker = operator(blocker_log, task_id="sweep-blocker", kueue_queue="two", container_resources={"cpu": "2"},
                       env={"GATE": str(gate)})  # fmt: skip
    thread, blocked = run_in_thread(blocker, TaskInstance(task_id="sweep-blocker"))
    wait_for(lambda: "[kueue] running (admitted by ClusterQueue cq-two)" in blocker_log.lines, 60, "the blocker running")
    run_id = TaskInstance().run_id
    trials = []
    for index in range(6):
        log, ti = TaskLog(), TaskInstance(task_id="trial", map_index=index, run_id=run_id)
        params = {"task_id": "trial", "kueue_queue": "two", "deferrable": True,
                  "env": {"LINES": "30", "STEP": "0.1", "SPANS": str(spans), "JOB": str(index)}}  # fmt: skip
        trigger = rebuild_trigger(defer(operator(log, **params), ti))
        log.attach(trigger)
        trials.append((log, ti, params, trigger))

    def open_the_gate() -> None:
        wait_for(lambda: all(kueue_lines(log) for log, *_ in trials), 60, "every trial told queued")
        gate.touch()

    opener = threading.Thread(target=open_the_gate, daemon=True)
    opener.start()

    async def follow_all() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(first_event(trigger) for *_, trigger in trials)))

    events = asyncio.run(follow_all())
    results = [
        operator(log, **params).execute_complete(context_for(ti), event)
        for (log, ti, params, _), event in zip(trials, events, strict=True)
    ]
    thread.join(60)
    assert "result" in blocked, blocked.get("error")
    assert [r["state"] for r in results] == ["succeeded"] * 6
    assert len({r["name"] for r in results}) == 6
    assert most_at_once(spans.read_text()) == 2
    # Kueue's clock has whole seconds: the last wave waited for two waves of 3 s trials at least.
    assert min(sorted(r["queue_wait_seconds"] for r in results)[-2:]) >= 5
    for log, *_ in trials:
        lines = kueue_lines(log)
        assert first(lines, "[kueue] queued in LocalQueue two") < first(lines, "[kueue] admitted") < first(
            lines, "[kueue] running"
        )


def test_the_sensor_and_its_trigger_say_where_a_queued_job_stands(conn: str) -> None:
    from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook
    from airflow_tfjob.sensors.tfjob import TFJobSensor
    from airflow_tfjob.triggers.deferral import KubeflowJobConditionTrigger

    hook = KubeflowJobHook(conn_id=conn)
    job = operator(TaskLog(), task_id="sensed", kueue_queue="none").build_manifest(
        context_for(TaskInstance(task_id="sensed"))
    )
    name = job["metadata"]["name"]
    hook.create_job("TFJob", job, NS)
    try:
        sensor_log = TaskLog()
        sensor = logged(sensor_log, TFJobSensor(task_id="wait", name=name, namespace=NS, target_condition="Running"))
        assert wait_for(lambda: not sensor.poke({}) and "Kueue: queued" in sensor_log.lines[-1], 30, "queued told")
        assert "in LocalQueue none (0 workload(s) ahead" in sensor_log.lines[-1]
        assert "insufficient quota for cpu in flavor f-none" in sensor_log.lines[-1]

        trigger_log = TaskLog()
        trigger = KubeflowJobConditionTrigger(name=name, namespace=NS, target_condition="Running")
        trigger_log.attach(trigger)

        async def watch_until_told() -> None:
            waiting = asyncio.ensure_future(first_event(trigger))
            while not any("Kueue: queued in LocalQueue none" in line for line in trigger_log.lines):
                assert not waiting.done(), waiting.result()  # a queued job reaches no target
                await asyncio.sleep(0.1)
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)

        asyncio.run(watch_until_told())
    finally:
        hook.delete_job("TFJob", name, NS)


def test_the_hooks_kueue_calls_sync_and_async_alike(conn: str, local_cluster: Any) -> None:
    """The Workload by the job's UID and the queue position, through both hooks over HTTP; on a
    cluster without Kueue (the session's), None for both: no Workload API, no positions."""
    from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook, KubeflowJobHook

    hook, ahook = KubeflowJobHook(conn_id=conn), AsyncKubeflowJobHook(conn_id=conn)
    job = operator(TaskLog(), task_id="hooked", kueue_queue="none").build_manifest(
        context_for(TaskInstance(task_id="hooked"))
    )
    uid = hook.create_job("TFJob", job, NS)["metadata"]["uid"]
    try:
        found = wait_for(lambda: hook.list_workloads(NS, uid), 30, "the job's Workload")
        assert [w["metadata"]["ownerReferences"][0]["uid"] for w in found] == [uid]

        async def both() -> tuple[Any, Any]:
            return await ahook.list_workloads(NS, uid), await ahook.pending_workloads(NS, "none")

        afound, apending = asyncio.run(both())
        assert [w["metadata"]["name"] for w in afound] == [w["metadata"]["name"] for w in found]
        pending = wait_for(lambda: hook.pending_workloads(NS, "none")["items"], 30, "the job pending")
        assert [(p["metadata"]["name"], p["positionInLocalQueue"]) for p in pending] == [(found[0]["metadata"]["name"], 0)]
        assert [p["metadata"]["name"] for p in apending["items"]] == [found[0]["metadata"]["name"]]
        assert hook.pending_workloads(NS, "no-such-queue") is None  # 404: no positions, not an error
    finally:
        hook.delete_job("TFJob", job["metadata"]["name"], NS)

    extra = {"kube_config_path": str(local_cluster.kubeconfig_path), "namespace": NS}
    plain, aplain = KubeflowJobHook(config_file=extra["kube_config_path"]), AsyncKubeflowJobHook(config_file=extra["kube_config_path"])

    async def without_kueue() -> tuple[Any, Any]:
        return await aplain.list_workloads(NS, uid), await aplain.pending_workloads(NS, "none")

    assert (plain.list_workloads(NS, uid), plain.pending_workloads(NS, "none")) == (None, None)
    assert asyncio.run(without_kueue()) == (None, None)


def test_kueues_pods_ready_timeout_evicts_before_a_longer_startup_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Admitted pods that never start: Kueue's WaitForPodsReady evicts the job first (here after 6 s; 30
    minutes on a real install), the task log says so, and the job, requeued behind its backoff, is
    held to queue_timeout from its requeue."""
    from airflow_tfjob.local import LocalCluster
    from airflow_tfjob.local.kueue.options import queue_objects

    gpu = queue_objects(cluster_queue="cq-gpu", local_queue="gpu", namespace=NS, quota={"nvidia.com/gpu": 64})
    # 6 s: the tracker looks at a queued Workload every 1 s and more while nothing changes; with 2 s an
    # admission under load ended before a look saw it (ci18), and the log went from queued to evicted.
    options = {"integrations": ["kubeflow.org/tfjob"], "objects": gpu, "pods_ready_timeout": 6}
    with LocalCluster(kueue=options) as cluster:
        use_cluster(cluster, monkeypatch)
        log = TaskLog()
        # 64 GPUs fit the queue's quota but no node of the local cluster: the pod stays Pending.
        op = operator(log, task_id="unready", kueue_queue="gpu", gpus=64, container_resources=None,
                      startup_timeout=60, queue_timeout=3)  # fmt: skip
        with pytest.raises(AirflowException, match="not admitted within queue_timeout=3 s: queued again"):
            op.execute(context_for(TaskInstance(task_id="unready")))
    lines = kueue_lines(log)
    evicted = first(lines, "[kueue] evicted (PodsReadyTimeout): Exceeded the PodsReady timeout default/tfjob-")
    assert first(lines, "[kueue] admitted by ClusterQueue cq-gpu") < evicted


@pytest.mark.parametrize(
    ("withheld", "told"),
    [
        # no positions: the task follows the job all the same, Kueue's message without "ahead"
        ('"localqueues/pendingworkloads"', "[kueue] queued in LocalQueue none, waiting "),
        # no Workloads: the task log names the permission, not Kueue's integration
        ('"workloads"', "its Workload cannot be read (403"),
    ],
    ids=["positions", "workloads"],
)
def test_kueue_reads_refused_by_rbac_are_told_not_errors(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, withheld: str, told: str
) -> None:
    """A user bound to the shipped Role without one of its Kueue rules: the API answers 403 once, and the
    task follows the job all the same (here to its queue_timeout)."""
    from pathlib import Path

    import airflow_tfjob
    from airflow_tfjob.local import LocalCluster
    from airflow_tfjob.local.kueue.options import queue_objects

    shipped = (Path(airflow_tfjob.__file__).parent / "rbac" / "role.yaml").read_text()
    assert withheld in shipped
    role = tmp_path / "role.yaml"
    role.write_text(shipped.replace(withheld, '"not-granted"'))
    none = queue_objects(cluster_queue="cq-none", local_queue="none", namespace=NS, quota={"cpu": 0})
    kueue = {"integrations": ["kubeflow.org/tfjob"], "objects": none}
    with LocalCluster(auth=True, roles={"airflow": [role]}, kueue=kueue) as cluster:
        extra = {"kube_config_path": str(cluster.kubeconfig_for("airflow")), "namespace": NS}
        monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps({"conn_type": "kubernetes", "extra": extra}))
        log = TaskLog()
        op = operator(log, task_id="refused", kueue_queue="none", queue_timeout=2)
        with pytest.raises(AirflowException, match="queue_timeout=2 s"):
            op.execute(context_for(TaskInstance(task_id="refused")))
        refused = {key: n for key, n in cluster.denied_requests().items() if key[0] == "airflow"}
    assert list(refused.values()) == [1], refused  # asked once, then left alone
    assert any(told in line for line in kueue_lines(log)), kueue_lines(log)
    assert "ahead" not in " ".join(kueue_lines(log))
    if withheld == '"workloads"':
        assert "grant list on workloads (kueue.x-k8s.io)" in " ".join(kueue_lines(log))
