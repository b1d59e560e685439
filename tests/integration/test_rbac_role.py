"""The shipped Role (airflow_tfjob/rbac/role.yaml) is sufficient for every feature, and no wider.

Every feature runs against a cluster that authenticates the provider as user "airflow", bound to the
shipped Role as-is: a sync run (logs of all replicas, events, metrics, cleanPodPolicy Running), a
deferred run (cleanPodPolicy All, TTL), a failed job (diagnostics, restarted container, deleted on
finish), a retried task (an earlier failure marked handled, a running job reattached by its labels),
the operator's and the trigger's kill paths, the sensor in both modes, TensorBoard, and a TrainJob (one
succeeded, one failed and kept for debugging). Each must give
the right task outcome with no request denied. The cluster counts the requests it let through by
user: the (verb, API group, resource) the features used together must be exactly what the Role grants.
Test-side checks go through an administrator's connection, which is not counted.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from operator_support import (
    TaskInstance,
    context_for,
    defer,
    fire,
    rebuild_trigger,
    replica_command,
    wait_for,
)
from test_operator_tensorboard import HELD, board_objects
from watch_support import wait_until

import airflow_tfjob
from airflow_tfjob.build.manifest import build_tfjob
from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook
from airflow_tfjob.integrations.tensorboard import XCOM_KEY
from airflow_tfjob.jobs.kinds import KINDS
from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.apiserver.rbac import load_grants
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.operators.trainjob import TrainJobOperator
from airflow_tfjob.sensors.tfjob import TFJobSensor
from airflow_tfjob.version_compat import AirflowException

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

ROLE = Path(airflow_tfjob.__file__).parent / "rbac" / "role.yaml"
USER = "airflow"
CONN, ADMIN_CONN = "rbac_airflow", "rbac_admin"
# (verb, API group, resource with its subresource), as RBAC rules name them.
Permission = tuple[str, str, str]


def granted_permissions() -> frozenset[Permission]:
    """Each rule of the shipped Role expanded to verbs x groups x resources (it names them all)."""
    granted = set()
    for grant in load_grants(ROLE):
        for rule in grant.rules:
            assert not rule.resource_names, "a rule limited to resourceNames cannot serve generated jobs"
            for group in rule.api_groups:
                for resource in rule.resources:
                    granted.update((verb, group, resource) for verb in rule.verbs)
    assert not any("*" in part for permission in granted for part in permission), "no wildcards"
    return frozenset(granted)


@dataclass
class Env:
    """The cluster, an administrator's hook for the checks, and what each feature used (per module)."""

    cluster: LocalCluster
    admin: KubeflowJobHook
    tmp: Path
    capfd: pytest.CaptureFixture[str]
    used: dict[str, frozenset[Permission]] = field(default_factory=dict)

    def operator(self, **kwargs: Any) -> TFJobOperator:
        params: dict[str, Any] = {
            "task_id": "train",
            "kubernetes_conn_id": CONN,
            "namespace": "default",
            "image": "local/python",
            "command": replica_command(),
            "worker": 1,
            "startup_timeout": 60,
        }
        params.update(kwargs)
        return TFJobOperator(**params)

    def logged(self) -> str:
        return "".join(self.capfd.readouterr())

    def gone(self, name: str) -> bool:
        return self.admin.find_job("TFJob", name, "default") is None and not self.admin.list_job_pods(name, "default")

    def counts(self) -> dict[Permission, int]:
        return {(verb, group, resource): n for (user, verb, group, resource, _ns), n
                in self.cluster.allowed_requests().items() if user == USER}

    def run(self, feature: str) -> frozenset[Permission]:
        """Run a feature once per module (its own assertions check the outcome); what it used."""
        if feature not in self.used:
            before = self.counts()
            FEATURES[feature](self)
            self.used[feature] = frozenset(p for p, n in self.counts().items() if n > before.get(p, 0))
        denied = {key: n for key, n in self.cluster.denied_requests().items() if key[0] == USER}
        assert not denied, f"requests denied to the shipped Role: {denied}"
        return self.used[feature]


def held(gate: Path) -> list[str]:
    """A replica that runs until the test creates the gate file, then exits 0."""
    return [sys.executable, "-c", HELD, str(gate)]


def in_thread(task: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run a task's execute as the worker does, beside the test; its outcome: a result or an error."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(task())
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def running_pods(env: Env, name: str) -> int:
    return sum(1 for p in env.admin.list_job_pods(name, "default") if (p.get("status") or {}).get("phase") == "Running")


# ---------------------------------------------------------------------------------------------------
# The features: each runs as Airflow would run it, and checks the task's outcome.


def sync_run(env: Env) -> None:
    ti = TaskInstance()
    # No Chief: the job succeeds with worker 0 while the PS still runs, for cleanPodPolicy Running.
    op = env.operator(ps=1, worker=2, env={"SLEEP_PS": "300"}, log_replicas="all", metrics=["accuracy"],
                      clean_pod_policy="Running")
    result = op.execute(context_for(ti))
    logged = env.logged()
    assert result["state"] == "succeeded" and result["metrics"] == {"accuracy": 0.875, "missing": []}
    for replica in ("worker-0", "worker-1", "ps-0"):
        assert f"replica {replica} starting" in logged
    assert "[events]" in logged
    pods = env.admin.list_job_pods(result["name"], "default")
    assert sorted(p["metadata"]["name"].rsplit("-", 2)[-2] for p in pods) == ["worker", "worker"], "PS deleted"


def deferred_run(env: Env) -> None:
    ti = TaskInstance()
    op = env.operator(deferrable=True, metrics=["accuracy"], clean_pod_policy="All", ttl_seconds_after_finished=600)
    context = context_for(ti)
    result = op.execute_complete(context, fire(defer(op, ti, context)))
    assert result["state"] == "succeeded" and result["metrics"] == {"accuracy": 0.875, "missing": []}
    assert env.admin.list_job_pods(result["name"], "default") == []
    assert env.admin.get_job("TFJob", result["name"], "default")["spec"]["runPolicy"]["ttlSecondsAfterFinished"] == 600


def failed_job(env: Env) -> None:
    ti = TaskInstance()
    # The worker fails, is restarted once (its previous run's log is read), then the job fails.
    op = env.operator(restart_policy="OnFailure", backoff_limit=1, env={"FAIL_TYPE": "worker"},
                      on_finish_action="delete")
    with pytest.raises(AirflowException, match=r"TFJobFailed.*reached the specified backoff limit"):
        op.execute(context_for(ti))
    assert "worker is failing on purpose" in env.logged()
    assert op._job_ref is not None and env.gone(op._job_ref[0]), "on_finish_action='delete'"


def retried_task(env: Env) -> None:
    first = TaskInstance()
    with pytest.raises(AirflowException):
        env.operator(env={"FAIL_TYPE": "worker"}).execute(context_for(first))
    # Try 2 marks the failed job handled and defers on a new one; its trigger is lost (no task state
    # store either): try 3 finds the running job by its labels alone and reattaches to it.
    gate = env.tmp / "retry-gate"
    second = first.next_try()
    new_job = defer(env.operator(command=held(gate), deferrable=True), second).trigger.name
    third = env.operator(command=held(gate))
    thread, outcome = in_thread(lambda: third.execute(context_for(second.next_try())))
    try:
        wait_for(lambda: third._job_ref == (new_job, "default"), 60, "try 3 reattached to try 2's job")
    finally:
        gate.touch()
        thread.join(120)
    assert outcome and outcome[0]["name"] == new_job and outcome[0]["state"] == "succeeded", outcome


def operator_kill(env: Env) -> None:
    op = env.operator(env={"SLEEP": "300"})
    thread, outcome = in_thread(lambda: op.execute(context_for(TaskInstance())))
    name = wait_for(lambda: op._job_ref and running_pods(env, op._job_ref[0]) and op._job_ref[0], 60, "running")
    op.on_kill()
    thread.join(60)
    assert env.gone(name)
    assert outcome and isinstance(outcome[0], AirflowException) and "Lost track" in str(outcome[0]), outcome


def trigger_kill(env: Env) -> None:
    deferred = defer(env.operator(env={"SLEEP": "300"}, deferrable=True), TaskInstance())
    name = deferred.trigger.name

    async def kill_while_deferred() -> None:
        trigger = rebuild_trigger(deferred)
        run = asyncio.ensure_future(trigger.run().__anext__())
        await wait_until(lambda: trigger._job_read, timeout=30)  # following the job
        run.cancel()  # the triggerer, on the user's kill: cancel the run, then on_kill
        await trigger.on_kill()
        # Awaited last, so that this scenario tests the Role, not how fast a cancelled follow unwinds
        # (test_deferred_kill and tests/unit/test_aio.py do).
        await asyncio.gather(run, return_exceptions=True)

    asyncio.run(kill_while_deferred())
    assert env.gone(name)


SPOKEN_THEN_HELD = (
    "import os, sys, time\nprint('before the take-over', flush=True)\n"
    "while not os.path.exists(sys.argv[1]): time.sleep(0.1)\nprint('after the take-over')"
)


def trigger_take_over(env: Env) -> None:
    """A trigger that stops (triggerer shutdown) saves its log position; the one that takes over reads it."""
    from airflow_tfjob.triggers import positions

    gate = env.tmp / "take-over-gate"
    command = [sys.executable, "-c", SPOKEN_THEN_HELD, str(gate)]
    ti = TaskInstance()
    op = env.operator(command=command, deferrable=True)
    context = context_for(ti)
    deferred = defer(op, ti, context)

    def written(book: positions.PositionBook) -> bool:
        return any(source() for _, source in book.sources.values())

    async def stop_while_following() -> None:
        trigger = rebuild_trigger(deferred)
        run = asyncio.ensure_future(trigger.run().__anext__())
        await wait_until(lambda: any(written(book) for book in positions._BOOKS.values()), timeout=60)
        run.cancel()  # the triggerer stops: the trigger saves where it stopped writing
        await asyncio.gather(run, return_exceptions=True)

    asyncio.run(stop_while_following())
    gate.touch()
    result = op.execute_complete(context, fire(deferred))  # the take-over reads the saved position
    assert result["state"] == "succeeded"
    logged = env.logged()
    assert "no line above is repeated" in logged and logged.count("before the take-over") == 1, logged


def sensor(env: Env) -> None:
    name = f"sensed-{TaskInstance().run_id[-10:]}"
    gate = env.tmp / "sensor-gate"
    env.admin.create_job("TFJob", build_tfjob(name, "default", image="x", command=held(gate), replicas={"worker": 1}))
    common = {"task_id": "wait", "name": name, "namespace": "default", "kubernetes_conn_id": CONN, "timeout": 60}
    TFJobSensor(target_condition="Running", poke_interval=0.2, **common).execute(context_for(TaskInstance()))
    ti = TaskInstance(task_id="wait")
    waiting = TFJobSensor(deferrable=True, **common)
    deferred = defer(waiting, ti)  # still running: it defers
    gate.touch()
    event = fire(deferred)
    assert event["event"] == "reached"
    waiting.execute_complete(context_for(ti), event)
    env.admin.delete_job("TFJob", name, "default")


def other_kinds(env: Env) -> None:
    """The job-object requests the provider makes, for every kind beside TFJob, as the Role's user:
    create, get, list by labels, watch, patch and delete (Foreground) a small job that runs to its end."""
    from kubernetes import client, config, watch

    api = config.new_client_from_config(str(env.cluster.kubeconfig_for(USER)))
    crd = client.CustomObjectsApi(api)
    for kind in KINDS:
        if kind.kind == "TFJob":
            continue
        name, labels = f"rbac-{kind.singular}", {"airflow.apache.org/task-id": "rbac"}
        container = {"name": kind.container, "image": "x", "command": [sys.executable, "-c", "pass"]}
        replicas = {t: {"replicas": 1, "template": {"spec": {"containers": [container]}}} for t in kind.replica_types}
        body = {"apiVersion": "kubeflow.org/v1", "kind": kind.kind, "metadata": {"name": name, "labels": labels},
                "spec": {kind.spec_key: replicas}}
        args = ("kubeflow.org", "v1", "default", kind.plural)
        crd.create_namespaced_custom_object(*args, body)
        listed = crd.list_namespaced_custom_object(*args, label_selector="airflow.apache.org/task-id=rbac")
        assert [i["metadata"]["name"] for i in listed["items"]] == [name]
        succeeded = False
        for event in watch.Watch().stream(crd.list_namespaced_custom_object, *args, timeout_seconds=60,
                                          resource_version=listed["metadata"]["resourceVersion"]):
            conditions = (event["object"].get("status") or {}).get("conditions") or []
            if any(c["type"] == "Succeeded" for c in conditions):
                succeeded = True
                break
        assert succeeded, f"{kind.kind} {name} did not succeed"
        crd.patch_namespaced_custom_object(*args, name, {"metadata": {"labels": {"airflow.apache.org/tfjob-handled": "true"}}})
        assert crd.get_namespaced_custom_object(*args, name)["metadata"]["labels"]["airflow.apache.org/tfjob-handled"]
        crd.delete_namespaced_custom_object(*args, name, propagation_policy="Foreground")
        wait_for(lambda a=args: not crd.list_namespaced_custom_object(*a)["items"], 30, f"{kind.kind} {name} to go")


def kueue(env: Env) -> None:
    """A job queued by Kueue where no quota ever frees: its Workload and position read, then deleted
    at queue_timeout."""
    op = env.operator(kueue_queue="starved", container_resources={"cpu": "1"}, queue_timeout=2)
    with pytest.raises(AirflowException, match=r"queue_timeout=2 s: queued in LocalQueue starved \(0 workload"):
        op.execute(context_for(TaskInstance()))
    assert op._job_ref is not None
    wait_for(lambda: env.gone(op._job_ref[0]), 30, "the queued job deleted")


def trainjob_run(env: Env) -> None:
    """A TrainJob (Trainer v2) run to its end and deleted after its logs are read: every trainjobs verb
    but a kill's, whose requests are the v1 kinds' (the same cleanup code).

    The node holds until the task's watch of trainjobs is seen: a job that ends before the follow
    opens its watch is read by a GET alone, and the watch verb would go unused by chance."""
    gate = env.tmp / "trainjob-gate"
    watches = ("watch", "trainer.kubeflow.org", "trainjobs")
    before = env.counts().get(watches, 0)
    script = f"print('loss=0.5', flush=True); exec({HELD!r})"
    op = TrainJobOperator(
        task_id="train", runtime="torch-distributed", image="x", num_nodes=1, namespace="default",
        command=[sys.executable, "-c", script, str(gate)], kubernetes_conn_id=CONN, metrics=["loss"],
        on_finish_action="delete",
    )  # fmt: skip
    thread, outcome = in_thread(lambda: op.execute(context_for(TaskInstance())))
    try:
        wait_for(lambda: env.counts().get(watches, 0) > before, 60, "the task watching its TrainJob")
    finally:
        gate.touch()
        thread.join(120)
    result = outcome[0] if outcome else None
    assert isinstance(result, dict), outcome
    assert result["state"] == "succeeded" and float(result["metrics"]["loss"]) == 0.5


def trainjob_kept_failed(env: Env) -> None:
    """keep_failed_for on a failed TrainJob: the batch Job whose TTL deletes it after the window (the
    one batch verb the Role grants), made its owner."""
    ti = TaskInstance()
    op = TrainJobOperator(
        task_id="train", runtime="torch-distributed", image="x", num_nodes=1, namespace="default",
        command=[sys.executable, "-c", "raise SystemExit(3)"], kubernetes_conn_id=CONN,
        keep_failed_for=600,
    )  # fmt: skip
    with pytest.raises(AirflowException, match="failed"):
        op.execute(context_for(ti))
    assert "cleanup_error" not in ti.xcoms
    assert op._job_ref is not None
    job = env.admin.find_job("TrainJob", op._job_ref[0], "default")
    assert [o["kind"] for o in job["metadata"]["ownerReferences"]] == ["Job"]


def tensorboard(env: Env) -> None:
    ti = TaskInstance()
    (env.tmp / "tb").mkdir()
    result = env.operator(tensorboard=True, tensorboard_log_dir=str(env.tmp / "tb")).execute(context_for(ti))
    assert result["state"] == "succeeded"
    assert ti.xcoms[XCOM_KEY].startswith("http://")  # the LoadBalancer Service's address
    # Deleted when the task ended; the pod goes once its TensorBoard process has exited (a graceful
    # deletion, as Kubernetes gives it), which the task does not wait for.
    wait_for(lambda: board_objects(env.admin, result["name"]) == [], 60, "the board removed after the task")


FEATURES: dict[str, Callable[[Env], None]] = {
    "sync run": sync_run,
    "deferred run": deferred_run,
    "failed job": failed_job,
    "retried task": retried_task,
    "operator kill": operator_kill,
    "trigger kill": trigger_kill,
    "trigger take-over": trigger_take_over,
    "sensor": sensor,
    "tensorboard": tensorboard,
    "other kinds": other_kinds,
    "kueue": kueue,
    "trainjob run": trainjob_run,
    "trainjob kept failed": trainjob_kept_failed,
}


# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    from airflow_tfjob.local.kueue import queue_objects

    # Kueue on, for the one feature with a queue: a LocalQueue whose ClusterQueue has no quota.
    queues = queue_objects(cluster_queue="starved", local_queue="starved", quota={"cpu": 0})
    with LocalCluster(auth=True, roles={USER: [ROLE]}, kueue={"integrations": ["kubeflow.org/tfjob"], "objects": queues}) as c:
        yield c


@pytest.fixture(scope="module")
def used() -> dict[str, frozenset[Permission]]:
    return {}


@pytest.fixture
def env(
    cluster: LocalCluster,
    used: dict[str, frozenset[Permission]],
    monkeypatch: pytest.MonkeyPatch,
    venv_on_path: None,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> Env:
    for conn_id, kubeconfig in ((CONN, cluster.kubeconfig_for(USER)), (ADMIN_CONN, cluster.kubeconfig_path)):
        extra = {"kube_config_path": str(kubeconfig), "namespace": "default"}
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kubernetes", "extra": extra}))
    return Env(cluster, KubeflowJobHook(conn_id=ADMIN_CONN), tmp_path, capfd, used)


@pytest.mark.parametrize("feature", FEATURES)
def test_the_shipped_role_is_sufficient(env: Env, feature: str) -> None:
    assert env.run(feature), "the feature made requests as the Role's user"


def test_the_shipped_role_grants_no_more_than_the_features_use(env: Env) -> None:
    by_feature = {feature: env.run(feature) for feature in FEATURES}  # those not run yet run now
    used = frozenset().union(*by_feature.values())
    granted = granted_permissions()
    for permission in sorted(granted):
        print(f"{'/'.join(permission):40} " + ", ".join(f for f, p in by_feature.items() if permission in p))
    assert used == granted, f"granted but unused: {sorted(granted - used)}; used: {sorted(used - granted)}"


def test_the_shipped_role_covers_every_kind() -> None:
    granted = granted_permissions()
    job_verbs = {(verb, resource) for verb, group, resource in granted if group == "kubeflow.org"}
    assert job_verbs == {(verb, kind.plural) for kind in KINDS
                         for verb in ("create", "get", "list", "watch", "patch", "delete")}
    trainjob_verbs = {(verb, resource) for verb, group, resource in granted if group == "trainer.kubeflow.org"}
    assert trainjob_verbs == {(verb, "trainjobs") for verb in ("create", "get", "list", "watch", "patch", "delete")}
