"""Kueue's deprecated v1beta1 next to the v1beta2 storage version (apis/kueue/v1beta1/*_conversion.go):
the few fields that differ are renamed both ways, everything else (conditions, admission, pod sets,
queueName, priority) has the same shape. Conversion never touches the stored object."""

from __future__ import annotations

from airflow_tfjob.local.apiserver.extensions import VersionView
from airflow_tfjob.local.model.resources import KUEUE_GROUP, JsonDict, clone

V1BETA1 = f"{KUEUE_GROUP}/v1beta1"
V1BETA2 = f"{KUEUE_GROUP}/v1beta2"
# The CRDs' deprecationWarning for v1beta1 (config/components/crd/bases/*.yaml).
DEPRECATION = "This version is deprecated. Use v1beta2 instead."
WPC_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
POD_PRIORITY_SOURCE = "scheduling.k8s.io/priorityclass"
_PAST_V1BETA2 = "accumulatedPastExecutionTimeSeconds"
_PAST_V1BETA1 = "accumulatedPastExexcutionTimeSeconds"  # sic: the v1beta1 JSON name


def _rename(obj: JsonDict | None, old: str, new: str) -> None:
    if isinstance(obj, dict) and old in obj:
        obj[new] = obj.pop(old)


def _set_version(obj: JsonDict, api_version: str) -> None:
    if obj.get("apiVersion") in (V1BETA1, V1BETA2):
        obj["apiVersion"] = api_version


def to_v1beta1(stored: JsonDict) -> JsonDict:
    obj = clone(stored)
    _set_version(obj, V1BETA1)
    kind, spec, status = obj.get("kind"), obj.get("spec"), obj.get("status")
    if kind == "Workload" and isinstance(spec, dict):
        ref = spec.pop("priorityClassRef", None)
        if isinstance(ref, dict):
            spec["priorityClassName"] = ref.get("name", "")
            spec["priorityClassSource"] = (WPC_SOURCE if ref.get("kind") == "WorkloadPriorityClass"
                                           else POD_PRIORITY_SOURCE)
        _rename(status, _PAST_V1BETA2, _PAST_V1BETA1)
    elif kind == "ClusterQueue":
        _rename(spec, "cohortName", "cohort")
    elif kind == "MultiKueueCluster" and isinstance(spec, dict):
        # v1beta1 has the cluster source's two fields on the spec itself (multikueue_conversion.go).
        source = spec.pop("clusterSource", None)
        if isinstance(source, dict):
            spec.update({k: source[k] for k in ("kubeConfig", "clusterProfileRef") if k in source})
    elif kind == "MultiKueueConfig" and isinstance(spec, dict):
        spec.pop("quotaManagement", None)  # not in v1beta1
    return obj


def to_v1beta2(sent: JsonDict) -> JsonDict:
    obj = clone(sent)
    _set_version(obj, V1BETA2)
    kind, spec, status = obj.get("kind"), obj.get("spec"), obj.get("status")
    if kind == "Workload" and isinstance(spec, dict):
        name = spec.pop("priorityClassName", None)
        source = spec.pop("priorityClassSource", None)
        if name:
            spec["priorityClassRef"] = (
                {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": name}
                if source == POD_PRIORITY_SOURCE
                else {"group": KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": name})
        _rename(status, _PAST_V1BETA1, _PAST_V1BETA2)
    elif kind == "ClusterQueue":
        _rename(spec, "cohort", "cohortName")
        if isinstance(spec, dict):
            spec.pop("admissionChecks", None)  # v1beta2 has only admissionChecksStrategy
    elif kind == "MultiKueueCluster" and isinstance(spec, dict):
        source = {k: spec.pop(k) for k in ("kubeConfig", "clusterProfileRef") if k in spec}
        if source:
            spec["clusterSource"] = source
    elif kind == "AdmissionCheck" and isinstance(spec, dict):
        spec.pop("retryDelayMinutes", None)  # deprecated since v0.8, gone in v1beta2
    return obj


VIEWS = {V1BETA1: VersionView(to_storage=to_v1beta2, from_storage=to_v1beta1, warning=DEPRECATION)}
