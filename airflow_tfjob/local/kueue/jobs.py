"""Kueue's jobframework for the kinds whose integration is on (pkg/controller/jobframework/reconciler.go;
docs/reference/kueue-behaviour.md §4): the mutating webhook that creates a labelled job suspended, and the
job reconciler that creates its Workload, unsuspends it on admission (flavor nodeLabels, tolerations and
the podset label handed to the job), suspends it again on eviction (what admission added taken back),
releases the quota once no replica is active, and marks the Workload Finished when the job ends. What
differs between integrations (the kubeflow.org/v1 kinds, Trainer's TrainJob, a standalone JobSet) is asked
of the kind's adapter (adapters.py). Kinds whose integration is off are never looked at. A job whose owner
Kueue manages (a TrainJob's JobSet) is its owner's: no queue, no suspend, no Workload of its own (upstream
also suspends it while the owner's Workload is not admitted; here the owner's controller keeps it so)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from airflow_tfjob.jobs.kinds import JobKind
from airflow_tfjob.local.admission.schemacheck import check
from airflow_tfjob.local.kueue.adapters import Adapter, PodSetsInfo, adapter_for
from airflow_tfjob.local.kueue.celrules import cel_errors
from airflow_tfjob.local.kueue.checks import cq_checks
from airflow_tfjob.local.kueue.defaults import apply_kueue_defaults
from airflow_tfjob.local.kueue.options import (
    MANAGER_NAMESPACE,
    MULTIKUEUE_CONTROLLER,
    KueueOptions,
    kinds_managed,
)
from airflow_tfjob.local.kueue.reasons import NO_RESERVATION, PENDING, PENDING_EVALUATION, Reasons
from airflow_tfjob.local.kueue.schema import CHECKED_KINDS, kueue_schema
from airflow_tfjob.local.kueue.workloads import (
    FINALIZER,
    JOB_UID_LABEL,
    PODSET_LABEL,
    PREBUILT_KEY,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    condition,
    has_reservation,
    is_true,
    new_workload,
    pods_ready_condition,
    set_condition,
)
from airflow_tfjob.local.kueue.writes import event, write_status
from airflow_tfjob.local.model.resources import RESOURCES, ApiError, JsonDict, clone, invalid
from airflow_tfjob.local.model.selectors import LabelSelector
from airflow_tfjob.local.store.core import Admission, Store

log = logging.getLogger(__name__)


# The release manifests' namespaceSelector of Kueue's job webhooks: their jobs are never even defaulted.
UNMANAGED_NAMESPACES = ("kube-system", MANAGER_NAMESPACE)


class Management:
    """Which jobs Kueue's configuration manages: `without_queue_name` is manageJobsWithoutQueueName,
    `selector` managedJobsNamespaceSelector (a namespace whose labels it does not match has none of its
    jobs reconciled, labelled or not: ReconcileGenericJob's first check), `kinds` the kinds whose
    integration is on (a job owned by one of them is that owner's, not a job of its own)."""

    def __init__(self, without_queue_name: bool = False, selector: LabelSelector | None = None,
                 kinds: Iterable[JobKind] = ()) -> None:
        self.without_queue_name = without_queue_name
        self.selector = selector or KueueOptions().namespace_selector()
        self.kinds = {(k.api_version, k.kind): k for k in kinds}

    @classmethod
    def of(cls, options: KueueOptions) -> Management:
        return cls(options.manage_jobs_without_queue_name, options.namespace_selector(), kinds_managed(options))

    def managed_owner(self, job: JsonDict) -> tuple[JobKind, str] | None:
        """(kind, name) of the job's controller when its kind's integration is on
        (IsOwnerManagedByKueueForObject)."""
        meta = job.get("metadata") or {}
        ref = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
        kind = self.kinds.get((str((ref or {}).get("apiVersion")), str((ref or {}).get("kind"))))
        return None if ref is None or kind is None else (kind, str(ref.get("name", "")))

    def managed_ancestor(self, store: Store | None, job: JsonDict) -> JsonDict | None:
        """FindAncestorJobManagedByKueue: up the controller references through kinds Kueue manages, the
        top-most ancestor with a queue label (any, under manageJobsWithoutQueueName); None for a top-level
        job. An owner that is not there (or another object of its name) ends the walk."""
        found: JsonDict | None = None
        current, seen = job, {str((job.get("metadata") or {}).get("uid"))}
        while store is not None and (owner := self.managed_owner(current)) is not None:
            ref = next(r for r in current["metadata"]["ownerReferences"] if r.get("controller"))
            try:
                parent = store.get(owner[0].plural, current["metadata"].get("namespace"), owner[1])
            except ApiError:
                return found
            uid = str(parent["metadata"].get("uid"))
            if uid != ref.get("uid") or uid in seen:
                return found
            seen.add(uid)
            if self.without_queue_name or queue_name(parent):
                found = parent
            current = parent
        return found

    def namespace_managed(self, store: Store | None, namespace: str) -> bool:
        """The namespace exists and its labels match the selector (a missing one: not managed)."""
        if store is None:
            return False
        try:
            ns = store.get("namespaces", None, namespace)
        except ApiError:
            return False
        return self.selector.matches((ns.get("metadata") or {}).get("labels"))


class KueueWebhook:
    """BaseWebhook.Default in front of the cluster's own admission, on CREATE of a managed kind outside
    the manifests' excluded namespaces: the queue label `default` when the namespace has a LocalQueue of
    that name, the job names none and the namespace is managed
    (ApplyDefaultLocalQueueWithManagedJobsNamespaceSelector), then `runPolicy.suspend = true` for a
    labelled job, or, with manageJobsWithoutQueueName, for any job of a managed namespace
    (ApplyDefaultForSuspend, WorkloadShouldBeSuspended), and whatever else the kind's webhook adds
    (adapters.py); and the Kueue CRDs' defaults and schema checks (schema.py, a 422 as the API server's)
    on every write of their kinds."""

    def __init__(self, inner: Admission | None, kinds: Sequence[JobKind], management: Management | None = None) -> None:
        self.inner = inner
        self.adapters = {k.plural: adapter_for(k) for k in kinds}
        self.management = management or Management()
        self.store: Store | None = None  # set once the store exists (it calls this admission)

    def admit(self, rtype: str, operation: str, obj: JsonDict, old: JsonDict | None) -> None:
        apply_kueue_defaults(rtype, obj)
        check_kueue_object(rtype, obj, old)
        namespace = (obj.get("metadata") or {}).get("namespace")
        if operation == "CREATE" and rtype in self.adapters and namespace not in UNMANAGED_NAMESPACES:
            if self.management.managed_owner(obj) is None:
                self._default_queue(obj, str(namespace))
            suspend = self.management.managed_ancestor(self.store, obj) is None and (bool(queue_name(obj)) or (
                self.management.without_queue_name and self.management.namespace_managed(self.store, str(namespace))))
            self.adapters[rtype].default(obj, suspend)
            self._default_managed_by(self.adapters[rtype], obj, str(namespace))
        if self.inner is not None:
            self.inner.admit(rtype, operation, obj, old)

    def _default_managed_by(self, adapter: Adapter, obj: JsonDict, namespace: str) -> None:
        """ApplyDefaultForManagedBy: a job queued to a ClusterQueue with a MultiKueue admission check is
        managed by MultiKueue (unless it names a controller other than its kind's own), so its own
        controller leaves it to the copy on a worker."""
        queue = queue_name(obj)
        if not queue or self.store is None or adapter.managed_by(obj) not in (None, adapter.own_controller):
            return
        try:
            lq = self.store.get("localqueues", namespace, queue)
            cq = self.store.get("clusterqueues", None, str((lq.get("spec") or {}).get("clusterQueue") or ""))
        except ApiError:
            return
        for name in cq_checks(cq):
            try:
                check = self.store.get("admissionchecks", None, name)
            except ApiError:
                continue  # not served (MultiKueue off) or not there: no check the cache would know
            if (check.get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER:
                adapter.set_managed_by(obj, MULTIKUEUE_CONTROLLER)
                return

    def _default_queue(self, obj: JsonDict, namespace: str) -> None:
        if queue_name(obj) or self.store is None:
            return
        try:
            self.store.get_entry("localqueues", namespace, "default")
        except ApiError:
            return
        if not self.management.namespace_managed(self.store, namespace):
            return
        meta = obj["metadata"]
        labels = meta.get("labels")
        if labels is None:
            labels = meta["labels"] = {}
        if isinstance(labels, dict):
            labels[QUEUE_LABEL] = "default"


def kueue_object_errors(rtype: str, obj: JsonDict, old: JsonDict | None = None) -> list[tuple[str, str, str]]:
    """(field, reason, detail) for every way `obj` (a ResourceFlavor, ClusterQueue, LocalQueue,
    WorkloadPriorityClass or MultiKueue kind, defaults applied; an update of `old` if given) breaks its
    v1beta2 CRD's schema, then, as the API server runs them only on a schema-valid object, its CEL rules
    (celrules.py); [] for other kinds."""
    kind = CHECKED_KINDS.get(rtype)
    if kind is None:
        return []
    return check(obj, kueue_schema(kind), types_from=()).invalid or cel_errors(rtype, obj, old)


def check_kueue_object(rtype: str, obj: JsonDict, old: JsonDict | None = None) -> None:
    """What the API server checks of a Kueue object against its CRD before storing it: 422 Invalid with one
    cause per problem (the file of `--kueue-objects` is checked through this too, options.py)."""
    errors = kueue_object_errors(rtype, obj, old)
    if errors:
        raise invalid(RESOURCES[rtype], str((obj.get("metadata") or {}).get("name") or ""), errors)


def prebuilt_name(job: JsonDict) -> str:
    """PrebuiltWorkloadNameFor: the Workload a job names (annotation, or the older label)."""
    meta = job.get("metadata") or {}
    return str((meta.get("annotations") or {}).get(PREBUILT_KEY) or (meta.get("labels") or {}).get(PREBUILT_KEY) or "")


def queue_name(job: JsonDict) -> str:
    return str(((job.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL) or "")


class JobReconciler:
    """ReconcileGenericJob for one managed kind; `reconcile` is called on job and Workload changes."""

    def __init__(self, store: Store, kind: JobKind, created: Callable[[str], None] = lambda _uid: None,
                 wait_for_pods_ready: bool = True, management: Management | None = None,
                 reasons: Reasons | None = None) -> None:
        self.store = store
        self.reasons = reasons or Reasons()
        self.kind = kind
        self.adapter: Adapter = adapter_for(kind)
        self.created = created  # tells the scheduler the creation order of Workloads
        self.wait_for_pods_ready = wait_for_pods_ready
        self.management = management or Management()

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
        if (not queue and not self.management.without_queue_name) or job["metadata"].get("deletionTimestamp"):
            return True
        if not self.management.namespace_managed(self.store, namespace):
            return True  # "Namespace not opted in for Kueue management"
        if self.management.managed_ancestor(self.store, job) is not None:
            return True  # a child job: its ancestor's Workload is the one (module docstring)
        finished = self.adapter.finished(job)
        wl, outcome = self._ensure_one_workload(job, finished is not None)
        if outcome is not None:
            return outcome
        if finished is not None:
            if wl is not None:
                self._finish(job, wl, finished)
            return True
        if wl is None or wl["metadata"].get("deletionTimestamp"):
            return self._without_workload(job, queue)
        reclaimable = self.adapter.reclaimable_pods(self.store, job)
        if reclaimable is not None and self._update_reclaimable(wl, reclaimable):
            return True  # step 4 wrote the Workload; its change brings the next pass
        if self._sync_spec(job, wl, queue) or self._pods_ready(job, wl):  # step 5, before eviction
            wl = self.workload_of(job) or wl
        if is_true(wl, "Evicted"):
            self._evicted(job, wl)
        elif is_true(wl, "Admitted") and has_reservation(wl):
            if self.adapter.suspended(job):
                self._start(job, wl)
        elif not self.adapter.suspended(job):
            self._stop(job, wl, "Not admitted by cluster queue")
        return True

    # ---- ensureOneWorkload: the one Workload that matches the job

    def owned_workloads(self, job: JsonDict) -> list[JsonDict]:
        """The Workloads the job controls (by owner kind and name, as Kueue's owner index), not being deleted."""
        meta = job["metadata"]
        found, _ = self.store.list("workloads", meta["namespace"])
        return [w for w in found if not w["metadata"].get("deletionTimestamp") and any(
            r.get("controller") and r.get("kind") == self.kind.kind and r.get("name") == meta["name"]
            for r in w["metadata"].get("ownerReferences") or [])]

    def _equivalent(self, job: JsonDict, wl: JsonDict) -> bool:
        """EquivalentToWorkload (ComparePodSetSlices): counts, containers, init containers, and tolerations
        unless the Workload holds quota (then the flavor's were merged into the job)."""
        wanted = self.adapter.pod_sets(self.store, job)
        if wanted is None:
            return True  # its pod sets cannot be computed now (a TrainJob's runtime missing): keep it
        have = (wl.get("spec") or {}).get("podSets") or []
        fields = ("initContainers", "containers") + (() if has_reservation(wl) else ("tolerations",))

        def same(a: JsonDict, b: JsonDict) -> bool:
            one, other = (a.get("template") or {}).get("spec") or {}, (b.get("template") or {}).get("spec") or {}
            return a.get("count", 1) == b.get("count", 1) and all(
                (one.get(f) or None) == (other.get(f) or None) for f in fields)

        return len(wanted) == len(have) and all(same(a, b) for a, b in zip(wanted, have, strict=False))

    def _ensure_one_workload(self, job: JsonDict, finished: bool) -> tuple[JsonDict | None, bool | None]:
        """(the Workload matching the job, None to go on or the reconcile's outcome to stop). Workloads that do not match are
        deleted (a running job stopped first, its templates restored from the one it had), or, for a
        suspended job whose only Workload holds no quota, that Workload is brought in line with it."""
        prebuilt = prebuilt_name(job)
        if prebuilt:
            return self._prebuilt(job, prebuilt)
        owned = self.owned_workloads(job)
        match = next((w for w in owned if self._equivalent(job, w)), None)
        extra = [w for w in owned if w is not match]
        to_update = None
        if match is None and extra and self.adapter.suspended(job) and not has_reservation(extra[0]):
            to_update, extra = extra[0], extra[1:]
        if match is None and extra and not self.adapter.suspended(job) and not finished:
            if len(extra) == 1:
                self._stop(job, extra[0], "No matching Workload; restoring pod templates according to existent Workload")
            else:
                self._stop(job, None, "Missing Workload; unable to restore pod templates")
        deleted = [w for w in extra if self._delete(w)]
        for wl in deleted:
            self._event(job, "DeletedWorkload", f"Deleted not matching Workload: {wl['metadata']['namespace']}/"
                                                f"{wl['metadata']['name']}")
        if deleted:
            return None, True  # the deletions' events bring the job back
        if to_update is not None:
            updated = self._update_to_match(job, to_update)
            return updated, None if updated is not None else False
        return match, None

    def _prebuilt(self, job: JsonDict, name: str) -> tuple[JsonDict | None, bool | None]:
        """ensureOneWorkload for a job that names its Workload (a MultiKueue worker's copy): that Workload,
        made the job's own (controller reference, job-uid label); one controlled by another object is
        not the job's; one that no longer matches the job is finished `OutOfSync`."""
        meta = job["metadata"]
        try:
            wl = self.store.get("workloads", meta["namespace"], name)
        except ApiError:
            return None, None
        controller = next((r for r in wl["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
        if controller is not None and controller.get("uid") != meta["uid"]:
            return None, None
        if controller is None:
            wl["metadata"].setdefault("ownerReferences", []).append({
                "apiVersion": self.kind.api_version, "kind": self.kind.kind, "name": meta["name"],
                "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True})
            wl["metadata"].setdefault("labels", {})[JOB_UID_LABEL] = meta["uid"]
            try:
                wl = self.store.replace("workloads", meta["namespace"], name, wl)
            except ApiError:
                return None, False
        if not self._equivalent(job, wl):
            self._finish(job, wl, ("OutOfSync", "The prebuilt workload is out of sync with its user job"))
            return None, True
        return wl, None

    def _update_to_match(self, job: JsonDict, wl: JsonDict) -> JsonDict | None:
        """updateWorkloadToMatchJob: the spec constructed anew (pod sets, priority), `active` kept."""
        found = self._priority(job)
        if found is None:
            return None
        new = clone(wl)
        sets = self.adapter.pod_sets(self.store, job)
        if sets is None:
            return None
        built = new_workload(self.kind, job, queue_name(job), sets, found[1], found[0])["spec"]
        new["spec"] = {**built, "active": (wl.get("spec") or {}).get("active", True)}
        meta = wl["metadata"]
        try:
            stored = self.store.replace("workloads", meta["namespace"], meta["name"], new)
        except ApiError:
            return None
        self._event(job, "UpdatedWorkload", f"Updated not matching Workload for suspended job: {meta['namespace']}/"
                                            f"{meta['name']}")
        return stored

    def _delete(self, wl: JsonDict) -> bool:
        meta = wl["metadata"]
        try:
            self.store.delete("workloads", meta["namespace"], meta["name"])
        except ApiError:
            return False
        return True

    def _priority(self, job: JsonDict) -> tuple[str, tuple[str, int] | None] | None:
        """ExtractPriority: (class kind, (name, value) or None for priority 0): the priority-class label's
        WorkloadPriorityClass, else the job's PriorityClass (runPolicy.schedulingPolicy.priorityClass or
        the first replica template's priorityClassName), else the globalDefault PriorityClass with the
        lowest value. None while a named class does not exist (no Workload until it does)."""
        wpc_name = (job["metadata"].get("labels") or {}).get(PRIORITY_LABEL)
        if wpc_name:
            return self._named_class("workloadpriorityclasses", "WorkloadPriorityClass", wpc_name)
        pc_name = self.adapter.priority_class(self.store, job)
        if pc_name:
            return self._named_class("priorityclasses", "PriorityClass", pc_name)
        defaults = [pc for pc in self.store.list("priorityclasses")[0] if pc.get("globalDefault") is True]
        if not defaults:
            return "WorkloadPriorityClass", None
        lowest = min(defaults, key=lambda pc: int(pc.get("value", 0)))
        return "PriorityClass", (lowest["metadata"]["name"], int(lowest.get("value", 0)))

    def _named_class(self, rtype: str, class_kind: str, name: str) -> tuple[str, tuple[str, int]] | None:
        try:
            value = self.store.get(rtype, None, name).get("value", 0)
        except ApiError:
            return None
        return class_kind, (name, int(value))

    # ---- the steps

    def _without_workload(self, job: JsonDict, queue: str) -> bool:
        if prebuilt_name(job):
            # handleJobWithNoWorkload: a job naming a Workload that is not there (yet) is held stopped,
            # and looked at again (ErrPrebuiltWorkloadNotFound); it never gets one of its own.
            if not self.adapter.suspended(job):
                self._stop(job, None, "missing workload")
            return False
        if not self.adapter.suspended(job) or self.adapter.active(job):
            # handleJobWithNoWorkload: a running job without a Workload is stopped first.
            if not self.adapter.suspended(job):
                self._stop(job, None, "Missing Workload; unable to restore pod templates")
            return True
        found = self._priority(job)
        if found is None:
            return False  # ExtractPriority fails: no Workload until the class exists
        sets = self.adapter.pod_sets(self.store, job)
        if sets is None:
            return False  # PodSets fails (a TrainJob's runtime not found): retried
        wl = new_workload(self.kind, job, queue, sets, found[1], found[0])
        try:
            created = self.store.create("workloads", job["metadata"]["namespace"], wl)
        except ApiError as exc:
            return exc.code == 409
        self.created(created["metadata"]["uid"])
        self._event(job, "CreatedWorkload", f"Created Workload: {created['metadata']['namespace']}/"
                                            f"{created['metadata']['name']}")
        return True

    def _start(self, job: JsonDict, wl: JsonDict) -> None:
        """startJob / RunWithPodSetsInfo: each pod set's flavors' nodeLabels and tolerations and the podset
        label handed to the job (written while still suspended if the kind wants it so), then unsuspend."""
        admission = (wl.get("status") or {}).get("admission") or {}
        new = clone(job)
        self.adapter.run_with(new, self._pod_sets_info(wl))
        if self.adapter.write_info_suspended and new != job:
            written = self._replace(new)
            if written is None:
                return
            new = clone(written)
        self.adapter.set_suspend(new, False)
        if self._replace(new) is not None:
            self._event(job, "Started", f"Admitted by clusterQueue {admission.get('clusterQueue', '')}")

    def _pod_sets_info(self, wl: JsonDict) -> PodSetsInfo:
        """getPodSetsInfoFromStatus: per pod set of the Workload, in its order, the podset label and the
        admitted flavors' nodeLabels (merged) and tolerations (appended), each flavor once."""
        flavors = {o["metadata"]["name"]: o for o in self.store.list("resourceflavors")[0]}
        admission = (wl.get("status") or {}).get("admission") or {}
        by_podset = {p.get("name"): p for p in admission.get("podSetAssignments") or []}
        infos: PodSetsInfo = {}
        for podset in (wl.get("spec") or {}).get("podSets") or []:
            name = str(podset.get("name", ""))
            info: dict[str, Any] = {"labels": {PODSET_LABEL: name}, "nodeSelector": {}, "tolerations": []}
            for flavor_name in dict.fromkeys(((by_podset.get(name) or {}).get("flavors") or {}).values()):
                flavor = (flavors.get(flavor_name) or {}).get("spec") or {}
                info["nodeSelector"].update(flavor.get("nodeLabels") or {})
                info["tolerations"] += flavor.get("tolerations") or []
            infos[name] = info
        return infos

    def _stop(self, job: JsonDict, wl: JsonDict | None, message: str) -> None:
        """stopJob: suspend and take back what admission added (RestorePodSetsInfo), in one write; a kind
        with a custom Stop is suspended first and restored only once none of its replicas is active."""
        new = clone(job)
        if self.adapter.custom_stop:
            suspended_now = not self.adapter.suspended(job)
            if suspended_now:
                self.adapter.set_suspend(new, True)
                written = self._replace(new)
                if written is None:
                    return
                new = clone(written)
            if self.adapter.active(new):
                return  # "jobs are still active": the job's status change brings the next pass
            before = clone(new)
            self.adapter.restore(new, wl)
            restored = new != before and self._replace(new) is not None
            if suspended_now or restored:
                self._event(job, "Stopped", message)
            return
        self.adapter.set_suspend(new, True)
        self.adapter.restore(new, wl)
        if self._replace(new) is not None:
            self._event(job, "Stopped", message)

    def _evicted(self, job: JsonDict, wl: JsonDict) -> None:
        evicted = condition(wl, "Evicted") or {}
        if not self.adapter.suspended(job) or self.adapter.custom_stop:
            self._stop(job, wl, str(evicted.get("message", "")))
        if not self.adapter.suspended(job) or self.adapter.active(job) or not has_reservation(wl):
            return
        # The job has no active replicas: release the quota, requeue (one status write).
        status = clone(wl.get("status") or {})
        generation = wl["metadata"].get("generation")
        reason, message = str(evicted.get("reason", "")), str(evicted.get("message", ""))
        requeued = "True" if reason in ("Preempted", "NodeFailures") else "False"
        set_condition(status, "Requeued", requeued, reason, message, generation)
        # jobframework reconciler.go: the requeued Workload is PendingEvaluation on 0.20 (Pending before).
        set_condition(status, "QuotaReserved", "False", self.reasons.pick(PENDING_EVALUATION, PENDING), message,
                      generation)
        status.pop("admission", None)
        set_condition(status, "Admitted", "False", *NO_RESERVATION, generation)
        if self.wait_for_pods_ready:
            set_condition(status, "PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded",
                          generation)
        self._write_status(wl, status)

    def _sync_spec(self, job: JsonDict, wl: JsonDict, queue: str) -> bool:
        """A queue label changed while the job waits goes to spec.queueName (QueueNameChange); the
        priority follows its WorkloadPriorityClass (UpdateWorkloadPriority)."""
        spec = clone(wl.get("spec") or {})
        if self.adapter.suspended(job) and not has_reservation(wl):
            if queue:
                spec["queueName"] = queue
            else:
                spec.pop("queueName", None)  # an empty name is omitted (omitempty)
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

    def _update_reclaimable(self, wl: JsonDict, reclaimable: list[JsonDict]) -> bool:
        """Step 4, UpdateReclaimablePods: the job's reclaimable pods, each at most its pod set's count
        (LimitReclaimablePodsToPodSetSizes), written when they differ from the Workload's."""
        sizes = {p.get("name"): int(p.get("count", 1)) for p in (wl.get("spec") or {}).get("podSets") or []}
        limited = [{"name": r["name"], "count": min(r["count"], sizes.get(r["name"], r["count"]))} for r in reclaimable]
        have = {r.get("name"): r.get("count") for r in (wl.get("status") or {}).get("reclaimablePods") or []}
        if {r["name"]: r["count"] for r in limited} == have:
            return False
        status = clone(wl.get("status") or {})
        status["reclaimablePods"] = limited
        return self._write_status(wl, status)

    def _pods_ready(self, job: JsonDict, wl: JsonDict) -> bool:
        """PodsReady (waitForPodsReady, on by default in v0.19): the kind's PodsReady (adapters.py).
        Nothing when waitForPodsReady is off."""
        if not self.wait_for_pods_ready:
            return False
        value, reason, message = pods_ready_condition(wl, self.adapter.pods_ready(self.store, job))
        before = condition(wl, "PodsReady")
        if before is not None and (before.get("status"), before.get("reason")) == (value, reason):
            return False  # HasConditionWithTypeAndReason
        status = clone(wl.get("status") or {})
        set_condition(status, "PodsReady", value, reason, message, wl["metadata"].get("generation"))
        return self._write_status(wl, status)

    def _finish(self, job: JsonDict, wl: JsonDict, finished: tuple[str, str]) -> None:
        if not is_true(wl, "Finished"):
            status = clone(wl.get("status") or {})
            set_condition(status, "Finished", "True", finished[0], finished[1], wl["metadata"].get("generation"))
            if not self._write_status(wl, status):
                return
            ns, name = wl["metadata"]["namespace"], wl["metadata"]["name"]
            self._event(job, "FinishedWorkload", f"Workload '{ns}/{name}' is declared finished")
        remove_finalizer(self.store, wl)

    # ---- store helpers

    def _replace(self, job: JsonDict) -> JsonDict | None:
        meta = job["metadata"]
        try:
            return self.store.replace(self.kind.plural, meta["namespace"], meta["name"], job)
        except ApiError as exc:
            log.debug("kueue: could not update %s %s: %s", self.kind.kind, meta["name"], exc.message)
            return None

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
