"""The shared job controller of the local cluster (the training-operator's common job controller): a
work queue fed by watches on one kind's jobs and on the pods and services they own, one reconcile at a
time, timers that reconcile a job again at its deadline or TTL, and retries with exponential backoff
(0.5 s up to 60 s, shorter than controller-runtime's 1000 s cap): reconciler.WorkQueue. What one pass does is `JobPass`
(jobpass.py); a kind plugs in its pass (tfjobcontroller.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from airflow_tfjob.local.ports import PortMap, free_port
from airflow_tfjob.local.reconciler import Reconciler
from airflow_tfjob.local.resources import ApiError, JsonDict
from airflow_tfjob.local.store import Store

if TYPE_CHECKING:
    from airflow_tfjob.local.jobpass import JobPass

log = logging.getLogger(__name__)

MANAGED_BY_OPERATOR = "kubeflow.org/training-operator"


class ReconcileError(Exception):
    """A reconcile pass stopped early, as the operator's returns an error: retried with backoff."""


class JobController(Reconciler):
    """Watches one kind's jobs and the pods and services they own, and reconciles jobs one at a time
    (a work queue with one worker, timers for deadlines and TTLs, retries with backoff). A kind
    subclasses it with `job_pass` set to its `JobPass`."""

    job_pass: ClassVar[type[JobPass]]
    owns = ("pods", "services")

    def __init__(
        self, store: Store, *, port_allocator: Callable[[], int] | None = None, used_ports: set[int] | None = None
    ) -> None:
        self.plural = self.job_pass.plural
        super().__init__(store)
        self._ports = PortMap(port_allocator or free_port, used_ports)

    def resynced(self) -> None:
        """Release the ports of jobs deleted while no watch was open (their DELETED event is lost).

        Called right after the watch is opened, with no await in between: the store cannot change in
        the meantime, so every job that exists here is also one the new watch reports."""
        entries, _ = self.store.list_entries(self.plural)
        existing = {entry.obj["metadata"].get("uid") for entry in entries}
        for uid in self._ports.known_jobs() - existing:
            self._ports.forget(uid)

    def deleted(self, obj: JsonDict) -> None:
        self._ports.forget(obj["metadata"].get("uid", ""))

    def expected_error(self, exc: Exception) -> bool:
        return isinstance(exc, (ReconcileError, ApiError))

    # ---- one pass

    def reconcile(self, namespace: str, name: str) -> float | None:
        """One reconcile pass; returns seconds until a timer must reconcile the job again (or None)."""
        try:
            job = self.store.get(self.job_pass.plural, namespace, name)
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

    # ---- used by JobPass (and `store`, the Reconciler's)

    @property
    def ports(self) -> PortMap:
        return self._ports
