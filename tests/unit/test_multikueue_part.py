"""The MultiKueue follow part's decisions from plain values (integrations/kueue/multikueue.py): which
worker to follow, through which connection, what the task log is told, and when nothing is done."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from airflow_tfjob.follow.outcome import FollowOptions
from airflow_tfjob.integrations.kueue.multikueue import (
    WORKER_LOOK,
    WORKER_LOST_WINDOW,
    WorkerPart,
    connection_map,
)
from airflow_tfjob.jobs.adapter import adapter_for
from airflow_tfjob.jobs.kinds import TFJOB
from airflow_tfjob.jobs.status import interpret


class FakeHook:
    """The manager's hook (its Workload and its connection's extra) or a worker's (its conn_id)."""

    def __init__(self, conn_id: str | None = None, cluster: str = "", extra: Any = None) -> None:
        self.conn_id = conn_id
        self.cluster = cluster
        self.extra = extra
        self.workload_reads = 0
        self.cluster_reads = 0
        self.clusters: dict[str, dict[str, Any] | None] = {}  # MultiKueueCluster objects (else Active)

    async def list_workloads(self, _namespace: str, _uid: str) -> list[dict[str, Any]]:
        self.workload_reads += 1
        status = {"clusterName": self.cluster} if self.cluster else {}
        return [{"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}, "status": status}]

    async def multikueue_cluster(self, name: str) -> dict[str, Any] | None:
        self.cluster_reads += 1
        return self.clusters.get(name, {"status": {"conditions": [{"type": "Active", "status": "True"}]}})

    async def connection_extra(self, name: str) -> Any:
        return self.extra if name == "multikueue_connections" else None


class FakeFollow:
    def __init__(self, hook: FakeHook, **options: Any) -> None:
        self.hook = hook
        self.options = FollowOptions.of(**options)
        self.adapter = adapter_for(TFJOB)
        self.namespace = "default"
        self.ref = "TFJob default/j"
        self.lines: list[str] = []
        self.followed: list[str | None] = []

    def sink(self, line: str) -> None:
        self.lines.append(line)

    def follow_on(self, hook: FakeHook) -> None:
        self.followed.append(hook.conn_id)


def _job(multikueue: bool = True) -> dict[str, Any]:
    policy = {"managedBy": "kueue.x-k8s.io/multikueue"} if multikueue else {}
    return {"kind": "TFJob", "metadata": {"name": "j", "uid": "u1", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"runPolicy": policy}}


def _see(part: WorkerPart, job: dict[str, Any]) -> None:
    assert asyncio.run(part.on_job(job, interpret(job))) is None  # it never ends a follow


def test_a_job_multikueue_does_not_manage_costs_no_read() -> None:
    """A Kueue job run where it is (Kueue alone): its Workload is QueuePart's to read, not this part's."""
    hook = FakeHook(cluster="worker1", extra={"worker1": "w1"})
    follow = FakeFollow(hook)
    _see(WorkerPart.start(follow), _job(multikueue=False))  # type: ignore[arg-type]
    assert (hook.workload_reads, follow.followed, follow.lines) == (0, [], [])


def test_a_job_not_dispatched_yet_is_left_alone() -> None:
    """A Workload naming no worker yet (MultiKueue not yet admitted anywhere): nothing is done."""
    follow = FakeFollow(FakeHook(cluster="", extra={"worker1": "w1"}))
    _see(WorkerPart.start(follow), _job())  # type: ignore[arg-type]
    assert (follow.followed, follow.lines) == ([], [])


def test_the_worker_is_followed_once_and_again_after_a_new_dispatch() -> None:
    hook = FakeHook(cluster="", extra={"worker1": "w1", "worker2": "w2"})
    follow = FakeFollow(hook)
    part = WorkerPart.start(follow)  # type: ignore[arg-type]
    _see(part, _job())  # not dispatched yet: no clusterName
    hook.cluster = "worker1"
    _see(part, _job())
    _see(part, _job())  # the same worker: nothing new
    hook.cluster = "worker2"
    _see(part, _job())
    assert follow.followed == ["w1", "w2"]
    assert follow.lines == [
        "[multikueue] TFJob default/j runs on worker cluster 'worker1': following its replicas there "
        "(connection 'w1')",
        "[multikueue] TFJob default/j was dispatched again, from worker cluster 'worker1' to 'worker2': "
        "following its replicas there (connection 'w2')"]


def test_a_worker_without_a_connection_is_named_once() -> None:
    follow = FakeFollow(FakeHook(cluster="worker3", extra='{"worker1": "w1"}'))
    part = WorkerPart.start(follow)  # type: ignore[arg-type]
    _see(part, _job())
    _see(part, _job())
    assert follow.followed == []
    assert len(follow.lines) == 1
    assert "runs on worker cluster 'worker3'" in follow.lines[0]
    assert 'or the operator\'s parameter of that name ({"worker3": "<connection id>"})' in follow.lines[0]


def test_the_operator_s_map_wins_per_worker_over_the_extra() -> None:
    """The parameter names worker1 (its connection wins over the extra's); worker2 is the extra's alone."""
    hook = FakeHook(cluster="worker1", extra={"worker1": "extra_w1", "worker2": "extra_w2"})
    follow = FakeFollow(hook, multikueue_connections={"worker1": "param_w1"})
    part = WorkerPart.start(follow)  # type: ignore[arg-type]
    _see(part, _job())
    hook.cluster = "worker2"
    _see(part, _job())
    assert follow.followed == ["param_w1", "extra_w2"]


def test_the_operator_s_map_alone_is_enough() -> None:
    follow = FakeFollow(FakeHook(cluster="worker1", extra=None), multikueue_connections={"worker1": "w1"})
    _see(WorkerPart.start(follow), _job())  # type: ignore[arg-type]
    assert follow.followed == ["w1"]


def test_each_api_names_its_manager() -> None:
    from airflow_tfjob.jobs.kinds import TRAINJOB

    mk = "kueue.x-k8s.io/multikueue"
    assert adapter_for(TRAINJOB).managed_by({"spec": {"managedBy": mk}}) == mk
    assert adapter_for(TFJOB).managed_by({"spec": {"runPolicy": {"managedBy": mk}}}) == mk
    assert adapter_for(TFJOB).managed_by({"spec": {}}) is None


def test_the_extra_s_map() -> None:
    assert connection_map('{"a": "x", "b": ""}') == {"a": "x"}
    assert connection_map("not json") == connection_map(["a"]) == connection_map(None) == {}


def _inactive(since: float, reason: str = "ClientConnectionFailed", message: str = "connection refused") -> dict:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since))
    return {"status": {"conditions": [{"type": "Active", "status": "False", "reason": reason,
                                       "message": message, "lastTransitionTime": stamp}]}}


def _judged(part: WorkerPart, job: dict[str, Any]) -> Any:
    return asyncio.run(part.on_job(job, interpret(job)))


def test_a_worker_lost_for_the_window_ends_the_follow_naming_the_loss() -> None:
    """Active=False for less than the window: the part waits, its clock set to the window's end; past
    it (counted from the condition's lastTransitionTime): the follow ends with the loss in words."""
    hook = FakeHook(cluster="worker1", extra={"worker1": "w1"})
    part = WorkerPart.start(FakeFollow(hook))  # type: ignore[arg-type]
    assert _judged(part, _job()) is None  # reachable: looked at every WORKER_LOOK seconds
    assert part.wake_in() == WORKER_LOOK and hook.cluster_reads == 1
    hook.clusters["worker1"] = _inactive(time.time() - 60)
    assert _judged(part, _job()) is None and part.wake_in() == WORKER_LOOK
    hook.clusters["worker1"] = _inactive(time.time() - (WORKER_LOST_WINDOW - 5))
    assert _judged(part, _job()) is None
    assert 3 < part.wake_in() <= 5  # type: ignore[operator]  # woken at the window's end
    assert part.waiting_for() == "its worker cluster worker1 was lost (ClientConnectionFailed)"
    hook.clusters["worker1"] = _inactive(time.time() - WORKER_LOST_WINDOW - 1)
    outcome = _judged(part, _job())
    assert outcome.event == "worker_lost"
    assert outcome.message.startswith(
        "worker cluster worker1 lost (MultiKueueCluster worker1 Active=False: ClientConnectionFailed: "
        "connection refused) while TFJob default/j ran;")
    assert "run the task again once the worker is reachable" in outcome.message


def test_a_worker_back_or_a_job_dispatched_elsewhere_stops_the_clock() -> None:
    hook = FakeHook(cluster="worker1", extra={"worker1": "w1", "worker2": "w2"})
    part = WorkerPart.start(FakeFollow(hook))  # type: ignore[arg-type]
    hook.clusters["worker1"] = _inactive(time.time() - WORKER_LOST_WINDOW - 1)
    hook.cluster = "worker2"  # Kueue moved it (its replicas never ran): worker2 is judged, and is fine
    assert _judged(part, _job()) is None and part.lost is None
    hook.clusters["worker2"] = {"status": {"conditions": [{"type": "Active", "status": "True"}]}}
    assert _judged(part, _job()) is None and part.wake_in() == WORKER_LOOK


def test_a_lost_worker_without_a_connection_still_ends_the_follow() -> None:
    """The task must not hang for want of a connection: the loss is read on the manager."""
    hook = FakeHook(cluster="worker3", extra={})
    hook.clusters["worker3"] = _inactive(time.time() - WORKER_LOST_WINDOW - 1)
    assert _judged(WorkerPart.start(FakeFollow(hook)), _job()).event == "worker_lost"  # type: ignore[arg-type]


def test_a_lost_worker_is_infrastructure_a_retry_may_fix() -> None:
    """As a lost node: the retry policy retries it after the same delay."""
    from airflow_tfjob.follow.failure import INFRASTRUCTURE, RETRY_AFTER, classify

    cause = classify("worker_lost", message="worker cluster worker1 lost (...)")
    assert (cause.category, cause.reason, cause.summary) == (INFRASTRUCTURE, "WorkerLost",
                                                             "worker cluster worker1 lost (...)")
    assert cause.retry_after == RETRY_AFTER["NodeLost"]


class KillHook:
    """A manager's or a worker's hook for cleanup.kill: the manager's holds the job until deleted; the
    worker's (made by the kill through its connection id) holds its copy as ``copies`` says."""

    copies: dict[str, Any] = {}  # worker connection id -> its copy (None: gone), or an exception raised

    def __init__(self, conn_id: str | None = None, api_retry_timeout: float | None = None) -> None:
        self.conn_id = conn_id
        self.deleted = False
        self.extra = {"worker1": "extra_w1"}

    def find_job(self, kind: Any, name: str, namespace: str) -> dict[str, Any] | None:
        if self.conn_id != "manager":
            copy = self.copies.get(str(self.conn_id))
            if isinstance(copy, Exception):
                raise copy
            return copy
        return None if self.deleted else _job()

    def list_workloads(self, namespace: str, uid: str) -> list[dict[str, Any]]:
        return [{"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}, "status": {"clusterName": "worker1"}}]

    def connection_extra(self, name: str) -> Any:
        return self.extra if name == "multikueue_connections" else None

    def delete_job(self, *args: Any, **kwargs: Any) -> None:
        self.deleted = True

    def list_job_pods(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return []


def _kill(monkeypatch: Any, copy: Any, given: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    from airflow_tfjob.follow import cleanup
    from airflow_tfjob.integrations.kueue import multikueue

    monkeypatch.setattr(multikueue, "WORKER_COPY_WAIT", 0.3)
    monkeypatch.setattr(KillHook, "copies", {"extra_w1": copy, "param_w1": copy})
    warned: list[str] = []
    told: list[str] = []
    check = multikueue.WorkerCopyCheck(given, warn=warned.append, info=told.append)
    gone = cleanup.kill(KillHook("manager"), "j", "default", on_kill_action="delete", log=told.append,
                        kind=TFJOB, elsewhere=check, poll_interval=0.01)
    assert gone  # the manager's copy: what the kill owns
    return warned, told


def test_a_kill_checks_the_worker_s_copy_is_gone(monkeypatch: Any) -> None:
    warned, told = _kill(monkeypatch, None, given={"worker1": "param_w1"})
    assert warned == []
    assert told[-1] == ("[multikueue] TFJob default/j on worker cluster 'worker1' is gone too (checked through "
                        "connection 'param_w1')")


def test_a_worker_copy_left_is_warned_naming_it(monkeypatch: Any) -> None:
    warned, _ = _kill(monkeypatch, {"metadata": {"name": "j"}})
    assert warned == ["[multikueue] TFJob default/j on worker cluster 'worker1' still exists 0.3 s after the "
                      "manager's copy was deleted; MultiKueue may not reach the worker: delete it there (kubectl "
                      "--context <worker1> delete tfjobs -n default j)"]


def test_a_worker_that_does_not_answer_is_warned_not_raised(monkeypatch: Any) -> None:
    from airflow_tfjob.hooks.retry import ApiCallFailed

    warned, _ = _kill(monkeypatch, ApiCallFailed("get TFJob", 3, 0.3, ConnectionRefusedError()))
    assert len(warned) == 1
    assert "could not be checked through connection 'extra_w1' (the worker did not answer)" in warned[0]


def test_a_worker_s_cluster_object_that_cannot_be_read_is_said_once() -> None:
    """Without it a lost worker goes unnoticed: the task log says so, and what to grant."""
    hook = FakeHook(cluster="worker1", extra={"worker1": "w1"})
    hook.clusters["worker1"] = None
    follow = FakeFollow(hook)
    part = WorkerPart.start(follow)  # type: ignore[arg-type]
    _see(part, _job())
    _see(part, _job())
    unread = [line for line in follow.lines if "cannot read MultiKueueCluster worker1" in line]
    assert len(unread) == 1 and "multikueueclusters.kueue.x-k8s.io (cluster-scoped: kubectl apply -f airflow_tfjob/rbac/multikueue-clusterrole.yaml" in unread[0]
