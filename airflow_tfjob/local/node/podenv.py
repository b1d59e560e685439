"""A pod's environment on this node, as the kubelet builds it: env and envFrom (values, secretKeyRef,
configMapKeyRef, fieldRef, resourceFieldRef), `$(VAR)` expansion, the host's PATH with this interpreter
first, pod loopback IPs, GPU devices (CUDA_VISIBLE_DEVICES), the working directory and the check that the
command can be started. Process supervision lives in podrun.py."""

from __future__ import annotations

import base64
import contextlib
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from airflow_tfjob.constants import GPU_RESOURCE
from airflow_tfjob.local.model.resources import ApiError, JsonDict
from airflow_tfjob.local.node.dns import ENV_VAR as DNS_ENV_VAR
from airflow_tfjob.local.store.core import Store

HOST_IP = "127.0.0.1"
_VAR_REF = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")


def expand(value: str, variables: dict[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion: defined names are replaced, `$$` gives `$`, the rest stays."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return variables[name] if name in variables else m.group(0)

    return _VAR_REF.sub(sub, value)


def gpu_request(pod: JsonDict) -> int:
    total = 0
    for c in pod.get("spec", {}).get("containers") or []:
        res = c.get("resources") or {}
        value = (res.get("limits") or {}).get(GPU_RESOURCE, (res.get("requests") or {}).get(GPU_RESOURCE, 0))
        try:
            total += int(str(value))
        except ValueError:
            continue
    return total


class ConfigError(Exception):
    """The container's configuration cannot be resolved yet (missing secret, config map or key)."""


class IpPool:
    """Loopback addresses 127.0.1.1 ... 127.0.255.254, one per running pod."""

    def __init__(self) -> None:
        self._free: list[str] = []
        self._next = 256 + 1

    def take(self) -> str:
        if self._free:
            return self._free.pop(0)
        n = self._next
        self._next += 1
        if n % 256 in (0, 255):
            return self.take()
        return f"127.0.{n >> 8}.{n & 255}"

    def give(self, ip: str) -> None:
        self._free.append(ip)


class PodEnvironment:
    """What one pod's containers see: resolved from the store each time a container (re)starts, so a
    secret created late is picked up on the retry."""

    def __init__(
        self,
        store: Store,
        pod: JsonDict,
        pod_ip: str,
        gpus: list[str],
        *,
        node_name: str,
        gpus_configured: bool,
        workdir: Path | None,
        dns_dir: str | None = None,
        volumes_dir: Path | None = None,
    ) -> None:
        self.store = store
        self.pod = pod
        meta = pod["metadata"]
        self.namespace, self.name, self.uid = meta["namespace"], meta["name"], meta["uid"]
        self.pod_ip = pod_ip
        self.gpus = gpus
        self.node_name = node_name
        self.gpus_configured = gpus_configured
        self.workdir = workdir
        self.dns_dir = dns_dir
        self.volumes_dir = volumes_dir

    def field(self, path: str) -> str:
        meta = self.pod["metadata"]
        m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']*)'\]", path)
        if m:
            return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
        simple = {
            "metadata.name": self.name,
            "metadata.namespace": self.namespace,
            "metadata.uid": self.uid,
            "spec.nodeName": self.node_name,
            "spec.serviceAccountName": self.pod.get("spec", {}).get("serviceAccountName", "default"),
            "status.podIP": self.pod_ip,
            "status.podIPs": self.pod_ip,
            "status.hostIP": HOST_IP,
            "status.hostIPs": HOST_IP,
        }
        if path not in simple:
            raise ConfigError(f"unsupported fieldPath: {path}")
        return simple[path]

    def lookup(self, kind: str, name: str, key: str | None, optional: bool) -> dict[str, str] | str | None:
        rtype = "secrets" if kind == "Secret" else "configmaps"
        try:
            obj = self.store.get(rtype, self.namespace, name)
        except ApiError:
            if optional:
                return None
            raise ConfigError(f'{kind.lower()} "{name}" not found') from None
        data: dict[str, str] = {}
        if kind == "Secret":
            for k, v in (obj.get("data") or {}).items():
                data[k] = base64.b64decode(v).decode(errors="replace")
        else:
            data.update(obj.get("data") or {})
        if key is None:
            return data
        if key not in data:
            if optional:
                return None
            raise ConfigError(f"couldn't find key {key} in {kind} {self.namespace}/{name}")
        return data[key]

    def environment(self, spec: JsonDict) -> tuple[dict[str, str], dict[str, str]]:
        """(process environment, the container's own variables used for $(VAR) expansion)."""
        own: dict[str, str] = {}
        for source in spec.get("envFrom") or []:
            prefix = source.get("prefix", "")
            for kind, field in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
                ref = source.get(field)
                if ref:
                    found = self.lookup(kind, ref.get("name", ""), None, bool(ref.get("optional")))
                    if isinstance(found, dict):
                        own.update({prefix + k: v for k, v in found.items()})
        for item in spec.get("env") or []:
            name = item.get("name", "")
            if "valueFrom" not in item:
                own[name] = expand(str(item.get("value", "")), own)
                continue
            source = item["valueFrom"] or {}
            value: Any = None
            if "fieldRef" in source:
                value = self.field(source["fieldRef"].get("fieldPath", ""))
            elif "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                value = self.lookup(
                    "Secret", ref.get("name", ""), ref.get("key", ""), bool(ref.get("optional"))
                )
            elif "configMapKeyRef" in source:
                ref = source["configMapKeyRef"]
                value = self.lookup(
                    "ConfigMap", ref.get("name", ""), ref.get("key", ""), bool(ref.get("optional"))
                )
            elif "resourceFieldRef" in source:
                value = self._resource_field(spec, source["resourceFieldRef"])
            if isinstance(value, str):
                own[name] = value
        mounts = self.claim_mounts(spec)
        own = {name: host_path(value, mounts) for name, value in own.items()}
        env = dict(os.environ)
        # The "image" is this host's environment: put the interpreter the cluster runs on first, so that a
        # replica's bare `python` (as written for a real image) finds the same packages (TensorFlow).
        interpreter_dir = os.path.dirname(sys.executable)
        env["PATH"] = os.pathsep.join([interpreter_dir, env.get("PATH", os.defpath)])
        # A pod's hostname is spec.hostname when set (a JobSet's pods: <job>-<index>), else its name.
        env["HOSTNAME"] = str((self.pod.get("spec") or {}).get("hostname") or self.name)
        env["PYTHONUNBUFFERED"] = "1"
        if self.dns_dir is not None:
            env[DNS_ENV_VAR] = self.dns_dir  # where names of headless Services resolve (dns.py)
        if self.gpus or self.gpus_configured:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpus)
        env.update(own)
        return env, own

    def claim_mounts(self, spec: JsonDict) -> list[tuple[str, str]]:
        """(mountPath, host directory) of each PersistentVolumeClaim the container mounts, longest path
        first. This node has no mount namespaces: a claim is a host directory per namespace and claim
        (created on first use, kept with the cluster's files, bound without a PVC object), and a path
        under its mountPath is rewritten to that directory where the container is told it."""
        if self.volumes_dir is None:
            return []
        claims = {
            str(v.get("name")): str((v.get("persistentVolumeClaim") or {}).get("claimName") or "")
            for v in (self.pod.get("spec") or {}).get("volumes") or []
            if isinstance(v, dict) and v.get("persistentVolumeClaim")
        }
        found: list[tuple[str, str]] = []
        for mount in spec.get("volumeMounts") or []:
            claim = claims.get(str(mount.get("name")))
            path = str(mount.get("mountPath") or "").rstrip("/")
            if not claim or not path:
                continue
            host = self.volumes_dir / self.namespace / claim / str(mount.get("subPath") or "")
            with contextlib.suppress(OSError):
                host.mkdir(parents=True, exist_ok=True)
            found.append((path, str(host).rstrip("/")))
        return sorted(found, key=lambda item: -len(item[0]))

    @staticmethod
    def _resource_field(spec: JsonDict, ref: JsonDict) -> str:
        resource = str(ref.get("resource", ""))
        section, _, name = resource.partition(".")
        value = ((spec.get("resources") or {}).get(section) or {}).get(name)
        return "0" if value is None else str(value)

    def working_dir(self, spec: JsonDict) -> str | None:
        wd = spec.get("workingDir")
        path = Path(wd) if wd else self.workdir
        if path is None:
            return None
        with contextlib.suppress(OSError):
            path.mkdir(parents=True, exist_ok=True)
        return str(path)


def host_path(value: str, mounts: list[tuple[str, str]]) -> str:
    """``value`` with a leading claim mountPath (alone, or after ``--flag=``) turned into its host
    directory (PodEnvironment.claim_mounts); anything else as it is."""
    flag, sep, rest = value.partition("=") if value.startswith("-") else ("", "", value)
    for path, host in mounts:
        if rest == path or rest.startswith(path + "/"):
            return f"{flag}{sep}{host}{rest[len(path):]}"
    return value


def check_executable(argv: list[str], env: dict[str, str]) -> str | None:
    if not argv:
        return "exec: no command specified"
    exe = argv[0]
    if "/" in exe:
        if not os.path.exists(exe):
            return f'exec: "{exe}": stat {exe}: no such file or directory'
        if os.path.isdir(exe) or not os.access(exe, os.X_OK):
            return f'exec: "{exe}": permission denied'
        return None
    if shutil.which(exe, path=env.get("PATH", os.defpath)) is None:
        return f'exec: "{exe}": executable file not found in $PATH'
    return None

# ---- status
