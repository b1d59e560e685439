"""A TFJob (kubeflow.org/v1) manifest from operator parameters, from a template, or from both.

Pure (no API calls; :func:`load_manifest` reads the template file it is given): the operator module
imports this at DAG parse time. PyYAML and Jinja2 are imported inside the functions that need them.

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
import json
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from airflow_tfjob import templates
from airflow_tfjob.constants import (
    ANNOTATION_INTENDED_CLEAN_POD_POLICY,
    ANNOTATION_INTENDED_TTL,
    API_VERSION,
    CONTAINER_NAME,
    GPU_RESOURCE,
    KIND,
    KUEUE_QUEUE_LABEL,
    REPLICA_TYPES,
)
from airflow_tfjob.naming import canonical_replica_type
from airflow_tfjob.paramtypes import check_types
from airflow_tfjob.secrets import REDACTED, redact, secret_env_names, with_secret_names
from airflow_tfjob.shape import shape_problems
from airflow_tfjob.templates import TEMPLATE_EXTENSIONS  # noqa: F401 (re-exported)
from airflow_tfjob.validation import TFJobValidationError

# Replica types that get the job-wide `gpus`: a parameter server only holds variables.
GPU_EXCLUDED_TYPES = ("PS",)
_PROTOTYPE_ORDER = ("Worker", "Chief", "Master")
_RESOURCE_SHORTHANDS = {
    "cpu": "cpu",
    "memory": "memory",
    "ephemeral-storage": "ephemeral-storage",
    "ephemeral_storage": "ephemeral-storage",
}
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

EnvValue = str | int | float | bool | Mapping[str, Any]
MountSpec = str | Mapping[str, Any]


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


def _bad(field_path: str, problem: str, fix: str) -> TFJobValidationError:
    return TFJobValidationError(field_path, problem, fix)


# --------------------------------------------------------------------------- small converters


def split_command(value: str | Sequence[Any], field_path: str) -> list[str]:
    """A list of strings; a single string is split the way a shell would."""
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as exc:
            raise _bad(
                field_path, f"cannot split {value!r} into arguments ({exc})", "pass a list of strings"
            ) from exc
    if isinstance(value, Mapping) or not isinstance(value, Iterable):
        raise _bad(
            field_path, f"expected a list of strings, got {type(value).__name__}", "pass a list of strings"
        )
    return [_arg_str(v) for v in value]


def _arg_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _flag(key: str) -> str:
    return key if key.startswith("-") else f"--{key}"


def format_hyperparameters(hyperparameters: Mapping[str, Any]) -> list[str]:
    """``{"epochs": 3, "fp16": True, "tags": ["a", "b"]}`` -> ``["--epochs=3", "--fp16", "--tags=a,b"]``."""
    out: list[str] = []
    for key, value in hyperparameters.items():
        flag = _flag(str(key))
        if value is None or value is False:
            continue
        if value is True:
            out.append(flag)
        elif isinstance(value, Mapping):
            out.append(f"{flag}={json.dumps(value, separators=(',', ':'), sort_keys=True)}")
        elif isinstance(value, (list, tuple)):
            out.append(f"{flag}={','.join(_arg_str(v) for v in value)}")
        else:
            out.append(f"{flag}={_arg_str(value)}")
    return out


def _without_flags(args: list[str], keys: Iterable[str]) -> list[str]:
    flags = {_flag(str(k)) for k in keys}
    return [a for a in args if a not in flags and a.split("=", 1)[0] not in flags]


def _env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _ref(value: Any, field_path: str, kind: str) -> dict[str, Any]:
    """``"name:key"``, ``(name, key)`` or ``{"name", "key", "optional"}`` -> a key reference."""
    if isinstance(value, str):
        name, sep, key = value.partition(":")
        if not sep or not name or not key:
            raise _bad(
                field_path, f"{value!r} does not name a {kind} and a key", f'write it as "{kind}-name:key"'
            )
        return {"name": name, "key": key}
    if isinstance(value, Mapping) and "name" in value and "key" in value:
        return dict(value)
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return {"name": str(value[0]), "key": str(value[1])}
    raise _bad(
        field_path, f"cannot read {value!r} as a {kind} key reference", f'write it as "{kind}-name:key"'
    )


def _env_entries(params: TFJobParameters) -> list[dict[str, Any]]:
    """Every env var the parameters set, each name once (two parameters setting one name is refused)."""
    entries: list[tuple[str, dict[str, Any]]] = []
    if params.env is not None:
        if isinstance(params.env, Mapping):
            for name, value in params.env.items():
                if isinstance(value, Mapping):
                    entry = {"name": str(name), **{k: v for k, v in value.items() if k != "name"}}
                elif value is None:
                    raise _bad(f"env.{name}", "has no value", "give a value, or remove the variable")
                else:
                    entry = {"name": str(name), "value": _env_value(value)}
                entries.append((f"env.{name}", entry))
        else:
            for i, item in enumerate(params.env):
                if not isinstance(item, Mapping) or "name" not in item:
                    raise _bad(f"env[{i}]", "is not an EnvVar with a name", 'use {"name": ..., "value": ...}')
                entries.append((f"env[{i}]", dict(item)))
    for name, value in (params.secret_env or {}).items():
        entries.append((f"secret_env.{name}", {"name": str(name), "value": _env_value(value)}))
    for name, value in (params.env_from_secrets or {}).items():
        ref = _ref(value, f"env_from_secrets.{name}", "secret")
        entries.append((f"env_from_secrets.{name}", {"name": str(name), "valueFrom": {"secretKeyRef": ref}}))
    for name, value in (params.env_from_config_maps or {}).items():
        ref = _ref(value, f"env_from_config_maps.{name}", "configmap")
        entries.append(
            (f"env_from_config_maps.{name}", {"name": str(name), "valueFrom": {"configMapKeyRef": ref}})
        )
    return _unique(entries, "env var", key="name")


def _unique(entries: Iterable[tuple[str, dict[str, Any]]], what: str, key: str) -> list[dict[str, Any]]:
    """The entries, refusing two different ones with the same ``key`` (one would silently replace the other)."""
    origin: dict[Any, str] = {}
    out: list[dict[str, Any]] = []
    for where, entry in entries:
        value = entry.get(key)
        if entry in out:
            continue  # the same thing twice (one claim mounted at two paths): nothing is lost
        if value is not None and value in origin:
            raise _bad(
                where,
                f"sets {what} {value!r}, which {origin[value]} already sets (one would silently replace the other)",
                f"give the {what} in one place only, or rename one of them",
            )
        if value is not None:
            origin[value] = where
        out.append(entry)
    return out


def _env_from_entries(values: Sequence[str | Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, item in enumerate(values):
        if isinstance(item, Mapping):
            out.append(dict(item))
            continue
        kind, sep, name = str(item).partition(":")
        kind = kind.lower().replace("_", "").replace("-", "")
        if not sep or not name or kind not in ("secret", "configmap"):
            raise _bad(
                f"env_from[{i}]",
                f"{item!r} does not say whether it is a secret or a config map",
                'write "secret:<name>" or "configmap:<name>"',
            )
        ref = "secretRef" if kind == "secret" else "configMapRef"
        out.append({ref: {"name": name}})
    return out


def _volume_name(prefix: str, name: str) -> str:
    slug = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    return f"{prefix}-{slug}"[:63].rstrip("-")


def _get(item: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    for key in keys:
        if key in item:
            return item[key]
    return default


def _pvc_items(value: MountSpec | Sequence[MountSpec]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    items: Sequence[MountSpec] = [value] if isinstance(value, (str, Mapping)) else value
    out = []
    for i, item in enumerate(items):
        where = f"pvc[{i}]" if not isinstance(value, (str, Mapping)) else "pvc"
        if isinstance(item, str):
            parts = item.split(":")
            if (
                len(parts) not in (2, 3)
                or not parts[0]
                or not parts[1]
                or (len(parts) == 3 and parts[2] not in ("ro", "rw"))
            ):
                raise _bad(
                    where,
                    f"{item!r} is not claim:/mount/path[:ro]",
                    'write e.g. "data:/data" or "data:/data:ro"',
                )
            claim, mount, read_only, sub_path, name = (
                parts[0],
                parts[1],
                len(parts) == 3 and parts[2] == "ro",
                None,
                None,
            )
        elif isinstance(item, Mapping):
            claim = _get(item, "claim", "claim_name", "claimName")
            mount = _get(item, "mount_path", "mountPath")
            if not isinstance(claim, str) or not isinstance(mount, str) or not claim or not mount:
                raise _bad(
                    where, "needs a claim and a mount path", '{"claim": "data", "mount_path": "/data"}'
                )
            read_only = bool(_get(item, "read_only", "readOnly", default=False))
            sub_path = _get(item, "sub_path", "subPath")
            name = item.get("name")
        else:
            raise _bad(where, f"cannot read {item!r} as a PVC mount", 'write "claim:/mount/path"')
        vol_name = str(name or _volume_name("pvc", str(claim)))
        claim_ref: dict[str, Any] = {"claimName": str(claim)}
        if read_only:
            claim_ref["readOnly"] = True
        mount_entry: dict[str, Any] = {"name": vol_name, "mountPath": str(mount)}
        if read_only:
            mount_entry["readOnly"] = True
        if sub_path:
            mount_entry["subPath"] = str(sub_path)
        out.append(({"name": vol_name, "persistentVolumeClaim": claim_ref}, mount_entry))
    return out


def _object_volume_items(
    value: Mapping[str, str] | Sequence[Mapping[str, Any]], kind: str
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Secret or config map volumes, mounted read-only."""
    param = "secret_volumes" if kind == "secret" else "config_map_volumes"
    source_key, name_key = ("secret", "secretName") if kind == "secret" else ("configMap", "name")
    keys = (
        ("secret", "secret_name", "secretName") if kind == "secret" else ("config_map", "configMap", "name")
    )
    items: list[Mapping[str, Any]]
    if isinstance(value, Mapping):
        items = [{keys[0]: obj, "mount_path": path} for obj, path in value.items()]
    else:
        items = list(value)
    out = []
    for i, item in enumerate(items):
        obj = _get(item, *keys) if isinstance(item, Mapping) else None
        mount = _get(item, "mount_path", "mountPath") if isinstance(item, Mapping) else None
        if not obj or not mount:
            raise _bad(
                f"{param}[{i}]",
                f"needs a {kind.replace('_', ' ')} name and a mount path",
                f'{{"{keys[0]}": "name", "mount_path": "/path"}}',
            )
        vol_name = str(item.get("volume_name") or _volume_name(kind.replace("_", ""), str(obj)))
        source: dict[str, Any] = {name_key: str(obj)}
        for py_key, k8s_key in (
            ("items", "items"),
            ("default_mode", "defaultMode"),
            ("defaultMode", "defaultMode"),
            ("optional", "optional"),
        ):
            if py_key in item:
                source[k8s_key] = item[py_key]
        out.append(
            (
                {"name": vol_name, source_key: source},
                {"name": vol_name, "mountPath": str(mount), "readOnly": True},
            )
        )
    return out


def _ports(value: Mapping[str, int] | Sequence[Mapping[str, Any] | int]) -> list[dict[str, Any]]:
    if isinstance(value, Mapping):
        return [{"name": str(name), "containerPort": port} for name, port in value.items()]
    entries = [
        (f"ports[{i}]", dict(item) if isinstance(item, Mapping) else {"containerPort": item})
        for i, item in enumerate(value)
    ]
    return _unique(entries, "port name", key="name")


def _resource_patch(value: Mapping[str, Any], field_path: str) -> dict[str, dict[str, Any]]:
    """Turn the ``resources`` shorthand into ``{"requests": {...}, "limits": {...}}``."""
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    for key, qty in value.items():
        if key == "requests" or key == "limits":
            if not isinstance(qty, Mapping):
                raise _bad(
                    f"{field_path}.{key}", "must be a mapping of resource name to quantity", '{"cpu": "1"}'
                )
            (requests if key == "requests" else limits).update(qty)
        elif key == "gpus":
            limits[GPU_RESOURCE] = qty
        elif key in _RESOURCE_SHORTHANDS:
            requests[_RESOURCE_SHORTHANDS[key]] = qty
            limits[_RESOURCE_SHORTHANDS[key]] = qty
        else:
            close = difflib.get_close_matches(
                str(key), [*_RESOURCE_SHORTHANDS, "gpus", "requests", "limits"], n=1
            )
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise _bad(
                f"{field_path}.{key}",
                "is not a resource shorthand",
                f"{hint}use cpu, memory, ephemeral-storage, gpus, or requests/limits for other resources",
            )
    out: dict[str, dict[str, Any]] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def _volumes_and_mounts(p: TFJobParameters) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Volumes and mounts from ``volumes``/``volume_mounts`` and the shortcuts; a name used twice is refused."""
    volumes = [(f"volumes[{i}]", dict(v)) for i, v in enumerate(p.volumes or [])]
    mounts = [(f"volume_mounts[{i}]", dict(m)) for i, m in enumerate(p.volume_mounts or [])]
    shortcuts = []
    if p.pvc is not None:
        shortcuts += [("pvc", item) for item in _pvc_items(p.pvc)]
    if p.secret_volumes is not None:
        shortcuts += [("secret_volumes", item) for item in _object_volume_items(p.secret_volumes, "secret")]
    if p.config_map_volumes is not None:
        items = _object_volume_items(p.config_map_volumes, "config_map")
        shortcuts += [("config_map_volumes", item) for item in items]
    for where, (volume, mount) in shortcuts:
        volumes.append((f"{where} (volume {volume['name']!r})", volume))
        mounts.append((f"{where} (mount {mount['mountPath']!r})", mount))
    return _unique(volumes, "volume name", key="name"), _unique(mounts, "mount path", key="mountPath")


# --------------------------------------------------------------------------- merge helpers


def _merge_named(
    existing: list[Any] | None, new: Iterable[Mapping[str, Any]], key: str = "name"
) -> list[Any]:
    """Entries of ``new`` replace entries of ``existing`` with the same key, else are appended."""
    result = [copy.deepcopy(e) for e in (existing or [])]
    for item in new:
        item = copy.deepcopy(dict(item))
        for i, old in enumerate(result):
            if isinstance(old, Mapping) and item.get(key) is not None and old.get(key) == item.get(key):
                result[i] = item
                break
        else:
            result.append(item)
    return result


def _merge_resources(container: dict[str, Any], patch: Mapping[str, Mapping[str, Any]]) -> None:
    resources = container.setdefault("resources", {})
    for section, values in patch.items():
        target = resources.get(section)
        if not isinstance(target, dict):
            target = resources[section] = {}
        target.update(values)


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Mappings merge recursively; anything else in ``override`` (lists included) replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def canonical_replica_specs(
    specs: Mapping[str, Any], field_path: str = "spec.tfReplicaSpecs"
) -> dict[str, Any]:
    """Known replica keys in canonical case, unknown ones unchanged (validation reports those)."""
    out: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for key, value in specs.items():
        name = canonical_replica_type(key) or key
        if name in out:
            raise _bad(
                f"{field_path}.{key}",
                f"duplicates {origin[name]!r}: replica types are case-insensitive",
                f"merge them into one {name!r} entry",
            )
        out[name] = value
        origin[name] = key
    return out


def _per_type(value: Mapping[str, Any] | None, param: str, known: Sequence[str]) -> dict[str, Any]:
    if not value:
        return {}
    out = {}
    for key, item in value.items():
        name = canonical_replica_type(key)
        if name is None or name not in known:
            raise _bad(
                f"{param}.{key}",
                f"{key!r} is not one of this job's replica types {list(known)}",
                "add the type to replicas=..., or fix its spelling",
            )
        out[name] = item
    return out


def tensorflow_container(replica_spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The first container named ``tensorflow`` of a replica spec, the one the operator configures."""
    containers = ((replica_spec.get("template") or {}).get("spec") or {}).get("containers") or []
    for container in containers:
        if isinstance(container, dict) and container.get("name") == CONTAINER_NAME:
            return container
    return None


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
        raise _bad("tfjob", f"is a {type(base).__name__}, not a TFJob mapping", "pass a dict or YAML text")
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

    images = _per_type(p.images, "images", types)
    extra_resources = _per_type(p.replica_resources, "replica_resources", types)
    if isinstance(p.restart_policy, Mapping):
        restart = _per_type(p.restart_policy, "restart_policy", types)
    elif p.restart_policy is not None:
        restart = dict.fromkeys(types, p.restart_policy)
    else:
        restart = {}

    env = _env_entries(p)
    env_from = _env_from_entries(p.env_from) if p.env_from is not None else []
    job_resources = _resource_patch(p.resources, "resources") if p.resources else {}
    type_resources = {t: _resource_patch(v, f"replica_resources.{t}") for t, v in extra_resources.items()}
    if p.gpus is not None and (isinstance(p.gpus, bool) or not isinstance(p.gpus, int) or p.gpus < 0):
        raise _bad("gpus", f"{p.gpus!r} is not a whole number of GPUs", "pass an integer such as gpus=1")
    volumes, mounts = _volumes_and_mounts(p)
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
            container["args"] = _without_flags(current, p.hyperparameters or {}) + hyper
        if env:
            container["env"] = _merge_named(container.get("env"), env)
        if env_from:
            container["envFrom"] = [
                *(container.get("envFrom") or []),
                *(e for e in env_from if e not in (container.get("envFrom") or [])),
            ]
        if job_resources:
            _merge_resources(container, job_resources)
        if p.gpus is not None and rtype not in GPU_EXCLUDED_TYPES:
            _merge_resources(container, {"limits": {GPU_RESOURCE: p.gpus}})
        if rtype in type_resources:
            _merge_resources(container, type_resources[rtype])
        if mounts:
            container["volumeMounts"] = _merge_named(container.get("volumeMounts"), mounts, key="mountPath")
        if p.working_dir is not None:
            container["workingDir"] = p.working_dir
        if p.ports is not None:
            container["ports"] = _merge_named(container.get("ports"), _ports(p.ports))

    _apply_job_metadata(metadata, p)
    _apply_run_policy(spec, p)
    if p.success_policy is not None:
        spec["successPolicy"] = p.success_policy
    if p.enable_dynamic_worker is not None:
        spec["enableDynamicWorker"] = p.enable_dynamic_worker
    return manifest


def _per_type_any(value: Mapping[str, Any] | None, param: str) -> dict[str, Any]:
    """Like _per_type, but any replica type may be named (``replicas`` defines the types)."""
    out: dict[str, Any] = {}
    for key, item in (value or {}).items():
        name = canonical_replica_type(key)
        if name is None:
            close = difflib.get_close_matches(
                str(key).lower(), [t.lower() for t in REPLICA_TYPES], n=1, cutoff=0.5
            )
            hint = f"did you mean {canonical_replica_type(close[0])!r}? " if close else ""
            raise _bad(
                f"{param}.{key}",
                f"{key!r} is not a TFJob replica type",
                f"{hint}use one of {list(REPLICA_TYPES)}",
            )
        if name in out:
            raise _bad(f"{param}.{key}", f"{name} is given twice", "name each replica type once")
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
        pod["volumes"] = _merge_named(pod.get("volumes"), volumes)
    if p.node_selector:
        pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **p.node_selector}
    if p.tolerations:
        existing = list(pod.get("tolerations") or [])
        pod["tolerations"] = existing + [dict(t) for t in p.tolerations if dict(t) not in existing]
    if p.service_account is not None:
        pod["serviceAccountName"] = p.service_account
    if p.image_pull_secrets:
        pod["imagePullSecrets"] = _merge_named(
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
            raise _bad(
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


# --------------------------------------------------------------------------- templates


def load_manifest(
    value: Mapping[str, Any] | str,
    *,
    render: Callable[[str], str] | None = None,
    searchpath: Sequence[str | Path] = (),
    context: Mapping[str, Any] | None = None,
    allow_outside: bool = False,
) -> dict[str, Any]:
    """A full TFJob manifest from a dict, a YAML/JSON string, or a template file.

    A single-line string ending in .yaml/.yml/.json is a file path, relative to one of
    ``searchpath`` (the DAG's folder and template_searchpath) and resolving inside them unless
    ``allow_outside`` (:mod:`airflow_tfjob.templates` has the rules). It is rendered as a Jinja
    template, with ``render`` (pass Airflow's, so macros and params work) or, without it, plain
    Jinja with ``context`` as variables and undefined names as errors. Only this argument loads
    files: other strings elsewhere (``args=["--config=conf.yaml"]``) stay strings.
    """
    if isinstance(value, Mapping):
        return copy.deepcopy(dict(value))
    if not isinstance(value, str):
        raise _bad(
            "tfjob",
            f"expected a mapping, a YAML string or a file path, got {type(value).__name__}",
            "pass a dict, YAML text, or a .yaml path",
        )
    if not templates.looks_like_path(value):
        return templates.parse_manifest_text(value, "the tfjob string")
    path = templates.resolve_template_path(value, searchpath, allow_outside=allow_outside)
    env = templates.plain_environment([path.parent, *searchpath])
    if render is not None:
        text = templates.render_file(env, path, lambda t: render(path.read_text(encoding="utf-8")))
        as_json = path.suffix.lower() == ".json"
        return templates.parse_manifest_text(str(text), str(path), as_json=as_json)
    return templates.load_template_file(path, env, lambda t: t.render(**(context or {})))


# --------------------------------------------------------------------------- cleanup intent and redaction


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
    garbage collection deletes pods before the provider has drained their logs (tfjob-behaviour.md
    §10 #1, #2); the intent travels in annotations and the provider applies it afterwards.
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
    run_policy = spec.get("runPolicy")
    if not isinstance(run_policy, dict):
        run_policy = spec["runPolicy"] = {}
    run_policy["cleanPodPolicy"] = "None"
    run_policy.pop("ttlSecondsAfterFinished", None)
    return out, intent


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
