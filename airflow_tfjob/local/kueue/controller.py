"""The Kueue manager of the local cluster: watches the managed kinds' jobs, the Workloads and the queue
objects, runs the job reconcilers (jobs.py) for what changed and, once its work queue drains, one scheduler
cycle (scheduler.py). It runs on the controllers' reconcile core (controllers/reconciler.py, keyed
(kind, namespace, name)) on the cluster's event loop; a change wakes it (no polling), and a reconcile that
must wait for something outside the watches (a WorkloadPriorityClass created later) is retried on a
timer. With MultiKueue on (KueueOptions.multikueue) it also runs mkclusters.py's reconcilers, keyed
("MultiKueueCluster" | "AdmissionCheck", "", name), and mkworkloads.py's dispatch, keyed
("MultiKueueWorkload", namespace, name), which change no quota and so start no cycle."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from airflow_tfjob.jobs.kinds import JobKind
from airflow_tfjob.local.controllers.reconciler import Key, Watch, WorkQueue
from airflow_tfjob.local.kueue.jobs import JobReconciler, Management, remove_finalizer
from airflow_tfjob.local.kueue.mkclusters import CHECK, CLUSTER, MultiKueueClusters
from airflow_tfjob.local.kueue.mkworkloads import WORKLOAD, MultiKueueWorkloads
from airflow_tfjob.local.kueue.options import KueueOptions, kinds_managed
from airflow_tfjob.local.kueue.podsready import PodsReadyTimeout
from airflow_tfjob.local.kueue.reasons import Reasons
from airflow_tfjob.local.kueue.scheduler import Scheduler
from airflow_tfjob.local.model.resources import JsonDict
from airflow_tfjob.local.store.core import Store

log = logging.getLogger(__name__)
_QUEUE_KINDS = ("clusterqueues", "localqueues", "resourceflavors", "workloadpriorityclasses", "namespaces")
_RETRY = 0.5
# What the MultiKueue reconcilers watch (with KueueOptions.multikueue; mkclusters.py).
_MULTIKUEUE_KINDS = ("admissionchecks", "multikueueclusters", "multikueueconfigs", "secrets")


class KueueController(WorkQueue):
    kind = "kueue"
    retry_base = retry_max = _RETRY  # a failed reconcile or cycle is retried after a steady 0.5 s

    def __init__(self, store: Store, options: KueueOptions, reasons: Reasons | None = None) -> None:
        super().__init__(store)
        self.options = options
        self.kinds: dict[str, JobKind] = {k.kind: k for k in kinds_managed(options)}
        self.scheduler = Scheduler(store, reasons)
        self.pods_ready = PodsReadyTimeout(store, options.pods_ready_timeout, options.backoff_base_seconds)
        self._timer: asyncio.TimerHandle | None = None
        management = Management.of(options)
        self.reconcilers = {k.kind: JobReconciler(store, k, self.scheduler.arrived, options.wait_for_pods_ready,
                                                  management, reasons)
                            for k in self.kinds.values()}
        self._cycle = False
        # MultiKueue's connection side, only when asked for: without it the manager watches nothing more.
        self.multikueue: MultiKueueClusters | None = None
        self.mkworkloads: MultiKueueWorkloads | None = None
        if options.multikueue:
            self.multikueue = MultiKueueClusters(
                store, self._enqueue_only, watched=[k.plural for k in self.kinds.values()],
                on_remote=self._on_remote, on_lost=self._on_worker_lost)
            self.mkworkloads = MultiKueueWorkloads(store, self.multikueue, self.kinds, self._enqueue_only,
                                                   options.multikueue_worker_lost_timeout,
                                                   options.multikueue_gc_interval)

    def _enqueue_only(self, key: Key) -> None:
        """A MultiKueue key: no quota changes by itself, so no scheduling cycle."""
        WorkQueue.enqueue(self, key)

    def _on_remote(self, cluster: str, plural: str, obj: JsonDict) -> None:
        assert self.mkworkloads is not None
        key = self.mkworkloads.on_remote(cluster, plural, obj)
        if key is not None:
            self._enqueue_only(key)

    def _on_worker_lost(self, _cluster: str) -> None:
        assert self.mkworkloads is not None
        for key in self.mkworkloads.keys_with_check():
            self._enqueue_only(key)

    def watches(self) -> list[Watch]:
        watches = [*(Watch(k.plural, self._job_handler(k)) for k in self.kinds.values()),
                   Watch("workloads", self._on_workload),
                   *(Watch(r, self._on_queue_object) for r in _QUEUE_KINDS)]
        if self.multikueue is not None:
            watches += [Watch(r, self._multikueue_handler(r)) for r in _MULTIKUEUE_KINDS]
        return watches

    # ---- events

    def _job_handler(self, kind: JobKind) -> Callable[[str, JsonDict], None]:
        def handle(etype: str, job: JsonDict) -> None:
            if etype != "DELETED":
                meta = job["metadata"]
                self.enqueue((kind.kind, meta["namespace"], meta["name"]))
        return handle

    def _on_workload(self, etype: str, wl: JsonDict) -> None:
        meta = wl["metadata"]
        self.scheduler.arrived(meta.get("uid", ""), gone=etype == "DELETED")
        for ref in meta.get("ownerReferences") or []:
            kind = self.kinds.get(ref.get("kind", ""))
            if ref.get("controller") and kind is not None and ref.get("apiVersion") == kind.api_version:
                self.enqueue((ref["kind"], meta["namespace"], ref.get("name", "")))
        if etype != "DELETED" and meta.get("deletionTimestamp"):
            remove_finalizer(self.store, wl)  # the job is gone or replaced: nothing holds the quota
        if self.mkworkloads is not None:
            self._enqueue_only(self.mkworkloads.on_local(etype, wl))
        self._want_cycle()

    def _on_queue_object(self, _etype: str, _obj: JsonDict) -> None:
        self._want_cycle()

    def _multikueue_handler(self, rtype: str) -> Callable[[str, JsonDict], None]:
        def handle(_etype: str, obj: JsonDict) -> None:
            assert self.multikueue is not None
            for key in self.multikueue.keys_for(rtype, obj):
                WorkQueue.enqueue(self, key)  # no scheduling cycle: no quota changed
        return handle

    def _wake_at(self, delay: float | None) -> None:
        """One timer for the next PodsReady deadline or backoff end (changes wake the loop anyway)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if delay is not None:
            self._timer = asyncio.get_running_loop().call_later(delay + 0.05, self._want_cycle)

    def enqueue(self, key: Key) -> None:
        """A job to reconcile; every change to a job may change what the scheduler admits."""
        super().enqueue(key)
        self._cycle = True

    def _want_cycle(self) -> None:
        self._cycle = True
        self.poke()

    # ---- work

    def reconcile_key(self, key: Key) -> float | None:
        kind, namespace, name = key
        if kind in (CLUSTER, CHECK) and self.multikueue is not None:
            if self.mkworkloads is not None:
                self.mkworkloads.start_gc()  # from the first cluster on, as the manager's runGC loop
            return self.multikueue.reconcile(kind, name)
        if kind == WORKLOAD and self.mkworkloads is not None:
            self.mkworkloads.reconcile(namespace, name)  # an async pass; it times its own next one
            return None
        return None if self.reconcilers[kind].reconcile(namespace, name) else _RETRY

    def drained(self) -> None:
        """One scheduling cycle over everything the reconciles just changed."""
        if not self._cycle:
            return
        self._cycle = False
        try:
            self.scheduler.cycle()
            self._wake_at(self.pods_ready.sweep(self.store.list("workloads")[0]))
        except Exception:
            log.exception("kueue: scheduling cycle failed")
            asyncio.get_running_loop().call_later(_RETRY, self._want_cycle)

    def cancel_timers(self) -> None:
        super().cancel_timers()
        if self.multikueue is not None:
            self.multikueue.cancel()
        if self.mkworkloads is not None:
            self.mkworkloads.cancel()
        if self._timer is not None:
            self._timer.cancel()
