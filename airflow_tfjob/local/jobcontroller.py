"""The shared job controller of the local cluster (the training-operator's common job controller): a
work queue fed by watches on one kind's jobs and on the pods and services they own, one reconcile at a
time, timers that reconcile a job again at its deadline or TTL, and retries with exponential backoff
(0.5 s up to 60 s, shorter than controller-runtime's 1000 s cap). What one pass does is `JobPass`
(jobpass.py); a kind plugs in its pass (tfjobcontroller.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from airflow_tfjob.local.ports import PortMap, free_port
from airflow_tfjob.local.resources import ApiError, JsonDict
from airflow_tfjob.local.store import Store

if TYPE_CHECKING:
    from airflow_tfjob.local.jobpass import JobPass

log = logging.getLogger(__name__)

MANAGED_BY_OPERATOR = "kubeflow.org/training-operator"
_RETRY_BASE = 0.5
_RETRY_MAX = 60.0
# Timers fire a little after the instant so that the "now >= deadline" test is already true.
_TIMER_SLACK = 0.05


class ReconcileError(Exception):
    """A reconcile pass stopped early, as the operator's returns an error: retried with backoff."""


class JobController:
    """Watches one kind's jobs and the pods and services they own, and reconciles jobs one at a time
    (a work queue with one worker, timers for deadlines and TTLs, retries with backoff). A kind
    subclasses it with `job_pass` set to its `JobPass`."""

    job_pass: ClassVar[type[JobPass]]

    def __init__(
        self, store: Store, *, port_allocator: Callable[[], int] | None = None, used_ports: set[int] | None = None
    ) -> None:
        self._store = store
        self._ports = PortMap(port_allocator or free_port, used_ports)
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._queued: set[tuple[str, str]] = set()
        self._timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._retry_timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._failures: dict[tuple[str, str], int] = {}

    # ---- loop

    async def run(self) -> None:
        """Reconcile until cancelled."""
        plural = self.job_pass.plural
        tasks = [
            asyncio.create_task(self._watch(plural, self._on_job), name=f"controller-watch-{plural}"),
            asyncio.create_task(self._watch("pods", self._on_owned), name=f"controller-{plural}-watch-pods"),
            asyncio.create_task(self._watch("services", self._on_owned), name=f"controller-{plural}-watch-services"),
            asyncio.create_task(self._work(), name=f"controller-{plural}-work"),
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
            if rtype == self.job_pass.plural:
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
        entries, _ = self._store.list_entries(self.job_pass.plural)
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
            if ref.get("controller") and ref.get("kind") == self.job_pass.kind and ref.get("apiVersion") == self.job_pass.api_version:
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
                if not isinstance(exc, (ReconcileError, ApiError)):
                    log.exception("reconcile of %s %s/%s failed", self.job_pass.kind, *key)
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
            job = self._store.get(self.job_pass.plural, namespace, name)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        spec_in = job.get("spec") or {}
        managed_by = (spec_in.get("runPolicy") or {}).get("managedBy")
        if managed_by and managed_by != MANAGED_BY_OPERATOR and self.job_pass.honours_managed_by:
            return None  # Kueue MultiKueue (or someone else) runs this job
        if job["metadata"].get("deletionTimestamp"):
            return None
        return self.job_pass(self, job).run()

    # ---- used by JobPass

    @property
    def store(self) -> Store:
        return self._store

    @property
    def ports(self) -> PortMap:
        return self._ports
