"""The shared job controller of the kubeflow.org/v1 kinds (the training-operator's common job controller):
a Reconciler (controllers/reconciler.py) of one kind's jobs and the pods and services they own, whose timers
reconcile a job again at its deadline or TTL. What one pass does is `JobPass` (jobpass.py), given the
controller's store and host ports; a kind plugs in its pass (kindpass.py and the kind modules beside it)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import ClassVar

from airflow_tfjob.local.controllers.reconciler import HostPortReconciler
from airflow_tfjob.local.controllers.v1.jobpass import JobPass, ReconcileError
from airflow_tfjob.local.model.resources import ApiError
from airflow_tfjob.local.store.core import Store

log = logging.getLogger(__name__)

MANAGED_BY_OPERATOR = "kubeflow.org/training-operator"


class V1JobController(HostPortReconciler):
    """Watches one kind's jobs and the pods and services they own, and reconciles jobs one at a time
    (a work queue with one worker, timers for deadlines and TTLs, retries with backoff). A kind
    subclasses it with `job_pass` set to its `JobPass` (kindpass.controller_for)."""

    job_pass: ClassVar[type[JobPass]]
    owns = ("pods", "services")

    def __init__(self, store: Store, *, port_allocator: Callable[[], int] | None = None) -> None:
        self.plural = self.job_pass.plural
        super().__init__(store, port_allocator=port_allocator)

    def expected_error(self, exc: Exception) -> bool:
        return isinstance(exc, (ReconcileError, ApiError))

    # ---- one pass

    def reconcile(self, namespace: str, name: str) -> float | None:
        """One reconcile pass; returns seconds until a timer must reconcile the job again (or None)."""
        job = self.get(self.plural, namespace, name)
        if job is None:
            return None
        spec_in = job.get("spec") or {}
        managed_by = (spec_in.get("runPolicy") or {}).get("managedBy")
        if managed_by and managed_by != MANAGED_BY_OPERATOR and self.job_pass.honours_managed_by:
            return None  # Kueue MultiKueue (or someone else) runs this job
        if job["metadata"].get("deletionTimestamp"):
            return None
        return self.job_pass(self.store, self.ports, job).run()
