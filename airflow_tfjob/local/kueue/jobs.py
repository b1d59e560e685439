"""Kueue's jobframework for the kubeflow.org/v1 kinds whose integration is on (pkg/controller/
jobframework/reconciler.go with the KubeflowJob adapter; docs/reference/kueue-behaviour.md §4): the
mutating webhook that creates a labelled job suspended, and the job reconciler that creates its
Workload, unsuspends it on admission (flavor nodeLabels, tolerations and the podset label merged in),
suspends it again on eviction (templates restored), releases the quota once no replica is active, and
marks the Workload Finished when the job ends. Kinds whose integration is off are never looked at."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from airflow_tfjob.kinds import JobKind
from airflow_tfjob.local.kueue.defaults import apply_kueue_defaults
from airflow_tfjob.local.kueue.workloads import (
    FINALIZER,
    JOB_UID_LABEL,
    PODSET_LABEL,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    condition,
    has_reservation,
    is_true,
    new_workload,
    ordered_replica_types,
    pods_ready_condition,
    set_condition,
)
from airflow_tfjob.local.kueue.writes import event, write_status
from airflow_tfjob.local.resources import ApiError, JsonDict, clone
from airflow_tfjob.local.store import Admission, Store

log = logging.getLogger(__name__)


# managedJobsNamespaceSelector's default: kube-system and Kueue's own namespace are never managed.
UNMANAGED_NAMESPACES = ("kube-system", "kueue-system")


class KueueWebhook:
    """BaseWebhook.Default in front of the cluster's own admission, on CREATE of a managed kind: the
    queue label `default` when the namespace has a LocalQueue of that name and the job names none
    (ApplyDefaultLocalQueueWithManagedJobsNamespaceSelector), then `runPolicy.suspend = true` for a
    labelled job (ApplyDefaultForSuspend); and the Kueue CRDs' defaults on every write of their kinds."""

    def __init__(self, inner: Admission | None, kinds: Sequence[JobKind]) -> None:
        self.inner = inner
        self.plurals = {k.plural for k in kinds}
        self.store: Store | None = None  # set once the store exists (it calls this admission)

    def admit(self, rtype: str, operation: str, obj: JsonDict, old: JsonDict | None) -> None:
        apply_kueue_defaults(rtype, obj)
        namespace = (obj.get("metadata") or {}).get("namespace")
        if operation == "CREATE" and rtype in self.plurals and namespace not in UNMANAGED_NAMESPACES:
            self._default_queue(obj, str(namespace))
            spec = obj.get("spec")
            if queue_name(obj) and isinstance(spec, dict):
                policy = spec.get("runPolicy")
                if policy is None:
                    policy = spec["runPolicy"] = {}
                if isinstance(policy, dict):
                    policy["suspend"] = True
        if self.inner is not None:
            self.inner.admit(rtype, operation, obj, old)

    def _default_queue(self, obj: JsonDict, namespace: str) -> None:
        if queue_name(obj) or self.store is None:
            return
        try:
            self.store.get_entry("localqueues", namespace, "default")
        except ApiError:
            return
        meta = obj["metadata"]
        labels = meta.get("labels")
        if labels is None:
            labels = meta["labels"] = {}
        if isinstance(labels, dict):
            labels[QUEUE_LABEL] = "default"


def queue_name(job: JsonDict) -> str:
    return str(((job.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL) or "")


def _suspended(job: JsonDict) -> bool:
    return ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend") is True


def _active(job: JsonDict) -> bool:
    """KubeflowJob.IsActive: any replicaStatuses.*.active != 0."""
    statuses = (job.get("status") or {}).get("replicaStatuses") or {}
    return any((s or {}).get("active") for s in statuses.values())


def _job_condition(job: JsonDict, type_: str) -> JsonDict | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == "True":
            return dict(cond)
    return None


class JobReconciler:
    """ReconcileGenericJob for one managed kind; `reconcile` is called on job and Workload changes."""

    def __init__(self, store: Store, kind: JobKind, created: Callable[[str], None] = lambda _uid: None) -> None:
        self.store = store
        self.kind = kind
        self.created = created  # tells the scheduler the creation order of Workloads

    def workload_of(self, job: JsonDict) -> JsonDict | None:
        uid = job["metadata"]["uid"]
        found, _ = self.store.list("workloads", job["metadata"]["namespace"],
                                   label_selector=f"{JOB_UID_LABEL}={uid}")
        owned = [w for w in found if any(r.get("uid") == uid for r in w["metadata"].get("ownerReferences") or [])]
        return owned[0] if owned else None

    def reconcile(self, namespace: str, name: str) -> bool:
        """One pass; False when it must be retried later (a missing WorkloadPriorityClass)."""
        try:
            job = self.store.get(self.kind.plural, namespace, name)
        except ApiError:
            return True
        queue = queue_name(job)
        if not queue or job["metadata"].get("deletionTimestamp") or namespace in UNMANAGED_NAMESPACES:
            return True
        wl = self.workload_of(job)
        finished = _job_condition(job, "Succeeded") or _job_condition(job, "Failed")
        if finished is not None:
            if wl is not None:
                self._finish(job, wl, finished)
            return True
        if wl is None or wl["metadata"].get("deletionTimestamp"):
            return self._without_workload(job, queue)
        if self._sync_spec(job, wl, queue) or self._pods_ready(job, wl):  # step 5, before eviction
            wl = self.workload_of(job) or wl
        if is_true(wl, "Evicted"):
            self._evicted(job, wl)
        elif is_true(wl, "Admitted") and has_reservation(wl):
            if _suspended(job):
                self._start(job, wl)
        elif not _suspended(job):
            self._stop(job, wl, "Not admitted by cluster queue")
        return True

    # ---- the steps

    def _without_workload(self, job: JsonDict, queue: str) -> bool:
        if not _suspended(job) or _active(job):
            # handleJobWithNoWorkload: a running job without a Workload is stopped first.
            if not _suspended(job):
                self._stop(job, None, "Missing Workload; unable to restore pod templates")
            return True
        wpc: tuple[str, int] | None = None
        wpc_name = (job["metadata"].get("labels") or {}).get(PRIORITY_LABEL)
        if wpc_name:
            try:
                value = self.store.get("workloadpriorityclasses", None, wpc_name).get("value", 0)
            except ApiError:
                return False  # ExtractPriority fails: no Workload until the class exists
            wpc = (wpc_name, int(value))
        wl = new_workload(self.kind, job, queue, wpc)
        try:
            created = self.store.create("workloads", job["metadata"]["namespace"], wl)
        except ApiError as exc:
            return exc.code == 409
        self.created(created["metadata"]["uid"])
        self._event(job, "CreatedWorkload", f"Created Workload: {created['metadata']['namespace']}/"
                                            f"{created['metadata']['name']}")
        return True

    def _start(self, job: JsonDict, wl: JsonDict) -> None:
        """startJob / RunWithPodSetsInfo: flavors' nodeLabels and tolerations, the podset label, unsuspend."""
        admission = (wl.get("status") or {}).get("admission") or {}
        flavors = {o["metadata"]["name"]: o for o in self.store.list("resourceflavors")[0]}
        by_podset = {p.get("name"): p for p in admission.get("podSetAssignments") or []}
        new = clone(job)
        specs = new["spec"].get(self.kind.spec_key) or {}
        for key_, rtype in ordered_replica_types(self.kind, specs):
            assignment = by_podset.get(rtype.lower()) or {}
            template = specs[key_].setdefault("template", {})
            pod_spec = template.setdefault("spec", {})
            labels = template.setdefault("metadata", {}).setdefault("labels", {})
            labels[PODSET_LABEL] = rtype.lower()
            for flavor_name in dict.fromkeys((assignment.get("flavors") or {}).values()):
                flavor = (flavors.get(flavor_name) or {}).get("spec") or {}
                if flavor.get("nodeLabels"):
                    pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **flavor["nodeLabels"]}
                if flavor.get("tolerations"):
                    pod_spec["tolerations"] = [*(pod_spec.get("tolerations") or []), *flavor["tolerations"]]
        new["spec"].setdefault("runPolicy", {})["suspend"] = False
        if self._replace(new):
            self._event(job, "Started", f"Admitted by clusterQueue {admission.get('clusterQueue', '')}")

    def _stop(self, job: JsonDict, wl: JsonDict | None, message: str) -> None:
        """stopJob: suspend, and put back the templates the Workload recorded (RestorePodSetsInfo)."""
        new = clone(job)
        new["spec"].setdefault("runPolicy", {})["suspend"] = True
        if wl is not None:
            originals = {p.get("name"): p.get("template") or {} for p in (wl.get("spec") or {}).get("podSets") or []}
            specs = new["spec"].get(self.kind.spec_key) or {}
            for key_, rtype in ordered_replica_types(self.kind, specs):
                original = originals.get(rtype.lower())
                if original is None:
                    continue
                template = specs[key_].setdefault("template", {})
                pod_spec = template.setdefault("spec", {})
                for field in ("nodeSelector", "tolerations"):
                    value = (original.get("spec") or {}).get(field)
                    if value is None:
                        pod_spec.pop(field, None)
                    else:
                        pod_spec[field] = clone(value)
                labels = (original.get("metadata") or {}).get("labels")
                meta = template.setdefault("metadata", {})
                if labels is None:
                    meta.pop("labels", None)
                else:
                    meta["labels"] = clone(labels)
        if self._replace(new):
            self._event(job, "Stopped", message)

    def _evicted(self, job: JsonDict, wl: JsonDict) -> None:
        evicted = condition(wl, "Evicted") or {}
        if not _suspended(job):
            self._stop(job, wl, str(evicted.get("message", "")))
            return
        if _active(job) or not has_reservation(wl):
            return
        # The job has no active replicas: release the quota, requeue (one status write).
        status = clone(wl.get("status") or {})
        generation = wl["metadata"].get("generation")
        reason, message = str(evicted.get("reason", "")), str(evicted.get("message", ""))
        requeued = "True" if reason in ("Preempted", "NodeFailures") else "False"
        set_condition(status, "Requeued", requeued, reason, message, generation)
        set_condition(status, "QuotaReserved", "False", "Pending", message, generation)
        status.pop("admission", None)
        set_condition(status, "Admitted", "False", "NoReservation", "The workload has no reservation", generation)
        set_condition(status, "PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded", generation)
        self._write_status(wl, status)

    def _sync_spec(self, job: JsonDict, wl: JsonDict, queue: str) -> bool:
        """A queue label changed while the job waits goes to spec.queueName (QueueNameChange); the
        priority follows its WorkloadPriorityClass (UpdateWorkloadPriority)."""
        spec = clone(wl.get("spec") or {})
        if _suspended(job) and not has_reservation(wl):
            spec["queueName"] = queue
        ref = spec.get("priorityClassRef") or {}
        if ref.get("kind") == "WorkloadPriorityClass":
            wanted = str((job["metadata"].get("labels") or {}).get(PRIORITY_LABEL) or ref.get("name", ""))
            try:
                value = self.store.get("workloadpriorityclasses", None, wanted).get("value", 0)
            except ApiError:
                value = spec.get("priority", 0)
            spec["priorityClassRef"] = {**ref, "name": wanted}
            spec["priority"] = int(value)
        if spec == wl.get("spec"):
            return False
        new = clone(wl)
        new["spec"] = spec
        try:
            self.store.replace("workloads", wl["metadata"]["namespace"], wl["metadata"]["name"], new)
        except ApiError:
            return False
        return True

    def _pods_ready(self, job: JsonDict, wl: JsonDict) -> bool:
        """PodsReady (waitForPodsReady, on by default in v0.19): KubeflowJob.PodsReady is the job's
        Running condition."""
        value, reason, message = pods_ready_condition(wl, _job_condition(job, "Running") is not None)
        before = condition(wl, "PodsReady")
        if before is not None and (before.get("status"), before.get("reason")) == (value, reason):
            return False  # HasConditionWithTypeAndReason
        status = clone(wl.get("status") or {})
        set_condition(status, "PodsReady", value, reason, message, wl["metadata"].get("generation"))
        return self._write_status(wl, status)

    def _finish(self, job: JsonDict, wl: JsonDict, finished: JsonDict) -> None:
        if not is_true(wl, "Finished"):
            status = clone(wl.get("status") or {})
            set_condition(status, "Finished", "True", str(finished.get("type")), str(finished.get("message", "")),
                          wl["metadata"].get("generation"))
            if not self._write_status(wl, status):
                return
            ns, name = wl["metadata"]["namespace"], wl["metadata"]["name"]
            self._event(job, "FinishedWorkload", f"Workload '{ns}/{name}' is declared finished")
        remove_finalizer(self.store, wl)

    # ---- store helpers

    def _replace(self, job: JsonDict) -> bool:
        meta = job["metadata"]
        try:
            self.store.replace(self.kind.plural, meta["namespace"], meta["name"], job)
        except ApiError as exc:
            log.debug("kueue: could not update %s %s: %s", self.kind.kind, meta["name"], exc.message)
            return False
        return True

    def _write_status(self, wl: JsonDict, status: JsonDict) -> bool:
        return write_status(self.store, "workloads", wl, status)

    def _event(self, job: JsonDict, reason: str, message: str) -> None:
        event(self.store, job, reason, message)


def remove_finalizer(store: Store, wl: JsonDict) -> None:
    finalizers = wl["metadata"].get("finalizers") or []
    if FINALIZER not in finalizers:
        return
    try:
        current = store.get("workloads", wl["metadata"]["namespace"], wl["metadata"]["name"])
        kept = [f for f in finalizers if f != FINALIZER]
        if kept:
            current["metadata"]["finalizers"] = kept
        else:
            current["metadata"].pop("finalizers", None)
        store.replace("workloads", wl["metadata"]["namespace"], wl["metadata"]["name"], current)
    except ApiError:
        pass
