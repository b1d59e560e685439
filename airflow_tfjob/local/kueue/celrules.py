"""The CEL rules (``x-kubernetes-validations``) of Kueue v0.19.2's MultiKueue CRDs, checked as the API
server checks them after the schema: without them the local cluster would store a MultiKueueCluster with
both a kubeconfig and a ClusterProfile (or neither), which Kueue's manager would then have to guess about,
and let an AdmissionCheck change the controller it belongs to.

The rules, from ``config/components/crd/bases/kueue.x-k8s.io_{admissionchecks,multikueueconfigs,
multikueueclusters}.yaml`` at v0.19.2: AdmissionCheck ``spec.controllerName`` "field is immutable" (self
== oldSelf), MultiKueueConfig ``spec.clusters`` "must be unique", MultiKueueCluster ``spec.clusterSource``
"exactly one of the fields in [kubeConfig clusterProfileRef] must be set". Each failure is one cause in
the API server's words: ``field: Invalid value: "<openapi type>": <message>``. The other Kueue kinds'
CEL rules are not modelled (schema.py says which).
"""

from __future__ import annotations

from typing import Any

from airflow_tfjob.local.model.resources import JsonDict

INVALID = "FieldValueInvalid"


def _spec(obj: JsonDict | None) -> dict[str, Any]:
    spec = (obj or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


def _failed(field: str, openapi_type: str, message: str) -> tuple[str, str, str]:
    return field, INVALID, f'Invalid value: "{openapi_type}": {message}'


def cel_errors(rtype: str, obj: JsonDict, old: JsonDict | None) -> list[tuple[str, str, str]]:
    """(field, reason, detail) for each CEL rule of `rtype`'s CRD that `obj` (an update of `old`, or a
    create when `old` is None) breaks; [] for kinds without modelled rules. Called after the schema
    check passed, so the fields have their declared types."""
    spec = _spec(obj)
    if rtype == "admissionchecks":
        # A transition rule: only checked on update, and only when both sides have the field.
        if old is not None and "controllerName" in spec and "controllerName" in _spec(old) \
                and spec["controllerName"] != _spec(old)["controllerName"]:
            return [_failed("spec.controllerName", "string", "field is immutable")]
    elif rtype == "multikueueconfigs":
        clusters = spec.get("clusters")
        if isinstance(clusters, list) and len(set(map(str, clusters))) != len(clusters):
            return [_failed("spec.clusters", "array", "must be unique")]
    elif rtype == "multikueueclusters":
        source = spec.get("clusterSource")
        if isinstance(source, dict) and sum(k in source for k in ("kubeConfig", "clusterProfileRef")) != 1:
            return [_failed("spec.clusterSource", "object",
                            "exactly one of the fields in [kubeConfig clusterProfileRef] must be set")]
    return []
