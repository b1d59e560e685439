"""The openAPIV3Schema of the Kueue kinds a user creates (ResourceFlavor, ClusterQueue, LocalQueue,
WorkloadPriorityClass, and with MultiKueue on AdmissionCheck, MultiKueueConfig, MultiKueueCluster), as
Kueue v0.19.2's v1beta2 CRDs declare them.

Why: a real API server checks these objects against their CRD before it stores them (types, required
fields, enums, sizes, name patterns); without the schema the local cluster stored a WorkloadPriorityClass
whose ``value`` was a word, and the scheduler met it later. The Kueue webhook (jobs.py) checks every
create and update of these kinds with this schema through the walk the job kinds use
(admission/schemacheck.py), and a ``--kueue-objects`` file is checked the same way before the cluster
starts (options.py).

Field names, types, ``required`` lists, enums, bounds and patterns are those of
``config/components/crd/bases/kueue.x-k8s.io_*.yaml`` at v0.19.2 (read 2026-12-06); the descriptions are
left out (kubectl explain does not read these kinds from the local cluster). Not modelled: the CRDs' CEL
rules (cross-field checks such as "flavors must have the same number of resources as the
coveredResources"), but for the MultiKueue kinds' three (celrules.py), and Kueue's validating webhooks,
beyond what the emulation checks itself; see
docs/local-cluster.md, "Kueue".
"""

from __future__ import annotations

from functools import cache
from typing import Any

from airflow_tfjob.local.model.resources import JsonDict

#: A DNS-1123 subdomain: names of flavors, queues, cohorts, topologies.
_NAME: JsonDict = {"type": "string", "maxLength": 253,
                   "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"}
#: resource.Quantity: a whole number, or a string such as "4", "500m", "8Gi".
_QUANTITY: JsonDict = {
    "x-kubernetes-int-or-string": True,
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)"
               r"|(\.[0-9]+))))?$",
}
_STRING: JsonDict = {"type": "string"}
_OPEN: JsonDict = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _object(properties: dict[str, Any], *required: str, **extra: Any) -> JsonDict:
    schema: JsonDict = {"type": "object", "properties": properties, **extra}
    if required:
        schema["required"] = list(required)
    return schema


def _array(items: JsonDict, **extra: Any) -> JsonDict:
    return {"type": "array", "items": items, **extra}


def _enum(*values: str) -> JsonDict:
    return {"type": "string", "enum": list(values)}


_STOP_POLICY = _enum("None", "Hold", "HoldAndDrain")
_FAIR_SHARING = _object({"weight": _QUANTITY})
_TAINT = _object({"key": _STRING, "value": _STRING, "effect": _STRING,
                  "timeAdded": {"type": "string", "format": "date-time"}}, "effect", "key")
_TOLERATION = _object({"key": _STRING, "operator": _STRING, "value": _STRING, "effect": _STRING,
                       "tolerationSeconds": {"type": "integer", "format": "int64"}})
_LABEL_SELECTOR = _object({
    "matchExpressions": _array(_object({"key": _STRING, "operator": _STRING, "values": _array(_STRING)},
                                       "key", "operator")),
    "matchLabels": {"type": "object", "additionalProperties": _STRING},
})
_RESOURCE_QUOTA = _object({"name": _STRING, "nominalQuota": _QUANTITY, "borrowingLimit": _QUANTITY,
                           "lendingLimit": _QUANTITY}, "name", "nominalQuota")
_FLAVOR_QUOTAS = _object({"name": _NAME, "resources": _array(_RESOURCE_QUOTA, minItems=1, maxItems=64)},
                         "name", "resources")
_RESOURCE_GROUP = _object({"coveredResources": _array(_STRING, minItems=1, maxItems=64),
                           "flavors": _array(_FLAVOR_QUOTAS, minItems=1, maxItems=64)},
                          "coveredResources", "flavors")

_SPECS: dict[str, JsonDict] = {
    "ResourceFlavor": _object({
        "nodeLabels": {"type": "object", "additionalProperties": _STRING, "maxProperties": 8},
        "nodeTaints": _array(_TAINT, maxItems=8),
        "tolerations": _array(_TOLERATION, maxItems=8),
        "topologyName": _NAME,
    }),
    "ClusterQueue": _object({
        "admissionChecksStrategy": _object({"admissionChecks": _array(_object({
            "name": {"type": "string", "minLength": 1, "maxLength": 316},
            "onFlavors": _array(_NAME, maxItems=64)}, "name"), minItems=1, maxItems=64)}, "admissionChecks"),
        "admissionScope": _object({"admissionMode": _enum("UsageBasedAdmissionFairSharing",
                                                          "NoAdmissionFairSharing")}, "admissionMode"),
        "cohortName": _NAME,
        "concurrentAdmissionPolicy": _object({"migration": _object({
            "constraints": _object({"lastAcceptableFlavorName": _NAME}),
            "mode": {**_enum("TryPreferredFlavors", "RetainFirstAdmission"), "maxLength": 253}}, "mode")},
            "migration"),
        "fairSharing": _FAIR_SHARING,
        "flavorFungibility": _object({"preference": _enum("BorrowingOverPreemption", "PreemptionOverBorrowing"),
                                      "whenCanBorrow": _enum("MayStopSearch", "TryNextFlavor"),
                                      "whenCanPreempt": _enum("MayStopSearch", "TryNextFlavor")}),
        "namespaceSelector": _LABEL_SELECTOR,
        "preemption": _object({
            "borrowWithinCohort": _object({"maxPriorityThreshold": {"type": "integer", "format": "int32"},
                                           "policy": _enum("Never", "LowerPriority")}),
            "reclaimWithinCohort": _enum("Never", "LowerPriority", "Any"),
            "withinClusterQueue": _enum("Never", "LowerPriority", "LowerOrNewerEqualPriority"),
        }),
        "queueingStrategy": _enum("StrictFIFO", "BestEffortFIFO"),
        "resourceGroups": _array(_RESOURCE_GROUP, maxItems=16),
        "stopPolicy": _STOP_POLICY,
    }),
    "LocalQueue": _object({"clusterQueue": _NAME, "fairSharing": _FAIR_SHARING, "stopPolicy": _STOP_POLICY}),
    # The MultiKueue kinds (served with MultiKueue on). Their CEL rules (controllerName immutable, clusters
    # unique, exactly one cluster source) are celrules.py's.
    "AdmissionCheck": _object({
        "controllerName": {"type": "string", "minLength": 1, "maxLength": 253},
        "parameters": _object({
            "apiGroup": {**_NAME, "minLength": 1},
            "kind": {"type": "string", "minLength": 1, "maxLength": 63,
                     "pattern": r"^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$"},
            "name": {"type": "string", "minLength": 1, "maxLength": 63,
                     "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}}, "apiGroup", "kind", "name"),
    }, "controllerName"),
    "MultiKueueConfig": _object({
        "clusters": _array({"type": "string", "maxLength": 256}, minItems=1, maxItems=20),
        "quotaManagement": _enum("Manual", "Automated"),
    }, "clusters"),
    "MultiKueueCluster": _object({"clusterSource": _object({
        "clusterProfileRef": _object({"name": {"type": "string", "minLength": 1, "maxLength": 256}}, "name"),
        "kubeConfig": _object({"location": {"type": "string", "minLength": 1, "maxLength": 256},
                               "locationType": _enum("Secret", "Path")}, "location"),
    })}, "clusterSource"),
}

#: The kinds a `--kueue-objects` file holds, by plural (Workloads are written by the emulation, not checked
#: here).
KINDS_BY_PLURAL = {"resourceflavors": "ResourceFlavor", "clusterqueues": "ClusterQueue",
                   "localqueues": "LocalQueue", "workloadpriorityclasses": "WorkloadPriorityClass"}
#: The MultiKueue kinds (served with MultiKueue on; created over the API only).
MULTIKUEUE_KINDS_BY_PLURAL = {"admissionchecks": "AdmissionCheck", "multikueueconfigs": "MultiKueueConfig",
                              "multikueueclusters": "MultiKueueCluster"}
#: Every kind whose writes are checked against a schema here.
CHECKED_KINDS = {**KINDS_BY_PLURAL, **MULTIKUEUE_KINDS_BY_PLURAL}


@cache
def kueue_schema(kind: str) -> JsonDict:
    """The whole object's schema of `kind` (one of CHECKED_KINDS' values). `metadata` is left open (the
    API server checks it itself) and so is `status` (a create or update of the object ignores it).
    Shared between callers: treat it as read-only."""
    properties: dict[str, Any] = {"apiVersion": _STRING, "kind": _STRING, "metadata": _OPEN, "status": _OPEN}
    if kind == "WorkloadPriorityClass":
        properties |= {"value": {"type": "integer", "format": "int32"},
                       "description": {"type": "string", "maxLength": 2048}}
        return _object(properties, "value")
    return _object({**properties, "spec": _SPECS[kind]})
