"""The Kueue emulation's options: which integrations are on (Kueue's framework names), which Kueue
objects to create at start, the WaitForPodsReady timeout. Checked before anything starts, with an
error naming the option and the fix.

Defaults are those of a v0.19.2 install from the release manifests (docs/reference/kueue-behaviour.md
§9.2): Trainer's TrainJob (`trainer.kubeflow.org/trainjob`) is **on**, the kubeflow.org v1 kinds are
**off**, so a queue label on a TFJob is ignored until the integration is named, e.g. ``LocalCluster(kueue={"integrations": ["kubeflow.org/tfjob"]})`` or
``tfjob-local serve --kueue --kueue-integrations kubeflow.org/tfjob``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from airflow_tfjob.jobs.kinds import ALL_KINDS, KINDS, TRAINJOB, JobKind
from airflow_tfjob.local.model.resources import (
    JOBSET_GROUP,
    JOBSET_VERSION,
    KUEUE_GROUP,
    RESOURCES,
    ApiError,
    clone,
)
from airflow_tfjob.local.model.selectors import LabelSelector
from airflow_tfjob.local.yamlfile import check_metadata

# Every integration name Kueue v0.19.2 accepts (pkg/config/validation.go validateIntegrations).
FRAMEWORKS = (
    "batch/job", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/raycluster", "ray.io/rayservice",
    "jobset.x-k8s.io/jobset", "workload.codeflare.dev/appwrapper", "trainer.kubeflow.org/trainjob", "pod",
    "deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset", "kubeflow.org/paddlejob",
    "kubeflow.org/pytorchjob", "kubeflow.org/tfjob", "kubeflow.org/xgboostjob", "kubeflow.org/jaxjob",
    "sparkoperator.k8s.io/sparkapplication",
)
# config/components/manager/controller_manager_config.yaml at v0.19.2: the v1 Kubeflow kinds commented out.
DEFAULT_INTEGRATIONS = FRAMEWORKS[:12]
#: Kueue's own namespace, which the start creates before the objects (the manager's ConfigMap is in it;
#: assembly.py).
MANAGER_NAMESPACE = "kueue-system"
#: MultiKueue's controller name, which its AdmissionChecks name, and the key of a worker's kubeconfig in
#: the Secret a MultiKueueCluster names (kueue.MultiKueueControllerName, MultiKueueConfigSecretKey).
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
MULTIKUEUE_SECRET_KEY = "kubeconfig"
# SetDefaults_Configuration's managedJobsNamespaceSelector: every namespace but kube-system and Kueue's own.
DEFAULT_NAMESPACE_SELECTOR: Mapping[str, Any] = {"matchExpressions": [
    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", MANAGER_NAMESPACE]}]}
# A standalone JobSet as a kind Kueue manages (framework `jobset.x-k8s.io/jobset`, integration
# adapters.JobSet), drawn from TrainJob's row (the same JobSet pod labels). Not a kind the provider runs, so
# not in jobs/kinds.py's ALL_KINDS: the row gives the job reconciler and MultiKueue its API names.
JOBSET = replace(TRAINJOB, kind="JobSet", plural="jobsets", singular="jobset", replica_types=(), container="",
                 port=0, controller="jobset-controller", group=JOBSET_GROUP, version=JOBSET_VERSION, api=JOBSET_GROUP)
# What v0.18.x ships: every kind of the local cluster managed.
KUBEFLOW_V1 = tuple(f"kubeflow.org/{k.singular}" for k in KINDS)


@dataclass(frozen=True)
class KueueOptions:
    """`integrations`: Kueue framework names that are on (default: v0.19.2's shipped set, TFJob & co off);
    `objects`: Kueue objects (ResourceFlavor, ClusterQueue, LocalQueue, WorkloadPriorityClass, as dicts in
    v1beta2 form) created when the cluster starts, e.g. from `queue_objects(...)`;
    `pods_ready_timeout`: WaitForPodsReady's timeout in seconds (None: PodsReady conditions only, no
    eviction; a v0.19 install evicts after 1800), and `backoff_base_seconds` its requeue backoff (60);
    `wait_for_pods_ready`: False as with the DisableWaitForPodsReady gate (no PodsReady conditions, no
    timeout; v0.19 has it on);
    `manage_jobs_without_queue_name`: Kueue's manageJobsWithoutQueueName (default false): a job of a
    managed kind without the queue label is suspended and gets a Workload without a queue name too;
    `managed_jobs_namespace_selector`: Kueue's managedJobsNamespaceSelector, a label selector over the
    namespaces whose jobs Kueue manages (default: all but kube-system and kueue-system);
    `multikueue`: serve Kueue's MultiKueue kinds (AdmissionCheck, MultiKueueConfig, MultiKueueCluster;
    default false, so that a cluster with Kueue alone answers as before; docs/local-cluster.md,
    "MultiKueue"), and `multikueue_worker_lost_timeout` Kueue's multiKueue.workerLostTimeout in seconds
    (how long an admitting worker may be unreachable before its Workload is dispatched again; 15 min),
    `multikueue_gc_interval` Kueue's multiKueue.gcInterval in seconds (how often the garbage collector
    removes from the connected workers the copies whose manager Workload is gone; 1 min, 0: never)."""

    integrations: tuple[str, ...] = DEFAULT_INTEGRATIONS
    objects: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    pods_ready_timeout: float | None = None
    backoff_base_seconds: float = 60.0
    wait_for_pods_ready: bool = True
    manage_jobs_without_queue_name: bool = False
    managed_jobs_namespace_selector: Mapping[str, Any] | None = None
    multikueue: bool = False
    multikueue_worker_lost_timeout: float = 900.0
    multikueue_gc_interval: float = 60.0

    def __post_init__(self) -> None:
        if isinstance(self.integrations, str) or not all(isinstance(i, str) for i in self.integrations):
            raise ValueError(f"kueue integrations must be a list of names, e.g. ['kubeflow.org/tfjob'], "
                             f"got {self.integrations!r}")
        unknown = [i for i in self.integrations if i not in FRAMEWORKS]
        if unknown:
            raise ValueError(f"kueue integrations: unsupported value {unknown[0]!r}: supported values: "
                             + ", ".join(f'"{f}"' for f in FRAMEWORKS))
        object.__setattr__(self, "integrations", tuple(self.integrations))
        for i, obj in enumerate(self.objects):
            check_object(obj, f"kueue objects[{i}]")
        object.__setattr__(self, "objects", tuple(self.objects))
        for name in ("pods_ready_timeout", "backoff_base_seconds", "multikueue_worker_lost_timeout"):
            value = getattr(self, name)
            if (value is not None or name != "pods_ready_timeout") and (
                    isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ValueError(f"kueue {name} must be a positive number of seconds, got {value!r}")
        gc = self.multikueue_gc_interval
        if isinstance(gc, bool) or not isinstance(gc, (int, float)) or gc < 0:
            raise ValueError(f"kueue multikueue_gc_interval must be a number of seconds (0: no garbage "
                             f"collection), got {gc!r}")
        if not isinstance(self.wait_for_pods_ready, bool):
            raise ValueError(f"kueue wait_for_pods_ready must be true or false, got {self.wait_for_pods_ready!r}")
        if not self.wait_for_pods_ready and self.pods_ready_timeout is not None:
            raise ValueError("kueue pods_ready_timeout needs wait_for_pods_ready; leave one of them out")
        if not isinstance(self.manage_jobs_without_queue_name, bool):
            raise ValueError(f"kueue manage_jobs_without_queue_name must be true or false, got "
                             f"{self.manage_jobs_without_queue_name!r}")
        if not isinstance(self.multikueue, bool):
            raise ValueError(f"kueue multikueue must be true or false, got {self.multikueue!r}")
        if self.managed_jobs_namespace_selector is not None:
            LabelSelector.from_object(self.managed_jobs_namespace_selector, "kueue managed_jobs_namespace_selector")
            object.__setattr__(self, "managed_jobs_namespace_selector", clone(dict(self.managed_jobs_namespace_selector)))

    def namespace_selector(self) -> LabelSelector:
        """managedJobsNamespaceSelector as requirements (v0.19.2's default when none is given)."""
        given = self.managed_jobs_namespace_selector
        return LabelSelector.from_object(DEFAULT_NAMESPACE_SELECTOR if given is None else given,
                                         "kueue managed_jobs_namespace_selector")

    def manages(self, kind: JobKind) -> bool:
        return kind.kueue_framework in self.integrations

    @classmethod
    def of(cls, value: bool | Mapping[str, Any] | KueueOptions | None) -> KueueOptions | None:
        """LocalCluster's `kueue=` argument: None/False (off), True (defaults), a mapping of the fields
        above, or KueueOptions."""
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, KueueOptions):
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"kueue must be True, a mapping such as {{'integrations': "
                             f"['kubeflow.org/tfjob']}} or KueueOptions, got {value!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"kueue: unknown option {unknown[0]!r}; known: {', '.join(sorted(known))}")
        return cls(**value)


def parse_namespace_selector(value: str) -> dict[str, Any]:
    """`--kueue-managed-jobs-namespace-selector 'kubernetes.io/metadata.name notin (kube-system,team-b)'`
    (kubectl's `-l` syntax) as the LabelSelector Kueue's configuration holds."""
    try:
        parsed = LabelSelector.parse(value)
    except ApiError as exc:
        raise ValueError(f"--kueue-managed-jobs-namespace-selector: {exc.message}; give a label selector, e.g. "
                         "'kubernetes.io/metadata.name notin (kube-system,kueue-system)'") from None
    if parsed is None:
        raise ValueError("--kueue-managed-jobs-namespace-selector: empty; give a label selector, e.g. "
                         "'kubernetes.io/metadata.name notin (kube-system,kueue-system)'")
    return parsed.to_object()


def parse_integrations(value: str) -> tuple[str, ...]:
    """`--kueue-integrations kubeflow.org/tfjob,kubeflow.org/pytorchjob` (Kueue's names, comma-separated)."""
    names = tuple(v.strip() for v in value.split(",") if v.strip())
    unknown = [n for n in names if n not in FRAMEWORKS]
    if unknown:
        raise ValueError(f"--kueue-integrations: unsupported value {unknown[0]!r}: supported values: "
                         + ", ".join(FRAMEWORKS))
    return names


#: The Kueue kinds the emulation creates at start, in the API versions it serves.
OBJECT_KINDS = ("ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass")
KUEUE_PLURALS = {r.kind: r.plural for r in RESOURCES.values() if r.group == KUEUE_GROUP and r.kind in OBJECT_KINDS}
API_VERSIONS = ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1")


def check_object(obj: Any, where: str) -> None:
    """One Kueue object as the emulation's start takes it: a mapping of a known kind and version, metadata
    an API server would accept, a spec that is a mapping, a LocalQueue naming its ClusterQueue. Everything
    else of its shape is its CRD schema's, which every create checks (jobs.check_kueue_object), so that a
    wrong type is one error naming the field, not a crash of the scheduler later."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where} is a YAML {type(obj).__name__}, not a Kueue object; give a mapping with "
                         "apiVersion, kind, metadata and spec")
    kind = obj.get("kind")
    if kind not in OBJECT_KINDS:
        raise ValueError(f"{where}: kind {kind!r} is not one the emulation creates at start; use "
                         f"{', '.join(OBJECT_KINDS)}")
    version = obj.get("apiVersion")
    if version is not None and version not in API_VERSIONS:
        raise ValueError(f"{where} ({kind}): apiVersion {version!r} is not Kueue's; use {API_VERSIONS[0]}")
    name = check_metadata(obj, f"{where} ({kind})")
    at = f"{where} ({kind} {name})"
    spec = obj.get("spec", {})
    if spec is not None and not isinstance(spec, Mapping):
        raise ValueError(f"{at}: spec: must be a mapping, got a {type(spec).__name__}; write spec as a mapping, "
                         "e.g. spec: {...}")
    # The rest of the object's types are its CRD's (schema.py), checked when it is created; this is what
    # Kueue's LocalQueue webhook adds (a queue must name its ClusterQueue) and the emulation relies on.
    queue = (spec or {}).get("clusterQueue")
    if kind == "LocalQueue" and not isinstance(queue, str):
        fix = "add spec.clusterQueue" if queue is None else "write spec.clusterQueue as a string (quote it)"
        raise ValueError(f"{at}: spec.clusterQueue: must name a ClusterQueue; {fix}, e.g. spec: "
                         "{clusterQueue: NAME}")



def queue_objects(
    *,
    cluster_queue: str = "cluster-queue",
    local_queue: str = "user-queue",
    namespace: str = "default",
    quota: Mapping[str, str | int] | None = None,
    flavor: str = "default-flavor",
    strategy: str = "BestEffortFIFO",
    preemption: str = "Never",
    priorities: Mapping[str, int] | None = None,
    node_labels: Mapping[str, str] | None = None,
    admission_checks: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The usual single-queue setup: one ResourceFlavor, one ClusterQueue open to every namespace with
    `quota` (e.g. {"cpu": 2, "memory": "4Gi", "nvidia.com/gpu": 1}) on that flavor, one LocalQueue, and a
    WorkloadPriorityClass per `priorities` entry (name -> value); `preemption` is withinClusterQueue;
    `admission_checks` the AdmissionChecks the ClusterQueue waits for (e.g. ["multikueue"], the check
    a cluster with MultiKueue workers has: it dispatches the queue's jobs to them)."""
    quota = dict(quota or {"cpu": 4, "memory": "8Gi"})
    group = "kueue.x-k8s.io/v1beta2"
    objects: list[dict[str, Any]] = [
        {"apiVersion": group, "kind": "ResourceFlavor", "metadata": {"name": flavor},
         "spec": {"nodeLabels": dict(node_labels)} if node_labels else {}},
        {"apiVersion": group, "kind": "ClusterQueue", "metadata": {"name": cluster_queue}, "spec": {
            "namespaceSelector": {}, "queueingStrategy": strategy,
            "preemption": {"withinClusterQueue": preemption},
            "resourceGroups": [{"coveredResources": list(quota), "flavors": [{"name": flavor, "resources": [
                {"name": name, "nominalQuota": str(value)} for name, value in quota.items()]}]}],
            **({"admissionChecksStrategy": {"admissionChecks": [{"name": c} for c in admission_checks]}}
               if admission_checks else {})}},
        {"apiVersion": group, "kind": "LocalQueue", "metadata": {"name": local_queue, "namespace": namespace},
         "spec": {"clusterQueue": cluster_queue}},
    ]
    objects += [{"apiVersion": group, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}
                for name, value in (priorities or {}).items()]
    return objects


def kinds_managed(options: KueueOptions) -> Sequence[JobKind]:
    """The kinds whose integration is on: the provider's kinds, and a standalone JobSet
    (`jobset.x-k8s.io/jobset`, on in a release install)."""
    return [k for k in (*ALL_KINDS, JOBSET) if options.manages(k)]
