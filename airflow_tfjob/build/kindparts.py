"""The parts of building a manifest that differ between job kinds (pure).

:func:`airflow_tfjob.build.manifest.build_job` reads everything kind-specific through here and the kind
table (:mod:`airflow_tfjob.jobs.kinds`): which replica types a parameter may name, how the replica keys of
a base manifest are read, which container the parameters configure, and the spec fields only some
kinds have (TFJob's ``successPolicy``/``enableDynamicWorker``, PyTorchJob's ``nprocPerNode``,
PyTorchJob's and PaddleJob's ``elasticPolicy``). A parameter a kind cannot honour is refused naming
the parameter and what the kind has instead, never dropped.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_tfjob.build.checker import JobValidationError, Problem
from airflow_tfjob.build.convert import bad, canonical_replica_specs, deep_merge
from airflow_tfjob.build.kind_rules import article, replica_key_problem, types_phrase
from airflow_tfjob.jobs.kinds import KINDS, JobKind

# The friendly (snake_case) names of each kind's elasticPolicy fields; camelCase is accepted too.
_PYTORCH_ELASTIC = {
    "min_replicas": "minReplicas",
    "max_replicas": "maxReplicas",
    "rdzv_backend": "rdzvBackend",
    "rdzv_host": "rdzvHost",
    "rdzv_port": "rdzvPort",
    "rdzv_id": "rdzvId",
    "rdzv_conf": "rdzvConf",
    "standalone": "standalone",
    "max_restarts": "maxRestarts",
    "n_proc_per_node": "nProcPerNode",  # deprecated by the operator: nproc_per_node= instead
    "metrics": "metrics",
}
_PADDLE_ELASTIC = {
    k: v
    for k, v in _PYTORCH_ELASTIC.items()
    if k in ("min_replicas", "max_replicas", "max_restarts", "metrics")
}
# By kind, as validation_kinds.KIND_RULES (the kinds whose spec has an elasticPolicy).
_ELASTIC_FIELDS = {"PyTorchJob": _PYTORCH_ELASTIC, "PaddleJob": _PADDLE_ELASTIC}
# Parameters that set a spec field only some kinds have: parameter -> (spec field, example).
_KIND_FIELDS = {
    "success_policy": ("successPolicy", "success_policy='AllWorkers'"),
    "enable_dynamic_worker": ("enableDynamicWorker", "enable_dynamic_worker=True"),
    "nproc_per_node": ("nprocPerNode", "nproc_per_node=4"),
    "elastic_policy": ("elasticPolicy", "elastic_policy={'min_replicas': 1, 'max_replicas': 4}"),
}


def no_such_type(kind: JobKind, field: str, rtype: str) -> Problem:
    """``ps: a PyTorchJob has no PS replicas; its replica types are Master and Worker``."""
    owners = [k.kind for k in KINDS if rtype in k.replica_types]
    elsewhere = f" ({', '.join(owners)} {'has' if len(owners) == 1 else 'have'} them)" if owners else ""
    return Problem(
        field,
        f"{article(kind.kind)} {kind.kind} has no {rtype} replicas; its replica types are {types_phrase(kind)}",
        f"remove {field}, or run the job as a kind that has {rtype} replicas{elsewhere}",
    )


def any_kind_type(key: str) -> str | None:
    """The canonical spelling of a replica type some v1 kind has (any case): a key that is a replica
    type, only not of the kind at hand, is refused as such rather than as a typo."""
    for kind in KINDS:
        name = kind.canonical_type(key)
        if name is not None:
            return name
    return None


def kind_type(kind: JobKind, key: Any, field: str) -> str:
    """The canonical replica type of ``kind`` that a parameter's key names (any case)."""
    name = kind.canonical_type(key) if isinstance(key, str) else None
    if name is not None:
        return name
    other = any_kind_type(key) if isinstance(key, str) else None
    if other is not None:
        raise JobValidationError([no_such_type(kind, field, other)], kind=kind.kind)
    lowered = [t.lower() for t in kind.replica_types]
    close = difflib.get_close_matches(str(key).lower(), lowered, n=1, cutoff=0.5)
    hint = f"did you mean {kind.canonical_type(close[0])!r}? " if close else ""
    raise JobValidationError(
        field, f"{key!r} is not {article(kind.kind)} {kind.kind} replica type", f"{hint}use one of {list(kind.replica_types)}",
        kind.kind,
    )  # fmt: skip


def replica_counts(kind: JobKind, value: Mapping[str, Any] | None, param: str = "replicas") -> dict[str, Any]:
    """``replicas={"worker": 2}`` by canonical type; any type of the kind may be named."""
    out: dict[str, Any] = {}
    for key, item in (value or {}).items():
        name = kind_type(kind, key, f"{param}.{key}")
        if name in out:
            raise bad(f"{param}.{key}", f"{name} is given twice", "name each replica type once")
        out[name] = item
    return out


def check_shortcuts(kind: JobKind, shortcuts: Mapping[str, Any]) -> None:
    """The operator's ``chief=``/``master=``/``ps=``/``worker=``/``evaluator=``: types the kind has."""
    problems = []
    for name in shortcuts:
        rtype = any_kind_type(name)
        if rtype is not None and kind.canonical_type(name) is None:
            problems.append(no_such_type(kind, name, rtype))
    if problems:
        raise JobValidationError(problems, kind=kind.kind)


def default_replicas(kind: JobKind) -> dict[str, int]:
    """The layout of a job given no replicas at all: one of the type the kind cannot do without
    (XGBoostJob's Master), else one Worker."""
    return {(kind.required_types or ("Worker",))[0]: 1}


def canonical_specs(kind: JobKind, specs: Mapping[str, Any]) -> dict[str, Any]:
    """A base manifest's replica specs by canonical type.

    TFJob keys are renamed (its operator does the same); the other kinds' webhooks refuse a key in
    another case, so such a key is refused here too, with the rename as the fix. Keys that name no
    type at all are kept for validation to report with the rest.
    """
    path = f"spec.{kind.spec_key}"
    if not kind.exact_case_keys:
        return canonical_replica_specs(specs, path)
    problems = []
    for key in specs:
        found = replica_key_problem(kind, key)
        if found is not None and kind.canonical_type(key) is not None:
            problems.append(Problem(f"{path}.{key}", *found))
    if problems:
        raise JobValidationError(problems, kind=kind.kind)
    return dict(specs)


def main_container(replica_spec: Mapping[str, Any], kind: JobKind) -> dict[str, Any] | None:
    """The first container named like the kind's default container: the one the parameters set."""
    containers = ((replica_spec.get("template") or {}).get("spec") or {}).get("containers") or []
    for container in containers:
        if isinstance(container, dict) and container.get("name") == kind.container:
            return container
    return None


def base_kind(base: Mapping[str, Any], kind: JobKind) -> None:
    """Refuse a base manifest written for another kind (its replica specs would be ignored)."""
    written = base.get("kind")
    if written is None or str(written).lower() == kind.kind.lower():
        return  # the kind itself, perhaps spelt in another case: validation names the spelling
    raise JobValidationError(
        "kind",
        f"the base manifest is {article(str(written))} {written!r}, but a {kind.kind} is being built",
        f"set kind: {kind.kind} in the manifest (and spec.{kind.spec_key}), or build the job as {written!r}",
        kind.kind,
    )


def apply_kind_fields(spec: dict[str, Any], kind: JobKind, values: Mapping[str, Any]) -> None:
    """Set the kind-specific spec fields from their parameters (``values``: parameter -> value)."""
    problems = []
    for param, value in values.items():
        if value is None:
            continue
        field, example = _KIND_FIELDS[param]
        if field not in kind.extra_spec_fields:
            owners = [k.kind for k in KINDS if field in k.extra_spec_fields]
            problems.append(
                Problem(
                    param,
                    f"sets spec.{field}, which {article(kind.kind)} {kind.kind} does not have "
                    f"(only {' and '.join(owners)})",
                    f"remove {param}, or run the job as {' or '.join(owners)} ({example})",
                )
            )
            continue
        if param == "nproc_per_node":
            spec[field] = nproc_value(value)
        elif param == "elastic_policy":
            current = spec.get(field)
            spec[field] = deep_merge(
                current if isinstance(current, Mapping) else {}, elastic_policy(kind, value)
            )
        else:
            spec[field] = value
    if problems:
        raise JobValidationError(problems, kind=kind.kind)


def nproc_value(value: int | str) -> str:
    """``nproc_per_node``: an int or a torchrun word; the CRD's ``nprocPerNode`` is a string."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise bad(
            "nproc_per_node",
            f"{value!r} is not a number of processes",
            "pass e.g. nproc_per_node=4 or 'auto'",
        )
    if isinstance(value, int) and value < 1:
        raise bad("nproc_per_node", f"is {value}: no process would run", "use 1 or more processes per pod")
    return str(value)


def elastic_policy(kind: JobKind, value: Mapping[str, Any]) -> dict[str, Any]:
    """``elastic_policy`` (snake_case or camelCase keys) as the kind's spec.elasticPolicy."""
    names = _ELASTIC_FIELDS[kind.kind]
    accepted = {**names, **{v: v for v in names.values()}}
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key not in accepted:
            close = difflib.get_close_matches(str(key), list(names), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise bad(
                f"elastic_policy.{key}",
                f"is not a field of {article(kind.kind)} {kind.kind}'s elastic policy",
                f"{hint}use one of {sorted(names)}",
            )
        field = accepted[key]
        if field in out:
            raise bad(f"elastic_policy.{key}", f"{field} is given twice", "give each field once")
        out[field] = _rdzv_conf(item) if field == "rdzvConf" else item
    return out


def _rdzv_conf(value: Any) -> Any:
    """``{"timeout": 900}`` -> ``[{"key": "timeout", "value": "900"}]`` (the CRD's list of strings)."""
    if not isinstance(value, Mapping):
        return value  # a list of {key, value} already; validation checks its entries
    out = []
    for key, item in value.items():
        text = ("true" if item else "false") if isinstance(item, bool) else str(item)
        out.append({"key": str(key), "value": text})
    return out


def known_types(kind: JobKind, specs: Sequence[str]) -> list[str]:
    """The job's replica types that are the kind's (keys naming no type are left to validation)."""
    return [t for t in specs if kind.canonical_type(t) == t]
