"""What Kueue's jobframework asks of each integration (its GenericJob implementations), one adapter per job
API, so that the job reconciler and the webhook (jobs.py) never branch on a kind:

- `KubeflowJob` (pkg/controller/jobs/kubeflow/kubeflowjob): the kubeflow.org/v1 kinds. Suspend is
  `spec.runPolicy.suspend`; one pod set per replica type; admission merges the flavors into the replica
  templates and eviction restores them, in the same write as the suspend.
- `TrainJob` (pkg/controller/jobs/trainjob, v0.19.2): Trainer v2's TrainJob. Suspend is `spec.suspend`;
  the webhook appends Kueue's own runtime patch (manager `kueue.x-k8s.io/manager`, empty) to every
  TrainJob it sees created; the pod sets are those of the JobSet the TrainJob's runtime makes (one per
  replicated job, count = replicas x pods per replica); admission writes the flavors into that runtime
  patch as `replicatedJobs` (one write while still suspended, as Trainer's webhook requires, then the
  unsuspend), and eviction (a custom Stop) suspends first and clears the patch's `replicatedJobs` only once
  no Job of the JobSet is active (Trainer refuses patch changes while one is).
- `JobSet` (pkg/controller/jobs/jobset/jobset_controller.go, v0.19.2): a standalone JobSet
  (jobset.x-k8s.io/v1alpha2). Suspend is `spec.suspend`, managedBy `spec.managedBy`; one pod set per
  replicated job (the lower-cased name, count = replicas x pods per replica, the Job's pod template);
  admission merges the flavors into the replicated jobs' pod templates in the write that unsuspends it (the
  JobSet controller carries them into Jobs it already made when it resumes them), eviction restores them
  in the suspending write; it finishes with its Completed or Failed condition.
"""

from __future__ import annotations

from typing import Any

from airflow_tfjob.jobs.kinds import TRAINJOB, JobKind
from airflow_tfjob.local.kueue.workloads import PODSET_LABEL, ordered_replica_types, pod_sets
from airflow_tfjob.local.model.resources import JOBSET_GROUP, ApiError, JsonDict, clone
from airflow_tfjob.local.model.trainerbuild import build_jobset, runtime_plural
from airflow_tfjob.local.store.core import Store

#: A pod set's admission, as PodSetInfo: {"labels", "nodeSelector", "tolerations"} by pod set name.
PodSetsInfo = dict[str, dict[str, Any]]

RUNTIME_PATCH_MANAGER = "kueue.x-k8s.io/manager"



def _condition_true(job: JsonDict, type_: str) -> JsonDict | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == "True":
            return cond
    return None


class KubeflowJob:
    """The kubeflow.org/v1 kinds (KubeflowJob)."""

    #: Stop is suspend-and-restore in one write (no JobWithCustomStop).
    custom_stop = False
    #: RunWithPodSetsInfo's template changes are written together with the unsuspend.
    write_info_suspended = False

    def __init__(self, kind: JobKind) -> None:
        self.kind = kind

    def default(self, job: JsonDict, suspend: bool) -> None:
        """ApplyDefaultForSuspend: a job Kueue manages (labelled, or any under manageJobsWithoutQueueName)
        is created suspended."""
        spec = job.get("spec")
        if suspend and isinstance(spec, dict):
            policy = spec.get("runPolicy")
            if policy is None:
                policy = spec["runPolicy"] = {}
            if isinstance(policy, dict):
                policy["suspend"] = True

    def suspended(self, job: JsonDict) -> bool:
        return ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend") is True

    #: The controller a job of the kind runs under when it names none (KubeflowJobsController).
    own_controller = "kubeflow.org/training-operator"

    def managed_by(self, job: JsonDict) -> str | None:
        value = ((job.get("spec") or {}).get("runPolicy") or {}).get("managedBy")
        return None if value is None else str(value)

    def set_managed_by(self, job: JsonDict, value: str | None) -> None:
        policy = job["spec"].setdefault("runPolicy", {})
        if value is None:
            policy.pop("managedBy", None)
        else:
            policy["managedBy"] = value

    def remote_spec(self, job: JsonDict) -> JsonDict:
        """The spec of the copy MultiKueue creates on a worker (copySpec): the manager's, unchanged."""
        return clone(job.get("spec") or {})

    def set_suspend(self, job: JsonDict, value: bool) -> None:
        job["spec"].setdefault("runPolicy", {})["suspend"] = value

    def active(self, job: JsonDict) -> bool:
        """IsActive: any replicaStatuses.*.active != 0."""
        statuses = (job.get("status") or {}).get("replicaStatuses") or {}
        return any((s or {}).get("active") for s in statuses.values())

    def finished(self, job: JsonDict) -> tuple[str, str] | None:
        """(Workload Finished reason, message) from the Succeeded/Failed condition."""
        for type_ in ("Succeeded", "Failed"):
            cond = _condition_true(job, type_)
            if cond is not None:
                return type_, str(cond.get("message", ""))
        return None

    def pods_ready(self, _store: Store, job: JsonDict) -> bool:
        """PodsReady: the job's Running condition."""
        return _condition_true(job, "Running") is not None

    def pod_sets(self, _store: Store, job: JsonDict) -> list[JsonDict] | None:
        return pod_sets(self.kind, job)

    def reclaimable_pods(self, _store: Store, _job: JsonDict) -> list[JsonDict] | None:
        """None: KubeflowJob does not implement JobWithReclaimablePods."""
        return None

    def priority_class(self, _store: Store, job: JsonDict) -> str:
        """KubeflowJob.PriorityClass: runPolicy.schedulingPolicy.priorityClass, else the first replica
        template's priorityClassName in Chief, Master, PS, Worker, Evaluator order."""
        spec = job.get("spec") or {}
        named = ((spec.get("runPolicy") or {}).get("schedulingPolicy") or {}).get("priorityClass")
        if named:
            return str(named)
        specs = spec.get(self.kind.spec_key) or {}
        for key_, _rtype in ordered_replica_types(self.kind, specs):
            name = (((specs[key_] or {}).get("template") or {}).get("spec") or {}).get("priorityClassName")
            if name:
                return str(name)
        return ""

    def run_with(self, job: JsonDict, infos: PodSetsInfo) -> None:
        """RunWithPodSetsInfo: nodeSelector merged, tolerations appended, the labels added to each template."""
        specs = job["spec"].get(self.kind.spec_key) or {}
        for key_, rtype in ordered_replica_types(self.kind, specs):
            info = infos.get(rtype.lower()) or {"labels": {PODSET_LABEL: rtype.lower()}}
            merge_info(specs[key_].setdefault("template", {}), info)

    def restore(self, job: JsonDict, wl: JsonDict | None) -> None:
        """RestorePodSetsInfo: the templates' nodeSelector, tolerations and labels as the Workload recorded."""
        if wl is None:
            return
        originals = {
            p.get("name"): p.get("template") or {} for p in (wl.get("spec") or {}).get("podSets") or []
        }
        specs = job["spec"].get(self.kind.spec_key) or {}
        for key_, rtype in ordered_replica_types(self.kind, specs):
            original = originals.get(rtype.lower())
            if original is not None:
                restore_template(specs[key_].setdefault("template", {}), original)


def merge_info(template: JsonDict, info: dict[str, Any]) -> None:
    """podset.Merge into a pod template: the labels added, nodeSelector merged, tolerations appended."""
    pod_spec = template.setdefault("spec", {})
    template.setdefault("metadata", {}).setdefault("labels", {}).update(info["labels"])
    if info.get("nodeSelector"):
        pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **info["nodeSelector"]}
    if info.get("tolerations"):
        pod_spec["tolerations"] = [*(pod_spec.get("tolerations") or []), *info["tolerations"]]


def restore_template(template: JsonDict, original: JsonDict) -> None:
    """podset.RestorePodSpec: a pod template's nodeSelector, tolerations and labels as `original` (the
    Workload's pod set template) has them."""
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


class _SpecSuspended:
    """The kinds whose suspend and managedBy are fields of the spec itself (TrainJob, JobSet)."""

    #: The kind's own controller (its managedBy default).
    own_controller = ""
    #: The status list of Job counts IsActive reads, and the condition that means success.
    counts_key = ""
    success_condition = ""

    def __init__(self, kind: JobKind) -> None:
        self.kind = kind

    def suspended(self, job: JsonDict) -> bool:
        return (job.get("spec") or {}).get("suspend") is True

    def set_suspend(self, job: JsonDict, value: bool) -> None:
        job["spec"]["suspend"] = value

    def managed_by(self, job: JsonDict) -> str | None:
        value = (job.get("spec") or {}).get("managedBy")
        return None if value is None else str(value)

    def set_managed_by(self, job: JsonDict, value: str | None) -> None:
        if value is None:
            job["spec"].pop("managedBy", None)
        else:
            job["spec"]["managedBy"] = value

    def active(self, job: JsonDict) -> bool:
        """IsActive: any status.<counts_key>[].active > 0."""
        return any(int((s or {}).get("active") or 0) > 0 for s in (job.get("status") or {}).get(self.counts_key) or [])

    def finished(self, job: JsonDict) -> tuple[str, str] | None:
        """Finished: the success condition True succeeds, Failed=True fails (the condition's message)."""
        for type_, reason in ((self.success_condition, "Succeeded"), ("Failed", "Failed")):
            cond = _condition_true(job, type_)
            if cond is not None:
                return reason, str(cond.get("message", ""))
        return None

    def priority_class(self, store: Store, job: JsonDict) -> str:
        """No PriorityClass of its own (ExtractPriority's extractPriorityFromPodSets): the first pod set
        whose template names one."""
        for podset in self.pod_sets(store, job) or []:
            name = ((podset.get("template") or {}).get("spec") or {}).get("priorityClassName")
            if name:
                return str(name)
        return ""

    def pod_sets(self, store: Store, job: JsonDict) -> list[JsonDict] | None:
        raise NotImplementedError


class TrainJob(_SpecSuspended):
    """Kubeflow Trainer v2's TrainJob (pkg/controller/jobs/trainjob/trainjob_controller.go)."""

    custom_stop = True
    write_info_suspended = True

    def default(self, job: JsonDict, suspend: bool) -> None:
        """TrainJobWebhook.Default: suspend a TrainJob Kueue manages (WorkloadShouldBeSuspended), and append
        Kueue's empty runtime patch to every TrainJob (managed or not), so that admission has a patch of its
        own to write into."""
        spec = job.get("spec")
        if not isinstance(spec, dict):
            return
        if suspend:
            spec["suspend"] = True
        patches = spec.get("runtimePatches")
        if patches is None:
            patches = spec["runtimePatches"] = []
        if isinstance(patches, list):
            patches.append(
                {"manager": RUNTIME_PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}}
            )

    #: TrainJobControllerName, Trainer's own controller; IsActive reads jobsStatus; Complete succeeds.
    own_controller = "trainer.kubeflow.org/trainjob-controller"
    counts_key = "jobsStatus"
    success_condition = "Complete"

    def remote_spec(self, job: JsonDict) -> JsonDict:
        """The worker's copy without Kueue's runtime patch (trainjob_multikueue_adapter.go SyncJob): the
        worker's Kueue adds its own, and writes its admission there."""
        spec = clone(job.get("spec") or {})
        patches = [p for p in spec.get("runtimePatches") or []
                   if not (isinstance(p, dict) and p.get("manager") == RUNTIME_PATCH_MANAGER)]
        if patches:
            spec["runtimePatches"] = patches
        else:
            spec.pop("runtimePatches", None)
        return spec

    def child_jobset(self, store: Store, job: JsonDict) -> JsonDict | None:
        """getChildJobSet: the JobSet the TrainJob's runtime (read now, not Trainer's snapshot) makes, with
        the TrainJob's runtime patches; None when the runtime cannot be read (Kueue retries)."""
        ref = (job.get("spec") or {}).get("runtimeRef") or {}
        plural = runtime_plural(ref)
        if plural is None or not ref.get("name"):
            return None
        namespace = job["metadata"]["namespace"] if plural == "trainingruntimes" else None
        try:
            runtime = store.get(plural, namespace, ref["name"])
        except ApiError:
            return None
        return build_jobset(job, runtime)

    def pods_ready(self, store: Store, job: JsonDict) -> bool:
        """PodsReady: the child JobSet's replicas against the TrainJob's jobsStatus (jobset_pods_ready)."""
        jobset = self.child_jobset(store, job)
        return jobset is not None and jobset_pods_ready(jobset, (job.get("status") or {}).get("jobsStatus") or [])

    def pod_sets(self, store: Store, job: JsonDict) -> list[JsonDict] | None:
        """The JobSet integration's pod sets of the child JobSet (jobset_pod_sets)."""
        jobset = self.child_jobset(store, job)
        return None if jobset is None else jobset_pod_sets(jobset)

    def reclaimable_pods(self, store: Store, job: JsonDict) -> list[JsonDict] | None:
        """TrainJob.ReclaimablePods: the child JobSet's replicated jobs against the TrainJob's
        status.jobsStatus (jobset_reclaimable); None before the TrainJob reports Jobs."""
        statuses = (job.get("status") or {}).get("jobsStatus") or []
        if not statuses:
            return None
        jobset = self.child_jobset(store, job)
        return None if jobset is None else jobset_reclaimable(jobset, statuses)

    @staticmethod
    def _kueue_patch(job: JsonDict) -> JsonDict | None:
        for patch in (job.get("spec") or {}).get("runtimePatches") or []:
            if isinstance(patch, dict) and patch.get("manager") == RUNTIME_PATCH_MANAGER:
                return patch
        return None

    def run_with(self, job: JsonDict, infos: PodSetsInfo) -> None:
        """RunWithPodSetsInfo: Kueue's runtime patch gets one replicatedJobs entry per pod set, with the pod
        labels and the flavors' nodeSelector and tolerations (no patch of Kueue's: nothing is written)."""
        patch = self._kueue_patch(job)
        if patch is None:
            return
        replicated = []
        for name, info in infos.items():
            pod_spec = {k: clone(info[k]) for k in ("nodeSelector", "tolerations") if info.get(k)}
            template: JsonDict = {"metadata": {"labels": dict(info["labels"])}}
            if pod_spec:
                template["spec"] = pod_spec
            replicated.append({"name": name, "template": {"spec": {"template": template}}})
        spec = patch.setdefault("trainingRuntimeSpec", {}).setdefault("template", {}).setdefault("spec", {})
        spec["replicatedJobs"] = replicated

    def restore(self, job: JsonDict, _wl: JsonDict | None) -> None:
        """RestorePodSetsInfo: the patch's replicatedJobs cleared."""
        patch = self._kueue_patch(job)
        if patch is not None:
            ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec", {}).pop(
                "replicatedJobs", None
            )


class JobSet(_SpecSuspended):
    """A standalone JobSet (pkg/controller/jobs/jobset/jobset_controller.go, jobset_multikueue_adapter.go)."""

    #: Stop is suspend-and-restore in one write; the flavors go in with the unsuspend.
    custom_stop = False
    write_info_suspended = False
    #: jobsetapi.JobSetControllerName, the JobSet controller's own; IsActive reads replicatedJobsStatus.
    own_controller = "jobset.sigs.k8s.io/jobset-controller"
    counts_key = "replicatedJobsStatus"
    success_condition = "Completed"

    def default(self, job: JsonDict, suspend: bool) -> None:
        """JobSetWebhook.Default's ApplyDefaultForSuspend: a JobSet Kueue manages is created suspended."""
        spec = job.get("spec")
        if suspend and isinstance(spec, dict):
            spec["suspend"] = True

    def remote_spec(self, job: JsonDict) -> JsonDict:
        """SyncJob's copy: the manager's spec (managedBy cleared by the caller)."""
        return clone(job.get("spec") or {})

    def pods_ready(self, _store: Store, job: JsonDict) -> bool:
        return jobset_pods_ready(job, (job.get("status") or {}).get("replicatedJobsStatus") or [])

    def pod_sets(self, _store: Store, job: JsonDict) -> list[JsonDict] | None:
        return jobset_pod_sets(job)

    def reclaimable_pods(self, _store: Store, job: JsonDict) -> list[JsonDict] | None:
        """ReclaimablePods: None before the JobSet reports replicated jobs (jobset_reclaimable)."""
        statuses = (job.get("status") or {}).get("replicatedJobsStatus") or []
        return jobset_reclaimable(job, statuses) if statuses else None

    @staticmethod
    def _pod_templates(job: JsonDict) -> list[tuple[str, JsonDict]]:
        """(pod set name, pod template) of each replicated job, in the spec's order."""
        found = []
        for rjob in (job.get("spec") or {}).get("replicatedJobs") or []:
            job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
            found.append((str(rjob.get("name", "")).lower(), job_spec.setdefault("template", {})))
        return found

    def run_with(self, job: JsonDict, infos: PodSetsInfo) -> None:
        """RunWithPodSetsInfo: each replicated job's pod template merged with its pod set's info."""
        for name, template in self._pod_templates(job):
            merge_info(template, infos.get(name) or {"labels": {PODSET_LABEL: name}})

    def restore(self, job: JsonDict, wl: JsonDict | None) -> None:
        """RestorePodSetsInfo: the replicated jobs' pod templates as the Workload recorded them, by position;
        nothing when the pod set count differs from the replicated jobs'."""
        originals = [p.get("template") or {} for p in ((wl or {}).get("spec") or {}).get("podSets") or []]
        templates = self._pod_templates(job)
        if wl is None or len(originals) != len(templates):
            return
        for (_name, template), original in zip(templates, originals, strict=True):
            restore_template(template, original)


def jobset_pod_sets(jobset: JsonDict) -> list[JsonDict]:
    """The JobSet integration's PodSets: one per replicated job, the lower-cased name (NewPodSetReference),
    count = replicas x pods per replica, the Job's pod template."""
    sets = []
    for rjob in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        job_spec = (rjob.get("template") or {}).get("spec") or {}
        sets.append({"name": str(rjob.get("name", "")).lower(),
                     "count": int(rjob.get("replicas", 1)) * _pods_per_replica(rjob),
                     "template": clone(job_spec.get("template") or {})})
    return sets


def jobset_pods_ready(jobset: JsonDict, statuses: list[JsonDict]) -> bool:
    """PodsReady: Σ the replicated jobs' replicas equals Σ ready + succeeded over `statuses` (Job counts)."""
    wanted = sum(int(r.get("replicas", 1)) for r in (jobset.get("spec") or {}).get("replicatedJobs") or [])
    got = sum(int((s or {}).get("ready") or 0) + int((s or {}).get("succeeded") or 0) for s in statuses)
    return wanted == got


def jobset_reclaimable(jobset: JsonDict, statuses: list[JsonDict]) -> list[JsonDict]:
    """ReclaimablePods: per replicated job whose status (by name) has 0 < succeeded Jobs <= its replicas,
    succeeded x pods per replica."""
    by_name = {s.get("name"): s for s in statuses if isinstance(s, dict)}
    found = []
    for rjob in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        status = by_name.get(rjob.get("name"))
        succeeded = int((status or {}).get("succeeded") or 0)
        if status is not None and 0 < succeeded <= int(rjob.get("replicas", 1)):
            found.append({"name": str(rjob.get("name", "")).lower(), "count": succeeded * _pods_per_replica(rjob)})
    return found


def _pods_per_replica(rjob: JsonDict) -> int:
    """PodsCountPerReplica: min(parallelism, completions) of a replicated job (parallelism defaults to 1)."""
    job_spec = (rjob.get("template") or {}).get("spec") or {}
    per_replica = int(job_spec.get("parallelism") or 1)
    return min(per_replica, int(job_spec.get("completions") or per_replica))


Adapter = KubeflowJob | TrainJob | JobSet


#: The job APIs with an integration of their own (a standalone JobSet: options.JOBSET, whose api is its group).
_BY_API: dict[str, type[TrainJob] | type[JobSet]] = {TRAINJOB.api: TrainJob, JOBSET_GROUP: JobSet}


def adapter_for(kind: JobKind) -> Adapter:
    """The kind's integration, by the kind's job API: KubeflowJob unless the API has its own."""
    return _BY_API.get(kind.api, KubeflowJob)(kind)
