"""TFJob reconciler of the local cluster, imitating training-operator v1.9.4.

The reconcile pass follows the operator's `ReconcileJobs` / `ReconcilePods` / `ReconcileServices` /
`UpdateJobStatus` (see /work/shared/reference/tfjob-behaviour.md): defaults are applied in memory only
(the stored spec is never rewritten), pods and headless Services are named `{job}-{type}-{index}` and
labelled as the operator labels them, conditions are edited with the operator's setCondition /
filterOutCondition rules, replicaStatuses are recounted from the pods on every pass, and the same events
are emitted (component `tfjob-controller`).

Deliberate differences from a real cluster, all visible to users:

* Addresses. The operator writes `{job}-{type}-{i}.{ns}.svc:{port}` into TF_CONFIG. Every replica of the
  local cluster runs on this host and there is no cluster DNS, so each (job, type, index) gets its own
  127.0.0.1 port from `port_allocator` and TF_CONFIG says `127.0.0.1:{port}` instead; the rest of
  TF_CONFIG is byte for byte the operator's. The port is recorded in the annotation
  `local.tfjob.dev/host-port` on the replica's Pod and Service, and as the `targetPort` of the Service's
  `tfjob-port` (the Service's `port` stays the declared containerPort, 2222 by default). A replica keeps
  its port when its pod is recreated (ExitCode restarts). TF servers listen on the port of their own
  TF_CONFIG address, so replicas need nothing else.
* activeDeadlineSeconds fires on time: the operator only notices the deadline when some other event
  triggers a reconcile (kubeflow/trainer#3358); here a timer reconciles the job at the deadline.
* Reconcile errors (for example a Service name longer than 63 characters, kubeflow/trainer#1101) are
  retried with an exponential backoff from 0.5 s up to 60 s, shorter than controller-runtime's 1000 s cap,
  so the repeated FailedCreateService warnings stay few (they are aggregated into one Event's count).
* On backoffLimit/deadline failure the Failed condition is set before cleanup, as v1.9.4 does
  (PR #3420): cleanPodPolicy is respected, so with the default `None` the pods keep running.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import socket
from collections.abc import Callable, Iterable
from typing import Any

from airflow_tfjob.constants import (
    API_VERSION,
    CONTAINER_NAME,
    DEFAULT_PORT,
    KIND,
    LABEL_JOB_NAME,
    LABEL_JOB_ROLE,
    LABEL_OPERATOR_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    PORT_NAME,
)
from airflow_tfjob.local.store import ApiError, Store, record_event
from airflow_tfjob.local.tfconfig import tf_config

log = logging.getLogger(__name__)

JsonDict = dict[str, Any]

CONTROLLER_NAME = "tfjob-controller"
MANAGED_BY_OPERATOR = "kubeflow.org/training-operator"
ANNOTATION_HOST_PORT = "local.tfjob.dev/host-port"
# UpdateJobStatus walks the known types in this order (it matters for which condition comes last).
STATUS_ORDER = ("Chief", "Evaluator", "Master", "PS", "Worker")

_RETRY_BASE = 0.5
_RETRY_MAX = 60.0
# Timers fire a little after the instant so that the "now >= deadline" test is already true.
_TIMER_SLACK = 0.05


# --------------------------------------------------------------------------------------------------
# Time


def now_rfc3339() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _now() -> float:
    return dt.datetime.now(dt.timezone.utc).timestamp()


# --------------------------------------------------------------------------------------------------
# Defaulting (SetDefaults_TFJob), in memory only


def default_spec(spec: JsonDict) -> JsonDict:
    """A defaulted copy of a TFJob spec: canonical replica keys, replicas 1, restartPolicy Never,
    cleanPodPolicy None, successPolicy "", and the tfjob-port on the tensorflow container."""
    import copy

    spec = copy.deepcopy(spec) if isinstance(spec, dict) else {}
    run_policy = spec.get("runPolicy")
    if not isinstance(run_policy, dict):
        run_policy = spec["runPolicy"] = {}
    run_policy.setdefault("cleanPodPolicy", "None")
    if spec.get("successPolicy") is None:
        spec["successPolicy"] = ""
    replicas = spec.get("tfReplicaSpecs")
    if not isinstance(replicas, dict):
        replicas = {}
    renamed: JsonDict = {}
    for key, value in replicas.items():
        canonical = next((t for t in STATUS_ORDER if t.lower() == str(key).lower()), key)
        renamed[canonical] = value if isinstance(value, dict) else {}
    for rspec in renamed.values():
        if rspec.get("replicas") is None:
            rspec["replicas"] = 1
        if not rspec.get("restartPolicy"):
            rspec["restartPolicy"] = "Never"
        _default_port(rspec.setdefault("template", {}).setdefault("spec", {}))
    spec["tfReplicaSpecs"] = renamed
    return spec


def _default_port(pod_spec: JsonDict) -> None:
    containers = pod_spec.get("containers") or []
    if not containers:
        return
    index = next((i for i, c in enumerate(containers) if c.get("name") == CONTAINER_NAME), 0)
    ports = containers[index].setdefault("ports", [])
    if not any(p.get("name") == PORT_NAME for p in ports):
        ports.append({"name": PORT_NAME, "containerPort": DEFAULT_PORT})


def ordered_types(replicas: Iterable[str]) -> list[str]:
    """Known types in the operator's status order, then unknown ones (they get pods, not status)."""
    names = list(replicas)
    return [t for t in STATUS_ORDER if t in names] + sorted(t for t in names if t not in STATUS_ORDER)


def has_chief_or_master(replicas: JsonDict) -> bool:
    return "Chief" in replicas or "Master" in replicas


def is_master_role(replicas: JsonDict, rtype: str, index: int) -> bool:
    if has_chief_or_master(replicas):
        return rtype in ("Chief", "Master")
    return rtype == "Worker" and index == 0


# --------------------------------------------------------------------------------------------------
# Conditions (pkg/util/status.go)


def get_condition(status: JsonDict, ctype: str) -> JsonDict | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None


def has_true(status: JsonDict, ctype: str) -> bool:
    cond = get_condition(status, ctype)
    return cond is not None and cond.get("status") == "True"


def is_finished(status: JsonDict) -> bool:
    return has_true(status, "Succeeded") or has_true(status, "Failed")


def set_condition(status: JsonDict, ctype: str, cstatus: str, reason: str, message: str) -> None:
    """UpdateJobConditions: frozen after Failed=True; no-op when status and reason are unchanged;
    otherwise the old entry is removed and the new one appended (Running/Restarting exclusive,
    Succeeded/Failed flip Running to False in place)."""
    if has_true(status, "Failed"):
        return
    now = now_rfc3339()
    current = get_condition(status, ctype)
    if current is not None and current.get("status") == cstatus and current.get("reason") == reason:
        return
    transition = now
    if current is not None and current.get("status") == cstatus:
        transition = current.get("lastTransitionTime", now)
    kept = []
    for cond in status.get("conditions") or []:
        other = cond.get("type")
        if other == ctype or {ctype, other} == {"Running", "Restarting"}:
            continue
        if ctype in ("Failed", "Succeeded") and other == "Running":
            cond = {**cond, "status": "False"}
        kept.append(cond)
    kept.append(
        {
            "type": ctype,
            "status": cstatus,
            "reason": reason,
            "message": message,
            "lastUpdateTime": now,
            "lastTransitionTime": transition,
        }
    )
    status["conditions"] = kept


# --------------------------------------------------------------------------------------------------
# Replica statuses (zero counts omitted, as Go's omitempty does)


def _count(status: JsonDict, rtype: str, field: str, n: int = 1) -> None:
    entry = status.setdefault("replicaStatuses", {}).setdefault(rtype, {})
    entry[field] = entry.get(field, 0) + n


def _counts(status: JsonDict, rtype: str) -> tuple[int, int, int]:
    entry = (status.get("replicaStatuses") or {}).get(rtype) or {}
    return int(entry.get("active", 0)), int(entry.get("succeeded", 0)), int(entry.get("failed", 0))


def _normalise(status: JsonDict) -> JsonDict:
    """The status as it reads back from the API: zero counts and empty fields gone, stable key order."""
    out: JsonDict = {}
    if status.get("conditions"):
        out["conditions"] = status["conditions"]
    if status.get("replicaStatuses"):
        out["replicaStatuses"] = {
            rt: {k: entry[k] for k in ("active", "succeeded", "failed") if entry.get(k)}
            for rt, entry in status["replicaStatuses"].items()
        }
    for key in ("startTime", "completionTime", "lastReconcileTime"):
        if status.get(key):
            out[key] = status[key]
    return out


def update_replica_status(status: JsonDict, rtype: str, pod: JsonDict) -> None:
    """core.UpdateJobReplicaStatuses: a terminating Running pod counts as failed."""
    phase = pod.get("status", {}).get("phase")
    if phase == "Running":
        deleting = bool(pod.get("metadata", {}).get("deletionTimestamp"))
        _count(status, rtype, "failed" if deleting else "active")
    elif phase == "Succeeded":
        _count(status, rtype, "succeeded")
    elif phase == "Failed":
        _count(status, rtype, "failed")


def container_exit_code(pod: JsonDict, container: str = CONTAINER_NAME) -> int | None:
    for cs in pod.get("status", {}).get("containerStatuses") or []:
        if cs.get("name") == container:
            terminated = (cs.get("state") or {}).get("terminated")
            if terminated is not None:
                return int(terminated.get("exitCode", 0))
    return None


def is_retryable_exit_code(code: int) -> bool:
    return code >= 128


# --------------------------------------------------------------------------------------------------
# Ports


def free_port() -> int:
    """A port the kernel considers free on 127.0.0.1 right now (the default allocator)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PortMap:
    """Host ports per (job uid, lower type, index), stable for the life of the job."""

    def __init__(self, allocator: Callable[[], int]) -> None:
        self._allocator = allocator
        self._by_job: dict[str, dict[tuple[str, int], int]] = {}
        self._used: set[int] = set()

    def port(self, job_uid: str, rt: str, index: int) -> int:
        ports = self._by_job.setdefault(job_uid, {})
        port = ports.get((rt, index))
        if port is None:
            port = self._allocate()
            ports[(rt, index)] = port
        return port

    def adopt(self, job_uid: str, rt: str, index: int, port: int) -> None:
        """Re-learn a port recorded on an existing object (after a controller restart)."""
        ports = self._by_job.setdefault(job_uid, {})
        if (rt, index) not in ports:
            ports[(rt, index)] = port
            self._used.add(port)

    def forget(self, job_uid: str) -> None:
        for port in self._by_job.pop(job_uid, {}).values():
            self._used.discard(port)

    def known_jobs(self) -> set[str]:
        return set(self._by_job)

    def _allocate(self) -> int:
        for _ in range(100):
            port = self._allocator()
            if port not in self._used:
                self._used.add(port)
                return port
        raise RuntimeError("port allocator keeps returning ports already in use")


# --------------------------------------------------------------------------------------------------
# The reconciler


class _ReconcileError(Exception):
    """A reconcile pass stopped early, as the operator's returns an error: retried with backoff."""


class Controller:
    """Watches TFJobs, pods and services in the store and reconciles jobs one at a time."""

    def __init__(self, store: Store, *, port_allocator: Callable[[], int] | None = None) -> None:
        self._store = store
        self._ports = PortMap(port_allocator or free_port)
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._queued: set[tuple[str, str]] = set()
        self._timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._retry_timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._failures: dict[tuple[str, str], int] = {}

    # ---- loop

    async def run(self) -> None:
        """Reconcile until cancelled."""
        tasks = [
            asyncio.create_task(self._watch("tfjobs", self._on_job), name="controller-watch-tfjobs"),
            asyncio.create_task(self._watch("pods", self._on_owned), name="controller-watch-pods"),
            asyncio.create_task(self._watch("services", self._on_owned), name="controller-watch-services"),
            asyncio.create_task(self._work(), name="controller-work"),
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for handle in [*self._timers.values(), *self._retry_timers.values()]:
                handle.cancel()

    async def _watch(self, rtype: str, handler: Callable[[str, JsonDict], None]) -> None:
        # A watch without resourceVersion starts with every current object as ADDED, so a re-watch
        # after the store dropped a slow watcher is also a full resync.
        while True:
            watcher = self._store.watch(rtype)
            if rtype == "tfjobs":
                self._forget_missing_jobs()
            try:
                async for etype, obj in watcher:
                    handler(etype, obj)
            finally:
                watcher.close()
            await asyncio.sleep(0.1)

    def _forget_missing_jobs(self) -> None:
        """Release the ports of jobs deleted while no watch was open (their DELETED event is lost).

        Called right after the watch is opened, with no await in between: the store cannot change in
        the meantime, so every job that exists here is also one the new watch reports."""
        entries, _ = self._store.list_entries("tfjobs")
        existing = {entry.obj["metadata"].get("uid") for entry in entries}
        for uid in self._ports.known_jobs() - existing:
            self._ports.forget(uid)

    def _on_job(self, etype: str, obj: JsonDict) -> None:
        meta = obj.get("metadata", {})
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if etype == "DELETED":
            self._ports.forget(meta.get("uid", ""))
            for timers in (self._timers, self._retry_timers):
                handle = timers.pop(key, None)
                if handle is not None:
                    handle.cancel()
            self._failures.pop(key, None)
            return
        self.enqueue(key)

    def _on_owned(self, etype: str, obj: JsonDict) -> None:
        meta = obj.get("metadata", {})
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == KIND and ref.get("apiVersion") == API_VERSION:
                self.enqueue((meta.get("namespace", ""), ref.get("name", "")))

    def enqueue(self, key: tuple[str, str]) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            try:
                requeue_after = self.reconcile(*key)
            except Exception as exc:  # any failure: retry later, as controller-runtime does
                if not isinstance(exc, (_ReconcileError, ApiError)):
                    log.exception("reconcile of TFJob %s/%s failed", *key)
                self._retry(key)
            else:
                self._failures.pop(key, None)
                self._set_timer(key, requeue_after)
            await asyncio.sleep(0)

    def _retry(self, key: tuple[str, str]) -> None:
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        delay = min(_RETRY_BASE * (2**n), _RETRY_MAX)
        old = self._retry_timers.pop(key, None)
        if old is not None:
            old.cancel()
        self._retry_timers[key] = asyncio.get_running_loop().call_later(delay, self.enqueue, key)

    def _set_timer(self, key: tuple[str, str], after: float | None) -> None:
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        if after is not None:
            self._timers[key] = asyncio.get_running_loop().call_later(
                max(after, 0.0) + _TIMER_SLACK, self.enqueue, key
            )

    # ---- one pass

    def reconcile(self, namespace: str, name: str) -> float | None:
        """One reconcile pass; returns seconds until a timer must reconcile the job again (or None)."""
        try:
            job = self._store.get("tfjobs", namespace, name)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        spec_in = job.get("spec") or {}
        managed_by = (spec_in.get("runPolicy") or {}).get("managedBy")
        if managed_by and managed_by != MANAGED_BY_OPERATOR:
            return None  # Kueue MultiKueue (or someone else) runs this job
        if job["metadata"].get("deletionTimestamp"):
            return None
        return _JobPass(self, job).run()

    # ---- used by _JobPass

    @property
    def store(self) -> Store:
        return self._store

    @property
    def ports(self) -> PortMap:
        return self._ports


class _JobPass:
    """The state of one ReconcileJobs call for one job."""

    def __init__(self, controller: Controller, job: JsonDict) -> None:
        self.c = controller
        self.store = controller.store
        self.job = job
        self.meta = job["metadata"]
        self.name: str = self.meta["name"]
        self.namespace: str = self.meta["namespace"]
        self.uid: str = self.meta["uid"]
        self.spec = default_spec(job.get("spec") or {})
        self.replicas: JsonDict = self.spec["tfReplicaSpecs"]
        self.run_policy: JsonDict = self.spec["runPolicy"]
        import copy

        self.status: JsonDict = copy.deepcopy(job.get("status") or {})
        # onOwnerCreateFunc puts Created into the informer's copy: it is persisted with the first write.
        set_condition(self.status, "Created", "True", "TFJobCreated", f"TFJob {self.name} is created.")
        self.old = _normalise(copy.deepcopy(self.status))

    # ---- events

    def event(self, type_: str, reason: str, message: str) -> None:
        try:
            record_event(self.store, self.job, type_, reason, message, CONTROLLER_NAME)
        except ApiError:
            log.warning("could not record event %s for %s/%s", reason, self.namespace, self.name)

    # ---- main flow (common/job.go ReconcileJobs)

    def run(self) -> float | None:
        pods = self._owned("pods")
        services = self._owned("services")
        self._adopt_ports([*pods, *services])
        if is_finished(self.status):
            self._delete_pods_and_services(pods)
            if self._cleanup_job():
                return None
            if has_true(self.status, "Succeeded"):
                for entry in (self.status.get("replicaStatuses") or {}).values():
                    entry["succeeded"] = entry.get("succeeded", 0) + entry.get("active", 0)
                    entry["active"] = 0
            self._write_if_changed()
            return self._ttl_remaining()

        if self.run_policy.get("suspend") is True:
            self._delete_pods_and_services(pods)
            for entry in (self.status.get("replicaStatuses") or {}).values():
                entry["active"] = 0
            msg = f"TFJob {self.name} is suspended."
            if has_true(self.status, "Running"):
                set_condition(self.status, "Running", "False", "TFJobSuspended", msg)
            if not has_true(self.status, "Suspended"):
                set_condition(self.status, "Suspended", "True", "TFJobSuspended", msg)
            self.event("Normal", "TFJobSuspended", msg)
            self._write_if_changed()
            return None

        if has_true(self.status, "Suspended"):
            msg = f"TFJob {self.name} is resumed."
            set_condition(self.status, "Suspended", "False", "TFJobResumed", msg)
            self.status["startTime"] = now_rfc3339()
            self.event("Normal", "TFJobResumed", msg)

        active_pods = [p for p in pods if _is_active(p)]
        self._record_abnormal_pods(active_pods)
        failure = self._limit_failure(pods, active_pods)
        if failure is not None:
            if not self.status.get("completionTime"):
                self.status["completionTime"] = now_rfc3339()
            self.event("Normal", "TFJobFailed", failure)
            set_condition(self.status, "Failed", "True", "TFJobFailed", failure)
            self._delete_pods_and_services(pods)
            self._cleanup_job()
            self._write()
            return self._ttl_remaining()

        for rtype in ordered_types(self.replicas):
            self._reconcile_pods(pods, rtype)
            self._reconcile_services(services, rtype)
        self._update_job_status()
        self._write_if_changed()
        return self._deadline_remaining()

    # ---- listing

    def _owned(self, rtype: str) -> list[JsonDict]:
        selector = f"{LABEL_OPERATOR_NAME}={CONTROLLER_NAME},{LABEL_JOB_NAME}={self.name.replace('/', '-')}"
        items, _ = self.store.list(rtype, self.namespace, label_selector=selector)
        owned = []
        for obj in items:
            for ref in obj["metadata"].get("ownerReferences") or []:
                if ref.get("controller") and ref.get("uid") == self.uid:
                    owned.append(obj)
                    break
        return owned

    def _adopt_ports(self, objs: list[JsonDict]) -> None:
        """Keep the ports already handed out (a controller restarted over a live store)."""
        for obj in objs:
            labels = obj["metadata"].get("labels") or {}
            raw = (obj["metadata"].get("annotations") or {}).get(ANNOTATION_HOST_PORT)
            try:
                port, index = int(str(raw)), int(str(labels.get(LABEL_REPLICA_INDEX)))
            except ValueError:
                continue
            self.c.ports.adopt(self.uid, str(labels.get(LABEL_REPLICA_TYPE)), index, port)

    # ---- limits (backoffLimit, activeDeadlineSeconds)

    def _limit_failure(self, pods: list[JsonDict], active_pods: list[JsonDict]) -> str | None:
        backoff = self.run_policy.get("backoffLimit")
        if backoff is not None:
            failed = sum(1 for p in pods if p.get("status", {}).get("phase") == "Failed")
            total = sum(max(int(s.get("replicas", 1)), 0) for s in self.replicas.values())
            previous_failed = sum(
                _counts(self.status, rt)[2] for rt in self.status.get("replicaStatuses") or {}
            )
            # NumRequeues of the operator's FakeWorkQueue is always 0.
            exceeds = failed > previous_failed and len(active_pods) != total and 1 > int(backoff)
            if exceeds or self._past_backoff_limit(pods, int(backoff)):
                return f"Job {self.name} has failed because it has reached the specified backoff limit"
        deadline = self.run_policy.get("activeDeadlineSeconds")
        start = parse_time(self.status.get("startTime"))
        if deadline is not None and start is not None and _now() - start >= int(deadline):
            return f"Job {self.name} has failed because it was active longer than specified deadline"
        return None

    def _past_backoff_limit(self, pods: list[JsonDict], limit: int) -> bool:
        restarts = 0
        for rtype, rspec in self.replicas.items():
            if rspec.get("restartPolicy") not in ("OnFailure", "Always", "ExitCode"):
                continue
            for pod in pods:
                if pod["metadata"].get("labels", {}).get(LABEL_REPLICA_TYPE) != rtype.lower():
                    continue
                if pod.get("status", {}).get("phase") != "Running":
                    continue
                for group in ("initContainerStatuses", "containerStatuses"):
                    for cs in pod["status"].get(group) or []:
                        restarts += int(cs.get("restartCount", 0))
        return restarts > 0 if limit == 0 else restarts >= limit

    def _deadline_remaining(self) -> float | None:
        deadline = self.run_policy.get("activeDeadlineSeconds")
        start = parse_time(self.status.get("startTime"))
        if deadline is None or start is None or is_finished(self.status):
            return None
        return start + int(deadline) - _now()

    # ---- cleanup (DeletePodsAndServices, CleanupJob)

    def _delete_pods_and_services(self, pods: list[JsonDict]) -> None:
        if not pods:
            return
        policy = self.run_policy.get("cleanPodPolicy")
        finished = is_finished(self.status)
        if finished and policy == "None":
            return
        for pod in pods:
            phase = pod.get("status", {}).get("phase")
            if finished and policy == "Running" and phase not in ("Running", "Pending"):
                continue
            self._delete("pods", pod["metadata"]["name"], "Pod", "pod")
            self._delete("services", pod["metadata"]["name"], "Service", "service")

    def _delete(self, rtype: str, name: str, kind: str, noun: str) -> None:
        try:
            current = self.store.get(rtype, self.namespace, name)
        except ApiError as exc:
            if exc.code == 404:
                return
            raise
        if current["metadata"].get("deletionTimestamp"):
            return  # already terminating: the operator skips it
        try:
            self.store.delete(rtype, self.namespace, name)
        except ApiError as exc:
            if exc.code == 404:
                return
            self.event("Warning", f"FailedDelete{kind}", f"Error deleting: {exc.message}")
            raise _ReconcileError(exc.message) from exc
        self.event("Normal", f"SuccessfulDelete{kind}", f"Deleted {noun}: {name}")

    def _cleanup_job(self) -> bool:
        """TTL: True when the job was deleted."""
        remaining = self._ttl_remaining()
        if remaining is None or remaining >= 0:
            return False
        try:
            self.store.delete("tfjobs", self.namespace, self.name)
        except ApiError as exc:
            if exc.code == 404:
                return True
            self.event("Warning", "FailedDeleteJob", f"Error deleting: {exc.message}")
            raise _ReconcileError(exc.message) from exc
        self.event("Normal", "SuccessfulDeleteJob", f"Deleted job: {self.name}")
        return True

    def _ttl_remaining(self) -> float | None:
        ttl = self.run_policy.get("ttlSecondsAfterFinished")
        if ttl is None or self.run_policy.get("suspend") is True or not is_finished(self.status):
            return None
        completion = parse_time(self.status.get("completionTime"))
        if completion is None:
            return None
        # CleanupJob deletes once now is strictly after the expiry; -0.0 marks "expired now".
        remaining = completion + int(ttl) - _now()
        return remaining if remaining > 0 else -1.0

    # ---- RecordAbnormalPods

    def _record_abnormal_pods(self, active_pods: list[JsonDict]) -> None:
        for pod in active_pods:
            pname = pod["metadata"]["name"]
            pstatus = pod.get("status", {})
            statuses = pstatus.get("containerStatuses") or pstatus.get("initContainerStatuses") or []
            if statuses:
                for cs in statuses:
                    state = cs.get("state") or {}
                    term = state.get("terminated")
                    if term is not None and int(term.get("exitCode", 0)) != 0:
                        self.event(
                            "Warning",
                            term.get("reason", ""),
                            f"Error pod {pname} container {cs.get('name')} exitCode: {term.get('exitCode')} "
                            f"terminated message: {term.get('message', '')}",
                        )
                    wait = state.get("waiting")
                    if wait is not None and wait.get("message"):
                        self.event(
                            "Warning",
                            wait.get("reason", ""),
                            f"Error pod {pname} container {cs.get('name')} waiting message: {wait['message']}",
                        )
                continue
            for cond in pstatus.get("conditions") or []:
                if cond.get("status") != "True" and cond.get("reason"):
                    self.event(
                        "Warning",
                        cond["reason"],
                        f"Error pod {pname} condition message: {cond.get('message', '')}",
                    )

    # ---- pods (tfjob_controller.go ReconcilePods)

    def _slices(self, objs: list[JsonDict], rtype: str, replicas: int) -> list[list[JsonDict]]:
        rt = rtype.lower()
        mine = [o for o in objs if o["metadata"].get("labels", {}).get(LABEL_REPLICA_TYPE) == rt]
        indexed: list[tuple[int, JsonDict]] = []
        for obj in mine:
            raw = obj["metadata"].get("labels", {}).get(LABEL_REPLICA_INDEX)
            try:
                index = int(str(raw))
            except ValueError:
                continue
            if index >= 0:
                indexed.append((index, obj))
        size = max([replicas, *[i + 1 for i, _ in indexed]])
        slices: list[list[JsonDict]] = [[] for _ in range(size)]
        for index, obj in indexed:
            slices[index].append(obj)
        return slices

    def _reconcile_pods(self, pods: list[JsonDict], rtype: str) -> None:
        rspec = self.replicas[rtype]
        n = max(int(rspec.get("replicas", 1)), 0)
        self.status.setdefault("replicaStatuses", {})[rtype] = {}
        for index, slice_ in enumerate(self._slices(pods, rtype, n)):
            if len(slice_) > 1:
                log.warning("too many pods for %s/%s %s %d", self.namespace, self.name, rtype, index)
                continue
            if not slice_:
                self._create_pod(rtype, index, rspec)
                continue
            pod = slice_[0]
            pname = pod["metadata"]["name"]
            if index >= n:
                self._delete("pods", pname, "Pod", "pod")
            exit_code = 0xBEEF
            code = container_exit_code(pod)
            if code is not None:
                exit_code = code
                self.event(
                    "Normal", "ExitedWithCode", f"Pod: {self.namespace}.{pname} exited with code {code}"
                )
            phase = pod.get("status", {}).get("phase")
            if rspec.get("restartPolicy") == "ExitCode" and phase == "Failed":
                if is_retryable_exit_code(exit_code):
                    self._delete("pods", pname, "Pod", "pod")
                    msg = f"job {self.name} is restarting because {rtype} replica(s) failed."
                    self.event("Warning", "TFJobRestarting", msg)
                    set_condition(self.status, "Restarting", "True", "TFJobRestarting", msg)
                else:
                    msg = f'job "{self.name}" is failing because "{rtype}" replica(s) failed.'
                    self.event("Warning", "TFJobFailed", msg)
                    set_condition(self.status, "Failed", "True", "TFJobFailed", msg)
            update_replica_status(self.status, rtype, pod)

    def _create_pod(self, rtype: str, index: int, rspec: JsonDict) -> None:
        import copy

        rt = rtype.lower()
        template = copy.deepcopy(rspec.get("template") or {})
        tmeta = template.get("metadata") or {}
        pod_spec = template.get("spec") or {}
        name = f"{self.name}-{rt}-{index}".replace("/", "-")
        labels = dict(tmeta.get("labels") or {})
        labels.update(self._labels(rt, index))
        if is_master_role(self.replicas, rtype, index):
            labels[LABEL_JOB_ROLE] = "master"
        port = self.c.ports.port(self.uid, rt, index)
        annotations = dict(tmeta.get("annotations") or {})
        annotations[ANNOTATION_HOST_PORT] = str(port)
        self._set_cluster_spec(pod_spec, rt, index)
        if pod_spec.get("restartPolicy"):
            self.event(
                "Warning",
                "SetPodTemplateRestartPolicy",
                "Restart policy in pod template will be overwritten by restart policy in replica spec",
            )
        policy = rspec.get("restartPolicy")
        pod_spec["restartPolicy"] = "Never" if policy == "ExitCode" else policy
        metadata: JsonDict = {
            "name": name,
            "namespace": self.namespace,
            "labels": labels,
            "annotations": annotations,
        }
        if tmeta.get("finalizers"):
            metadata["finalizers"] = list(tmeta["finalizers"])
        metadata["ownerReferences"] = [self._owner_ref()]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}
        self._create_recorded("pods", "Pod", pod)

    def _create_recorded(self, rtype: str, kind: str, obj: JsonDict) -> None:
        """Create a pod or service as the operator's PodControl / ServiceControl do: with an event,
        Successful or Failed; a failure ends this reconcile (it is retried with backoff)."""
        try:
            self.store.create(rtype, self.namespace, obj)
        except ApiError as exc:
            self.event("Warning", f"FailedCreate{kind}", f"Error creating: {exc.message}")
            raise _ReconcileError(exc.message) from exc
        self.event("Normal", f"SuccessfulCreate{kind}", f"Created {kind.lower()}: {obj['metadata']['name']}")

    def _set_cluster_spec(self, pod_spec: JsonDict, rt: str, index: int) -> None:
        counts = {t.lower(): max(int(s.get("replicas", 1)), 0) for t, s in self.replicas.items()}

        def address(other_rt: str, other_index: int) -> str:
            return f"127.0.0.1:{self.c.ports.port(self.uid, other_rt, other_index)}"

        value = tf_config(
            counts, rt, index, address, dynamic_worker=self.spec.get("enableDynamicWorker") is True
        )
        if value is None:
            return
        for container in pod_spec.get("containers") or []:
            if container.get("name") == CONTAINER_NAME:
                container["env"] = [*(container.get("env") or []), {"name": "TF_CONFIG", "value": value}]
                break

    def _labels(self, rt: str, index: int) -> dict[str, str]:
        return {
            LABEL_OPERATOR_NAME: CONTROLLER_NAME,
            LABEL_JOB_NAME: self.name.replace("/", "-"),
            LABEL_REPLICA_TYPE: rt,
            LABEL_REPLICA_INDEX: str(index),
        }

    def _owner_ref(self) -> JsonDict:
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }

    # ---- services (common/service.go ReconcileServices)

    def _reconcile_services(self, services: list[JsonDict], rtype: str) -> None:
        rspec = self.replicas[rtype]
        n = max(int(rspec.get("replicas", 1)), 0)
        for index, slice_ in enumerate(self._slices(services, rtype, n)):
            if len(slice_) > 1:
                continue
            if not slice_:
                self._create_service(rtype, index, rspec)
            elif index >= n:
                self._delete("services", slice_[0]["metadata"]["name"], "Service", "service")

    def _create_service(self, rtype: str, index: int, rspec: JsonDict) -> None:
        rt = rtype.lower()
        name = f"{self.name}-{rt}-{index}".replace("/", "-")
        labels = self._labels(rt, index)
        host_port = self.c.ports.port(self.uid, rt, index)
        ports = []
        for cport in _tensorflow_ports(rspec):
            sport: JsonDict = {"name": cport.get("name", ""), "port": cport.get("containerPort")}
            if cport.get("name") == PORT_NAME:
                sport["targetPort"] = host_port
            ports.append(sport)
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": labels,
                "annotations": {ANNOTATION_HOST_PORT: str(host_port)},
                "ownerReferences": [self._owner_ref()],
            },
            "spec": {"clusterIP": "None", "selector": dict(labels), "ports": ports},
        }
        self._create_recorded("services", "Service", service)

    # ---- UpdateJobStatus (tfjob_controller.go)

    def _update_job_status(self) -> None:
        worker0_completed = self._worker0_completed()
        if not self.status.get("startTime"):
            self.status["startTime"] = now_rfc3339()
        chief_spec = has_chief_or_master(self.replicas)
        ns_name = f"{self.namespace}/{self.name}"
        for rtype in [t for t in STATUS_ORDER if t in self.replicas]:
            active, succeeded, failed = _counts(self.status, rtype)
            expected = max(int(self.replicas[rtype].get("replicas", 1)), 0) - succeeded
            if chief_spec:
                if rtype in ("Chief", "Master"):
                    if active > 0:
                        set_condition(
                            self.status, "Running", "True", "TFJobRunning", f"TFJob {ns_name} is running."
                        )
                    if expected == 0:
                        self._succeed(ns_name)
            elif rtype == "Worker":
                all_workers = self.spec.get("successPolicy") == "AllWorkers"
                if expected == 0 or (worker0_completed and not all_workers):
                    self._succeed(ns_name)
                elif active > 0:
                    set_condition(
                        self.status, "Running", "True", "TFJobRunning", f"TFJob {ns_name} is running."
                    )
            if failed > 0:
                restarting = get_condition(self.status, "Restarting")
                if restarting is not None:
                    set_condition(
                        self.status,
                        "Restarting",
                        "True",
                        restarting.get("reason", ""),
                        restarting.get("message", ""),
                    )
                elif self.spec.get("enableDynamicWorker") is True and rtype == "Worker":
                    continue
                else:
                    msg = f"TFJob {ns_name} has failed because {failed} {rtype} replica(s) failed."
                    self.event("Normal", "TFJobFailed", msg)
                    if not self.status.get("completionTime"):
                        self.status["completionTime"] = now_rfc3339()
                    set_condition(self.status, "Failed", "True", "TFJobFailed", msg)

    def _succeed(self, ns_name: str) -> None:
        msg = f"TFJob {ns_name} successfully completed."
        self.event("Normal", "TFJobSucceeded", msg)
        if not self.status.get("completionTime"):
            self.status["completionTime"] = now_rfc3339()
        set_condition(self.status, "Succeeded", "True", "TFJobSucceeded", msg)

    def _worker0_completed(self) -> bool:
        try:
            pod = self.store.get("pods", self.namespace, f"{self.name}-worker-0")
        except ApiError:
            return False
        refs = pod["metadata"].get("ownerReferences") or []
        if not any(r.get("uid") == self.uid and r.get("controller") for r in refs):
            return False
        return container_exit_code(pod) == 0 and pod.get("status", {}).get("phase") == "Succeeded"

    # ---- writing

    def _write_if_changed(self) -> None:
        if _normalise(self.status) != self.old:
            self._write()

    def _write(self) -> None:
        try:
            self.store.update_status("tfjobs", self.namespace, self.name, _normalise(self.status))
        except ApiError as exc:
            if exc.code != 404:
                raise


def _is_active(pod: JsonDict) -> bool:
    return pod.get("status", {}).get("phase") not in ("Succeeded", "Failed") and not pod["metadata"].get(
        "deletionTimestamp"
    )


def _tensorflow_ports(rspec: JsonDict) -> list[JsonDict]:
    for container in (rspec.get("template") or {}).get("spec", {}).get("containers") or []:
        if container.get("name") == CONTAINER_NAME:
            return sorted(container.get("ports") or [], key=lambda p: str(p.get("name", "")))
    return []


__all__ = ["ANNOTATION_HOST_PORT", "Controller", "default_spec", "set_condition"]
