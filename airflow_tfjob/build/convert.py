"""Small converters from operator parameters to manifest pieces, and the merge rules.

Each converter turns one parameter's friendly form (``{"cpu": "2"}``, ``"claim:/data"``,
``{"VAR": "secret:key"}``, a shell string...) into the Kubernetes form, and raises
JobValidationError naming the parameter when it cannot. :func:`airflow_tfjob.build.manifest.build_tfjob`
applies them; the merge helpers say how an explicit parameter overrides a base manifest (mappings by
key; env vars, ports, volumes and mounts by name; lists of arguments replace).
"""

from __future__ import annotations

import copy
import difflib
import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_tfjob.build.checker import JobValidationError
from airflow_tfjob.build.naming import canonical_replica_type
from airflow_tfjob.constants import CONTAINER_NAME, GPU_RESOURCE

if TYPE_CHECKING:
    from airflow_tfjob.build.params import JobParameters

_RESOURCE_SHORTHANDS = {
    "cpu": "cpu",
    "memory": "memory",
    "ephemeral-storage": "ephemeral-storage",
    "ephemeral_storage": "ephemeral-storage",
}
EnvValue = str | int | float | bool | Mapping[str, Any]
MountSpec = str | Mapping[str, Any]


def bad(field_path: str, problem: str, fix: str) -> JobValidationError:
    return JobValidationError(field_path, problem, fix)


# --------------------------------------------------------------------------- small converters


def split_command(value: str | Sequence[Any], field_path: str) -> list[str]:
    """A list of strings; a single string is split the way a shell would."""
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as exc:
            raise bad(
                field_path, f"cannot split {value!r} into arguments ({exc})", "pass a list of strings"
            ) from exc
    if isinstance(value, Mapping) or not isinstance(value, Iterable):
        raise bad(
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


def without_flags(args: list[str], keys: Iterable[str]) -> list[str]:
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
            raise bad(
                field_path, f"{value!r} does not name a {kind} and a key", f'write it as "{kind}-name:key"'
            )
        return {"name": name, "key": key}
    if isinstance(value, Mapping) and "name" in value and "key" in value:
        return dict(value)
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return {"name": str(value[0]), "key": str(value[1])}
    raise bad(
        field_path, f"cannot read {value!r} as a {kind} key reference", f'write it as "{kind}-name:key"'
    )


def env_entries(params: JobParameters) -> list[dict[str, Any]]:
    """Every env var the parameters set, each name once (two parameters setting one name is refused)."""
    entries: list[tuple[str, dict[str, Any]]] = []
    if params.env is not None:
        if isinstance(params.env, Mapping):
            for name, value in params.env.items():
                if isinstance(value, Mapping):
                    entry = {"name": str(name), **{k: v for k, v in value.items() if k != "name"}}
                elif value is None:
                    raise bad(f"env.{name}", "has no value", "give a value, or remove the variable")
                else:
                    entry = {"name": str(name), "value": _env_value(value)}
                entries.append((f"env.{name}", entry))
        else:
            for i, item in enumerate(params.env):
                if not isinstance(item, Mapping) or "name" not in item:
                    raise bad(f"env[{i}]", "is not an EnvVar with a name", 'use {"name": ..., "value": ...}')
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
            raise bad(
                where,
                f"sets {what} {value!r}, which {origin[value]} already sets (one would silently replace the other)",
                f"give the {what} in one place only, or rename one of them",
            )
        if value is not None:
            origin[value] = where
        out.append(entry)
    return out


def env_from_entries(values: Sequence[str | Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, item in enumerate(values):
        if isinstance(item, Mapping):
            out.append(dict(item))
            continue
        kind, sep, name = str(item).partition(":")
        kind = kind.lower().replace("_", "").replace("-", "")
        if not sep or not name or kind not in ("secret", "configmap"):
            raise bad(
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
                raise bad(
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
                raise bad(where, "needs a claim and a mount path", '{"claim": "data", "mount_path": "/data"}')
            read_only = bool(_get(item, "read_only", "readOnly", default=False))
            sub_path = _get(item, "sub_path", "subPath")
            name = item.get("name")
        else:
            raise bad(where, f"cannot read {item!r} as a PVC mount", 'write "claim:/mount/path"')
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
            raise bad(
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


def ports(value: Mapping[str, int] | Sequence[Mapping[str, Any] | int]) -> list[dict[str, Any]]:
    if isinstance(value, Mapping):
        return [{"name": str(name), "containerPort": port} for name, port in value.items()]
    entries = [
        (f"ports[{i}]", dict(item) if isinstance(item, Mapping) else {"containerPort": item})
        for i, item in enumerate(value)
    ]
    return _unique(entries, "port name", key="name")


def resource_patch(value: Mapping[str, Any], field_path: str) -> dict[str, dict[str, Any]]:
    """Turn the ``resources`` shorthand into ``{"requests": {...}, "limits": {...}}``."""
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    for key, qty in value.items():
        if key == "requests" or key == "limits":
            if not isinstance(qty, Mapping):
                raise bad(
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
            raise bad(
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


def volumes_and_mounts(p: JobParameters) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
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


def merge_named(existing: list[Any] | None, new: Iterable[Mapping[str, Any]], key: str = "name") -> list[Any]:
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


def merge_resources(container: dict[str, Any], patch: Mapping[str, Mapping[str, Any]]) -> None:
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
            raise bad(
                f"{field_path}.{key}",
                f"duplicates {origin[name]!r}: replica types are case-insensitive",
                f"merge them into one {name!r} entry",
            )
        out[name] = value
        origin[name] = key
    return out


def tensorflow_container(replica_spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The first container named ``tensorflow`` of a replica spec, the one the operator configures."""
    containers = ((replica_spec.get("template") or {}).get("spec") or {}).get("containers") or []
    for container in containers:
        if isinstance(container, dict) and container.get("name") == CONTAINER_NAME:
            return container
    return None
