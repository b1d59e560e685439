"""A kubeflow.org/v1 job manifest (TFJob, PyTorchJob, XGBoostJob, JAXJob, PaddleJob) from operator
parameters, from a template, or from both.

Pure (no API calls): the operator module imports this when the task runs. The parameters are
:class:`JobParameters` (:mod:`airflow_tfjob.build.params`); the converters of single parameters
and the merge rules are in :mod:`airflow_tfjob.build.convert`, what differs between kinds in
:mod:`airflow_tfjob.build.kindparts`; :func:`load_manifest` (re-exported) is in
:mod:`airflow_tfjob.build.templates`, beside the template rules it shares with the operator; the cleanup
intent (:func:`submission_manifest`, re-exported) is in :mod:`airflow_tfjob.follow.cleanup`.

How the pieces combine (:func:`build_job`; :func:`build_tfjob` is ``build_job(TFJOB, ...)``):

1. ``base`` (a full manifest, e.g. from :func:`load_manifest`) is deep-copied; a base written for
   another kind is refused. A TFJob's replica keys are put in canonical case (``worker`` ->
   ``Worker``), as its operator does; the other kinds' webhooks refuse a key in another case, so
   the builder refuses it too.
2. The replica types are those of ``base`` plus those named in ``replicas``; with neither, a single
   ``Worker`` (an XGBoostJob's ``Master``). A type named only in ``replicas`` starts as a copy of the
   base's Worker template (else Chief, Master, or the first one), so image, env and volumes carry
   over. A type the kind has not (``ps`` for a PyTorchJob) is refused naming the kind's types. A
   Master the kind allows only once (PyTorchJob, XGBoostJob) gets ``replicas: 1`` written when the
   base leaves it out, because their webhooks check the object before defaults apply.
3. Every explicit parameter then overrides the base: pod-level ones (volumes, node selector, ...) on
   every replica's pod template, container-level ones (image, command, env, resources, ...) on the
   kind's training container only (``tensorflow``, ``pytorch``, ``xgboost``, ``jax``, ``paddle``;
   sidecars are left alone). Mappings merge by key, env vars, ports, volumes and mounts by name;
   lists of arguments replace.
4. Kind-specific fields: ``success_policy``/``enable_dynamic_worker`` (TFJob), ``nproc_per_node``
   (PyTorchJob), ``elastic_policy`` (PyTorchJob, PaddleJob); another kind refuses them.

Per-type variants: ``images``, ``replica_resources`` and ``restart_policy`` (when a mapping) take
replica types as keys, in any case; naming a type the job does not have is an error. Neither the
restartPolicy nor the port is written when not asked for: the operator defaults them per kind.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping
from typing import Any

from airflow_tfjob.build.checker import JobValidationError
from airflow_tfjob.build.convert import (
    bad,
    canonical_replica_specs,
    deep_merge,
    env_entries,
    env_from_entries,
    format_hyperparameters,
    merge_named,
    merge_resources,
    ports,
    resource_patch,
    split_command,
    tensorflow_container,
    volumes_and_mounts,
    without_flags,
)
from airflow_tfjob.build.kindparts import (
    apply_kind_fields,
    base_kind,
    canonical_specs,
    default_replicas,
    kind_type,
    main_container,
    replica_counts,
)
from airflow_tfjob.build.params import PARAMETER_NAMES, JobParameters
from airflow_tfjob.build.paramtypes import check_types
from airflow_tfjob.build.placement import apply_placement, placement_patch
from airflow_tfjob.build.secrets import REDACTED, redact, secret_env_names, with_secret_names
from airflow_tfjob.build.shape import shape_problems
from airflow_tfjob.build.submission import IntendedCleanup, intended_cleanup, submission_manifest
from airflow_tfjob.build.templates import TEMPLATE_EXTENSIONS, load_manifest  # noqa: F401 (re-exported)
from airflow_tfjob.constants import GPU_RESOURCE, KUEUE_QUEUE_LABEL
from airflow_tfjob.jobs.kinds import API_VERSION, TFJOB, JobKind, kind_named

# Replica types that get the job-wide `gpus`: a parameter server only holds variables.
GPU_EXCLUDED_TYPES = ("PS",)
_PROTOTYPE_ORDER = ("Worker", "Chief", "Master")
_SCHEDULING_KEYS = {
    "queue": "queue",
    "min_available": "minAvailable",
    "minAvailable": "minAvailable",
    "priority_class": "priorityClass",
    "priorityClass": "priorityClass",
    "min_resources": "minResources",
    "minResources": "minResources",
    "schedule_timeout_seconds": "scheduleTimeoutSeconds",
    "scheduleTimeoutSeconds": "scheduleTimeoutSeconds",
}


# --------------------------------------------------------------------------- build


def build_job(
    kind: JobKind | str,
    name: str | None = None,
    namespace: str | None = None,
    *,
    base: Mapping[str, Any] | None = None,
    generate_name: str | None = None,
    params: JobParameters | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """A manifest of ``kind`` (a :class:`~airflow_tfjob.jobs.kinds.JobKind` or its name): ``base``
    (optional full manifest) overridden by explicit parameters.

    Parameters are those of :class:`JobParameters`, given either as ``params=`` or as keywords
    (an unknown keyword raises TypeError). Raises :class:`JobValidationError` for parameters that
    cannot be turned into a manifest of that kind (e.g. ``pvc="data"`` without a mount path, ``ps``
    replicas for a PyTorchJob); whether the result is acceptable is
    :func:`airflow_tfjob.build.validation.validate_job`'s job.
    """
    kind = kind if isinstance(kind, JobKind) else kind_named(kind)
    if params is not None and kwargs:
        raise TypeError("pass either params= or keyword parameters, not both")
    p = params if params is not None else JobParameters(**kwargs)
    try:
        return _build(kind, name, namespace, base, generate_name, p)
    except JobValidationError as error:
        if error.kind == kind.kind:
            raise
        # The converters are kind-blind: their problems are this kind's.
        raise JobValidationError(list(error.problems), kind=kind.kind) from None


def _build(
    kind: JobKind,
    name: str | None,
    namespace: str | None,
    base: Mapping[str, Any] | None,
    generate_name: str | None,
    p: JobParameters,
) -> dict[str, Any]:
    check_types({f: getattr(p, f) for f in PARAMETER_NAMES})
    if base is not None and not isinstance(base, Mapping):
        raise bad(
            "tfjob", f"is a {type(base).__name__}, not a {kind.kind} mapping", "pass a dict or YAML text"
        )
    manifest: dict[str, Any] = copy.deepcopy(dict(base)) if base else {}
    base_kind(manifest, kind)
    problems = shape_problems(manifest, kind.spec_key)
    if problems:
        raise JobValidationError(problems, kind=kind.kind)
    manifest.setdefault("apiVersion", API_VERSION)
    manifest.setdefault("kind", kind.kind)
    metadata = manifest.get("metadata")
    if not isinstance(metadata, dict):
        metadata = manifest["metadata"] = {}
    if name is not None:
        metadata["name"] = name
    if generate_name is not None:
        metadata["generateName"] = generate_name
    if namespace is not None:
        metadata["namespace"] = namespace

    spec = manifest.get("spec")
    if not isinstance(spec, dict):
        spec = manifest["spec"] = {}
    raw_specs = spec.get(kind.spec_key)
    specs = canonical_specs(kind, raw_specs) if isinstance(raw_specs, Mapping) else {}
    types = _replica_layout(kind, specs, replica_counts(kind, p.replicas))
    spec[kind.spec_key] = specs

    images = _per_type(kind, p.images, "images", types)
    extra_resources = _per_type(kind, p.replica_resources, "replica_resources", types)
    placements = {
        t: placement_patch(v, f"replica_placement.{t}")
        for t, v in _per_type(kind, p.replica_placement, "replica_placement", types).items()
    }
    if isinstance(p.restart_policy, Mapping):
        restart = _per_type(kind, p.restart_policy, "restart_policy", types)
    elif p.restart_policy is not None:
        restart = dict.fromkeys(types, p.restart_policy)
    else:
        restart = {}

    env = env_entries(p)
    env_from = env_from_entries(p.env_from) if p.env_from is not None else []
    job_resources = resource_patch(p.resources, "resources") if p.resources else {}
    type_resources = {t: resource_patch(v, f"replica_resources.{t}") for t, v in extra_resources.items()}
    if p.gpus is not None and (isinstance(p.gpus, bool) or not isinstance(p.gpus, int) or p.gpus < 0):
        raise bad("gpus", f"{p.gpus!r} is not a whole number of GPUs", "pass an integer such as gpus=1")
    volumes, mounts = volumes_and_mounts(p)
    command = split_command(p.command, "command") if p.command is not None else None
    args = split_command(p.args, "args") if p.args is not None else None
    hyper = format_hyperparameters(p.hyperparameters) if p.hyperparameters else []

    for rtype in types:
        replica = specs[rtype]
        if not isinstance(replica, dict):
            continue
        if rtype in restart:
            replica["restartPolicy"] = restart[rtype]
        template = replica.get("template")
        if not isinstance(template, dict):
            template = replica["template"] = {}
        pod = template.get("spec")
        if not isinstance(pod, dict):
            pod = template["spec"] = {}
        if not pod.get("containers"):
            pod["containers"] = [{"name": kind.container}]
        _apply_pod(template, pod, p, volumes)
        if rtype in placements:
            apply_placement(pod, placements[rtype])
        container = main_container(replica, kind)
        if container is None:
            continue  # validation names the missing container; sidecars are never touched
        image = images.get(rtype, p.image)
        if image is not None:
            container["image"] = image
        if p.image_pull_policy is not None:
            container["imagePullPolicy"] = p.image_pull_policy
        if command is not None:
            container["command"] = list(command)
        if args is not None:
            container["args"] = list(args)
        if hyper:
            current = [str(a) for a in container.get("args") or []]
            container["args"] = without_flags(current, p.hyperparameters or {}) + hyper
        if env:
            container["env"] = merge_named(container.get("env"), env)
        if env_from:
            container["envFrom"] = [
                *(container.get("envFrom") or []),
                *(e for e in env_from if e not in (container.get("envFrom") or [])),
            ]
        if job_resources:
            merge_resources(container, job_resources)
        if p.gpus is not None and rtype not in GPU_EXCLUDED_TYPES:
            merge_resources(container, {"limits": {GPU_RESOURCE: p.gpus}})
        if rtype in type_resources:
            merge_resources(container, type_resources[rtype])
        if mounts:
            container["volumeMounts"] = merge_named(container.get("volumeMounts"), mounts, key="mountPath")
        if p.working_dir is not None:
            container["workingDir"] = p.working_dir
        if p.ports is not None:
            container["ports"] = merge_named(container.get("ports"), ports(p.ports))

    _apply_job_metadata(metadata, p)
    _apply_run_policy(spec, p)
    kind_fields = ("success_policy", "enable_dynamic_worker", "nproc_per_node", "elastic_policy")
    apply_kind_fields(spec, kind, {f: getattr(p, f) for f in kind_fields})
    return manifest


def build_tfjob(
    name: str | None = None,
    namespace: str | None = None,
    *,
    base: Mapping[str, Any] | None = None,
    generate_name: str | None = None,
    params: JobParameters | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """A TFJob manifest: :func:`build_job` for :data:`~airflow_tfjob.jobs.kinds.TFJOB`."""
    return build_job(TFJOB, name, namespace, base=base, generate_name=generate_name, params=params, **kwargs)


def _replica_layout(kind: JobKind, specs: dict[str, Any], counts: dict[str, Any]) -> list[str]:
    """Add the replica types ``counts`` names to ``specs`` (in place); return the job's types."""
    if not specs and not counts:
        counts = default_replicas(kind)
    prototype = next((specs[t] for t in _PROTOTYPE_ORDER if isinstance(specs.get(t), Mapping)), None)
    if prototype is None:
        prototype = next((s for s in specs.values() if isinstance(s, Mapping)), None)
    for rtype, count in counts.items():
        if rtype not in specs:
            if prototype is not None:
                specs[rtype] = {k: copy.deepcopy(v) for k, v in prototype.items() if k == "template"}
            else:
                specs[rtype] = {"template": {"spec": {"containers": [{"name": kind.container}]}}}
        if not isinstance(specs[rtype], dict):
            specs[rtype] = {}
        specs[rtype]["replicas"] = count
    for rtype in kind.single_replica_types:
        if isinstance(specs.get(rtype), dict):
            specs[rtype].setdefault("replicas", 1)
    return list(specs)


def _per_type(kind: JobKind, value: Mapping[str, Any] | None, param: str, known: list[str]) -> dict[str, Any]:
    """A per-type parameter (``images={"ps": ...}``) by canonical type: types this job has only."""
    out = {}
    for key, item in (value or {}).items():
        name = kind_type(kind, key, f"{param}.{key}")
        if name not in known:
            raise bad(
                f"{param}.{key}",
                f"{key!r} is not one of this job's replica types {list(known)}",
                "add the type to replicas=..., or fix its spelling",
            )
        out[name] = item
    return out


def _apply_pod(
    template: dict[str, Any], pod: dict[str, Any], p: JobParameters, volumes: list[dict[str, Any]]
) -> None:
    if p.pod_labels or p.pod_annotations:
        meta = template.get("metadata")
        if not isinstance(meta, dict):
            meta = template["metadata"] = {}
        if p.pod_labels:
            meta["labels"] = {**(meta.get("labels") or {}), **p.pod_labels}
        if p.pod_annotations:
            meta["annotations"] = {**(meta.get("annotations") or {}), **p.pod_annotations}
    if volumes:
        pod["volumes"] = merge_named(pod.get("volumes"), volumes)
    if p.node_selector:
        pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **p.node_selector}
    if p.tolerations:
        existing = list(pod.get("tolerations") or [])
        pod["tolerations"] = existing + [dict(t) for t in p.tolerations if dict(t) not in existing]
    if p.service_account is not None:
        pod["serviceAccountName"] = p.service_account
    if p.image_pull_secrets:
        pod["imagePullSecrets"] = merge_named(
            pod.get("imagePullSecrets"), [{"name": s} for s in p.image_pull_secrets]
        )


def _apply_job_metadata(metadata: dict[str, Any], p: JobParameters) -> None:
    labels = dict(metadata.get("labels") or {})
    labels.update(p.labels or {})
    if p.queue is not None:
        labels[KUEUE_QUEUE_LABEL] = p.queue
    if labels:
        metadata["labels"] = labels
    annotations = dict(metadata.get("annotations") or {})
    annotations.update(p.annotations or {})
    if p.secret_env:
        annotations = with_secret_names(annotations, p.secret_env)
    if annotations:
        metadata["annotations"] = annotations


def _apply_run_policy(spec: dict[str, Any], p: JobParameters) -> None:
    updates: dict[str, Any] = {
        "cleanPodPolicy": p.clean_pod_policy,
        "ttlSecondsAfterFinished": p.ttl_seconds_after_finished,
        "activeDeadlineSeconds": p.active_deadline_seconds,
        "backoffLimit": p.backoff_limit,
        "suspend": p.suspend,
        "managedBy": p.managed_by,
    }
    updates = {k: v for k, v in updates.items() if v is not None}
    scheduling: dict[str, Any] = {}
    for key, value in (p.scheduling or {}).items():
        if key not in _SCHEDULING_KEYS:
            close = difflib.get_close_matches(key, list(_SCHEDULING_KEYS), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise bad(
                f"scheduling.{key}",
                "is not a scheduling policy field",
                f"{hint}use one of {sorted(set(_SCHEDULING_KEYS.values()))}",
            )
        scheduling[_SCHEDULING_KEYS[key]] = value
    if not updates and not scheduling:
        return
    run_policy = spec.get("runPolicy")
    if not isinstance(run_policy, dict):
        run_policy = spec["runPolicy"] = {}
    run_policy.update(updates)
    if scheduling:
        current = run_policy.get("schedulingPolicy")
        run_policy["schedulingPolicy"] = {**(current if isinstance(current, Mapping) else {}), **scheduling}


__all__ = [
    "GPU_EXCLUDED_TYPES",
    "PARAMETER_NAMES",
    "REDACTED",
    "IntendedCleanup",
    "JobParameters",
    "JobValidationError",
    "build_job",
    "build_tfjob",
    "canonical_replica_specs",
    "deep_merge",
    "format_hyperparameters",
    "intended_cleanup",
    "load_manifest",
    "redact",
    "secret_env_names",
    "submission_manifest",
    "tensorflow_container",
]
