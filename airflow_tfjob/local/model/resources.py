"""The local cluster's resource vocabulary: the kinds it serves, the API error shape, and small JSON helpers
shared by the store, the API server, admission and the controller."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from airflow_tfjob.jobs.kinds import GROUP, KINDS, VERSION, JobKind

JsonDict = dict[str, Any]


# --------------------------------------------------------------------------------------------------
# Errors


class ApiError(Exception):
    """An error the API server reports as a Kubernetes Status object."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> JsonDict:
        status: JsonDict = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            status["details"] = self.details
        return status


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


# --------------------------------------------------------------------------------------------------
# Resource types


@dataclass(frozen=True)
class ResourceType:
    plural: str
    singular: str
    kind: str
    group: str
    version: str
    namespaced: bool
    status_subresource: bool
    short_names: tuple[str, ...] = ()
    # Field selector keys the real API server accepts for this type (besides metadata.name/namespace).
    extra_fields: tuple[str, ...] = ()
    # For a job kind's CRD: the replica type its `scale` subresource is about (None: no scale).
    scale_type: str | None = None
    spec_key: str = ""
    # An optional part of the cluster that serves this kind ("kueue"); None: always served.
    feature: str | None = None
    # Versions served besides `version`, which is the storage version (e.g. Kueue's deprecated v1beta1).
    extra_versions: tuple[str, ...] = ()

    @property
    def versions(self) -> tuple[str, ...]:
        return (self.version, *self.extra_versions)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """The name used in error messages: `pods`, `tfjobs.kubeflow.org`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def is_core(self) -> bool:
        """Built-in kinds accept strategic merge patch; custom resources do not."""
        return self.group in CORE_GROUPS


# Groups every cluster serves, whatever `--apis` says (batch/v1 Jobs run Trainer v2's JobSets; PriorityClasses
# give Kueue's Workloads a priority).
CORE_GROUPS = ("", "apps", "batch", "scheduling.k8s.io")
TRAINER_GROUP = "trainer.kubeflow.org"
TRAINER_VERSION = "v1alpha1"
#: Kubeflow Trainer's feature gate for the TrainJob progress status endpoint (off by default, as upstream).
TRAINER_STATUS_GATE = "TrainJobStatus"
JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"
# `tfjob-local serve --apis`: the API families a cluster can serve, by name, and their groups.
API_FAMILIES: dict[str, tuple[str, ...]] = {
    "v1": (GROUP,),  # kubeflow.org/v1: TFJob, PyTorchJob, XGBoostJob, JAXJob, PaddleJob
    "trainjob": (TRAINER_GROUP, JOBSET_GROUP),  # Kubeflow Trainer v2 and the JobSets it runs through
}
DEFAULT_APIS = ("v1", "trainjob")


def served_groups(apis: tuple[str, ...] | list[str]) -> frozenset[str]:
    """The API groups a cluster serving the families `apis` answers for: every group it knows but those of
    the families left out (core groups always; an optional part's, Kueue's, are gated by its feature)."""
    unknown = [a for a in apis if a not in API_FAMILIES]
    if unknown or not apis:
        raise ValueError(f"apis must be a non-empty list of {', '.join(API_FAMILIES)} "
                         f"(e.g. 'trainjob' or 'v1,trainjob'), got {','.join(apis)!r}")
    left_out = {g for family, groups in API_FAMILIES.items() if family not in apis for g in groups}
    return frozenset(r.group for r in RESOURCES.values()) - left_out


_POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)



def _job_resource(kind: JobKind) -> ResourceType:
    """A kubeflow.org/v1 job CRD as training-operator v1.9.4 installs it: status subresource, no short
    names, and a scale subresource on the Worker replicas for the kinds whose CRD has one."""
    return ResourceType(kind.plural, kind.singular, kind.kind, GROUP, VERSION, True, True,
                        scale_type=kind.scale_type, spec_key=kind.spec_key)


KUEUE_GROUP = "kueue.x-k8s.io"
# Kueue v0.19.2's CRDs (docs/reference/kueue-behaviour.md §1): served only with the Kueue emulation on.
_KUEUE_KINDS = (
    ("resourceflavors", "ResourceFlavor", False, ("flavor", "flavors", "rf")),
    ("clusterqueues", "ClusterQueue", False, ("cq",)),
    ("localqueues", "LocalQueue", True, ("queue", "queues", "lq")),
    ("workloadpriorityclasses", "WorkloadPriorityClass", False, ("wpc",)),
    ("workloads", "Workload", True, ("kwl", "kueueworkload", "kueueworkloads")),
)


# Kueue v0.19.2's MultiKueue CRDs: installed by every Kueue release, but served here only when MultiKueue
# is asked for (feature "multikueue"), so that a cluster with Kueue alone answers discovery as before.
# (plural, kind, short names, status subresource): all cluster-scoped; MultiKueueConfig has no status.
_MULTIKUEUE_KINDS = (
    ("admissionchecks", "AdmissionCheck", ("ac",), True),
    ("multikueueconfigs", "MultiKueueConfig", ("mkconf",), False),
    ("multikueueclusters", "MultiKueueCluster", ("mkc",), True),
)


def _kueue_resource(plural: str, kind: str, namespaced: bool, short: tuple[str, ...], status: bool = True,
                    feature: str = "kueue") -> ResourceType:
    return ResourceType(plural, kind.lower(), kind, KUEUE_GROUP, "v1beta2", namespaced, status, short,
                        feature=feature, extra_versions=("v1beta1",))


RESOURCES: dict[str, ResourceType] = {
    r.plural: r
    for r in (
        ResourceType("namespaces", "namespace", "Namespace", "", "v1", False, True, ("ns",), ("status.phase",)),
        ResourceType("pods", "pod", "Pod", "", "v1", True, True, ("po",), _POD_FIELDS),
        ResourceType("services", "service", "Service", "", "v1", True, True, ("svc",)),
        ResourceType("events", "event", "Event", "", "v1", True, False, ("ev",), _EVENT_FIELDS),
        ResourceType("secrets", "secret", "Secret", "", "v1", True, False, (), ("type",)),
        ResourceType("configmaps", "configmap", "ConfigMap", "", "v1", True, False, ("cm",)),
        ResourceType("deployments", "deployment", "Deployment", "apps", "v1", True, True, ("deploy",)),
        ResourceType("jobs", "job", "Job", "batch", "v1", True, True, (), ("status.successful",)),
        ResourceType("priorityclasses", "priorityclass", "PriorityClass", "scheduling.k8s.io", "v1", False, False,
                     ("pc",)),
        *(_job_resource(k) for k in KINDS),
        *(_kueue_resource(*row) for row in _KUEUE_KINDS),
        *(_kueue_resource(plural, kind, False, short, status, "multikueue")
          for plural, kind, short, status in _MULTIKUEUE_KINDS),
        ResourceType("trainjobs", "trainjob", "TrainJob", TRAINER_GROUP, TRAINER_VERSION, True, True),
        ResourceType("trainingruntimes", "trainingruntime", "TrainingRuntime", TRAINER_GROUP, TRAINER_VERSION,
                     True, False),
        ResourceType("clustertrainingruntimes", "clustertrainingruntime", "ClusterTrainingRuntime",
                     TRAINER_GROUP, TRAINER_VERSION, False, False),
        ResourceType("jobsets", "jobset", "JobSet", JOBSET_GROUP, JOBSET_VERSION, True, True),
    )
}
JOB_PLURALS: tuple[str, ...] = tuple(k.plural for k in KINDS)
# The kinds every cluster serves (OpenAPI documents list only these).
BASE_RESOURCES: tuple[ResourceType, ...] = tuple(r for r in RESOURCES.values() if r.feature is None)

INITIAL_NAMESPACES = ("default", "kubeflow", "kube-system", "kube-public")


def resource_type(rtype: str) -> ResourceType:
    info = RESOURCES.get(rtype)
    if info is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    return info


# --------------------------------------------------------------------------------------------------
# Small helpers


def clone(value: Any) -> Any:
    """Deep copy of JSON data; much cheaper than copy.deepcopy for plain dicts and lists."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def json_type(value: Any) -> str:
    """The JSON type of a decoded value, in OpenAPI's words: boolean, integer, number, string, array, object
    or null (a bool is not an integer, though Python's bool is an int). Go's encoding/json names a value it
    cannot unmarshal from these (model/patches.py)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"


def now_rfc3339() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(value: object) -> dt.datetime | None:
    """An RFC 3339 time as the objects carry it ("2026-12-06T10:00:00Z", a fraction or an offset allowed),
    aware; None for no time or one that does not parse (the callers then treat it as absent)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def encode(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def not_found(info: ResourceType, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{info.qualified} "{name}" not found',
        {"name": name, "group": info.group, "kind": info.plural},
    )


def parse_resource_version(value: str | None) -> int | None:
    """None for "" / absent; raises 400 for a value that is not an unsigned integer."""
    if value is None or value == "":
        return None
    try:
        rv = int(value)
    except ValueError:
        rv = -1
    if rv < 0 or not value.isdigit():
        raise bad_request(f'Invalid value: "{value}": resourceVersion must be an unsigned integer')
    return rv


def invalid(info: ResourceType, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid with the API server's message layout: `Kind.group "name" is invalid: field: detail`."""
    errors = [f"{field}: {detail}" for field, _, detail in causes]
    text = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    kind = f"{info.kind}.{info.group}" if info.group else info.kind
    return ApiError(
        422,
        "Invalid",
        f'{kind} "{name}" is invalid: {text}',
        {
            "name": name,
            "group": info.group,
            "kind": info.kind,
            "causes": [
                {"reason": reason, "message": detail, "field": field} for field, reason, detail in causes
            ],
        },
    )
