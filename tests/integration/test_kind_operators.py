"""Every kubeflow.org/v1 kind besides TFJob, run by its named operator against the local cluster.

One module over the kinds (PyTorchJob, XGBoostJob, JAXJob, PaddleJob): success with the kind's
environment read back from the rank-0 replica's log and cleanPodPolicy applied after the logs,
failure of each replica type with its diagnostics in the task's log and error, reattach on retry,
deferral, render_only, and the kind's sensor.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest
from operator_support import TaskInstance, context_for, defer, fire, rebuild_trigger, wait_for

from airflow_tfjob.build.naming import identity_selector
from airflow_tfjob.jobs.kinds import kind_named
from airflow_tfjob.operators.generic import KubeflowJobOperator
from airflow_tfjob.operators.jaxjob import JAXJobOperator
from airflow_tfjob.operators.paddlejob import PaddleJobOperator
from airflow_tfjob.operators.pytorchjob import PyTorchJobOperator
from airflow_tfjob.operators.xgboostjob import XGBoostJobOperator
from airflow_tfjob.sensors.generic import KubeflowJobSensor
from airflow_tfjob.version_compat import AirflowException, AirflowFailException

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

# The replica's type and index come from its pod name (`<job>-<type>-<index>`, the HOSTNAME the
# kubelet gives it): not every kind injects them (a JAXJob has PROCESS_ID, a PaddleJob nothing).
KIND_REPLICA_PROGRAM = r"""
import os, sys, time
rtype, index = os.environ["HOSTNAME"].rsplit("-", 2)[-2:]
print(f"replica {rtype}-{index} starting", flush=True)
for var in filter(None, os.environ.get("SHOW_ENV", "").split(",")):
    print(f"env {var}={os.environ.get(var, '<unset>')}", flush=True)
if rtype == os.environ.get("FAIL_TYPE"):
    print(f"{rtype} is failing on purpose", flush=True)
    sys.exit(1)
time.sleep(float(os.environ.get(f"SLEEP_{rtype.upper()}", os.environ.get("SLEEP", "0"))))
print("loss=0.25 accuracy=0.875", flush=True)
print(f"replica {rtype}-{index} done", flush=True)
"""


@dataclass(frozen=True)
class Case:
    operator: type[KubeflowJobOperator]
    replicas: dict[str, int]
    rank0: str  # the replica metrics and the "master" log selection come from
    # The kind's injected variables, with the value rank 0 must see (None: any value, but set).
    env: dict[str, str | None]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.operator.default_kind or ""

    def __str__(self) -> str:
        return self.kind


CASES = [
    Case(
        PyTorchJobOperator,
        {"master": 1, "worker": 1},
        "master-0",
        {"MASTER_ADDR": None, "MASTER_PORT": None, "WORLD_SIZE": "2", "RANK": "0", "PYTHONUNBUFFERED": "1"},
        # OnFailure (the kind's default) would restart a failing replica in place for ever.
        {"restart_policy": "Never"},
    ),
    Case(
        XGBoostJobOperator,
        {"master": 1, "worker": 1},
        "master-0",
        {"MASTER_ADDR": None, "MASTER_PORT": None, "WORLD_SIZE": "2", "RANK": "0", "WORKER_ADDRS": None},
    ),
    Case(
        JAXJobOperator,
        {"worker": 2},
        "worker-0",
        {"COORDINATOR_ADDRESS": None, "COORDINATOR_PORT": None, "NUM_PROCESSES": "2", "PROCESS_ID": "0"},
    ),
    Case(
        PaddleJobOperator,
        {"master": 1, "worker": 1},
        "master-0",
        {"PADDLE_JOB_ID": None, "PADDLE_NNODES": "2", "PADDLE_MASTER": None, "PADDLE_SERVER_NUM": "1"},
        {"restart_policy": "Never"},
    ),
]
FAILURES = [(case, rtype) for case in CASES for rtype in case.replicas]


def make_operator(case: Case, **kwargs: Any) -> KubeflowJobOperator:
    params: dict[str, Any] = {
        "task_id": "train",
        "image": "local/python",
        "command": [sys.executable, "-c", KIND_REPLICA_PROGRAM],
        "namespace": "default",
        "startup_timeout": 60,
        **case.replicas,
        **case.extra,
    }
    params.update(kwargs)
    return case.operator(**params)


def jobs_of(hook: Any, kind: str, ti: TaskInstance) -> list[dict[str, Any]]:
    selector = identity_selector(ti.dag_id, ti.task_id, ti.run_id, ti.map_index, include_handled=True)
    return list(hook.list_jobs(kind, "default", selector))


@pytest.mark.parametrize("case", CASES, ids=str)
def test_success_env_logs_metrics_cleanup_and_sensor(
    hook: Any, case: Case, capfd: pytest.CaptureFixture[str]
) -> None:
    ti = TaskInstance()
    op = make_operator(
        case,
        # Rank 0 ends last, as in training: a Master's success ends the job of most kinds.
        env={"SHOW_ENV": ",".join(case.env), f"SLEEP_{case.rank0.split('-')[0].upper()}": "3"},
        metrics=["loss"],
        log_replicas="all",
        clean_pod_policy="All",
    )
    result = op.execute(context_for(ti))
    logged = "".join(capfd.readouterr())
    assert result["state"] == "succeeded"
    assert result["reason"] == f"{case.kind}Succeeded"
    assert list(result["replica_statuses"]) == list(kind_named(case.kind).replica_types)
    assert float(result["metrics"]["loss"]) == 0.25  # read from rank 0's log
    for var, value in case.env.items():
        expected = f"[{case.rank0}] env {var}=" + (value or "")
        assert expected in logged, f"{expected!r} not in the task log"
        assert f"[{case.rank0}] env {var}=<unset>" not in logged
    for rtype, count in case.replicas.items():
        for index in range(count):
            assert f"[{rtype}-{index}] replica {rtype}-{index} done" in logged
    job = hook.get_job(case.kind, result["name"], "default")
    assert job["kind"] == case.kind
    # Submitted without a cleanup policy; the task applied "All" once the logs were read.
    assert job["spec"]["runPolicy"]["cleanPodPolicy"] == "None"
    wait_for(lambda: not hook.list_job_pods(result["name"], "default"), 30, "pods deleted by cleanup")
    sensor = KubeflowJobSensor(task_id="wait", kind=case.kind, name=result["name"], namespace="default")
    assert sensor.poke(context_for(TaskInstance()))


@pytest.mark.parametrize(("case", "rtype"), FAILURES, ids=[f"{c}-{t}" for c, t in FAILURES])
def test_failure_of_each_replica_type_names_it_with_diagnostics(
    hook: Any, case: Case, rtype: str, capfd: pytest.CaptureFixture[str]
) -> None:
    ti = TaskInstance()
    op = make_operator(case, env={"FAIL_TYPE": rtype, "SLEEP": "30"}, on_finish_action="delete")
    with pytest.raises(AirflowException) as raised:
        op.execute(context_for(ti))
    logged = "".join(capfd.readouterr())
    message = str(raised.value)
    canonical = kind_named(case.kind).canonical_type(rtype)
    assert f"{case.kind} default/" in message and f"{case.kind}Failed" in message
    assert f"failing replicas: {canonical}" in message
    assert f"=== {rtype}-0 failed" in logged
    assert f"  | {rtype} is failing on purpose" in logged
    wait_for(lambda: not jobs_of(hook, case.kind, ti), 60, "failed job deleted")


@pytest.mark.parametrize("case", CASES, ids=str)
def test_retry_reattaches_to_the_same_job(hook: Any, case: Case) -> None:
    first = TaskInstance()
    op = make_operator(case, env={"SLEEP": "2"})
    context = context_for(first)
    # The first try creates the job, then its worker "dies" before following it.
    created = op.find_or_create(hook, op.build_manifest(context), context)
    result = make_operator(case, env={"SLEEP": "2"}).execute(context_for(first.next_try()))
    assert result["uid"] == created["metadata"]["uid"]
    assert result["state"] == "succeeded"
    assert len(jobs_of(hook, case.kind, first)) == 1


@pytest.mark.parametrize("case", CASES, ids=str)
def test_deferred_run_resumes_with_the_result(hook: Any, case: Case) -> None:
    ti = TaskInstance()
    op = make_operator(case, deferrable=True, metrics=["loss"], env={"SLEEP": "1"})
    deferred = defer(op, ti)
    assert deferred.trigger.kind.kind == case.kind
    event = fire(deferred)
    assert event["event"] == "succeeded"
    result = op.execute_complete(context_for(ti), event)
    assert result["reason"] == f"{case.kind}Succeeded"
    assert float(result["metrics"]["loss"]) == 0.25


@pytest.mark.parametrize("case", CASES, ids=str)
def test_kill_deletes_the_job_and_its_pods(hook: Any, case: Case) -> None:
    ti = TaskInstance()
    op = make_operator(case, env={"SLEEP": "120"})
    errors: list[BaseException] = []

    def run() -> None:
        try:
            op.execute(context_for(ti))
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    total = sum(case.replicas.values())

    def running() -> list[dict[str, Any]]:
        jobs = jobs_of(hook, case.kind, ti)
        pods = hook.list_job_pods(jobs[0]["metadata"]["name"], "default") if jobs else []
        return jobs if sum(p["status"].get("phase") == "Running" for p in pods) == total else []

    name = wait_for(running, 60, "every replica running")[0]["metadata"]["name"]
    op.on_kill()
    assert hook.find_job(case.kind, name, "default") is None
    assert hook.list_job_pods(name, "default") == []
    thread.join(60)
    assert not thread.is_alive()
    assert errors, "execute must not succeed once its job was deleted"


@pytest.mark.parametrize("case", CASES, ids=str)
def test_render_only_builds_the_kind_and_submits_nothing(hook: Any, case: Case) -> None:
    ti = TaskInstance()
    op = KubeflowJobOperator(
        task_id="train", kind=case.kind.lower(), image="local/python", render_only=True, **case.replicas
    )
    manifest = op.execute(context_for(ti))["manifest"]
    row = kind_named(case.kind)
    assert manifest["kind"] == case.kind
    assert {k.lower(): v["replicas"] for k, v in manifest["spec"][row.spec_key].items()} == case.replicas
    assert jobs_of(hook, case.kind, ti) == []


@pytest.mark.parametrize("case", CASES[:1], ids=str)
def test_the_kinds_sensor_fails_at_once_on_a_failed_job(hook: Any, case: Case) -> None:
    ti = TaskInstance()
    op = make_operator(case, env={"FAIL_TYPE": "worker", "SLEEP": "30"})
    with pytest.raises(AirflowException):
        op.execute(context_for(ti))
    name = jobs_of(hook, case.kind, ti)[0]["metadata"]["name"]
    sensor = case.operator.__name__.replace("Operator", "Sensor")
    module = __import__(f"airflow_tfjob.sensors.{case.kind.lower()}", fromlist=[sensor])
    with pytest.raises(AirflowFailException, match=f"{case.kind} default/{name} failed"):
        getattr(module, sensor)(task_id="wait", name=name, namespace="default").poke(context_for(ti))


async def test_one_shared_watch_per_kind_in_a_namespace(hook: Any) -> None:
    from airflow_tfjob.hooks import jobwatch as watch
    from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook

    ahook = AsyncKubeflowJobHook(conn_id=hook.conn_id)
    pytorch = watch.shared_watch(ahook, "default", kind=kind_named("PyTorchJob"))
    async with (
        pytorch.subscribe("absent-a") as a,
        watch.shared_watch(ahook, "default", kind=kind_named("TFJob")).subscribe("absent-b") as b,
    ):
        # Each watcher lists its own collection first: neither job exists in it.
        assert await a.next(timeout=30) is None and await b.next(timeout=30) is None
        kinds = sorted(w["kind"] for w in watch.active_watchers() if w["namespace"] == "default")
        assert kinds == ["PyTorchJob", "TFJob"]
        assert pytorch.stats is not None and pytorch.stats.lists == 1


def whoami(tag: str) -> dict:
    """A @task.pytorchjob function: every replica runs it; the task returns rank 0's value."""
    import os

    return {"tag": tag, "rank": os.environ.get("RANK"), "pod": os.environ["HOSTNAME"].rsplit("-", 2)[-2:]}


@pytest.mark.parametrize(
    ("replicas", "rank0"), [({"master": 1, "worker": 1}, ["master", "0"]), ({"worker": 2}, ["worker", "0"])]
)
def test_pytorchjob_decorator_returns_rank_0s_value(
    hook: Any, replicas: dict[str, int], rank0: list[str]
) -> None:
    from airflow.sdk import DAG

    from airflow_tfjob.decorators.pytorchjob import pytorchjob_task

    with DAG("kinds_decorator", schedule=None):
        made = pytorchjob_task(image="local/python", namespace="default", restart_policy="Never", **replicas)(
            whoami
        )("t")
    op = made.operator
    value = op.execute(context_for(TaskInstance()))
    assert value == {"tag": "t", "rank": "0" if "master" in replicas else None, "pod": rank0}


def test_a_paddlejob_without_master_reads_metrics_from_worker_0(
    hook: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    # Collective mode: the operator labels no pod job-role=master; rank 0 is still Worker 0.
    case = CASES[3]
    op = make_operator(case, master=None, worker=2, metrics=["loss"], env={"SLEEP_WORKER": "1"})
    result = op.execute(context_for(TaskInstance()))
    logged = "".join(capfd.readouterr())
    assert float(result["metrics"]["loss"]) == 0.25
    assert "[worker-0] replica worker-0 done" in logged  # the default log selection, "master"
    assert "[worker-1]" not in logged


async def test_the_trigger_of_a_deferred_kind_deletes_that_kind_on_kill(hook: Any) -> None:
    from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook

    case = CASES[2]  # JAXJob: the trigger must know the kind from its serialised options alone
    deferred = defer(make_operator(case, deferrable=True, env={"SLEEP": "120"}), TaskInstance())
    trigger = rebuild_trigger(deferred)
    ahook = AsyncKubeflowJobHook(conn_id=hook.conn_id)
    assert await ahook.find_job(case.kind, trigger.name, "default") is not None
    await trigger.on_kill()
    assert await ahook.find_job(case.kind, trigger.name, "default") is None
    assert await ahook.list_job_pods(trigger.name, "default") == []
