"""The Kueue manager of the local cluster: watches the managed kinds' jobs, the Workloads and the queue
objects, runs the job reconcilers (jobs.py) for what changed and then one scheduler cycle
(scheduler.py). Everything runs on the cluster's event loop, like the job controllers; a change wakes it
(no polling), and a reconcile that must wait for something outside the watches (a
WorkloadPriorityClass created later) is retried on a timer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from airflow_tfjob.kinds import API_VERSION, JobKind
from airflow_tfjob.local.kueue.jobs import JobReconciler, remove_finalizer
from airflow_tfjob.local.kueue.options import KueueOptions, kinds_managed
from airflow_tfjob.local.kueue.podsready import PodsReadyTimeout
from airflow_tfjob.local.kueue.scheduler import Scheduler
from airflow_tfjob.local.resources import ApiError, JsonDict
from airflow_tfjob.local.store import Store
from airflow_tfjob.local.watchers import follow_forever

log = logging.getLogger(__name__)
_QUEUE_KINDS = ("clusterqueues", "localqueues", "resourceflavors", "workloadpriorityclasses", "namespaces")
_RETRY = 0.5


class KueueController:
    def __init__(self, store: Store, options: KueueOptions) -> None:
        self.store = store
        self.options = options
        self.kinds: dict[str, JobKind] = {k.kind: k for k in kinds_managed(options)}
        self.scheduler = Scheduler(store)
        self.pods_ready = PodsReadyTimeout(store, options.pods_ready_timeout, options.backoff_base_seconds)
        self._timer: asyncio.TimerHandle | None = None
        self.reconcilers = {k.kind: JobReconciler(store, k, self.scheduler.arrived) for k in self.kinds.values()}
        self._jobs: set[tuple[str, str, str]] = set()  # (kind, namespace, name)
        self._cycle = False
        self._wake = asyncio.Event()

    async def run(self) -> None:
        watched: list[tuple[str, Callable[[str, JsonDict], None]]] = [
            (k.plural, self._job_handler(k)) for k in self.kinds.values()]
        watched += [("workloads", self._on_workload), *((r, self._on_queue_object) for r in _QUEUE_KINDS)]
        tasks = [asyncio.create_task(self._watch(r, h), name=f"kueue-watch-{r}") for r, h in watched]
        tasks.append(asyncio.create_task(self._work(), name="kueue-work"))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _watch(self, rtype: str, handler: Callable[[str, JsonDict], None]) -> None:
        await follow_forever(self.store, rtype, handler, "kueue")

    # ---- events

    def _job_handler(self, kind: JobKind) -> Callable[[str, JsonDict], None]:
        def handle(etype: str, job: JsonDict) -> None:
            if etype != "DELETED":
                meta = job["metadata"]
                self.enqueue(kind.kind, meta["namespace"], meta["name"])
        return handle

    def _on_workload(self, etype: str, wl: JsonDict) -> None:
        meta = wl["metadata"]
        self.scheduler.arrived(meta.get("uid", ""), gone=etype == "DELETED")
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("apiVersion") == API_VERSION and ref.get("kind") in self.kinds:
                self.enqueue(ref["kind"], meta["namespace"], ref.get("name", ""))
        if etype != "DELETED" and meta.get("deletionTimestamp"):
            remove_finalizer(self.store, wl)  # the job is gone or replaced: nothing holds the quota
        self._schedule()

    def _on_queue_object(self, _etype: str, _obj: JsonDict) -> None:
        self._schedule()

    def _wake_at(self, delay: float | None) -> None:
        """One timer for the next PodsReady deadline or backoff end (changes wake the loop anyway)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if delay is not None:
            self._timer = asyncio.get_running_loop().call_later(delay + 0.05, self._schedule)

    def enqueue(self, kind: str, namespace: str, name: str) -> None:
        self._jobs.add((kind, namespace, name))
        self._schedule()

    def _schedule(self) -> None:
        self._cycle = True
        self._wake.set()

    # ---- work

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            jobs, self._jobs = self._jobs, set()
            for kind, namespace, name in sorted(jobs):
                try:
                    done = self.reconcilers[kind].reconcile(namespace, name)
                except ApiError as exc:
                    log.debug("kueue: reconcile of %s %s/%s: %s", kind, namespace, name, exc.message)
                    done = False
                except Exception:  # a bug must not stop the emulation: log it and retry
                    log.exception("kueue: reconcile of %s %s/%s failed", kind, namespace, name)
                    done = False
                if not done:
                    loop.call_later(_RETRY, self.enqueue, kind, namespace, name)
            if self._cycle:
                self._cycle = False
                try:
                    self.scheduler.cycle()
                    self._wake_at(self.pods_ready.sweep(self.store.list("workloads")[0]))
                except Exception:
                    log.exception("kueue: scheduling cycle failed")
                    loop.call_later(_RETRY, self._schedule)
            await asyncio.sleep(0)
