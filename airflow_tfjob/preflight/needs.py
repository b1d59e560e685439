"""What a job of each API needs besides its own kind, and the fix for each part (data, read by
preflight/checks.py): the install of each API, the runtimes a TrainJob runs on, the JobSet under
Trainer v2, the Role's verbs (read from the shipped airflow_tfjob/rbac/role.yaml).

The one module of the preflight that names an API: the checks look a kind's needs up here by its
row's ``api`` and never compare with an API's name.
"""

# names-job-apis: the table of what each API needs (its install, runtimes, JobSet), looked up by a
# kind row's `api`, names each API once (tests/unit/test_api_blind_core.py).
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

from airflow_tfjob.jobs.kinds import ALL_KINDS, JobKind, kind_named, kind_of
from airflow_tfjob.jobs.trainjob.from_tfjob import runtime_for
from airflow_tfjob.jobs.trainjob.runtimes import load_runtimes

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


@dataclass(frozen=True)
class Target:
    """One job to check: its kind, the runtime a TrainJob runs on, the Kueue LocalQueue it asks for,
    and where it comes from (a DAG's task id, or the command line)."""

    kind: JobKind
    runtime: str | None = None
    runtime_kind: str = "ClusterTrainingRuntime"
    queue: str | None = None
    source: str = ""
    #: MultiKueue's worker cluster name -> the Airflow connection its replicas are read through (the
    #: operator's multikueue_connections over its connection's extra; the CLI's --worker-connection).
    workers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of_manifest(cls, manifest: Mapping[str, Any], source: str = "") -> Target:
        """The target a built manifest is (what an operator submits)."""
        spec = manifest.get("spec") or {}
        ref = spec.get("runtimeRef") or {}
        labels = (manifest.get("metadata") or {}).get("labels") or {}
        return cls(
            kind=kind_of(dict(manifest)),
            runtime=ref.get("name") or None,
            runtime_kind=ref.get("kind") or "ClusterTrainingRuntime",
            queue=labels.get(QUEUE_LABEL) or None,
            source=source,
        )


@dataclass(frozen=True)
class Api:
    """A job API's install: what it is called and how it is installed."""

    name: str
    install: str
    #: (group/version, plural) of the cluster-wide runtimes its jobs run on, if it has any.
    runtimes: tuple[str, str] | None = None
    #: Other APIs its controller needs: (group, plural, name, fix).
    companions: tuple[tuple[str, str, str, str], ...] = ()
    #: Where its install records the release: (namespace, ConfigMap, key).
    version_config: tuple[str, str, str] | None = None
    #: A limit on its runtimes' ReplicatedJob names: (the first release enforcing it, the most characters).
    replicated_job_name_limit: tuple[tuple[int, int], int] | None = None
    #: How its releases are named in a verdict ("Trainer 2.4"); its name where empty.
    release_name: str = ""

    @property
    def releases(self) -> str:
        return self.release_name or self.name


TRAINER_INSTALL = 'kubectl apply --server-side -k "https://github.com/kubeflow/trainer.git/manifests/overlays/manager?ref=v2.3.0"'
TRAINER_RUNTIMES_INSTALL = 'kubectl apply --server-side -k "https://github.com/kubeflow/trainer.git/manifests/overlays/runtimes?ref=v2.3.0"'
#: Where Trainer's install records its version (docs/reference/trainjob-behaviour.md §11).
TRAINER_VERSION_CONFIG = ("kubeflow-system", "kubeflow-trainer-public", "kubeflow_trainer_version")
APIS: dict[str, Api] = {
    "kubeflow.org/v1": Api(
        "Kubeflow training-operator",
        'kubectl apply --server-side -k "github.com/kubeflow/training-operator.git/manifests/overlays/'
        'standalone?ref=v1.9.4"',
    ),
    "trainer.kubeflow.org": Api(
        "Kubeflow Trainer v2",
        TRAINER_INSTALL,
        runtimes=("trainer.kubeflow.org/v1alpha1", "clustertrainingruntimes"),
        companions=(
            (
                "jobset.x-k8s.io",
                "jobsets",
                "JobSet",
                f"install JobSet (Trainer's manifests include it): {TRAINER_INSTALL}",
            ),
        ),
        version_config=TRAINER_VERSION_CONFIG,
        replicated_job_name_limit=((2, 4), 20),
        release_name="Trainer",
    ),
}
#: Trainer v2's API (its release is what a Kueue's TrainJob integration depends on).
TRAINER_API = "trainer.kubeflow.org"
#: The plural of the namespaced runtime kind.
RUNTIME_PLURALS = {"ClusterTrainingRuntime": "clustertrainingruntimes", "TrainingRuntime": "trainingruntimes"}


#: Where the ReplicatedJob name limit comes from. Trainer v2.4.0 refuses a runtime with a ReplicatedJob
#: name over 20 characters (kubeflow/trainer#4394, as issue 38 reads v2.4.0's release notes); not
#: confirmed in the stored sources: the stored kubeflow/trainer ends (2026-08-21) before v2.4.0.
REPLICATED_JOB_NAME_SOURCE = "kubeflow/trainer#4394"


def replicated_job_names(runtime: Mapping[str, Any]) -> list[str]:
    """The ReplicatedJob names of a (Cluster)TrainingRuntime (spec.template.spec.replicatedJobs)."""
    template = ((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}
    return [str(r.get("name")) for r in template.get("replicatedJobs") or () if isinstance(r, Mapping)]


def replicated_job_name_fix(names: list[str], limit: int, runtime: str, runtime_kind: str) -> str:
    """How to make a runtime's ReplicatedJob names fit the limit."""
    plural = RUNTIME_PLURALS.get(runtime_kind, runtime_kind)
    return (
        f"rename {', '.join(names)} to at most {limit} characters in {runtime_kind} {runtime} "
        f"(kubectl edit {plural} {runtime}), and in any TrainJob patch (spec.runtimePatches) that names it"
    )


def api_of(kind: JobKind) -> Api:
    return APIS[kind.api]


def runtime_fix(runtime: str, runtime_kind: str) -> str:
    """How to get a runtime: the provider installs its TensorFlow ones; others are Trainer's or yours."""
    shipped = {r["metadata"]["name"] for r in load_runtimes()}
    if runtime in shipped:
        return "tfjob-runtimes install --kubeconfig FILE (installs the provider's TensorFlow runtimes)"
    return (
        f"install the {runtime_kind} {runtime!r} (Trainer's own runtimes: {TRAINER_RUNTIMES_INSTALL}), "
        f"or name one that exists (kubectl get {RUNTIME_PLURALS.get(runtime_kind, runtime_kind)})"
    )


# -- Kueue ------------------------------------------------------------------------------------------

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_INSTALL = "kubectl apply --server-side -f https://github.com/kubernetes-sigs/kueue/releases/download/v0.19.2/manifests.yaml"
#: The manager's configuration (docs/reference/kueue-behaviour.md §9.2): namespace, ConfigMap, key.
KUEUE_CONFIG = ("kueue-system", "kueue-manager-config", "controller_manager_config.yaml")
#: The AdmissionCheck controller of MultiKueue: a ClusterQueue with such a check runs its jobs on workers.
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
#: Kueue's versions of the queue objects, preferred first.
KUEUE_VERSIONS = ("v1beta2", "v1beta1")
#: What the follow reads on a worker cluster (the replicas' pods, their logs, the job's events) and
#: what a kill's check of the worker's copy reads (the job): (verb, group, resource).
WORKER_GRANTS = (
    ("list", "", "pods"),
    ("watch", "", "pods"),
    ("get", "", "pods/log"),
    ("list", "", "events"),
    ("watch", "", "events"),
)


def frameworks_of(config_map: Mapping[str, Any]) -> list[str] | None:
    """``integrations.frameworks`` of the manager's ConfigMap; None when it names none (Kueue's
    built-in default, batch/job only) or cannot be read."""
    text = (config_map.get("data") or {}).get(KUEUE_CONFIG[2])
    try:
        config = yaml.safe_load(text) if isinstance(text, str) else None
    except yaml.YAMLError:
        return None
    frameworks = (
        ((config or {}).get("integrations") or {}).get("frameworks") if isinstance(config, dict) else None
    )
    return [str(f) for f in frameworks] if isinstance(frameworks, list) else None


#: What Kueue manages without a queue name, by default (apis/config/v1beta2/defaults.go at v0.19.2): every
#: namespace but kube-system and the manager's own.
NAME_LABEL = "kubernetes.io/metadata.name"
#: The LocalQueue Kueue puts a managed job without a queue name in (pkg/controller/constants: "default").
DEFAULT_LOCAL_QUEUE = "default"


@dataclass(frozen=True)
class Unqueued:
    """Kueue's configuration for jobs that name no queue: whether it manages them
    (``manageJobsWithoutQueueName``) and in which namespaces (``managedJobsNamespaceSelector``)."""

    manages: bool
    selector: Mapping[str, Any]

    def selects(self, namespace: str, labels: Mapping[str, Any] | None) -> bool:
        """Whether the selector matches the namespace (its labels, and the name label every namespace has)."""
        have = {**(labels or {}), NAME_LABEL: namespace}
        for key, value in (self.selector.get("matchLabels") or {}).items():
            if have.get(key) != value:
                return False
        for expr in self.selector.get("matchExpressions") or ():
            if not isinstance(expr, Mapping):
                continue
            key, op, values = str(expr.get("key")), expr.get("operator"), set(expr.get("values") or ())
            ok = {"In": have.get(key) in values, "NotIn": key not in have or have[key] not in values,
                  "Exists": key in have, "DoesNotExist": key not in have}.get(str(op), False)
            if not ok:
                return False
        return True


def unqueued_of(config_map: Mapping[str, Any]) -> Unqueued:
    """What the manager's ConfigMap says of jobs without a queue name (Kueue's defaults where it is silent)."""
    text = (config_map.get("data") or {}).get(KUEUE_CONFIG[2])
    try:
        config = yaml.safe_load(text) if isinstance(text, str) else None
    except yaml.YAMLError:
        config = None
    config = config if isinstance(config, dict) else {}
    own = str(config.get("namespace") or KUEUE_CONFIG[0])
    selector = config.get("managedJobsNamespaceSelector")
    if not isinstance(selector, dict):
        selector = {"matchExpressions": [{"key": NAME_LABEL, "operator": "NotIn", "values": ["kube-system", own]}]}
    return Unqueued(config.get("manageJobsWithoutQueueName") is True, selector)


def unqueued_fix(namespace: str) -> str:
    ns, name, _ = KUEUE_CONFIG
    return (
        f"set kueue_queue to a LocalQueue of {namespace}; or create LocalQueue {DEFAULT_LOCAL_QUEUE!r} in "
        f"{namespace} (Kueue puts jobs without a queue name there); or leave {namespace} out of "
        f"managedJobsNamespaceSelector in {ns}/{name}"
    )


#: Why a kind's integration is off on a release install, by API: Kueue 0.19 ships the five kubeflow.org/v1
#: kinds' integrations commented out (kubernetes-sigs/kueue#12606).
OFF_BY_DEFAULT = {"kubeflow.org/v1": "off by default from Kueue 0.19 (kubernetes-sigs/kueue#12606)"}


def integration_fix(kind: JobKind) -> str:
    namespace, name, key = KUEUE_CONFIG
    return (
        f'add "- {kind.kueue_framework}" under integrations.frameworks in {key} of the ConfigMap '
        f"{namespace}/{name}, then restart the manager (kubectl -n {namespace} rollout restart "
        "deployment kueue-controller-manager)"
    )


# -- which releases fit together ---------------------------------------------------------------------

#: Kueue stopped serving kueue.x-k8s.io/v1beta1 in v0.20 (kubernetes-sigs/kueue#14558): what a cluster's
#: discovery tells of its Kueue line without reading the manager's image.
KUEUE_DROPPED_V1BETA1 = "0.20"
#: The Trainer release a Kueue line's TrainJob integration needs, by whether it still serves v1beta1:
#: every line writes spec.runtimePatches, which Trainer has from v2.2 (kubernetes-sigs/kueue#11931, a
#: v2.1 TrainJob is never unsuspended); 0.20 is built and tested against v2.3.0
#: (kubernetes-sigs/kueue#14504).
TRAINER_FLOOR = (2, 2)
TRAINER_FOR_KUEUE_0_20 = (2, 3)


def release_of(text: object) -> tuple[int, int] | None:
    """(major, minor) of a release as an install records it ("2.3.0", "v2.4.1"); None if it is not one."""
    parts = str(text or "").strip().removeprefix("v").split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        return None
    return int(parts[0]), int(parts[1])


def kueue_line(versions: list[str]) -> str:
    """Which Kueue releases serve `versions` of kueue.x-k8s.io."""
    if "v1beta1" in versions:
        return f"Kueue before {KUEUE_DROPPED_V1BETA1} (serves v1beta1)"
    return f"Kueue {KUEUE_DROPPED_V1BETA1} or later (serves {', '.join(versions) or 'no version'}, not v1beta1)"


def trainer_needed(versions: list[str]) -> tuple[tuple[int, int], str]:
    """The oldest Trainer the Kueue serving `versions` admits TrainJobs with, and why."""
    if "v1beta1" in versions:
        return TRAINER_FLOOR, ("its TrainJob integration writes spec.runtimePatches, which Trainer has from "
                               "2.2: an older Trainer's TrainJob is never admitted (kubernetes-sigs/kueue#11931)")
    return TRAINER_FOR_KUEUE_0_20, (f"Kueue {KUEUE_DROPPED_V1BETA1}'s TrainJob integration is built and "
                                    "tested for Trainer 2.3 (kubernetes-sigs/kueue#14504); before 2.2 it "
                                    "cannot admit a TrainJob at all (no spec.runtimePatches)")


# -- the Role ---------------------------------------------------------------------------------------

#: Verbs a job runs without (what needs them is optional), and what needs them.
OPTIONAL_GRANTS: dict[tuple[str, str, str], str] = {
    ("", "pods", "create"): "tensorboard=True",
    ("", "services", "create"): "tensorboard=True",
    ("", "services", "get"): "tensorboard=True",
    ("visibility.kueue.x-k8s.io", "localqueues/pendingworkloads", "get"): "queue positions in the task log",
}
ROLE_FILE = "airflow_tfjob/rbac/role.yaml"
#: The ClusterRole a MultiKueue job's follow needs on the manager (cluster-scoped reads a Role cannot grant).
MULTIKUEUE_ROLE_FILE = "airflow_tfjob/rbac/multikueue-clusterrole.yaml"


@dataclass(frozen=True)
class Grant:
    """One (group, resource, verb) of the provider's Role."""

    group: str
    resource: str
    verb: str

    @property
    def optional_for(self) -> str | None:
        return OPTIONAL_GRANTS.get((self.group, self.resource, self.verb))

    def __str__(self) -> str:
        return f"{self.verb} {self.resource}" + (f".{self.group}" if self.group else "")


def _file_grants(path: str, kind: str) -> tuple[Grant, ...]:
    """Every verb of the ``kind`` (Role, ClusterRole) in the package's file ``path``, in its order."""
    text = resources.files("airflow_tfjob").joinpath(path).read_text()
    role = next(d for d in yaml.safe_load_all(text) if isinstance(d, dict) and d.get("kind") == kind)
    return tuple(
        Grant(group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    )


@cache
def role_grants() -> tuple[Grant, ...]:
    """Every verb of the shipped Role, in its order."""
    return _file_grants("rbac/role.yaml", "Role")


@cache
def multikueue_grants() -> tuple[Grant, ...]:
    """Every verb of the shipped MultiKueue ClusterRole (the manager's cluster-scoped reads), in its order."""
    return _file_grants("rbac/multikueue-clusterrole.yaml", "ClusterRole")


def grants_for(targets: tuple[Target, ...]) -> tuple[Grant, ...]:
    """The Role's verbs the targets use: their kinds' (not every kind's), the core ones, Kueue's when a
    target asks for a queue."""
    plurals = {(t.kind.group, t.kind.plural) for t in targets}
    job_groups = {k.group for k in ALL_KINDS}
    queued = any(t.queue for t in targets)
    out = []
    for grant in role_grants():
        if grant.group in job_groups:
            if (grant.group, grant.resource) in plurals:
                out.append(grant)
        elif grant.group.endswith(KUEUE_GROUP):
            if queued:
                out.append(grant)
        else:
            out.append(grant)
    return tuple(out)


# -- a DAG's operators --------------------------------------------------------------------------------


def target_of_task(task: Any) -> Target | None:
    """The target a provider operator of a loaded DAG is (None for any other task): its kind (the one it
    runs, once ``api="auto"`` is decided), the runtime and queue as written."""
    if not hasattr(task, "parameter_table") or not hasattr(task, "job_kind"):
        return None
    kind: JobKind = task.job_kind
    queue = getattr(task, "kueue_queue", None)
    runtime = getattr(task, "runtime", None)
    runtime_kind = getattr(task, "runtime_kind", None) or "ClusterTrainingRuntime"
    if runtime is None and kind.api in APIS and APIS[kind.api].runtimes and task.kind != kind.kind:
        runtime = _tensorflow_runtime(task)
    given = getattr(task, "multikueue_connections", None)
    workers = tuple((str(w), str(c)) for w, c in given.items()) if isinstance(given, Mapping) else ()
    return Target(
        kind,
        runtime if isinstance(runtime, str) else None,
        runtime_kind,
        queue if isinstance(queue, str) else None,
        task.task_id,
        workers,
    )


def _tensorflow_runtime(task: Any) -> str | None:
    """The shipped TensorFlow runtime a TFJob run as a TrainJob lands on, by its replica types."""
    written = getattr(task, "replicas", None)
    types = set(written) if isinstance(written, Mapping) else set()
    for rtype in kind_named(task.kind).replica_types:
        if getattr(task, rtype.lower(), None):
            types.add(rtype)
    return runtime_for(frozenset(types or {"Worker"}))
