"""The checks of one container of a pod template (image, command, env, resources, mounts, ports).

Called by :mod:`airflow_tfjob.build.validation` for every container of every replica's pod template; it
uses the checker and value syntax of :mod:`airflow_tfjob.build.checker`. What is checked and
why is described in :mod:`airflow_tfjob.build.validation`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from airflow_tfjob.build.checker import CLASSIC_ENV_RE, PRINTABLE_ENV_RE, Checker, is_int
from airflow_tfjob.constants import GPU_RESOURCE

PULL_POLICIES = ("Always", "IfNotPresent", "Never")


def validate_container(
    check: Checker, container: Mapping[str, Any], cpath: str, volumes: set[str], *, is_init: bool
) -> None:
    image = container.get("image")
    if not isinstance(image, str) or not image.strip():
        check.error(
            f"{cpath}.image",
            "is missing or empty (the webhook refuses it)",
            "set image: to the training image, or pass image= to the operator",
        )
    else:
        validate_image(check, image, f"{cpath}.image")
    check.choice(
        container.get("imagePullPolicy"), f"{cpath}.imagePullPolicy", PULL_POLICIES,
        "is not an image pull policy (Kubernetes compares it case-sensitively)",
    )  # fmt: skip
    for key in ("command", "args"):
        for j, item in enumerate(check.seq(container.get(key), f"{cpath}.{key}")):
            if not isinstance(item, str):
                check.error(
                    f"{cpath}.{key}[{j}]",
                    f"{item!r} is a {type(item).__name__}, not a string",
                    f'quote it: "{item}"',
                )
    env_names: dict[str, int] = {}
    for j, epath, entry in check.entries(container.get("env"), f"{cpath}.env", "{name: ..., value: ...}"):
        validate_env_entry(check, entry, epath)
        ename = entry.get("name")
        if isinstance(ename, str):
            if ename in env_names:
                check.warn(
                    f"{epath}.name",
                    f"{ename} is set more than once (also at {cpath}.env[{env_names[ename]}]); the last value wins",
                )
            env_names.setdefault(ename, j)
    for j, source in enumerate(check.seq(container.get("envFrom"), f"{cpath}.envFrom")):
        spath = f"{cpath}.envFrom[{j}]"
        refs = [k for k in ("secretRef", "configMapRef") if isinstance(source, Mapping) and k in source]
        if len(refs) != 1:
            check.error(
                spath,
                "must have exactly one of secretRef or configMapRef",
                "write {secretRef: {name: ...}} or {configMapRef: {name: ...}}",
            )
        elif not isinstance(source[refs[0]], Mapping) or not source[refs[0]].get("name"):
            check.error(f"{spath}.{refs[0]}.name", "is missing", "name the Secret or ConfigMap")
    validate_resources(check, container.get("resources"), f"{cpath}.resources")
    mount_paths: set[str] = set()
    mounts = check.entries(
        container.get("volumeMounts"), f"{cpath}.volumeMounts", "{name: ..., mountPath: ...}"
    )
    for _, mpath, mount in mounts:
        mname = mount.get("name")
        if mname not in volumes:
            check.error(
                f"{mpath}.name",
                f"mounts volume {mname!r}, which the pod does not declare (declared: {sorted(volumes)})",
                "add it to the pod's volumes (or use the pvc=/secret_volumes= shortcuts), or fix the name",
            )
        mount_path = mount.get("mountPath")
        if not isinstance(mount_path, str) or not mount_path:
            check.error(
                f"{mpath}.mountPath", "is missing or empty", "set mountPath to an absolute path such as /data"
            )
        elif mount_path in mount_paths:
            check.error(
                f"{mpath}.mountPath",
                f"{mount_path!r} is mounted twice in this container",
                "mount each path once",
            )
        else:
            mount_paths.add(mount_path)
    port_names: set[str] = set()
    ports = check.entries(container.get("ports"), f"{cpath}.ports", "{name: tfjob-port, containerPort: 2222}")
    for _, ppath, port in ports:
        for key in ("containerPort", "hostPort"):
            number = port.get(key)
            if number is None and key == "hostPort":
                continue
            if not is_int(number) or not 1 <= number <= 65535:
                check.error(
                    f"{ppath}.{key}", f"{number!r} is not a port number", "use an integer between 1 and 65535"
                )
        if port.get("name") is not None:
            check.unique_name(port["name"], f"{ppath}.name", "port", port_names, port=True)
    working_dir = container.get("workingDir")
    if working_dir is not None and not isinstance(working_dir, str):
        check.error(
            f"{cpath}.workingDir", f"{working_dir!r} is not a path", "write workingDir as a string path"
        )
    del is_init


def validate_image(check: Checker, image: str, path: str) -> None:
    """Whitespace and invisible characters: pasted from a document, they make the pull fail at run time
    (every API's container: the v1 kinds' replicas and a TrainJob's trainer)."""
    for i, char in enumerate(image):
        if char.isspace() or unicodedata.category(char) in ("Cc", "Cf", "Zs", "Zl", "Zp"):
            check.error(
                path,
                f"contains whitespace or an invisible character (U+{ord(char):04X} at position {i})",
                "retype the image reference: registry/name:tag without spaces or pasted formatting characters",
            )
            return


def validate_env_entry(check: Checker, entry: Mapping[str, Any], epath: str) -> None:
    """One EnvVar of any API's container: its name's syntax, a string value, one source."""
    ename = entry.get("name")
    if not isinstance(ename, str) or not ename or not PRINTABLE_ENV_RE.match(ename):
        check.error(
            f"{epath}.name",
            f"{ename!r} is not a valid environment variable name",
            "use letters, digits, '_', '-' and '.', starting with a letter or '_' (no spaces or '=')",
        )
    elif not CLASSIC_ENV_RE.match(ename):
        check.warn(
            f"{epath}.name",
            f"{ename!r} is only accepted by Kubernetes 1.32 or later; start it with a letter or '_'",
        )
    has_value = "value" in entry and entry.get("value") is not None
    value_from = entry.get("valueFrom")
    if has_value and not isinstance(entry["value"], str):
        val = entry["value"]
        check.error(
            f"{epath}.value",
            f"{val!r} is a {type(val).__name__}; environment values must be strings",
            f'quote it: "{str(val).lower() if isinstance(val, bool) else val}"',
        )
    if has_value and value_from is not None:
        check.error(epath, "has both value and valueFrom", "keep one of them")
    if value_from is not None:
        sources = ("secretKeyRef", "configMapKeyRef", "fieldRef", "resourceFieldRef")
        present = [s for s in sources if isinstance(value_from, Mapping) and s in value_from]
        if len(present) != 1:
            check.error(
                f"{epath}.valueFrom", "must have exactly one source", f"use one of {', '.join(sources)}"
            )
        elif present[0] in ("secretKeyRef", "configMapKeyRef"):
            ref = value_from[present[0]]
            if not isinstance(ref, Mapping) or not ref.get("name") or not ref.get("key"):
                check.error(
                    f"{epath}.valueFrom.{present[0]}",
                    "needs both name and key",
                    "write {name: <object>, key: <key>}",
                )


def validate_resources(check: Checker, resources: Any, rpath: str) -> None:
    """A ResourceRequirements (a replica's container's, a TrainJob's resources_per_node): quantities,
    whole GPUs, requests within limits, GPUs not overcommitted: what the API server refuses only at
    pod creation, long after the job was admitted."""
    res = check.mapping(resources, rpath)
    if not res:
        return
    check.unknown_keys(res, ("requests", "limits", "claims"), rpath)
    parsed: dict[str, dict[str, Decimal]] = {"requests": {}, "limits": {}}
    for section in ("requests", "limits"):
        values = check.mapping(res.get(section), f"{rpath}.{section}")
        for name, qty in (values or {}).items():
            qpath = f"{rpath}.{section}.{name}"
            if name == "gpus" or name == "gpu":
                check.error(
                    qpath,
                    f"{name!r} is not a Kubernetes resource name",
                    f"use {GPU_RESOURCE!r} (or the operator's gpus= parameter)",
                )
                continue
            number = check.quantity(qty, qpath)
            if number is None:
                continue
            if name == GPU_RESOURCE and number != number.to_integral_value():
                check.error(qpath, f"{qty!r} is not a whole number of GPUs", "request whole GPUs, e.g. 1")
                continue
            parsed[section][name] = number
    for name, request in parsed["requests"].items():
        limit = parsed["limits"].get(name)
        if limit is not None and request > limit:
            check.error(
                f"{rpath}.requests.{name}",
                f"request {res['requests'][name]!r} is above the limit {res['limits'][name]!r}",
                "lower the request or raise the limit",
            )
    gpu_request = parsed["requests"].get(GPU_RESOURCE)
    if gpu_request is not None and gpu_request != parsed["limits"].get(GPU_RESOURCE):
        check.error(
            f"{rpath}.limits.{GPU_RESOURCE}",
            "GPUs cannot be overcommitted: the limit must be set and equal the request",
            f"set limits.{GPU_RESOURCE} (requests may be left out)",
        )
