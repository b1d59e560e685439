"""Per-replica-type placement (``replica_placement``): where one type's pods may run (pure).

Masters and workers often belong on different nodes (a CPU pool for a PyTorch master or a TF
parameter server, a GPU pool for the workers), which the job-wide ``node_selector`` and
``tolerations`` cannot say. Each type's entry is applied after the job-wide values: node selector
keys override, tolerations are added, and an affinity replaces the pod's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_tfjob.build.checker import DNS1123_SUBDOMAIN_RE
from airflow_tfjob.build.convert import bad
from airflow_tfjob.build.pod_validation import PRIORITY_CLASS_FIX

# Friendly key -> the pod spec's field; the camelCase field names are accepted as they are.
_FIELDS = {
    "node_selector": "nodeSelector",
    "tolerations": "tolerations",
    "affinity": "affinity",
    "priority_class": "priorityClassName",
    "scheduler_name": "schedulerName",
}
_ACCEPTED = {**_FIELDS, **{v: v for v in _FIELDS.values()}, "priority_class_name": "priorityClassName"}
EXAMPLE = "replica_placement={'worker': {'node_selector': {'pool': 'gpu'}, 'tolerations': [...]}}"


def placement_patch(value: Any, field_path: str) -> dict[str, Any]:
    """One type's entry -> the pod spec fields it sets, or a validation error naming the key and fix."""
    if not isinstance(value, Mapping):
        raise bad(field_path, f"is a {type(value).__name__}, not a mapping", f"pass e.g. {EXAMPLE}")
    patch: dict[str, Any] = {}
    for key, item in value.items():
        target = _ACCEPTED.get(str(key))
        where = f"{field_path}.{key}"
        if target is None:
            known = ", ".join(_FIELDS)
            raise bad(where, "is not a placement setting", f"use one of {known}")
        if target == "nodeSelector":
            if not isinstance(item, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in item.items()
            ):
                raise bad(where, "must map label keys to string values", "pass e.g. {'pool': 'gpu'}")
            patch[target] = dict(item)
        elif target == "tolerations":
            if not isinstance(item, (list, tuple)) or not all(isinstance(t, Mapping) for t in item):
                raise bad(
                    where,
                    "must be a list of toleration dicts",
                    "pass e.g. [{'key': 'gpu', 'operator': 'Exists'}]",
                )
            patch[target] = [dict(t) for t in item]
        elif target == "affinity":
            if not isinstance(item, Mapping):
                raise bad(where, "must be an Affinity dict", "pass e.g. {'nodeAffinity': {...}}")
            patch[target] = dict(item)
        else:
            if not isinstance(item, str) or not item:
                raise bad(where, "must be a non-empty string", f"pass the name, e.g. {key}='high'")
            if target == "priorityClassName" and (len(item) > 253 or not DNS1123_SUBDOMAIN_RE.match(item)):
                raise bad(where, f"{item[:80]!r} is not a PriorityClass name", PRIORITY_CLASS_FIX)
            patch[target] = item
    return patch


def apply_placement(pod: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """Apply one type's placement over the job-wide values already in ``pod``."""
    for target, item in patch.items():
        if target == "nodeSelector":
            pod[target] = {**(pod.get(target) or {}), **item}
        elif target == "tolerations":
            existing = list(pod.get(target) or [])
            pod[target] = existing + [t for t in item if t not in existing]
        else:
            pod[target] = item
