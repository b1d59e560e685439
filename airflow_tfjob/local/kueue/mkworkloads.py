"""MultiKueue's dispatch on the manager (Kueue v0.19.2 pkg/controller/admissionchecks/multikueue/
workload.go, the AllAtOnce dispatcher, with the kubeflow, TrainJob, JobSet adapters' SyncJob): a Workload whose
MultiKueue check is `Pending` once it holds quota gets a copy on every connected worker of the check's
MultiKueueConfig; the first worker to admit its copy wins (the others' copies are removed), gets a copy of
the job (`managedBy` cleared, the MultiKueue origin label and the prebuilt-workload annotation naming the
copy), and the manager's check turns `Ready` ("The workload was admitted on "<worker>""), its
`status.clusterName` the worker's. From then on the worker's job status is copied onto the manager's
job, the worker's `Finished` finishes the manager's Workload, and a manager Workload that is finished,
without quota, or deleted has its copies (job first, then Workload) removed from every connected worker.

A worker that evicts its copy sets the check `Retry` ("Workload evicted on worker cluster ..."), as does
the loss of the admitting worker once `worker_lost_timeout` has passed since it was lost ("Admitting
remote lost"), or its copy's disappearance ("Admitting remote no longer exists"); the check's `Retry`
then evicts the Workload (checks.py) and the dispatch starts over on the workers still there.

Why async tasks: every step reads or writes a worker over HTTP (mkremote.py), so each Workload's pass
runs as a task on the cluster's loop, one at a time per Workload (a change during a pass runs it again
after). What a pass decides about the manager is written to the manager's store at once.

Not reproduced: the Incremental and External dispatchers, elastic (sliced) and multi-Workload jobs, the
orchestrated preemption gates, priority propagation to the copies, and a manager-side eviction's
deactivation of the worker's copy (the pass waits for the requeue).

The garbage collector (multikueuecluster.go runGC, every `multikueue_gc_interval` seconds): on each
connected worker, the copies of this manager's origin whose manager Workload is gone are removed (the
job copy first, then the Workload), which removes what a deletion left on a worker that was lost then."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from airflow_tfjob.jobs.kinds import JobKind
from airflow_tfjob.local.controllers.reconciler import Key
from airflow_tfjob.local.kueue import checks
from airflow_tfjob.local.kueue.adapters import Adapter, adapter_for
from airflow_tfjob.local.kueue.mkclusters import MultiKueueClusters
from airflow_tfjob.local.kueue.mkremote import UNREACHABLE, Remote, RemoteError
from airflow_tfjob.local.kueue.options import MULTIKUEUE_CONTROLLER
from airflow_tfjob.local.kueue.workloads import (
    JOB_UID_LABEL,
    ORIGIN_LABEL,
    PREBUILT_KEY,
    condition,
    has_reservation,
    is_true,
    set_condition,
)
from airflow_tfjob.local.kueue.writes import event, write_status
from airflow_tfjob.local.model.resources import KUEUE_GROUP, ApiError, JsonDict, clone
from airflow_tfjob.local.store.core import Store

log = logging.getLogger(__name__)
WORKLOAD = "MultiKueueWorkload"
#: config.DefaultMultiKueueOrigin: the origin label value of every copy this manager makes.
ORIGIN = "multikueue"
#: What a pass meets and tries again after a while: a worker's or the manager's API refusing, a worker gone.
RETRIED: tuple[type[BaseException], ...] = (RemoteError, ApiError, *UNREACHABLE)


class MultiKueueWorkloads:
    """The manager's MultiKueue Workload reconciler, keyed (WORKLOAD, namespace, name)."""

    def __init__(self, store: Store, clusters: MultiKueueClusters, kinds: Mapping[str, JobKind],
                 enqueue: Callable[[Key], None], worker_lost_timeout: float, gc_interval: float = 0.0) -> None:
        self.store = store
        self.gc_interval = gc_interval
        self._gc: asyncio.TimerHandle | asyncio.Task[None] | None = None
        self.clusters = clusters
        self.kinds = dict(kinds)
        self.enqueue = enqueue
        self.worker_lost_timeout = worker_lost_timeout
        self._deleted: dict[tuple[str, str], JsonDict] = {}
        self._running: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._again: set[tuple[str, str]] = set()
        self._timers: dict[tuple[str, str], asyncio.TimerHandle] = {}

    # ---- what wakes a Workload's pass

    def on_local(self, etype: str, wl: JsonDict) -> Key:
        """A manager Workload changed; a deleted one is remembered so that its copies can be removed."""
        meta = wl["metadata"]
        where = (str(meta.get("namespace", "")), str(meta["name"]))
        if etype == "DELETED":
            self._deleted[where] = wl
        return (WORKLOAD, *where)

    def on_remote(self, _cluster: str, plural: str, obj: JsonDict) -> Key | None:
        """A worker's copy changed: the manager Workload it belongs to (the copy's own name for a
        Workload, the prebuilt-workload name for a job), if this manager made it."""
        meta = obj.get("metadata") or {}
        if (meta.get("labels") or {}).get(ORIGIN_LABEL) != ORIGIN:
            return None
        name = meta.get("name") if plural == "workloads" else (
            (meta.get("annotations") or {}).get(PREBUILT_KEY) or (meta.get("labels") or {}).get(PREBUILT_KEY))
        return (WORKLOAD, str(meta.get("namespace", "")), str(name)) if name else None

    def keys_with_check(self) -> list[Key]:
        """Every manager Workload with a MultiKueue check (a worker lost concerns them all)."""
        return [(WORKLOAD, str(w["metadata"].get("namespace", "")), str(w["metadata"]["name"]))
                for w in self.store.list("workloads")[0] if self._mk_check(w) is not None]

    def reconcile(self, namespace: str, name: str) -> None:
        """Start the Workload's pass, or run it again once the running one is done."""
        where = (namespace, name)
        timer = self._timers.pop(where, None)
        if timer is not None:
            timer.cancel()
        if where in self._running:
            self._again.add(where)
            return
        self._running[where] = asyncio.get_running_loop().create_task(self._run(where))

    async def _run(self, where: tuple[str, str]) -> None:
        delay: float | None
        try:
            delay = await self._pass(*where)
        except RETRIED as exc:
            log.debug("multikueue: %s/%s: %s; retried", *where, exc)
            delay = 1.0
        except Exception:
            log.exception("multikueue: the pass of %s/%s failed", *where)
            delay = 1.0
        finally:
            self._running.pop(where, None)
        if where in self._again:
            self._again.discard(where)
            self.enqueue((WORKLOAD, *where))
        elif delay is not None:
            self._timers[where] = asyncio.get_running_loop().call_later(delay, self.enqueue, (WORKLOAD, *where))

    # ---- the garbage collector (multikueuecluster.go runGC)

    def start_gc(self) -> None:
        """Collect every `gc_interval` seconds from now on (once started; 0: never)."""
        if self.gc_interval > 0 and self._gc is None:
            self._gc = asyncio.get_running_loop().call_later(self.gc_interval, self._collect_now)

    def _collect_now(self) -> None:
        self._gc = asyncio.get_running_loop().create_task(self._collect_all())

    async def _collect_all(self) -> None:
        for cluster in list(self.clusters.remotes):
            try:
                await self.collect(cluster)
            except RETRIED as exc:
                log.debug("multikueue: the garbage collection on %s: %s", cluster, exc)
            except Exception:
                log.exception("multikueue: the garbage collection on %s failed", cluster)
        self._gc = asyncio.get_running_loop().call_later(self.gc_interval, self._collect_now)

    async def collect(self, cluster: str) -> None:
        """runGC on one connected worker: each copy of this manager's origin whose manager Workload is
        gone (or being deleted) is removed there, its job first when the job is this manager's copy
        (DeleteRemoteObjectIfOwned), then the Workload."""
        remote = self.clusters.remotes.get(cluster)
        if remote is None:
            return  # not connected: skipped until it is
        for copy in await remote.list("workloads", f"{ORIGIN_LABEL}={ORIGIN}"):
            meta = copy["metadata"]
            namespace, name = str(meta.get("namespace", "")), str(meta["name"])
            try:
                local: JsonDict | None = self.store.get("workloads", namespace, name)
            except ApiError:
                local = None
            if local is not None and not local["metadata"].get("deletionTimestamp"):
                continue
            owner = _controller(copy)
            kind = self.kinds.get(str((owner or {}).get("kind"))) if owner else None
            if owner is not None and kind is not None and owner.get("apiVersion") == kind.api_version:
                job = await remote.get(kind.plural, namespace, str(owner.get("name", "")))
                if job is not None and ((job.get("metadata") or {}).get("labels") or {}).get(ORIGIN_LABEL) == ORIGIN:
                    await remote.delete(kind.plural, namespace, str(owner.get("name", "")))
            await remote.delete("workloads", namespace, name)

    def cancel(self) -> None:
        if self._gc is not None:
            self._gc.cancel()
            self._gc = None
        for task in self._running.values():
            task.cancel()
        for timer in self._timers.values():
            timer.cancel()
        self._running.clear()
        self._timers.clear()

    # ---- one pass (wlReconciler.Reconcile)

    async def _pass(self, namespace: str, name: str) -> float | None:
        try:
            wl: JsonDict | None = self.store.get("workloads", namespace, name)
            deleted = bool(wl and wl["metadata"].get("deletionTimestamp"))
        except ApiError:
            wl, deleted = self._deleted.get((namespace, name)), True
        if wl is None:
            return None
        found = self._mk_check(wl)
        if found is None or found[1].get("state") == checks.REJECTED:
            self._deleted.pop((namespace, name), None)
            return None
        check_name, acs = found
        owner = _controller(wl)
        kind = self.kinds.get(str((owner or {}).get("kind"))) if owner else None
        if kind is None or owner is None or owner.get("apiVersion") != kind.api_version:
            message = "No multikueue adapter found"
            if owner is not None:
                api_group = str(owner.get("apiVersion", "")).rpartition("/")[0]
                owner_kind = f'{owner.get("kind")}.{api_group}' if api_group else str(owner.get("kind"))
                message += f' for owner kind "{owner_kind}"'
            self.update_check(wl, check_name, acs, checks.REJECTED, message)
            return None
        adapter = adapter_for(kind)
        job_name = str(owner.get("name", ""))
        if not deleted:
            try:
                job = self.store.get(kind.plural, namespace, job_name)
            except ApiError:
                return 1.0  # the owner not there (yet): upstream's Get error, retried
            managed = adapter.managed_by(job)
            if managed != MULTIKUEUE_CONTROLLER:
                self.update_check(wl, check_name, acs, checks.REJECTED,
                                   f'The owner is not managed by Kueue: Expecting spec.managedBy to be '
                                   f'"{MULTIKUEUE_CONTROLLER}" not "{managed or ""}"')
                return None
        group = _Group(self, wl, check_name, kind, adapter, job_name)
        await group.read()
        if deleted:
            for cluster in list(group.remotes):
                await group.remove(cluster)
            self._deleted.pop((namespace, name), None)
            return None
        return await group.reconcile()

    def _mk_check(self, wl: JsonDict) -> tuple[str, JsonDict] | None:
        """GetMultiKueueAdmissionCheck: the Workload's check state whose AdmissionCheck is MultiKueue's."""
        for state in checks.states(wl):
            try:
                check = self.store.get("admissionchecks", None, str(state.get("name")))
            except ApiError:
                continue
            if (check.get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER:
                return str(state["name"]), state
        return None

    def config_clusters(self, check_name: str) -> list[str]:
        check = self.store.get("admissionchecks", None, check_name)
        params = (check.get("spec") or {}).get("parameters") or {}
        config = self.store.get("multikueueconfigs", None, str(params.get("name", "")))
        return [str(c) for c in (config.get("spec") or {}).get("clusters") or []]

    def lost_for(self, cluster: str) -> float:
        """Seconds since the worker was lost (admittingWorkerLostSince: now when not known)."""
        since = self.clusters.lost_since.get(cluster)
        return 0.0 if since is None else time.time() - since

    # ---- manager writes

    def update_check(self, wl: JsonDict, check_name: str, acs: JsonDict, state: str, message: str) -> None:
        """updateACS: the state, its message with what it was before."""
        self.patch_local(wl, lambda status: checks.set_state(
            status, check_name, state, f'{message}, Previously: "{acs.get("state")}"'))

    def patch_local(self, wl: JsonDict, change: Callable[[JsonDict], None]) -> JsonDict | None:
        """Apply `change` to the Workload's current status; written when it changed. The Workload as
        written (None when gone or unchanged)."""
        meta = wl["metadata"]
        try:
            current = self.store.get("workloads", meta.get("namespace"), meta["name"])
        except ApiError:
            return None
        status = clone(current.get("status") or {})
        change(status)
        if status == current.get("status") or not write_status(self.store, "workloads", current, status):
            return None
        return current


class _Group:
    """The manager's Workload and its copies on the config's connected workers (wlGroup)."""

    def __init__(self, owner: MultiKueueWorkloads, wl: JsonDict, check_name: str, kind: JobKind,
                 adapter: Adapter, job_name: str) -> None:
        self.o = owner
        self.local = wl
        self.check_name = check_name
        self.kind = kind
        self.adapter = adapter
        self.namespace = str(wl["metadata"].get("namespace", ""))
        self.name = str(wl["metadata"]["name"])
        self.job_name = job_name
        self.clients: dict[str, Remote] = {}
        self.unavailable: list[str] = []
        self.remotes: dict[str, JsonDict | None] = {}

    async def read(self) -> None:
        for cluster in self.o.config_clusters(self.check_name):
            remote = self.o.clusters.remotes.get(cluster)
            if remote is None:
                self.unavailable.append(cluster)
            else:
                self.clients[cluster] = remote
        for cluster, remote in self.clients.items():
            self.remotes[cluster] = await remote.get("workloads", self.namespace, self.name)

    def acs(self) -> JsonDict:
        found = checks.find_state(self.local, self.check_name)
        return found if found is not None else {"name": self.check_name, "state": checks.PENDING}

    def best(self, type_: str) -> tuple[JsonDict, str] | None:
        """bestMatchByCondition: the copy with `type_` True the longest (ties: the config's order)."""
        found = [(str(c.get("lastTransitionTime", "")), i, c, cluster)
                 for i, (cluster, wl) in enumerate(self.remotes.items()) if wl is not None
                 for c in [condition(wl, type_)] if c is not None and c.get("status") == "True"]
        if not found:
            return None
        _, _, cond, cluster = min(found, key=lambda f: (f[0], f[1]))
        return cond, cluster

    async def remove(self, cluster: str) -> None:
        """RemoveRemoteObjects: the worker's job (if this manager made it), then its Workload."""
        remote = self.clients[cluster]
        job = await remote.get(self.kind.plural, self.namespace, self.job_name)
        if job is not None and ((job.get("metadata") or {}).get("labels") or {}).get(ORIGIN_LABEL) == ORIGIN:
            await remote.delete(self.kind.plural, self.namespace, self.job_name)
        copy = self.remotes.get(cluster)
        if copy is not None:
            if copy["metadata"].get("finalizers"):
                copy["metadata"]["finalizers"] = []
                try:
                    await remote.replace("workloads", self.namespace, copy)
                except RemoteError as exc:
                    if exc.code != 404:
                        raise
            await remote.delete("workloads", self.namespace, self.name)
        self.remotes[cluster] = None

    async def sync_job(self, cluster: str) -> None:
        """SyncJob: the worker's job status onto the manager's job, or, with no job there yet, the copy
        created. (The kubeflow, TrainJob and JobSet adapters never defer a sync, so neither does this.)"""
        remote = self.clients[cluster]
        try:
            local = self.o.store.get(self.kind.plural, self.namespace, self.job_name)
        except ApiError:
            return
        copy = await remote.get(self.kind.plural, self.namespace, self.job_name)
        if copy is not None:
            status = copy.get("status") or {}
            if status != (local.get("status") or {}):
                self.o.store.update_status(self.kind.plural, self.namespace, self.job_name, clone(status))
            return
        meta = local["metadata"]
        spec = self.adapter.remote_spec(local)
        new: JsonDict = {"apiVersion": local.get("apiVersion", self.kind.api_version), "kind": self.kind.kind,
                         "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                                      "labels": {**(meta.get("labels") or {}), ORIGIN_LABEL: ORIGIN},
                                      "annotations": {**(meta.get("annotations") or {}), PREBUILT_KEY: self.name}},
                         "spec": spec}
        self.adapter.set_managed_by(new, None)
        await remote.create(self.kind.plural, self.namespace, new)

    async def reconcile(self) -> float | None:
        """reconcileGroup's steps, in upstream's order."""
        o, local, acs = self.o, self.local, self.acs()
        # 2. Finished, or no quota: no copy anywhere (retried while a worker cannot be reached).
        if is_true(local, "Finished") or not has_reservation(local):
            for cluster in [c for c, wl in self.remotes.items() if wl is not None]:
                await self.remove(cluster)
            return o.worker_lost_timeout if self.unavailable else None
        # 3. A copy finished: its job's status copied, the manager's Workload finished as it was.
        finished = self.best("Finished")
        if finished is not None:
            cond, cluster = finished
            if cond.get("reason") == "OutOfSync":
                if acs.get("state") == checks.READY:
                    message = (f'Remote workload on worker cluster "{cluster}" is out of sync with its user job, '
                               "resetting for re-dispatch")
                    o.update_check(local, self.check_name, acs, checks.RETRY, message)
                    event(o.store, local, "MultiKueue", f'{message}, Previously: "{acs.get("state")}"', "Warning")
                return None
            await self.sync_job(cluster)
            o.patch_local(local, lambda status: set_condition(
                status, "Finished", "True", str(cond.get("reason", "")), str(cond.get("message", "")),
                local["metadata"].get("generation")))
            return None
        # 4. A copy evicted: after an eviction on the manager, its status is still copied; an eviction on
        # the worker sends the Workload back for a new admission.
        evicted = self.best("Evicted")
        if evicted is not None:
            _, cluster = evicted
            if is_true(local, "Evicted"):
                await self.sync_job(cluster)
                return None
            if acs.get("state") == checks.READY:
                where = local.get("status", {}).get("clusterName", "")
                message = (f'Workload evicted on worker cluster: "{where}", resetting for re-admission. '
                           f'Previously: "{acs.get("state")}"')
                o.patch_local(local, lambda status: checks.set_state(status, self.check_name, checks.RETRY, message))
                event(o.store, local, "MultiKueue", message)
                return None
        # 5. Copies whose spec no longer matches the manager's are removed.
        for cluster, copy in list(self.remotes.items()):
            if copy is not None and copy.get("spec") != local.get("spec"):
                await self.remove(cluster)
        # 6. The admitting copy.
        admitted = self.best("Admitted")
        if admitted is None and acs.get("state") == checks.READY:
            where = str((local.get("status") or {}).get("clusterName") or "")
            if where and where in self.unavailable:
                remaining = o.worker_lost_timeout - o.lost_for(where)
                if remaining > 0:
                    return remaining
                o.update_check(local, self.check_name, acs, checks.RETRY, "Admitting remote lost")
            elif not where:
                o.update_check(local, self.check_name, acs, checks.RETRY,
                                "Admission check is Ready but no admitting cluster is recorded; this is "
                                "unexpected, please report it")
            else:
                o.update_check(local, self.check_name, acs, checks.RETRY, "Admitting remote no longer exists")
            return None
        if admitted is not None:
            _, cluster = admitted
            for other in [c for c, wl in self.remotes.items() if wl is not None and c != cluster]:
                await self.remove(other)
            if has_reservation(local) and is_true(local, "Evicted"):
                return None  # the manager's eviction is under way; its requeue removes the copies
            await self.sync_job(cluster)
            if acs.get("state") not in (checks.RETRY, checks.REJECTED):
                self._admitted_on(cluster)
            return o.worker_lost_timeout
        # 8. No nomination while the check is not Pending or a cluster is still recorded (an eviction
        # under way).
        if acs.get("state") != checks.PENDING or (local.get("status") or {}).get("clusterName"):
            return None
        return await self._nominate()

    def _admitted_on(self, cluster: str) -> None:
        """syncAdmittingRemoteState: the check Ready, the worker recorded (once), the nomination over."""
        message = f'The workload was admitted on "{cluster}"'

        def change(status: JsonDict) -> None:
            checks.set_state(status, self.check_name, checks.READY, message)
            status.setdefault("clusterName", cluster)
            status.pop("nominatedClusterNames", None)

        if self.o.patch_local(self.local, change) is not None:
            event(self.o.store, self.local, "MultiKueue", message)

    async def _nominate(self) -> float | None:
        """nominateAndSynchronizeWorkers, AllAtOnce: every connected worker nominated, a copy of the
        Workload on each that has none (cloneForCreate: name, labels but the job-uid one, annotations,
        the origin label, the spec)."""
        nominated = sorted(self.clients)
        if sorted((self.local.get("status") or {}).get("nominatedClusterNames") or []) != nominated:
            self.o.patch_local(self.local, lambda status: status.__setitem__("nominatedClusterNames", nominated))
        meta = self.local["metadata"]
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != JOB_UID_LABEL}
        for cluster in nominated:
            if self.remotes.get(cluster) is not None:
                continue
            copy: dict[str, Any] = {
                "apiVersion": f"{KUEUE_GROUP}/v1beta2", "kind": "Workload",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "labels": {**labels, ORIGIN_LABEL: ORIGIN}},
                "spec": clone(self.local.get("spec") or {})}
            if meta.get("annotations"):
                copy["metadata"]["annotations"] = dict(meta["annotations"])
            try:
                await self.clients[cluster].create("workloads", self.namespace, copy)
            except RemoteError as exc:
                if exc.code != 409:
                    raise
        return None


def _controller(wl: JsonDict) -> JsonDict | None:
    refs = wl["metadata"].get("ownerReferences") or []
    return next((r for r in refs if r.get("controller")), refs[0] if refs else None)
