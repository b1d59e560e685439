"""A TFJob (kubeflow.org/v1) manifest from operator parameters, from a template, or from both.

Pure (no API calls): the operator module imports this when the task runs. The converters of single
parameters and the merge rules are in :mod:`airflow_tfjob.manifest_convert`; :func:`load_manifest`
(re-exported) is in :mod:`airflow_tfjob.templates`, beside the template rules it shares with the
operator; the cleanup intent (:func:`submission_manifest`, re-exported) is in :mod:`airflow_tfjob.cleanup`.

How the pieces combine (:func:`build_tfjob`):

1. ``base`` (a full manifest, e.g. from :func:`load_manifest`) is deep-copied; its replica keys are
   put in canonical case (``worker`` -> ``Worker``), as the training-operator does.
2. The replica types are those of ``base`` plus those named in ``replicas``; with neither, a single
   ``Worker``. A type named only in ``replicas`` starts as a copy of the base's Worker template (else
   Chief, Master, or the first one), so image, env and volumes carry over.
3. Every explicit parameter then overrides the base: pod-level ones (volumes, node selector, ...) on
   every replica's pod template, container-level ones (image, command, env, resources, ...) on the
   container named ``tensorflow`` only (sidecars are left alone). Mappings merge by key, env vars,
   ports, volumes and mounts by name; lists of arguments replace.

Per-type variants: ``images``, ``replica_resources`` and ``restart_policy`` (when a mapping) take
replica types as keys, in any case; naming a type the job does not have is an error.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from airflow_tfjob.cleanup import IntendedCleanup, intended_cleanup, submission_manifest
from airflow_tfjob.constants import (
    API_VERSION,
    CONTAINER_NAME,
    GPU_RESOURCE,
    KIND,
    KUEUE_QUEUE_LABEL,
    REPLICA_TYPES,
)
from airflow_tfjob.manifest_convert import (
    EnvValue,
    MountSpec,
    bad,
    canonical_replica_specs,
    deep_merge,
    env_entries,
    env_from_entries,
    format_hyperparameters,
    merge_named,
    merge_resources,
    per_type,
    ports,
    resource_patch,
    split_command,
    tensorflow_container,
    volumes_and_mounts,
    without_flags,
)
from airflow_tfjob.naming import canonical_replica_type
from airflow_tfjob.paramtypes import check_types
from airflow_tfjob.secrets import REDACTED, redact, secret_env_names, with_secret_names
from airflow_tfjob.shape import shape_problems
from airflow_tfjob.templates import TEMPLATE_EXTENSIONS, load_manifest  # noqa: F401 (re-exported)
from airflow_tfjob.validation import TFJobValidationError

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


@dataclass(frozen=True)
class TFJobParameters:
    """Every parameter :func:`build_tfjob` understands. ``None`` (the default) means "leave as is".

    Replica layout
      replicas: ``{"worker": 3, "ps": 1}`` (keys chief, master, ps, worker, evaluator in any case).
      restart_policy: ``"OnFailure"`` for every type, or ``{"ps": "Always", "worker": "OnFailure"}``.
    Container (the ``tensorflow`` container of every replica type)
      image / images: one image, and per-type overrides ``{"ps": "img-cpu"}``.
      image_pull_policy: ``Always`` / ``IfNotPresent`` / ``Never``.
      command / args: a list, or a string split like a shell would (``shlex``). ``args`` replaces.
      hyperparameters: ``{"epochs": 10, "learning_rate": 1e-3}`` -> ``--epochs=10 --learning_rate=0.001``,
        appended to the args in insertion order, replacing any ``--epochs``/``--epochs=...`` already
        there. ``True`` -> bare flag ``--key``; ``False`` and ``None`` -> left out; lists ->
        ``--key=a,b``; dicts -> ``--key=<json>``. Keys already starting with ``-`` are used as is.
      env: ``{"NAME": "value"}`` (numbers and booleans become strings, ``true``/``false``), a value
        may also be an EnvVar-like dict (``{"valueFrom": {...}}``); or a list of EnvVar dicts.
      secret_env: ``{"API_TOKEN": "s3cr3t"}``: literal values that are hidden by :func:`redact`
        (rendered manifest, XCom, logs). They are still stored in the TFJob object in the cluster;
        prefer ``env_from_secrets`` when a Kubernetes Secret exists.
      env_from_secrets: ``{"VAR": "secret-name:key"}`` (or ``("secret-name", "key")``) -> secretKeyRef.
      env_from_config_maps: ``{"VAR": "config-map:key"}`` -> configMapKeyRef.
      env_from: ``["secret:name", "configmap:name"]`` or EnvFromSource dicts -> whole-object envFrom.
      resources: ``{"cpu": "2", "memory": "4Gi"}`` sets requests **and** limits (predictable
        placement); ``{"requests": {...}, "limits": {...}}`` sets them separately; both forms mix.
        A ``gpus`` key is allowed here too.
      gpus: ``nvidia.com/gpu`` limit on every type except PS (use ``replica_resources`` for a PS).
      replica_resources: per type, same shape as ``resources`` (``{"ps": {"cpu": "1"}, "worker": {"gpus": 2}}``),
        applied after the job-wide values.
      volume_mounts: VolumeMount dicts for the tensorflow container.
      working_dir, ports (``{"tfjob-port": 2222, "tensorboard": 6006}`` or ContainerPort dicts).
    Pod template (every replica type)
      volumes: Volume dicts.
      pvc: ``"claim:/mount/path"`` (``":ro"`` suffix for read-only), ``{"claim": "data",
        "mount_path": "/data", "read_only": False, "sub_path": None}``, or a list of those.
      secret_volumes / config_map_volumes: ``{"name": "/mount/path"}`` or a list of
        ``{"secret"|"config_map": name, "mount_path": ..., "items": [...]}``; mounted read-only.
      node_selector, tolerations, service_account, image_pull_secrets (names), pod_labels,
      pod_annotations (e.g. ``{"sidecar.istio.io/inject": "false"}``).
    TFJob
      labels, annotations; queue: Kueue's ``kueue.x-k8s.io/queue-name`` label.
      clean_pod_policy, ttl_seconds_after_finished, active_deadline_seconds, backoff_limit, suspend,
      managed_by: ``spec.runPolicy``.
      scheduling: ``{"queue", "min_available", "priority_class", "min_resources",
        "schedule_timeout_seconds"}`` (camelCase accepted) -> ``spec.runPolicy.schedulingPolicy``.
      success_policy (``""`` or ``AllWorkers``), enable_dynamic_worker.
    """

    replicas: Mapping[str, int] | None = None
    restart_policy: str | Mapping[str, str] | None = None
    image: str | None = None
    images: Mapping[str, str] | None = None
    image_pull_policy: str | None = None
    command: str | Sequence[Any] | None = None
    args: str | Sequence[Any] | None = None
    hyperparameters: Mapping[str, Any] | None = None
    env: Mapping[str, EnvValue] | Sequence[Mapping[str, Any]] | None = None
    secret_env: Mapping[str, str] | None = None
    env_from_secrets: Mapping[str, Any] | None = None
    env_from_config_maps: Mapping[str, Any] | None = None
    env_from: Sequence[str | Mapping[str, Any]] | None = None
    resources: Mapping[str, Any] | None = None
    gpus: int | None = None
    replica_resources: Mapping[str, Mapping[str, Any]] | None = None
    volume_mounts: Sequence[Mapping[str, Any]] | None = None
    working_dir: str | None = None
    ports: Mapping[str, int] | Sequence[Mapping[str, Any] | int] | None = None
    volumes: Sequence[Mapping[str, Any]] | None = None
    pvc: MountSpec | Sequence[MountSpec] | None = None
    secret_volumes: Mapping[str, str] | Sequence[Mapping[str, Any]] | None = None
    config_map_volumes: Mapping[str, str] | Sequence[Mapping[str, Any]] | None = None
    node_selector: Mapping[str, str] | None = None
    tolerations: Sequence[Mapping[str, Any]] | None = None
    service_account: str | None = None
    image_pull_secrets: Sequence[str] | None = None
    pod_labels: Mapping[str, str] | None = None
    pod_annotations: Mapping[str, str] | None = None
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None
    queue: str | None = None
    clean_pod_policy: str | None = None
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None
    suspend: bool | None = None
    managed_by: str | None = None
    scheduling: Mapping[str, Any] | None = None
    success_policy: str | None = None
    enable_dynamic_worker: bool | None = None


PARAMETER_NAMES: tuple[str, ...] = tuple(f.name for f in fields(TFJobParameters))


# --------------------------------------------------------------------------- build


def build_tfjob(
    name: str | None = None,
    namespace: str | None = None,
    *,
    base: Mapping[str, Any] | None = None,
    generate_name: str | None = None,
    params: TFJobParameters | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """A TFJob manifest: ``base`` (optional full manifest) overridden by explicit parameters.

    Parameters are those of :class:`TFJobParameters`, given either as ``params=`` or as keywords
    (an unknown keyword raises TypeError). Raises :class:`TFJobValidationError` for parameters that
    cannot be turned into a manifest (e.g. ``pvc="data"`` without a mount path); whether the
    resulting manifest is acceptable is :func:`airflow_tfjob.validation.validate_tfjob`'s job.
    """
    if params is not None and kwargs:
        raise TypeError("pass either params= or keyword parameters, not both")
    p = params if params is not None else TFJobParameters(**kwargs)
    check_types({f: getattr(p, f) for f in PARAMETER_NAMES})
    if base is not None and not isinstance(base, Mapping):
        raise bad("tfjob", f"is a {type(base).__name__}, not a TFJob mapping", "pass a dict or YAML text")
    manifest: dict[str, Any] = copy.deepcopy(dict(base)) if base else {}
    problems = shape_problems(manifest)
    if problems:
        raise TFJobValidationError(problems)
    manifest.setdefault("apiVersion", API_VERSION)
    manifest.setdefault("kind", KIND)
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
    raw_specs = spec.get("tfReplicaSpecs")
    specs = canonical_replica_specs(raw_specs) if isinstance(raw_specs, Mapping) else {}

    replica_counts = _per_type_any(p.replicas, "replicas")
    if not specs and not replica_counts:
        replica_counts = {"Worker": 1}
    prototype = next((specs[t] for t in _PROTOTYPE_ORDER if isinstance(specs.get(t), Mapping)), None)
    if prototype is None:
        prototype = next((s for s in specs.values() if isinstance(s, Mapping)), None)
    for rtype, count in replica_counts.items():
        if rtype not in specs:
            if prototype is not None:
                specs[rtype] = {k: copy.deepcopy(v) for k, v in prototype.items() if k == "template"}
            else:
                specs[rtype] = {"template": {"spec": {"containers": [{"name": CONTAINER_NAME}]}}}
        if not isinstance(specs[rtype], dict):
            specs[rtype] = {}
        specs[rtype]["replicas"] = count
    spec["tfReplicaSpecs"] = specs
    types = list(specs)

    images = per_type(p.images, "images", types)
    extra_resources = per_type(p.replica_resources, "replica_resources", types)
    if isinstance(p.restart_policy, Mapping):
        restart = per_type(p.restart_policy, "restart_policy", types)
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
            pod["containers"] = [{"name": CONTAINER_NAME}]
        _apply_pod(template, pod, p, volumes)
        container = tensorflow_container(replica)
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
    if p.success_policy is not None:
        spec["successPolicy"] = p.success_policy
    if p.enable_dynamic_worker is not None:
        spec["enableDynamicWorker"] = p.enable_dynamic_worker
    return manifest


def _per_type_any(value: Mapping[str, Any] | None, param: str) -> dict[str, Any]:
    """Like per_type, but any replica type may be named (``replicas`` defines the types)."""
    out: dict[str, Any] = {}
    for key, item in (value or {}).items():
        name = canonical_replica_type(key)
        if name is None:
            close = difflib.get_close_matches(
                str(key).lower(), [t.lower() for t in REPLICA_TYPES], n=1, cutoff=0.5
            )
            hint = f"did you mean {canonical_replica_type(close[0])!r}? " if close else ""
            raise bad(
                f"{param}.{key}",
                f"{key!r} is not a TFJob replica type",
                f"{hint}use one of {list(REPLICA_TYPES)}",
            )
        if name in out:
            raise bad(f"{param}.{key}", f"{name} is given twice", "name each replica type once")
        out[name] = item
    return out


def _apply_pod(
    template: dict[str, Any], pod: dict[str, Any], p: TFJobParameters, volumes: list[dict[str, Any]]
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


def _apply_job_metadata(metadata: dict[str, Any], p: TFJobParameters) -> None:
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


def _apply_run_policy(spec: dict[str, Any], p: TFJobParameters) -> None:
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
    "TFJobParameters",
    "TFJobValidationError",
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
