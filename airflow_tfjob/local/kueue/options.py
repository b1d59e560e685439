"""The Kueue emulation's options: which integrations are on (Kueue's framework names), which Kueue
objects to create at start, the WaitForPodsReady timeout. Checked before anything starts, with an
error naming the option and the fix.

Defaults are those of a v0.19.2 install from the release manifests (docs/reference/kueue-behaviour.md
§9.2): Trainer's TrainJob (`trainer.kubeflow.org/trainjob`) is **on**, the kubeflow.org v1 kinds are
**off**, so a queue label on a TFJob is ignored until the integration is named, e.g. ``LocalCluster(kueue={"integrations": ["kubeflow.org/tfjob"]})`` or
``tfjob-local serve --kueue --kueue-integrations kubeflow.org/tfjob``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_tfjob.jobs.kinds import ALL_KINDS, KINDS, JobKind
from airflow_tfjob.local.admission.schemacheck import field_path
from airflow_tfjob.local.model.resources import (
    INITIAL_NAMESPACES,
    KUEUE_GROUP,
    RESOURCES,
    ApiError,
    JsonDict,
    clone,
)
from airflow_tfjob.local.model.selectors import LabelSelector
from airflow_tfjob.local.yamlfile import check_metadata, load_labelled

if TYPE_CHECKING:
    from airflow_tfjob.local.store.core import Store

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
# SetDefaults_Configuration's managedJobsNamespaceSelector: every namespace but kube-system and Kueue's own.
DEFAULT_NAMESPACE_SELECTOR: Mapping[str, Any] = {"matchExpressions": [
    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", MANAGER_NAMESPACE]}]}
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
    namespaces whose jobs Kueue manages (default: all but kube-system and kueue-system)."""

    integrations: tuple[str, ...] = DEFAULT_INTEGRATIONS
    objects: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    pods_ready_timeout: float | None = None
    backoff_base_seconds: float = 60.0
    wait_for_pods_ready: bool = True
    manage_jobs_without_queue_name: bool = False
    managed_jobs_namespace_selector: Mapping[str, Any] | None = None

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
        for name in ("pods_ready_timeout", "backoff_base_seconds"):
            value = getattr(self, name)
            if (value is not None or name == "backoff_base_seconds") and (
                    isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ValueError(f"kueue {name} must be a positive number of seconds, got {value!r}")
        if not isinstance(self.wait_for_pods_ready, bool):
            raise ValueError(f"kueue wait_for_pods_ready must be true or false, got {self.wait_for_pods_ready!r}")
        if not self.wait_for_pods_ready and self.pods_ready_timeout is not None:
            raise ValueError("kueue pods_ready_timeout needs wait_for_pods_ready; leave one of them out")
        if not isinstance(self.manage_jobs_without_queue_name, bool):
            raise ValueError(f"kueue manage_jobs_without_queue_name must be true or false, got "
                             f"{self.manage_jobs_without_queue_name!r}")
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


def load_objects(paths: Iterable[Path]) -> tuple[dict[str, Any], ...]:
    """Kueue objects from YAML files (several documents each, or a List), for `--kueue-objects`: loaded
    with the templates' limits, each checked as the emulation walks it (check_object), then every one
    checked as the API server checks a create (check_as_created). Every problem is said at once, naming
    the file, the document, the object, the field and the fix, but no content; nothing of a file with a
    problem reaches the cluster, which does not start."""
    found: list[tuple[str, Any]] = []
    problems: list[str] = []
    for path in paths:
        for label, doc in load_labelled(Path(path), "--kueue-objects"):
            where = f"--kueue-objects {path} {label}"
            try:
                check_object(doc, where)
            except ValueError as exc:
                problems.append(str(exc))
                continue
            found.append((where, doc))
    problems += check_as_created(found)
    if problems:
        more = f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
        raise ValueError(f"{'; '.join(problems[:5])}{more} ({len(problems)} problem(s): no object is created "
                         "and the cluster does not start)")
    return tuple(doc for _, doc in found)


def create_object(store: Store, obj: Mapping[str, Any]) -> JsonDict:
    """One configured object created as the cluster's start creates it (assembly.py): in its v1beta2 form
    (a v1beta1 object converted as the API server converts it), through the store's create, i.e. the API
    server's decoding, name and namespace checks, then the Kueue webhook's defaults and CRD schema. Raises
    the ApiError a real API server would answer."""
    from airflow_tfjob.local.kueue.convert import to_v1beta2  # the API's version views: aiohttp and all

    body: dict[str, Any] = to_v1beta2(dict(obj))
    body.setdefault("apiVersion", API_VERSIONS[0])
    plural = KUEUE_PLURALS[str(obj.get("kind"))]
    namespaced = RESOURCES[plural].namespaced
    namespace = (body.get("metadata") or {}).get("namespace") if namespaced else None
    return store.create(plural, namespace or ("default" if namespaced else None), body)


def check_as_created(objects: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """Every object (labelled by where it comes from) created in order in a scratch store that holds what
    the start creates first: the problems a real API server (and `kubectl apply`, which sends
    fieldValidation=Strict, so that a misspelt field is an error) would report, each naming the object,
    the field and the fix. The scratch store is thrown away: nothing reaches the cluster."""
    if not objects:
        return []
    from airflow_tfjob.local.admission.schemacheck import check
    from airflow_tfjob.local.kueue.convert import to_v1beta2
    from airflow_tfjob.local.kueue.jobs import KueueWebhook
    from airflow_tfjob.local.kueue.schema import kueue_schema
    from airflow_tfjob.local.store.core import Store

    scratch = Store(admission=KueueWebhook(None, ()))
    scratch.create("namespaces", None, {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": MANAGER_NAMESPACE}})
    problems: list[str] = []
    for where, obj in objects:
        kind = str(obj.get("kind"))
        at = f"{where} ({kind} {(obj.get('metadata') or {}).get('name')})"
        unknown = check(to_v1beta2(dict(obj)), kueue_schema(kind)).unknown
        problems += [f"{at}: {field_path(p)}: unknown field; check its spelling against Kueue's {kind} (v1beta2)"
                     for p in unknown]
        try:
            create_object(scratch, obj)
        except ApiError as exc:
            problems += [f"{at}: {said}" for said in _said(exc)]
    return problems


def _said(error: ApiError) -> list[str]:
    """An API server's refusal as `field: problem; fix` lines, one per cause; a long value it quotes is
    cut (a file's text is not shown beyond what names the problem)."""
    causes = (error.details or {}).get("causes") or []
    if not causes:
        return [f"{_cut(error.message)}; {_FIX_OF_CODE.get(error.code, 'fix the object')}"]
    said = []
    for cause in causes:
        field, reason, message = str(cause.get("field")), str(cause.get("reason")), str(cause.get("message"))
        said.append(f"{field}: {_cut(message)}; {_fix(field, reason, message)}")
    return said


def _cut(message: str) -> str:
    return re.sub(r'"([^"]{32})[^"]{8,}"', r'"\1..."', message)


_FIX_OF_CODE = {
    404: f"create it in a namespace that exists at start ({', '.join((*INITIAL_NAMESPACES, MANAGER_NAMESPACE))})",
    409: "give each object of a kind its own name",
    400: "write the object as its kind's API defines it",
}
_TYPE_WORDS = {"integer": "a whole number", "number": "a number", "string": "a string (quote it)",
               "boolean": "true or false", "object": "a mapping", "array": "a list",
               "integer,string": "a quantity such as 4, 500m or 8Gi"}


def _fix(field: str, reason: str, message: str) -> str:
    """How to mend one cause of a 422, in the user's words."""
    if reason == "FieldValueRequired":
        return f"add {field}"
    if reason == "FieldValueTypeInvalid":
        expected = message.rpartition("must be of type ")[2].partition(":")[0]
        return f"write {field} as {_TYPE_WORDS.get(expected, expected)}"
    if reason == "FieldValueNotSupported":
        return "use one of the supported values"
    if reason in ("FieldValueTooMany", "FieldValueTooLong"):
        return f"make {field} shorter"
    bounds = re.search(r"must be of type int(?:32|64) \((-?\d+) to (-?\d+)\)", message)
    if bounds:
        return f"give {field} a whole number from {bounds[1]} to {bounds[2]}"
    if "should have at least" in message:
        return f"give {field} at least one item"
    if "should match" in message:
        if field.endswith(("Quota", "Limit", "weight")):
            return "give a quantity such as 4, 500m or 8Gi"
        return "use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
    return f"fix {field}"


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
) -> list[dict[str, Any]]:
    """The usual single-queue setup: one ResourceFlavor, one ClusterQueue open to every namespace with
    `quota` (e.g. {"cpu": 2, "memory": "4Gi", "nvidia.com/gpu": 1}) on that flavor, one LocalQueue, and a
    WorkloadPriorityClass per `priorities` entry (name -> value); `preemption` is withinClusterQueue."""
    quota = dict(quota or {"cpu": 4, "memory": "8Gi"})
    group = "kueue.x-k8s.io/v1beta2"
    objects: list[dict[str, Any]] = [
        {"apiVersion": group, "kind": "ResourceFlavor", "metadata": {"name": flavor},
         "spec": {"nodeLabels": dict(node_labels)} if node_labels else {}},
        {"apiVersion": group, "kind": "ClusterQueue", "metadata": {"name": cluster_queue}, "spec": {
            "namespaceSelector": {}, "queueingStrategy": strategy,
            "preemption": {"withinClusterQueue": preemption},
            "resourceGroups": [{"coveredResources": list(quota), "flavors": [{"name": flavor, "resources": [
                {"name": name, "nominalQuota": str(value)} for name, value in quota.items()]}]}]}},
        {"apiVersion": group, "kind": "LocalQueue", "metadata": {"name": local_queue, "namespace": namespace},
         "spec": {"clusterQueue": cluster_queue}},
    ]
    objects += [{"apiVersion": group, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}
                for name, value in (priorities or {}).items()]
    return objects


def kinds_managed(options: KueueOptions) -> Sequence[JobKind]:
    return [k for k in ALL_KINDS if options.manages(k)]
