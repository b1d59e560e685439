"""A job behind a MultiKueue ClusterQueue is followed on the worker cluster that runs it (issue 37, part
2): the task log gets every replica's lines from the worker through the worker's Airflow connection,
named in the manager connection's extra, in both modes; without a connection for the worker the task
says which one to add and follows the status alone.

One local manager with two workers for the module (each worker its own API server); the task's
connections point at their kubeconfigs."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_support import TaskInstance, context_for, defer, first_event, rebuild_trigger, wait_for
from test_deferred_parity import TaskLog
from test_kueue import operator

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

NS = "default"


@pytest.fixture(scope="module")
def manager() -> Iterator[Any]:
    from airflow_tfjob.local import LocalCluster
    from airflow_tfjob.local.kueue.options import queue_objects
    from airflow_tfjob.local.multikueue import CHECK_NAME

    queues = queue_objects(cluster_queue="mk", local_queue="mk", namespace=NS, quota={"cpu": 4},
                           admission_checks=[CHECK_NAME])
    with LocalCluster(multikueue_workers=2,
                      kueue={"integrations": ["kubeflow.org/tfjob"], "objects": queues}) as cluster:
        yield cluster


def _connect(manager: Any, monkeypatch: pytest.MonkeyPatch, mapped: bool) -> None:
    """`kubernetes_default` on the manager (mapping each worker to its connection when `mapped`), and
    `k8s_<worker>` on each worker."""
    extra: dict[str, Any] = {"kube_config_path": str(manager.kubeconfig_path), "namespace": NS}
    if mapped:
        extra["multikueue_connections"] = {w: f"k8s_{w}" for w in manager.workers}
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps({"conn_type": "kubernetes", "extra": extra}))
    for worker in manager.workers:
        monkeypatch.setenv(f"AIRFLOW_CONN_K8S_{worker.upper()}", json.dumps({"conn_type": "kubernetes", "extra": {
            "kube_config_path": str(manager.worker_kubeconfig(worker)), "namespace": NS}}))


def _replica_lines(log: TaskLog) -> list[str]:
    return [line for line in log.lines if line.startswith("[worker-")]


def _let_go_once_shown(log: TaskLog, line: str, hold: Path) -> threading.Thread:
    """Creates `hold` once the task log shows `line` (or after 120 s, and the test fails on its lines).

    The replica waits on `hold` after its numbered lines: MultiKueue removes the worker's copy, with its
    pods and their logs, as soon as the job ends, so a replica that ends before the follow reached it
    leaves nothing to read, as with a real Kueue. On busy cores a 0.5 s replica once did: the test claims
    the follow loses and repeats nothing of what it reaches, not a race against the replica.
    """

    def wait() -> None:
        deadline = time.monotonic() + 120
        while line not in log.lines and time.monotonic() < deadline:
            time.sleep(0.05)
        hold.touch()

    thread = threading.Thread(target=wait, daemon=True, name=f"let-go-{hold.name}")
    thread.start()
    return thread


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferred"])
def test_the_replicas_lines_come_from_the_worker(manager: Any, monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path, deferrable: bool) -> None:
    """Every line of the replica, once each, read on the worker Kueue chose, which the log names. One
    replica: a TFJob succeeds with its worker 0, and MultiKueue then removes the worker's copy, killing
    a replica still running (cleanPodPolicy cannot keep it: the whole job goes)."""
    _connect(manager, monkeypatch, mapped=True)
    log, ti = TaskLog(), TaskInstance(task_id=f"mk-{deferrable}")
    hold = tmp_path / "hold"
    params: dict[str, Any] = {"task_id": ti.task_id, "kueue_queue": "mk", "worker": 1,
                              "env": {"LINES": "5", "HOLD": str(hold)}, "deferrable": deferrable}
    _let_go_once_shown(log, "[worker-0] line 4", hold)
    op = operator(log, **params)
    if deferrable:
        trigger = rebuild_trigger(defer(op, ti))
        log.attach(trigger)  # the triggerer's lines in the same task log
        event = asyncio.run(first_event(trigger))
        result = operator(log, **params).execute_complete(context_for(ti), event)
    else:
        result = op.execute(context_for(ti))
    assert result["state"] == "succeeded"
    told = [line for line in log.lines if line.startswith("[multikueue] ")]
    assert told, log.lines
    worker = next(w for w in manager.workers if f"runs on worker cluster {w!r}: following its replicas there "
                  f"(connection 'k8s_{w}')" in told[0])
    assert all(f"'{worker}'" in line for line in told)
    lines = _replica_lines(log)
    mine = [line.split("] ", 1)[1] for line in lines if line.startswith("[worker-0] ")]
    assert mine == [f"line {i}" for i in range(5)] + ["done"], "\n".join(log.lines)  # 0 lost, 0 repeated


def test_without_a_connection_for_the_worker_the_task_says_which_to_add(manager: Any,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _connect(manager, monkeypatch, mapped=False)
    log = TaskLog()
    result = operator(log, task_id="mk-unmapped", kueue_queue="mk").execute(
        context_for(TaskInstance(task_id="mk-unmapped")))
    assert result["state"] == "succeeded"
    told = [line for line in log.lines if line.startswith("[multikueue] ")]
    assert len(told) == 1, told
    assert "add an Airflow kubernetes connection for it and name it in the job connection's extra " \
           "multikueue_connections" in told[0]
    assert _replica_lines(log) == []
    assert os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"]  # the manager's own connection was enough


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferred"])
def test_a_sweep_spreads_over_both_workers_and_each_task_reads_its_own(manager: Any, monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path, deferrable: bool) -> None:
    """Issue 37's sweep: four map indexes behind the MultiKueue queue, each worker with room for two (its
    ClusterQueue's quota lowered to 2 cpus): Kueue spreads them two and two, every task's log names its
    worker and holds every line of its replica once, and nothing is left on either worker."""
    from kubernetes import client, config
    from test_kueue import run_in_thread

    _connect(manager, monkeypatch, mapped=True)
    workers = {w: client.CustomObjectsApi(config.new_client_from_config(str(manager.worker_kubeconfig(w))))
               for w in manager.workers}
    two = {"spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": 2}]}]}]}}
    before = {w: api.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "mk")["spec"]
              for w, api in workers.items()}
    for api in workers.values():
        api.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "mk", two)
    try:
        run_id = TaskInstance().run_id
        trials = []
        for index in range(4):
            log, ti = TaskLog(), TaskInstance(task_id=f"sweep-{deferrable}", map_index=index, run_id=run_id)
            hold = tmp_path / f"hold-{index}"
            params = {"task_id": ti.task_id, "kueue_queue": "mk", "deferrable": deferrable,
                      "env": {"LINES": "20", "STEP": "0.1", "HOLD": str(hold)}}
            _let_go_once_shown(log, "[worker-0] line 19", hold)
            trials.append((log, ti, params))
        if deferrable:
            triggers = []
            for log, ti, params in trials:
                trigger = rebuild_trigger(defer(operator(log, **params), ti))
                log.attach(trigger)
                triggers.append(trigger)

            async def follow_all() -> list[dict[str, Any]]:
                return list(await asyncio.gather(*(first_event(t) for t in triggers)))

            results = [operator(log, **params).execute_complete(context_for(ti), event)
                       for (log, ti, params), event in zip(trials, asyncio.run(follow_all()), strict=True)]
        else:
            runs = [run_in_thread(operator(log, **params), ti) for log, ti, params in trials]
            for thread, _ in runs:
                thread.join(120)
            results = [out.get("result") or out for _, out in runs]
    finally:
        for w, api in workers.items():
            api.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "mk", {"spec": before[w]})
    assert [r["state"] for r in results] == ["succeeded"] * 4, results
    used = []
    for log, *_ in trials:
        told = [line for line in log.lines if line.startswith("[multikueue] ")]
        used += [w for w in manager.workers if told and f"runs on worker cluster {w!r}" in told[0]]
        mine = [line.split("] ", 1)[1] for line in _replica_lines(log) if line.startswith("[worker-0] ")]
        assert mine == [f"line {i}" for i in range(20)] + ["done"], "\n".join(log.lines)
    assert sorted(used) == sorted(list(manager.workers) * 2)
    names = {r["name"] for r in results}
    assert len(names) == 4

    def left_on_workers() -> list[str]:
        return [o["metadata"]["name"] for api in workers.values()
                for plural, group, version in (("tfjobs", "kubeflow.org", "v1"), ("workloads", "kueue.x-k8s.io", "v1beta2"))
                for o in api.list_namespaced_custom_object(group, version, NS, plural)["items"]
                if o["metadata"]["name"] in names or o["metadata"]["name"].rsplit("-", 1)[0] in {f"tfjob-{n}" for n in names}]

    wait_for(lambda: not left_on_workers(), 10, "no job or Workload of the sweep left on either worker")


async def test_a_kill_while_deferred_removes_the_job_from_the_manager_and_the_worker(
        manager: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The trigger's kill deletes the manager's copy; MultiKueue removes the worker's job, its pods and
    its Workload: nothing is left on either cluster within 10 s (the issue's bound)."""
    from kubernetes import client, config
    from watch_support import wait_until

    from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook
    from airflow_tfjob.triggers.deferral import KubeflowJobTrigger

    _connect(manager, monkeypatch, mapped=True)
    log, ti = TaskLog(), TaskInstance(task_id="mk-killed")
    op = operator(log, task_id=ti.task_id, kueue_queue="mk", env={"LINES": "100000", "STEP": "0.05"},
                  deferrable=True)
    kwargs = dict(defer(op, ti).trigger.serialize()[1])
    trigger = KubeflowJobTrigger(**kwargs)
    log.attach(trigger)
    run = asyncio.ensure_future(trigger.run().__anext__())
    await wait_until(lambda: any(line.startswith("[worker-0] line 3") for line in log.lines), timeout=60)
    told = next(line for line in log.lines if line.startswith("[multikueue] "))
    worker = next(w for w in manager.workers if f"worker cluster {w!r}" in told)
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    await trigger.on_kill()

    name = kwargs["name"]
    here, there = AsyncKubeflowJobHook(conn_id="kubernetes_default"), AsyncKubeflowJobHook(conn_id=f"k8s_{worker}")
    apis = [client.CustomObjectsApi(config.new_client_from_config(str(path)))
            for path in (manager.kubeconfig_path, manager.worker_kubeconfig(worker))]

    def workloads_left() -> bool:
        return any(w["metadata"]["name"].startswith(f"tfjob-{name}-")
                   for api in apis for w in api.list_namespaced_custom_object(
                       "kueue.x-k8s.io", "v1beta2", NS, "workloads")["items"])

    async def nothing_left() -> bool:
        for hook in (here, there):
            if await hook.find_job("TFJob", name, NS) is not None or await hook.list_job_pods(name, NS):
                return False
        return not await asyncio.to_thread(workloads_left)

    await wait_until(nothing_left, timeout=10)
    checked = (f"[multikueue] TFJob {NS}/{name} on worker cluster {worker!r} is gone too (checked through "
               f"connection 'k8s_{worker}')")
    assert checked in log.lines, log.lines  # the kill looked at the worker through its connection


async def test_a_job_dispatched_again_is_followed_on_its_new_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its worker lost, the job is dispatched to the other one after the worker-lost timeout (1.5 s
    here), and the follow moves there, saying so. Its replica asks for a GPU no worker has, so it never
    runs: a manager's copy whose mirrored status counted running replicas would keep its quota and not
    be dispatched again (Kueue v0.19.2's IsActive; docs/local-cluster.md)."""
    from watch_support import wait_until

    from airflow_tfjob.local import LocalCluster
    from airflow_tfjob.local.kueue.options import queue_objects
    from airflow_tfjob.local.multikueue import CHECK_NAME
    from airflow_tfjob.triggers.deferral import KubeflowJobTrigger

    queues = queue_objects(cluster_queue="mk", local_queue="mk", namespace=NS, quota={"cpu": 4, "nvidia.com/gpu": 2},
                           admission_checks=[CHECK_NAME])
    kueue = {"integrations": ["kubeflow.org/tfjob"], "objects": queues, "multikueue_worker_lost_timeout": 1.5}
    with LocalCluster(multikueue_workers=2, kueue=kueue) as cluster:
        _connect(cluster, monkeypatch, mapped=True)
        log, ti = TaskLog(), TaskInstance(task_id="mk-moved")
        op = operator(log, task_id=ti.task_id, kueue_queue="mk", deferrable=True,
                      container_resources={"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "1"}})
        trigger = KubeflowJobTrigger(**dict(defer(op, ti).trigger.serialize()[1]))
        log.attach(trigger)
        run = asyncio.ensure_future(trigger.run().__anext__())
        try:
            await wait_until(lambda: any(line.startswith("[multikueue] ") for line in log.lines), timeout=60)
            first = next(w for w in cluster.workers if any(f"worker cluster {w!r}" in line for line in log.lines))
            other = next(w for w in cluster.workers if w != first)
            await asyncio.to_thread(cluster.lose_worker, first)
            moved = (f"was dispatched again, from worker cluster {first!r} to {other!r}: following its replicas "
                     f"there (connection 'k8s_{other}')")
            await wait_until(lambda: any(moved in line for line in log.lines), timeout=30)
        finally:
            run.cancel()
            await asyncio.gather(run, return_exceptions=True)
            await trigger.on_kill()


def test_a_worker_lost_while_the_job_runs_fails_the_task_naming_the_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue v0.19.2 does not dispatch again a job whose replicas were running: its worker lost, the
    manager's copy stays active for ever. Once the worker's MultiKueueCluster has been Active=False for
    the part's window (1 s here, 20 min by default), the task fails naming the loss, as an
    infrastructure failure a retry may fix, and the manager's copy is deleted. Sync first (its job on
    one worker, that worker lost), then deferred (its job on the other, the only one left, lost too):
    one cluster for both."""
    from test_kueue import run_in_thread

    from airflow_tfjob.follow.failure import INFRASTRUCTURE, TrainingJobFailed
    from airflow_tfjob.integrations.kueue import multikueue
    from airflow_tfjob.local import LocalCluster
    from airflow_tfjob.local.kueue.options import queue_objects
    from airflow_tfjob.local.multikueue import CHECK_NAME

    monkeypatch.setattr(multikueue, "WORKER_LOST_WINDOW", 1.0)
    monkeypatch.setattr(multikueue, "WORKER_LOOK", 0.25)
    monkeypatch.setattr(multikueue, "WORKER_COPY_WAIT", 1.0)
    queues = queue_objects(cluster_queue="mk", local_queue="mk", namespace=NS, quota={"cpu": 4},
                           admission_checks=[CHECK_NAME])
    with LocalCluster(multikueue_workers=2,
                      kueue={"integrations": ["kubeflow.org/tfjob"], "objects": queues}) as cluster:
        _connect(cluster, monkeypatch, mapped=True)
        long = {"env": {"LINES": "100000", "STEP": "0.05"}}

        def running_on(log: TaskLog) -> str:
            wait_for(lambda: any(line.startswith("[worker-0] line 3") for line in log.lines), 60,
                     "the replica's lines read on its worker")
            told = next(line for line in log.lines if line.startswith("[multikueue] "))
            return next(w for w in cluster.workers if f"worker cluster {w!r}" in told)

        from kubernetes import client, config

        tfjobs = client.CustomObjectsApi(config.new_client_from_config(str(cluster.kubeconfig_path)))

        def failed_for_the_loss(error: BaseException, worker: str) -> None:
            assert isinstance(error, TrainingJobFailed), repr(error)
            assert str(error).startswith(f"worker cluster {worker} lost (MultiKueueCluster {worker} Active=False: "
                                         "ClientConnectionFailed"), str(error)
            assert "run the task again once the worker is reachable" in str(error)
            assert (error.cause.category, error.cause.reason) == (INFRASTRUCTURE, "WorkerLost")
            left = tfjobs.list_namespaced_custom_object("kubeflow.org", "v1", NS, "tfjobs")["items"]
            assert left == [], "the manager's copy is deleted"
            unchecked = (f"on worker cluster {worker!r} could not be checked through connection 'k8s_{worker}' "
                         "(the worker did not answer); MultiKueue removes it once it reaches the worker again")
            assert any(unchecked in line for line in log.lines), log.lines

        log, ti = TaskLog(), TaskInstance(task_id="mk-lost-sync")
        op = operator(log, task_id=ti.task_id, kueue_queue="mk", **long)
        thread, out = run_in_thread(op, ti)
        worker = running_on(log)
        cluster.lose_worker(worker)
        thread.join(60)
        assert not thread.is_alive(), "the task hangs on a lost worker"
        failed_for_the_loss(out.get("error") or AssertionError(out), worker)

        log, ti = TaskLog(), TaskInstance(task_id="mk-lost-deferred")
        params = {"task_id": ti.task_id, "kueue_queue": "mk", "deferrable": True, **long}
        trigger = rebuild_trigger(defer(operator(log, **params), ti))
        log.attach(trigger)

        async def follow() -> dict[str, Any]:
            run = asyncio.ensure_future(first_event(trigger))
            other = await asyncio.to_thread(running_on, log)
            assert other != worker
            await asyncio.to_thread(cluster.lose_worker, other)
            return await asyncio.wait_for(run, 60)

        event = asyncio.run(follow())
        with pytest.raises(TrainingJobFailed) as failed:
            operator(log, **params).execute_complete(context_for(ti), event)
        failed_for_the_loss(failed.value, next(w for w in cluster.workers if w != worker))


def test_keep_failed_for_keeps_the_managers_copy_and_says_the_workers_pods_went(
        manager: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """keep_failed_for on a job MultiKueue ran: the manager's copy is kept for the window and then deleted
    by a batch Job's TTL (the manager's training operator leaves a job managed by MultiKueue alone, its
    ttlSecondsAfterFinished too, so the TFJob's own TTL would keep it for ever); its pods were the
    worker's, which MultiKueue removes with the worker's copy once the job finished, and the cleanup line
    says so. Its cost (GPU- and core-hours) comes from the manager's copy, whose status (start and
    completion times) is the worker's mirrored."""
    import sys

    from kubernetes import client, config

    from airflow_tfjob.build.naming import identity_selector
    from airflow_tfjob.constants import ANNOTATION_KEEP_FAILED_UNTIL
    from airflow_tfjob.follow.failure import TrainingJobFailed
    from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook
    from airflow_tfjob.jobs.kinds import TFJOB

    _connect(manager, monkeypatch, mapped=True)
    window = 3
    log, ti = TaskLog(), TaskInstance(task_id="mk-keep-failed")
    op = operator(log, task_id=ti.task_id, kueue_queue="mk", restart_policy="Never", keep_failed_for=window,
                  command=[sys.executable, "-c", "import sys, time; time.sleep(1); print('failing', flush=True); "
                           "time.sleep(0.5); sys.exit(3)"])  # a moment for the follow's stream on the worker
    with pytest.raises(TrainingJobFailed):
        op.execute(context_for(ti))
    assert "[worker-0] failing" in log.lines, log.lines  # read on the worker
    (cleanup,) = [line for line in log.lines if line.startswith("Cleanup of TFJob ")]
    assert "kept for debugging until" in cleanup and "then deleted by batch Job " in cleanup, cleanup
    assert "its pods ran on a MultiKueue worker cluster" in cleanup and "none kept" in cleanup, cleanup

    hook = KubeflowJobHook(conn_id="kubernetes_default")
    (job,) = hook.list_jobs(TFJOB, NS, identity_selector(ti.dag_id, ti.task_id, ti.run_id, ti.map_index,
                                                         include_handled=True))
    name = job["metadata"]["name"]
    assert ANNOTATION_KEEP_FAILED_UNTIL in job["metadata"]["annotations"]
    assert "ttlSecondsAfterFinished" not in job["spec"]["runPolicy"]
    (owner,) = job["metadata"]["ownerReferences"]
    assert (owner["apiVersion"], owner["kind"]) == ("batch/v1", "Job")

    cost = ti.xcoms["cost"]
    status = job["status"]
    assert status["startTime"] and status["completionTime"]  # the worker's, mirrored
    assert (cost["replicas"], cost["cpu_cores"], cost["finished"]) == (1, 1, True), cost
    assert cost["running_seconds"] > 0 and cost["running_cpu_core_hours"] > 0, cost

    workers = {w: client.CustomObjectsApi(config.new_client_from_config(str(manager.worker_kubeconfig(w))))
               for w in manager.workers}

    def on_workers() -> list[str]:
        return [w for w, api in workers.items()
                if any(j["metadata"]["name"] == name
                       for j in api.list_namespaced_custom_object("kubeflow.org", "v1", NS, "tfjobs")["items"])]

    wait_for(lambda: not on_workers(), 10, "the worker's copy removed by MultiKueue")
    wait_for(lambda: hook.find_job(TFJOB, name, NS) is None, window + 20,
             "the manager's copy deleted once the window ended (the batch Job's TTL, then garbage collection)")


def test_the_asset_watcher_reads_a_jobs_metrics_on_its_worker(manager: Any, monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Any) -> None:
    """The asset watcher's metrics (lineage: the model's asset event) come from the rank-0 replica's log,
    which for a job MultiKueue dispatched is on the worker: read there through the worker's connection,
    the source naming the worker; without a connection for it, or once MultiKueue has removed the
    worker's copy with its pods, the note says which. No follow runs: the job is deferred, its trigger
    never started, as a job the watcher did not submit."""
    import sys

    from watch_support import wait_until

    from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook, KubeflowJobHook
    from airflow_tfjob.integrations.assets import LOG_TAIL_LINES, read_metrics
    from airflow_tfjob.jobs.kinds import TFJOB

    gate = tmp_path / "gate"
    program = (f"import os, time\nprint('loss=0.25', flush=True)\nwhile not os.path.exists({str(gate)!r}):\n"
               "    time.sleep(0.05)\n")
    _connect(manager, monkeypatch, mapped=True)
    ti = TaskInstance(task_id="mk-metrics")
    deferred = defer(operator(TaskLog(), task_id=ti.task_id, kueue_queue="mk", deferrable=True,
                              command=[sys.executable, "-c", program]), ti)
    name = deferred.trigger.serialize()[1]["name"]
    hook = KubeflowJobHook(conn_id="kubernetes_default")

    def read(names: list[str]) -> tuple[Any, ...]:
        job = hook.find_job(TFJOB, name, NS)
        return asyncio.run(read_metrics(AsyncKubeflowJobHook(conn_id="kubernetes_default"), TFJOB, job, names))

    try:
        found = wait_for(lambda: (lambda r: r if r[0] else None)(read(["loss", "accuracy"])), 60,
                         "the replica's loss read on its worker")
        metrics, source, missing, note = found
        worker = next(w for w in manager.workers if source == f"worker-0 log on worker cluster {w}")
        assert (metrics, missing) == ({"loss": 0.25}, ["accuracy"]), found
        assert note == f"not printed in the last {LOG_TAIL_LINES} lines of the worker-0 log", found

        _connect(manager, monkeypatch, mapped=False)
        assert read(["loss"]) == ({}, None, ["loss"], f"it ran on worker cluster {worker!r}, which no connection "
                                  "names (multikueue_connections in the connection's extra): its log was not read")

        _connect(manager, monkeypatch, mapped=True)
        gate.write_text("")
        wait_for(lambda: (hook.find_job(TFJOB, name, NS) or {}).get("status", {}).get("completionTime"), 60,
                 "the job succeeded on its worker")
        there = AsyncKubeflowJobHook(conn_id=f"k8s_{worker}")
        asyncio.run(wait_until(lambda: _gone(there, name), timeout=10))
        assert read(["loss"]) == ({}, None, ["loss"], f"no pod of the job is left on worker cluster {worker!r} "
                                  "(MultiKueue removes the worker's copy with its pods once the job finished): its "
                                  "log was not read")
    finally:
        gate.write_text("")
        hook.delete_job(TFJOB, name, NS)


async def _gone(hook: Any, name: str) -> bool:
    from airflow_tfjob.jobs.kinds import TFJOB

    return await hook.find_job(TFJOB, name, NS) is None and not await hook.list_job_pods(name, NS, kind=TFJOB)


#: A training that saves a checkpoint an epoch, resumes after the newest one in CHECKPOINT_DIR (a file://
#: store: the workers' replicas are processes of this machine), and fails once after epoch FAIL_AT. Before
#: it ends it says so and holds until HOLD exists (_let_go_once_shown): MultiKueue removes the worker's
#: copy, pods and all, as soon as the job has ended, so a replica that ends before the follow's stream on
#: the worker opens leaves no line to read (at load 13 a 0.6 s one did).
RESUMING = r"""
import os, sys, time
directory = os.environ["CHECKPOINT_DIR"]
path = directory.removeprefix("file://")
os.makedirs(path, exist_ok=True)
saved = [int(n.split("-")[1]) for n in os.listdir(path) if n.startswith("epoch-")]
first = max(saved, default=0) + 1
print(f"starting at epoch {first}", flush=True)
for epoch in range(first, int(os.environ["EPOCHS"]) + 1):
    time.sleep(0.2)
    open(os.path.join(path, f"epoch-{epoch}"), "w").close()
    print(f"checkpoint saved: {directory}/epoch-{epoch} epoch={epoch}", flush=True)
    if epoch == int(os.environ["FAIL_AT"]) and first == 1 or epoch == int(os.environ["EPOCHS"]):
        print(f"ending after epoch {epoch}", flush=True)
        while not os.path.exists(os.environ["HOLD"]):
            time.sleep(0.05)
        sys.exit(5 if first == 1 else 0)
"""


def test_a_failed_try_records_the_workers_checkpoint_and_the_retry_resumes_from_it(
        manager: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """checkpoint= on a job MultiKueue runs: the "checkpoint saved:" lines are the worker's replica's,
    read there; the failed try records the newest, and the next try's job (dispatched again, to
    whichever worker admits it) starts from it."""
    import sys

    from operator_support import StateStore

    from airflow_tfjob.follow.failure import TrainingJobFailed

    _connect(manager, monkeypatch, mapped=True)
    store, state, ti = f"file://{tmp_path}/ckpt", StateStore(), TaskInstance(task_id="mk-ckpt")

    def attempt(log: TaskLog, last_epoch: int) -> Any:
        hold = tmp_path / f"hold-{last_epoch}"
        _let_go_once_shown(log, f"[worker-0] ending after epoch {last_epoch}", hold)
        return operator(log, task_id=ti.task_id, kueue_queue="mk", restart_policy="Never", checkpoint=store,
                        command=[sys.executable, "-c", RESUMING],
                        env={"EPOCHS": "6", "FAIL_AT": "3", "HOLD": str(hold)})

    first_log = TaskLog()
    with pytest.raises(TrainingJobFailed):
        attempt(first_log, 3).execute({**context_for(ti), "task_state_store": state})
    assert any(line.startswith("[multikueue] ") for line in first_log.lines), first_log.lines
    recorded = state.values.get("checkpoint") or {}
    assert recorded, "\n".join(first_log.lines)
    assert recorded["epoch"] == 3 and recorded["path"].endswith("/epoch-3"), recorded

    second_log = TaskLog()
    result = attempt(second_log, 6).execute({**context_for(ti.next_try()), "task_state_store": state})
    assert result["state"] == "succeeded"
    text = "\n".join(second_log.lines)
    assert f"resuming from {recorded['path']} (epoch 3) (recorded by an earlier try)" in text, text
    assert "[worker-0] starting at epoch 4" in second_log.lines, text
    assert state.values["checkpoint"]["epoch"] == 6
