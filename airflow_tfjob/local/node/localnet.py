"""Local addresses for the pods of a JobSet (Trainer v2's TrainJobs).

On a cluster every JobSet pod has a stable DNS name `<job>-<index>.<subdomain>` (hostname + the headless
Service), its own IP, and all of them listen on the same port (29500 for the torch/JAX/XGBoost
plugins). Here every pod runs on this host, where a name of that form does not resolve and two pods
cannot bind one port. So, as for the v1 kinds' Service names (ports.py), the JobSet controller gives each
pod of a JobSet its own free 127.0.0.1 port (the map travels on the JobSet's Jobs as the annotation
`local.tfjob.dev/host-ports`), and when the Job controller creates a pod it rewrites, in the env values,
command and args of its containers, every `<pod name>.<subdomain>[.<ns>[.svc[.cluster.local]]][:port]`
to `127.0.0.1[:<that pod's host port>]`, and the value of a port variable paired with such an address
(`PET_MASTER_PORT` with `PET_MASTER_ADDR`, `DMLC_TRACKER_PORT` with `DMLC_TRACKER_URI`) to that pod's
host port. The JobSet and Job objects keep the values the real controllers write; the pod records its
own port as `local.tfjob.dev/host-port`, as v1 replicas do.
"""

from __future__ import annotations

import json
import re
from typing import Any

from airflow_tfjob.local.model.resources import JsonDict
from airflow_tfjob.local.node.ports import ANNOTATION_HOST_PORT

ANNOTATION_HOST_PORTS = "local.tfjob.dev/host-ports"
LOCAL_HOST = "127.0.0.1"
# Port variables whose value is the port of the pod named by the paired address variable.
PORT_OF = {"PET_MASTER_PORT": "PET_MASTER_ADDR", "DMLC_TRACKER_PORT": "DMLC_TRACKER_URI",
           "MASTER_PORT": "MASTER_ADDR"}


def host_ports(annotations: JsonDict | None) -> dict[str, int]:
    raw = (annotations or {}).get(ANNOTATION_HOST_PORTS)
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return {str(k): int(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _pattern(ports: dict[str, int], subdomain: str, namespace: str) -> re.Pattern[str]:
    names = "|".join(re.escape(h) for h in sorted(ports, key=len, reverse=True))
    suffix = rf"(?:\.{re.escape(namespace)}(?:\.svc(?:\.cluster\.local)?)?)?"
    return re.compile(rf"(?<![\w.-])({names})\.{re.escape(subdomain)}{suffix}(?::(\d+))?(?![\w-])")


def localize_pod(pod: JsonDict, ports: dict[str, int]) -> None:
    """Rewrite the JobSet pod names in `pod`'s containers to local addresses, and record its own port."""
    spec = pod.get("spec") or {}
    subdomain, hostname = spec.get("subdomain"), spec.get("hostname")
    if not ports or not subdomain:
        return
    if hostname in ports:
        pod["metadata"].setdefault("annotations", {})[ANNOTATION_HOST_PORT] = str(ports[hostname])
    pattern = _pattern(ports, subdomain, pod["metadata"].get("namespace", "default"))

    def sub(text: Any) -> Any:
        if not isinstance(text, str):
            return text
        return pattern.sub(lambda m: LOCAL_HOST + (f":{ports[m.group(1)]}" if m.group(2) else ""), text)

    for group in ("initContainers", "containers"):
        for container in spec.get(group) or []:
            for key in ("command", "args"):
                if isinstance(container.get(key), list):
                    container[key] = [sub(a) for a in container[key]]
            env = container.get("env") or []
            addresses = {e.get("name"): e.get("value") for e in env if isinstance(e, dict)}
            for entry in env:
                if not isinstance(entry, dict) or "value" not in entry:
                    continue
                paired = addresses.get(PORT_OF.get(entry.get("name", ""), ""))
                match = pattern.fullmatch(paired) if isinstance(paired, str) else None
                if match is not None and str(entry["value"]).isdigit():
                    entry["value"] = str(ports[match.group(1)])
                else:
                    entry["value"] = sub(entry["value"])
