"""The openAPIV3Schema of each kubeflow.org/v1 job kind's CRD, built from the kind table.

All five v1.9.4 CRDs (`manifests/base/crds/kubeflow.org_<plural>.yaml`) share one shape: `spec` with the
kind's replica-spec map (required), `runPolicy` and a few kind-specific fields, and the common `status`.
The pod template is core/v1's `PodTemplateSpec` inlined (generated in coreschema.py), except that its
`metadata` knows only the five fields controller-gen keeps. The descriptions here are written for this
project; field names, types, the `required` list, the `suspend: false` default and the immutable-queue
CEL rule are the CRDs'.

`schema_for` picks the structural schema of any served kind (these, or a core kind's): the one answer
field validation (admission/) and the OpenAPI documents (apiserver/) both read.
"""

from __future__ import annotations

from functools import cache

from airflow_tfjob.jobs.kinds import KINDS, PADDLEJOB, PYTORCHJOB, JobKind
from airflow_tfjob.local.model.coreschema import model_schema
from airflow_tfjob.local.model.resources import JsonDict, ResourceType

QUEUE_IMMUTABLE = "spec.runPolicy.schedulingPolicy.queue is immutable"


def _s(description: str, type_: str, **extra: object) -> JsonDict:
    return {"description": description, "type": type_, **extra}


_INT_OR_STRING: JsonDict = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}

_RUN_POLICY: JsonDict = _s("Policies applied to the job as a whole: cleanup, deadlines, retries, gang scheduling.",
                           "object", properties={
    "cleanPodPolicy": _s("Which pods to delete once the job finished: None (default), Running or All.", "string"),
    "ttlSecondsAfterFinished": _s("Seconds after the job finished before it is deleted.", "integer"),
    "activeDeadlineSeconds": _s("Seconds the job may run before it is failed.", "integer"),
    "backoffLimit": _s("Number of restarts before the job is failed.", "integer"),
    "schedulingPolicy": _s("Gang-scheduling settings (Volcano, scheduler-plugins).", "object", properties={
        "minAvailable": _s("Pods that must be schedulable together.", "integer"),
        "queue": _s("Queue of the gang scheduler.", "string", **{"x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": QUEUE_IMMUTABLE}]}),
        "minResources": _s("Resources the gang needs.", "object", additionalProperties=_INT_OR_STRING),
        "priorityClass": _s("Priority class of the gang.", "string"),
        "scheduleTimeoutSeconds": _s("Seconds to wait for the gang to be scheduled.", "integer"),
    }),
    "suspend": _s("Whether the job's pods are deleted and no new ones created.", "boolean", default=False),
    "managedBy": _s("Controller that runs the job: kubeflow.org/training-operator (default) or "
                    "kueue.x-k8s.io/multikueue. Immutable.", "string"),
})

_ELASTIC_FIELDS: dict[str, JsonDict] = {
    "minReplicas": _s("Lower bound of the number of workers.", "integer"),
    "maxReplicas": _s("Upper bound of the number of workers.", "integer"),
    "maxRestarts": _s("Restarts of the worker group before the job fails.", "integer"),
    "rdzvBackend": _s("Rendezvous backend: c10d (default), etcd or etcd-v2.", "string"),
    "rdzvPort": _s("Port of the rendezvous endpoint.", "integer"),
    "rdzvHost": _s("Host of the rendezvous endpoint (default: worker 0).", "string"),
    "rdzvId": _s("Rendezvous id.", "string"),
    "rdzvConf": _s("Rendezvous configuration, key-value pairs.", "array", items=_s(
        "One rendezvous setting.", "object", properties={"key": {"type": "string"}, "value": {"type": "string"}})),
    "standalone": _s("Whether to run a single-node rendezvous (torchrun --standalone).", "boolean"),
    "nProcPerNode": _s("Deprecated: use spec.nprocPerNode.", "integer"),
}
_ELASTIC_KEYS = {
    PYTORCHJOB.kind: (*_ELASTIC_FIELDS, "metrics"),
    PADDLEJOB.kind: ("minReplicas", "maxReplicas", "maxRestarts", "metrics"),
}


def _elastic_policy(kind: JobKind) -> JsonDict:
    metrics = _s("Metrics for the HorizontalPodAutoscaler that scales the workers.", "array",
                 items=model_schema("V2MetricSpec"))
    properties = {key: metrics if key == "metrics" else _ELASTIC_FIELDS[key] for key in _ELASTIC_KEYS[kind.kind]}
    return _s("Elastic training: worker bounds, rendezvous and autoscaling.", "object", properties=properties)


def _extra_field(kind: JobKind, name: str) -> JsonDict:
    if name == "elasticPolicy":
        return _elastic_policy(kind)
    return {
        "successPolicy": _s('When the job succeeds without a Chief: "" (worker 0 finished) or AllWorkers.',
                            "string"),
        "enableDynamicWorker": _s("Whether workers may join and leave (TF_CONFIG without worker list).",
                                  "boolean"),
        "nprocPerNode": _s('Processes per pod: a number, "auto" (default), "cpu" or "gpu".', "string"),
    }[name]


def _replica_spec(kind: JobKind) -> JsonDict:
    pod_meta = model_schema("V1ObjectMeta")["properties"]
    template_meta = {k: pod_meta[k] for k in ("annotations", "finalizers", "labels", "name", "namespace")}
    template = _s("The pod template of this replica type.", "object", properties={
        "metadata": _s("Labels and annotations of the pods.", "object", properties=template_meta),
        "spec": model_schema("V1PodSpec"),
    })
    types = ", ".join(kind.replica_types)
    return _s(f"One replica type ({types}) of the {kind.kind}.", "object", properties={
        "replicas": _s("Number of pods of this type (default 1).", "integer"),
        "restartPolicy": _s(f"Always, OnFailure, Never or ExitCode (default {kind.restart_policy}).", "string"),
        "template": template,
    })


def _status() -> JsonDict:
    time = {"type": "string", "format": "date-time"}
    condition = _s("One job condition.", "object", required=["status", "type"], properties={
        "type": _s("Created, Running, Restarting, Succeeded, Failed or Suspended.", "string"),
        "status": _s("True, False or Unknown.", "string"),
        "reason": _s("Machine-readable reason of the last transition.", "string"),
        "message": _s("Human-readable message of the last transition.", "string"),
        "lastUpdateTime": time,
        "lastTransitionTime": time,
    })
    replica = _s("Pod counts of one replica type.", "object", properties={
        "active": _s("Running pods.", "integer"),
        "succeeded": _s("Pods that succeeded.", "integer"),
        "failed": _s("Pods that failed.", "integer"),
        "labelSelector": model_schema("V1LabelSelector"),
        "selector": _s("Label selector of the pods, as a string (scale subresource).", "string"),
    })
    return _s("Observed state of the job, written by the operator.", "object", properties={
        "conditions": _s("Conditions, oldest first.", "array", items=condition),
        "replicaStatuses": _s("Pod counts per replica type.", "object", additionalProperties=replica),
        "startTime": time,
        "completionTime": time,
        "lastReconcileTime": time,
    })


@cache
def job_schema(kind: JobKind) -> JsonDict:
    """The CRD's openAPIV3Schema for `kind` (shared; read-only)."""
    spec_properties: JsonDict = {
        kind.spec_key: _s(f"The replica types of the job ({', '.join(kind.replica_types)}).", "object",
                          additionalProperties=_replica_spec(kind)),
        "runPolicy": _RUN_POLICY,
    }
    for name in kind.extra_spec_fields:
        spec_properties[name] = _extra_field(kind, name)
    return _s(f"{kind.kind} runs a distributed training job on {kind.container} replicas.", "object", properties={
        "apiVersion": _s("Versioned schema of this object: kubeflow.org/v1.", "string"),
        "kind": _s(f"The kind: {kind.kind}.", "string"),
        "metadata": model_schema("V1ObjectMeta"),
        "spec": _s(f"Desired state of the {kind.kind}.", "object", required=[kind.spec_key],
                   properties=spec_properties),
        "status": _status(),
    })


_JOB_KINDS = {k.plural: k for k in KINDS}
_MODEL_NAMES = {"Event": "CoreV1Event"}  # the client's name when it is not V1<Kind>
_OPEN_OBJECT: JsonDict = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def schema_for(info: ResourceType) -> JsonDict:
    """The structural schema of a served kind (shared; read-only)."""
    kind = _JOB_KINDS.get(info.plural)
    if kind is not None and info.group == "kubeflow.org":
        return job_schema(kind)
    if "." in info.group:  # Trainer v2 and JobSet: checked by admission/trainjobs.py, not by a schema here
        return _OPEN_OBJECT
    return model_schema(_MODEL_NAMES.get(info.kind, f"V1{info.kind}"))
