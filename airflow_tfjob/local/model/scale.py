"""The `scale` subresource of the job CRDs that declare one (PyTorchJob, JAXJob, PaddleJob in v1.9.4):
an autoscaling/v1 Scale whose `spec.replicas` is `.spec.<specKey>.Worker.replicas`, `status.replicas` is
`.status.replicaStatuses.Worker.active` and `status.selector` is `.status.replicaStatuses.Worker.selector`,
as the API server serves it for a CRD's `subresources.scale` (what `kubectl scale` and an HPA use)."""

from __future__ import annotations

from typing import Any

from airflow_tfjob.local.model.patches import apply_patch
from airflow_tfjob.local.model.resources import ApiError, JsonDict, ResourceType, bad_request, clone

SCALE_INFO = ResourceType("scale", "scale", "Scale", "autoscaling", "v1", True, False)


def scale_of(info: ResourceType, job: JsonDict) -> JsonDict:
    """The Scale object the API server derives from a job (a missing replicas count reads as 0, as the
    apiextensions server reads an absent specReplicasPath)."""
    assert info.scale_type is not None
    meta = job["metadata"]
    rspec = ((job.get("spec") or {}).get(info.spec_key) or {}).get(info.scale_type) or {}
    rstatus = ((job.get("status") or {}).get("replicaStatuses") or {}).get(info.scale_type) or {}
    status: JsonDict = {"replicas": int(rstatus.get("active", 0))}
    if rstatus.get("selector"):
        status["selector"] = rstatus["selector"]
    scale_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                  if k in meta}
    return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": scale_meta,
            "spec": {"replicas": int(rspec.get("replicas") or 0)}, "status": status}


def scaled_job(info: ResourceType, job: JsonDict, scale: Any) -> JsonDict:
    """The job with the Scale's `spec.replicas` written to its scaled replica type (422 when that type
    is missing, as the API server answers for a CRD whose specReplicasPath does not exist)."""
    assert info.scale_type is not None
    if not isinstance(scale, dict) or not isinstance(scale.get("spec"), dict):
        raise bad_request("the body of the request must be an autoscaling/v1 Scale object")
    replicas = scale["spec"].get("replicas", 0)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise ApiError(422, "Invalid", f'Scale.autoscaling "{job["metadata"]["name"]}" is invalid: '
                       f"spec.replicas: Invalid value: {replicas!r}: must be greater than or equal to 0")
    new = clone(job)
    rspec = ((new.get("spec") or {}).get(info.spec_key) or {}).get(info.scale_type)
    if not isinstance(rspec, dict):
        path = f".spec.{info.spec_key}.{info.scale_type}.replicas"
        raise ApiError(422, "Invalid", f'{info.kind}.{info.group} "{job["metadata"]["name"]}" is invalid: '
                       f"{path}: Required value: field not found in the object")
    rspec["replicas"] = replicas
    return new


def patched_scale(info: ResourceType, job: JsonDict, patch: Any, patch_type: str) -> JsonDict:
    """A merge or JSON patch applied to the job's current Scale."""
    if patch_type == "strategic":
        raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                       "accepted media types include: application/json-patch+json, application/merge-patch+json")
    return apply_patch(SCALE_INFO, scale_of(info, job), patch, patch_type)
