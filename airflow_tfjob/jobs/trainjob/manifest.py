"""The TrainJob the user asked for, from parameters over an optional base manifest (pure).

Shapes follow trainjob-behaviour.md §1.1 (Trainer v2.3.0): ``spec.runtimeRef`` (name, kind, apiGroup),
``spec.trainer`` (image, command, args, env, numNodes, resourcesPerNode, numProcPerNode),
``spec.initializer.{dataset,model}.storageUri``, ``spec.runtimePatches``, ``suspend``,
``activeDeadlineSeconds``, ``managedBy``. A TrainJob has no ``spec.labels`` in v2.3.0: ``labels`` and
``annotations`` go on the TrainJob's metadata (where Kueue reads its queue label).

Hyperparameters become arguments, ``--key=value`` after ``args``, exactly as on the TFJob path
(``manifest_convert.format_hyperparameters``): a training program reads them the same way on both
APIs, and the runtime's environment stays the runtime's. Env and secret env are the TFJob path's too
(``secret_env`` names are recorded in an annotation so that redaction and the masker know them).
Every problem is raised as a JobValidationError naming the parameter and the fix, before anything
is created (:mod:`airflow_tfjob.jobs.trainjob.validation` checks the result).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from airflow_tfjob.build.checker import JobValidationError
from airflow_tfjob.build.convert import env_entries, format_hyperparameters, split_command, without_flags
from airflow_tfjob.build.params import JobParameters
from airflow_tfjob.build.secrets import with_secret_names
from airflow_tfjob.constants import KUEUE_QUEUE_LABEL
from airflow_tfjob.jobs.kinds import TRAINJOB

RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
#: The runtimePatches manager the provider writes its own patches under.
PATCH_MANAGER = "airflow.apache.org/tfjob-provider"


@dataclass(frozen=True)
class TrainJobParameters:
    """Everything :func:`build_trainjob` takes; None means "not given" (the base or the runtime decides)."""

    name: str | None = None
    namespace: str | None = None
    runtime: str | None = None
    runtime_kind: str | None = None
    image: str | None = None
    command: str | Sequence[Any] | None = None
    args: str | Sequence[Any] | None = None
    hyperparameters: Mapping[str, Any] | None = None
    env: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None
    secret_env: Mapping[str, str] | None = None
    num_nodes: int | None = None
    resources_per_node: Mapping[str, Any] | None = None
    num_proc_per_node: int | None = None
    dataset_storage_uri: str | None = None
    model_storage_uri: str | None = None
    runtime_patches: Sequence[Mapping[str, Any]] | None = None
    suspend: bool | None = None
    active_deadline_seconds: int | None = None
    managed_by: str | None = None
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None
    kueue_queue: str | None = None


PARAMETER_NAMES = tuple(f.name for f in fields(TrainJobParameters))


def _bad(field: str, problem: str, fix: str) -> JobValidationError:
    return JobValidationError(field, problem, fix, kind=TRAINJOB.kind)


def base_trainjob() -> dict[str, Any]:
    return {
        "apiVersion": TRAINJOB.api_version,
        "kind": TRAINJOB.kind,
        "metadata": {},
        "spec": {},
    }


def _env(p: TrainJobParameters) -> list[dict[str, Any]]:
    # The TFJob path's conversion (same forms, same refusal of one name set twice).
    try:
        return env_entries(JobParameters(env=p.env, secret_env=p.secret_env))
    except JobValidationError as exc:
        raise JobValidationError(list(exc.problems), kind=TRAINJOB.kind) from None


def _upsert_env(current: list[Any], entries: list[dict[str, Any]]) -> list[Any]:
    names = {e["name"] for e in entries}
    return [e for e in current if not (isinstance(e, Mapping) and e.get("name") in names)] + entries


def _trainer(spec: dict[str, Any], p: TrainJobParameters) -> None:
    trainer = dict(spec.get("trainer") or {})
    if p.image is not None:
        trainer["image"] = p.image
    if p.command is not None:
        trainer["command"] = split_command(p.command, "command")
    if p.args is not None or p.hyperparameters:
        args = split_command(p.args, "args") if p.args is not None else list(trainer.get("args") or [])
        if p.hyperparameters:
            args = without_flags(args, p.hyperparameters) + format_hyperparameters(p.hyperparameters)
        trainer["args"] = args
    env = _env(p)
    if env:
        trainer["env"] = _upsert_env(list(trainer.get("env") or []), env)
    if p.num_nodes is not None:
        trainer["numNodes"] = p.num_nodes
    if p.resources_per_node is not None:
        trainer["resourcesPerNode"] = dict(p.resources_per_node)
    if p.num_proc_per_node is not None:
        trainer["numProcPerNode"] = p.num_proc_per_node
    if trainer:
        spec["trainer"] = trainer


def _initializer(spec: dict[str, Any], p: TrainJobParameters) -> None:
    for key, uri in (("dataset", p.dataset_storage_uri), ("model", p.model_storage_uri)):
        if uri is not None:
            initializer = spec.setdefault("initializer", {})
            initializer[key] = {**(initializer.get(key) or {}), "storageUri": uri}


def _runtime_ref(spec: dict[str, Any], p: TrainJobParameters) -> None:
    ref = dict(spec.get("runtimeRef") or {})
    if p.runtime is not None:
        ref["name"] = p.runtime
    if p.runtime_kind is not None:
        ref["kind"] = p.runtime_kind
    if ref.get("name"):
        ref.setdefault("kind", RUNTIME_KINDS[0])
        ref.setdefault("apiGroup", TRAINJOB.group)
    if ref:
        spec["runtimeRef"] = ref


def build_trainjob(base: Mapping[str, Any] | None = None, **params: Any) -> dict[str, Any]:
    """The TrainJob manifest: ``base`` (a full TrainJob) with the given parameters applied over it."""
    unknown = sorted(set(params) - set(PARAMETER_NAMES))
    if unknown:
        raise _bad(unknown[0], "is not a TrainJob parameter", f"use one of {', '.join(PARAMETER_NAMES)}")
    p = TrainJobParameters(**params)
    manifest = copy.deepcopy(dict(base)) if base is not None else base_trainjob()
    manifest.setdefault("apiVersion", TRAINJOB.api_version)
    manifest.setdefault("kind", TRAINJOB.kind)
    metadata = manifest.setdefault("metadata", {})
    spec = manifest.setdefault("spec", {})
    if p.name is not None:
        metadata["name"] = p.name
    if p.namespace is not None:
        metadata["namespace"] = p.namespace
    if p.labels:
        metadata["labels"] = {**(metadata.get("labels") or {}), **p.labels}
    if p.kueue_queue:
        # Kueue's TrainJob integration (trainer.kubeflow.org/trainjob) reads the same label as for v1 kinds.
        metadata.setdefault("labels", {})[KUEUE_QUEUE_LABEL] = p.kueue_queue
    annotations = {**(metadata.get("annotations") or {}), **(p.annotations or {})}
    if p.secret_env:
        annotations = with_secret_names(annotations, p.secret_env)
    if annotations:
        metadata["annotations"] = annotations
    _runtime_ref(spec, p)
    _trainer(spec, p)
    _initializer(spec, p)
    if p.runtime_patches is not None:
        spec["runtimePatches"] = [
            {"manager": PATCH_MANAGER, **dict(patch)} if isinstance(patch, Mapping) else patch
            for patch in p.runtime_patches
        ]
    for key, value in (
        ("suspend", p.suspend),
        ("activeDeadlineSeconds", p.active_deadline_seconds),
        ("managedBy", p.managed_by),
    ):
        if value is not None:
            spec[key] = value
    return manifest
