"""TrainJobOperator (Kubeflow Trainer v2) against a local cluster started in TrainJob-only mode.

Success (every node's log with its `[node-0-i]` prefix, metrics, the result's shape, the sensor), the
progress status a node reports in the result, a
node's failure with its diagnostics, reattach on retry, deferral, suspend and resume, the active
deadline, kill, render_only; and TFJobOperator on the same cluster: api="auto" maps a worker-only
TFJob onto a TrainJob, and refuses what cannot be mapped (an Evaluator) before anything is created.
The nodes are fast `python -c` programs on the shipped `tensorflow-distributed` runtime (installed
with the package's install command; restartPolicy Never, so a failing node fails the job at once).
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from operator_support import TaskInstance, context_for, defer, fire, rebuild_trigger, wait_for

from airflow_tfjob.build.checker import JobValidationError
from airflow_tfjob.build.naming import identity_selector
from airflow_tfjob.constants import RESULT_KEYS
from airflow_tfjob.jobs.kinds import TRAINJOB
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.operators.trainjob import TrainJobOperator
from airflow_tfjob.sensors.trainjob import TrainJobSensor
from airflow_tfjob.version_compat import AirflowException

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

RUNTIME = "tensorflow-distributed"
NODE_PROGRAM = r"""
import os, sys, time
index = os.environ["JOB_COMPLETION_INDEX"]
print(f"node {index} starting argv={sys.argv[1:]}", flush=True)
if index == os.environ.get("FAIL_INDEX"):
    print(f"node {index} is failing on purpose", flush=True)
    sys.exit(3)
time.sleep(float(os.environ.get("SLEEP", "0")))
print("loss=0.25 accuracy=0.875", flush=True)
print(f"node {index} done", flush=True)
"""


@pytest.fixture(scope="module", params=["trainer=2.3", "trainer=2.4"])
def local_cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """This module's own cluster: Trainer v2 only (no kubeflow.org/v1 kinds), the TF runtimes installed;
    once per Trainer profile of the local cluster (issue 38: the provider on every profile; 2.4's runtime
    and TrainJob rules, docs/local-cluster.md, must take what the provider installs and creates)."""
    from airflow_tfjob.jobs.trainjob.runtimes import cluster_hook, install
    from airflow_tfjob.local import LocalCluster

    # The progress status (Trainer's alpha TrainJobStatus gate) on: the nodes may report to it.
    with LocalCluster(apis=["trainjob"], feature_gates={"TrainJobStatus": True}, profile=request.param) as cluster:
        assert f"trainer={cluster.runtime.profile.trainer.version}" == request.param
        install(cluster_hook(str(cluster.kubeconfig_path)), log=lambda _: None)
        yield cluster


def operator(**kwargs: Any) -> TrainJobOperator:
    params: dict[str, Any] = {
        "task_id": "train",
        "runtime": RUNTIME,
        "image": "python:3.12",
        "command": [sys.executable, "-c", NODE_PROGRAM],
        "num_nodes": 2,
        "namespace": "default",
        "startup_timeout": 60,
    }
    return TrainJobOperator(**{**params, **kwargs})


def jobs_of(hook: Any, ti: TaskInstance) -> list[dict[str, Any]]:
    selector = identity_selector(ti.dag_id, ti.task_id, ti.run_id, ti.map_index, include_handled=True)
    return list(hook.list_jobs(TRAINJOB, "default", selector))


def pods_of(hook: Any, name: str) -> list[dict[str, Any]]:
    return list(hook.list_job_pods(name, "default", kind=TRAINJOB))


def run_in_thread(op: TrainJobOperator, ti: TaskInstance) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(op.execute(context_for(ti)))
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_success_logs_every_node_with_metrics_and_the_result_shape(
    hook: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    ti = TaskInstance()
    op = operator(hyperparameters={"epochs": 2}, secret_env={"TOKEN": "s3cr3t-value"}, metrics=["loss"])
    result = op.execute(context_for(ti))
    logged = "".join(capfd.readouterr())
    assert result["state"] == "succeeded" and result["reason"] == "AllJobsCompleted"
    assert result["api"] == "trainjob"
    assert list(result) == [*RESULT_KEYS]
    assert result["replica_statuses"] == {"node": {"active": 0, "succeeded": 1, "failed": 0}}
    assert float(result["metrics"]["loss"]) == 0.25  # node 0's log
    for index in (0, 1):
        assert f"[node-0-{index}] node {index} starting argv=['--epochs=2']" in logged
        assert f"[node-0-{index}] node {index} done" in logged
    assert "s3cr3t-value" not in logged
    job = hook.get_job(TRAINJOB, result["name"], "default")
    assert job["spec"]["runtimeRef"] == {"name": RUNTIME, "kind": "ClusterTrainingRuntime", "apiGroup": "trainer.kubeflow.org"}
    assert TrainJobSensor(task_id="wait", name=result["name"], namespace="default").poke(context_for(TaskInstance()))


# A program written for a real cluster's status server (Trainer's TrainJobStatus gate): HTTPS verified
# against the CA file Trainer injects, the token file's token as a Bearer token; half-way, then done.
REPORT_PROGRESS = r"""
import json, os, ssl, time, urllib.request
context = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
def report(percent, left, metrics):
    status = {"progressPercentage": percent, "estimatedRemainingSeconds": left,
              "lastUpdatedTime": "2026-01-01T00:00:0%dZ" % (percent // 50),
              "metrics": [{"name": k, "value": v} for k, v in metrics.items()]}
    request = urllib.request.Request(os.environ["KUBEFLOW_TRAINER_SERVER_URL"], method="POST",
        data=json.dumps({"trainerStatus": status}).encode(), headers={"Content-Type": "application/json",
        "Authorization": "Bearer " + open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read()})
    print("reported", urllib.request.urlopen(request, context=context).status, flush=True)
report(50, 90, {"loss": "0.5"})
time.sleep(0.5)
report(100, 0, {"loss": "0.125", "val_accuracy": "0.97"})
print("loss=0.25", flush=True)
"""
HALF_WAY = "[progress] Trainer reports 50%, about 1 min 30 s left, loss=0.5"
DONE = "[progress] Trainer reports 100%, done, loss=0.125, val_accuracy=0.97"


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferred"])
def test_the_progress_status_a_node_reports_is_logged_and_in_the_result(
    hook: Any, capfd: pytest.CaptureFixture[str], deferrable: bool
) -> None:
    ti = TaskInstance()
    op = operator(
        command=[sys.executable, "-c", REPORT_PROGRESS], num_nodes=1, metrics=["loss", "val_accuracy"],
        deferrable=deferrable,
    )  # fmt: skip
    if deferrable:
        result = op.execute_complete(context_for(ti), fire(defer(op, ti)))
    else:
        result = op.execute(context_for(ti))
    logged = "".join(capfd.readouterr())
    expected = {
        "percentage": 100, "remaining_seconds": 0, "updated": "2026-01-01T00:00:02Z",
        "metrics": {"loss": 0.125, "val_accuracy": 0.97},
    }  # fmt: skip
    assert result["trainer_status"] == expected
    assert ti.xcoms["trainer_status"] == expected
    # One line per report the follow saw (the half-way one may have been overtaken by the last before
    # the watch delivered it), the last one exactly once, whichever process followed.
    shown = [line.strip() for line in re.findall(r"\[progress\] Trainer reports [^\[\n]*", logged)]
    assert shown in ([HALF_WAY, DONE], [DONE]), shown
    # The log's metric stands; the one only the progress status has fills the gap.
    assert float(result["metrics"]["loss"]) == 0.25 and result["metrics"]["val_accuracy"] == 0.97


def test_a_failing_node_fails_the_task_with_its_diagnostics(hook: Any, capfd: pytest.CaptureFixture[str]) -> None:
    ti = TaskInstance()
    op = operator(env={"FAIL_INDEX": "1", "SLEEP": "30"})
    with pytest.raises(AirflowException) as raised:
        op.execute(context_for(ti))
    logged = "".join(capfd.readouterr())
    message = str(raised.value)
    assert "TrainJob default/" in message and "FailedJobs" in message
    assert logged.count("=== node-0-1 failed") == 1  # once, not once per layer that saw it
    assert "  | node 1 is failing on purpose" in logged
    assert "exit code 3" in logged


def test_a_retry_reattaches_to_the_same_trainjob(hook: Any) -> None:
    first = TaskInstance()
    op = operator(env={"SLEEP": "2"})
    context = context_for(first)
    created = op.find_or_create(hook, op.build_manifest(context), context)
    result = operator(env={"SLEEP": "2"}).execute(context_for(first.next_try()))
    assert result["uid"] == created["metadata"]["uid"]
    assert result["state"] == "succeeded"
    assert len(jobs_of(hook, first)) == 1


def test_a_deferred_run_resumes_with_the_result(hook: Any) -> None:
    ti = TaskInstance()
    op = operator(deferrable=True, metrics=["loss"], env={"SLEEP": "1"})
    deferred = defer(op, ti)
    assert deferred.trigger.kind.kind == "TrainJob"
    event = fire(deferred)
    assert event["event"] == "succeeded"
    result = op.execute_complete(context_for(ti), event)
    assert result["reason"] == "AllJobsCompleted" and float(result["metrics"]["loss"]) == 0.25


def test_a_suspended_trainjob_waits_and_runs_once_resumed(hook: Any, capfd: pytest.CaptureFixture[str]) -> None:
    ti = TaskInstance()
    thread, outcome = run_in_thread(operator(suspend=True, startup_timeout=5), ti)
    job = wait_for(lambda: jobs_of(hook, ti), 30, "the TrainJob created")[0]
    name = job["metadata"]["name"]

    def suspended() -> bool:
        conditions = (hook.get_job(TRAINJOB, name, "default").get("status") or {}).get("conditions") or []
        return any(c["type"] == "Suspended" and c["status"] == "True" for c in conditions)

    wait_for(suspended, 30, "the Suspended condition")
    assert pods_of(hook, name) == [] and not outcome  # waiting past startup_timeout: suspended time does not count
    hook.patch_job(TRAINJOB, name, "default", {"spec": {"suspend": False}})
    thread.join(120)
    assert outcome and isinstance(outcome[0], dict), outcome
    assert outcome[0]["state"] == "succeeded"


def test_the_active_deadline_fails_the_task(hook: Any) -> None:
    ti = TaskInstance()
    with pytest.raises(AirflowException, match="DeadlineExceeded"):
        operator(active_deadline_seconds=2, env={"SLEEP": "60"}).execute(context_for(ti))


def test_kill_deletes_the_trainjob_and_its_pods(hook: Any) -> None:
    ti = TaskInstance()
    op = operator(env={"SLEEP": "120"})
    thread, outcome = run_in_thread(op, ti)

    def running() -> str | None:
        jobs = jobs_of(hook, ti)
        pods = pods_of(hook, jobs[0]["metadata"]["name"]) if jobs else []
        both = sum((p.get("status") or {}).get("phase") == "Running" for p in pods) == 2
        return jobs[0]["metadata"]["name"] if both else None

    name = wait_for(running, 60, "both nodes running")
    op.on_kill()
    assert hook.find_job(TRAINJOB, name, "default") is None
    assert pods_of(hook, name) == []
    thread.join(60)
    assert not thread.is_alive() and isinstance(outcome[0], BaseException)


def test_render_only_builds_the_trainjob_and_submits_nothing(hook: Any) -> None:
    ti = TaskInstance()
    base = "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nspec:\n  trainer: {numNodes: 4, image: base:1}\n"
    op = operator(trainjob=base, image=None, render_only=True, secret_env={"TOKEN": "hidden"})
    manifest = op.execute(context_for(ti))["manifest"]
    assert manifest["kind"] == "TrainJob" and manifest["spec"]["trainer"]["numNodes"] == 2  # the parameter wins
    assert manifest["spec"]["trainer"]["image"] == "base:1"  # the template's, where no parameter says otherwise
    assert {"name": "TOKEN", "value": "***"} in manifest["spec"]["trainer"]["env"]
    assert jobs_of(hook, ti) == []
    # TFJobOperator: "auto" renders the TFJob without asking the cluster, "trainjob" the TrainJob.
    tf = {"task_id": "t", "worker": 2, "image": "tf:1", "command": ["python", "t.py"], "render_only": True}
    assert TFJobOperator(**tf).execute(context_for(ti))["manifest"]["kind"] == "TFJob"
    mapped = TFJobOperator(**tf, api="trainjob").execute(context_for(ti))["manifest"]
    assert mapped["kind"] == "TrainJob" and mapped["spec"]["runtimeRef"]["name"] == RUNTIME


async def test_the_trigger_deletes_the_trainjob_on_kill(hook: Any) -> None:
    from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook

    deferred = defer(operator(deferrable=True, env={"SLEEP": "120"}), TaskInstance())
    trigger = rebuild_trigger(deferred)
    ahook = AsyncKubeflowJobHook(conn_id=hook.conn_id)
    assert await ahook.find_job(TRAINJOB, trigger.name, "default") is not None
    await trigger.on_kill()
    assert await ahook.find_job(TRAINJOB, trigger.name, "default") is None
    assert await ahook.list_job_pods(trigger.name, "default", kind=TRAINJOB) == []


def test_tfjob_operator_auto_runs_a_worker_only_tfjob_as_a_trainjob(
    hook: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    program = "import json, os; print('TF_CONFIG', os.environ['TF_CONFIG'], flush=True); print('loss=0.5')"
    op = TFJobOperator(
        task_id="train", worker=2, image="python:3.12", command=[sys.executable, "-c", program],
        namespace="default", metrics=["loss"], log_replicas="all", startup_timeout=60,
    )  # fmt: skip
    result = op.execute(context_for(TaskInstance()))
    logged = "".join(capfd.readouterr())
    assert result["api"] == "trainjob" and result["state"] == "succeeded"
    assert result["replica_statuses"] == {"Worker": {"active": 0, "succeeded": 2, "failed": 0}}  # as a TFJob's
    assert float(result["metrics"]["loss"]) == 0.5
    assert '[node-0-1] TF_CONFIG {"cluster": {"worker": ["127.0.0.1:' in logged
    assert '"task": {"type": "worker", "index": 1}}' in logged


def test_a_deferred_tfjob_run_as_a_trainjob_resumes_on_the_api_its_trigger_followed(hook: Any) -> None:
    """The resumed task (a new operator, as in a new worker process) takes the API from the kind its
    trigger followed: a TrainJob here, where the cluster serves only Trainer's API."""
    params: dict[str, Any] = {
        "task_id": "train", "worker": 2, "image": "python:3.12", "namespace": "default",
        "command": [sys.executable, "-c", "print('loss=0.5', flush=True)"], "metrics": ["loss"],
        "startup_timeout": 60, "deferrable": True,
    }  # fmt: skip
    ti = TaskInstance()
    event = fire(defer(TFJobOperator(**params), ti))
    assert event["event"] == "succeeded" and event["options"]["kind"] == "TrainJob"
    result = TFJobOperator(**params).execute_complete(context_for(ti), event)
    assert result["api"] == "trainjob" and result["state"] == "succeeded"
    assert float(result["metrics"]["loss"]) == 0.5


def test_tfjob_operator_refuses_an_evaluator_on_the_trainjob_api(hook: Any) -> None:
    ti = TaskInstance()
    op = TFJobOperator(task_id="train", worker=2, evaluator=1, image="python:3.12", command=["python", "x.py"])
    with pytest.raises(JobValidationError) as raised:
        op.execute(context_for(ti))
    assert raised.value.problems[0].field == "evaluator"
    assert "Evaluator replicas (Worker=2, Evaluator=1) cannot run on a TrainJob" in str(raised.value)
    assert "api='tfjob'" in str(raised.value)
    assert jobs_of(hook, ti) == []


TF_TASK = r"""
import json, os, sys, time
config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
print("task", task["type"], task["index"], "cluster", sorted(config["cluster"]), flush=True)
if task["type"] == "ps":
    time.sleep(300)  # a parameter server never ends by itself: the chief's success ends the job
if task["type"] == "chief":  # the coordinator ends when the test releases it
    while not os.path.exists(os.environ["RELEASE"]):
        time.sleep(0.1)
    print("loss=0.5", flush=True)
"""


def test_tfjob_operator_runs_chief_ps_and_workers_on_the_ps_runtime(
    hook: Any, capfd: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    release = tmp_path / "release"
    op = TFJobOperator(
        task_id="train", chief=1, ps=1, worker=2, image="python:3.12", command=[sys.executable, "-c", TF_TASK],
        env={"RELEASE": str(release)}, namespace="default", metrics=["loss"], startup_timeout=60,
        log_replicas="chief,ps,worker:1",  # TFJob's replica types, whichever API runs the job
    )  # fmt: skip
    thread, outcome = run_in_thread(op, TaskInstance())
    cluster = "cluster ['chief', 'ps', 'worker']"
    expected = [f"[chief-0-0] task chief 0 {cluster}", f"[ps-0-0] task ps 0 {cluster}", f"[node-0-1] task worker 1 {cluster}"]
    logged: list[str] = []
    wait_for(lambda: logged.append("".join(capfd.readouterr())) or all(e in "".join(logged) for e in expected),
             60, "every selected replica's first line in the task log")  # fmt: skip
    release.touch()
    thread.join(60)
    logged.append("".join(capfd.readouterr()))
    result = outcome[0]
    assert isinstance(result, dict) and result["api"] == "trainjob" and result["state"] == "succeeded", outcome
    assert "[node-0-0] task worker 0" not in "".join(logged)  # not selected
    assert hook.get_job(TRAINJOB, result["name"], "default")["spec"]["runtimeRef"]["name"] == "tensorflow-ps"
    assert float(result["metrics"]["loss"]) == 0.5  # read from the chief, rank 0
    assert result["replica_statuses"]["Chief"] == {"active": 0, "succeeded": 1, "failed": 0}


def test_a_missing_namespace_is_one_line_naming_it_and_the_fix(hook: Any) -> None:
    """Only the cluster knows a namespace is missing: its 404 becomes the part and the fix, not a dump."""
    with pytest.raises(AirflowException) as raised:
        operator(namespace="no-such-team").execute(context_for(TaskInstance()))
    message = str(raised.value)
    assert "Missing: namespace 'no-such-team'" in message
    assert "kubectl create namespace no-such-team" in message
    assert "HTTP response headers" not in message
