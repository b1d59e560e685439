"""The manifest as the provider submits it: the cleanup the user asked for moved into annotations (pure).

A job is submitted with ``cleanPodPolicy: None`` and no ``ttlSecondsAfterFinished``, so that neither the
training-operator nor garbage collection removes a pod before the provider has read its logs; the user's
policy travels in annotations on the job, and ``follow.cleanup`` applies it once the logs are drained.
Both the submission and the cleanup read the intent with :func:`intended_cleanup`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_tfjob.constants import ANNOTATION_INTENDED_CLEAN_POD_POLICY, ANNOTATION_INTENDED_TTL
from airflow_tfjob.jobs.adapter import adapter_of


@dataclass(frozen=True)
class IntendedCleanup:
    """What the user asked the operator to clean up once the job is finished and its logs are read."""

    clean_pod_policy: str = "None"
    ttl_seconds_after_finished: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "clean_pod_policy": self.clean_pod_policy,
            "ttl_seconds_after_finished": self.ttl_seconds_after_finished,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IntendedCleanup:
        return cls(data.get("clean_pod_policy") or "None", data.get("ttl_seconds_after_finished"))


def intended_cleanup(tfjob: Mapping[str, Any]) -> IntendedCleanup:
    """The cleanup intent of a manifest or a live job: our annotations first, then its run policy.

    On a job submitted by :func:`submission_manifest` the run policy says None/no TTL and the
    annotations hold the intent; on any other manifest the run policy is the intent.
    """
    annotations = (tfjob.get("metadata") or {}).get("annotations") or {}
    run_policy = (tfjob.get("spec") or {}).get("runPolicy") or {}
    policy = annotations.get(ANNOTATION_INTENDED_CLEAN_POD_POLICY)
    if policy is None or run_policy.get("cleanPodPolicy") not in (None, "None"):
        policy = run_policy.get("cleanPodPolicy") or "None"
    ttl: Any = annotations.get(ANNOTATION_INTENDED_TTL)
    if run_policy.get("ttlSecondsAfterFinished") is not None:
        ttl = run_policy["ttlSecondsAfterFinished"]
    return IntendedCleanup(str(policy), int(ttl) if ttl not in (None, "") else None)


def submission_manifest(manifest: Mapping[str, Any]) -> tuple[dict[str, Any], IntendedCleanup]:
    """The manifest to submit, and the cleanup the user intended.

    Submitted with ``cleanPodPolicy: None`` and no TTL, so that neither the training-operator nor
    garbage collection deletes pods before the provider has drained their logs; the intent travels in annotations and the provider applies it afterwards.
    """
    intent = intended_cleanup(manifest)
    out = copy.deepcopy(dict(manifest))
    metadata = out.setdefault("metadata", {})
    annotations = dict(metadata.get("annotations") or {})
    annotations[ANNOTATION_INTENDED_CLEAN_POD_POLICY] = intent.clean_pod_policy
    if intent.ttl_seconds_after_finished is not None:
        annotations[ANNOTATION_INTENDED_TTL] = str(intent.ttl_seconds_after_finished)
    else:
        annotations.pop(ANNOTATION_INTENDED_TTL, None)
    metadata["annotations"] = annotations
    spec = out.setdefault("spec", {})
    if not adapter_of(out).holds_pods_by_run_policy():
        return out, intent  # no runPolicy (a TrainJob's): its controller deletes no pod of a finished job
    run_policy = spec.get("runPolicy")
    if not isinstance(run_policy, dict):
        run_policy = spec["runPolicy"] = {}
    run_policy["cleanPodPolicy"] = "None"
    run_policy.pop("ttlSecondsAfterFinished", None)
    return out, intent
