"""Building and checking a job of any kind until the kind-aware builder lands (pure; TEMPORARY).

The kind-aware manifest builder and validator (``manifest.build_job(kind, *, base=None, **arguments)``
and ``validation.validate_job(manifest)``) come from another branch. Until then the operator calls
these two functions, with the same signatures, in one place (``operators/kubeflow.py``): a TFJob goes
through ``build_tfjob``/``validate_tfjob`` unchanged; another kind is built and checked as a TFJob of
the same replica types (the rules the kinds share), then moved under its own kind, spec key and
container name, with its kind-specific fields (``nprocPerNode``, ``elasticPolicy``) set as given.
Delete this module when the switch is made.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from airflow_tfjob.kinds import TFJOB, JobKind, kind_of

_TF_CONTAINER = TFJOB.container
# operator argument -> spec field, for the kinds that have the field
_KIND_FIELDS = {"nproc_per_node": "nprocPerNode", "elastic_policy": "elasticPolicy"}


def _swap(manifest: dict[str, Any], src: JobKind, dst: JobKind) -> dict[str, Any]:
    """The manifest with its kind, spec key and default container name moved from `src` to `dst`."""
    out = copy.deepcopy(manifest)
    out["kind"] = dst.kind
    spec = out.get("spec")
    if isinstance(spec, dict) and src.spec_key in spec:
        specs = spec[dst.spec_key] = spec.pop(src.spec_key)
        for replica in specs.values() if isinstance(specs, dict) else ():
            pod = ((replica or {}).get("template") or {}).get("spec") or {}
            for container in pod.get("containers") or []:
                if isinstance(container, dict) and container.get("name") == src.container:
                    container["name"] = dst.container
    return out


def build_job(kind: JobKind, *, base: Mapping[str, Any] | None = None, **arguments: Any) -> dict[str, Any]:
    from airflow_tfjob.manifest import build_tfjob
    from airflow_tfjob.validation import TFJobValidationError

    extras = {_KIND_FIELDS[k]: arguments.pop(k) for k in list(arguments) if k in _KIND_FIELDS}
    if kind is TFJOB:
        if extras:
            field = next(k for k, v in _KIND_FIELDS.items() if v in extras)
            raise TFJobValidationError(field, "is not a TFJob field", f"leave {field} out for a TFJob")
        return build_tfjob(base=base, **arguments)
    unknown = [name for name in extras if name not in kind.extra_spec_fields]
    if unknown:
        field = next(k for k, v in _KIND_FIELDS.items() if v == unknown[0])
        raise TFJobValidationError(
            field, f"is not a {kind.kind} field", f"leave {field} out for a {kind.kind}"
        )
    as_tf = _swap(dict(base), kind, TFJOB) if base is not None else None
    kept: dict[str, Any] = {}
    if as_tf is not None:
        spec = as_tf.get("spec")
        if isinstance(spec, dict):
            kept = {f: spec.pop(f) for f in kind.extra_spec_fields if f in spec}
    manifest = _swap(build_tfjob(base=as_tf, **arguments), TFJOB, kind)
    manifest.setdefault("spec", {}).update({**kept, **{k: v for k, v in extras.items() if v is not None}})
    return manifest


def validate_job(manifest: dict[str, Any]) -> list[str]:
    from airflow_tfjob.validation import validate_tfjob

    kind = kind_of(manifest)
    if kind is TFJOB:
        return validate_tfjob(manifest)
    as_tf = _swap(manifest, kind, TFJOB)
    for field in kind.extra_spec_fields:
        (as_tf.get("spec") or {}).pop(field, None)
    return validate_tfjob(as_tf)
