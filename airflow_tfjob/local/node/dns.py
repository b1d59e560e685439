"""A stand-in for cluster DNS, as far as headless Services go: the runner keeps one file per headless
Service that has a ready endpoint (a Running pod with an IP matching its selector), named after the
Service in a directory per namespace and holding the endpoints' IPs, and removes it when none is left.
A process finds its namespace's directory in `TFJOB_LOCAL_DNS`, so "does `{job}-master-0` resolve" is
"does `$TFJOB_LOCAL_DNS/{job}-master-0` exist".

A pod with `hostname` and `subdomain` (a JobSet's pods, `<tj>-node-0-1.<tj>`) gets the record
`<hostname>.<subdomain>` (its pod IP) while it runs, as cluster DNS answers for a headless Service.

The PyTorchJob init container (`init-pytorch`) uses it: the operator's waits with
`nslookup {job}-master-0` every 2 s (100 tries) until the master pod is ready; the local one runs
`python -c WAIT_SCRIPT {job}-master-0`, which checks every 0.2 s (1000 tries, the same 200 s) and says
`waiting for master` about every 2 s."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from airflow_tfjob.local.model.resources import JsonDict

ENV_VAR = "TFJOB_LOCAL_DNS"

WAIT_SCRIPT = """import os, sys, time
name, message = sys.argv[1], sys.argv[2]
path = os.path.join(os.environ.get("TFJOB_LOCAL_DNS", ""), name)
for attempt in range(1000):
    if os.path.exists(path):
        print("Name:", name)
        print("Address:", open(path).read().split()[0] if open(path).read().split() else "")
        sys.exit(0)
    if attempt % 10 == 0:
        print(message, flush=True)
    time.sleep(0.2)
sys.exit(1)
"""


def wait_for_name_container(name: str, target: str, message: str) -> JsonDict:
    """An init container that ends once `target` resolves (the operator's image and resources are kept
    for the record; the local cluster pulls no image and enforces no limits)."""
    return {
        "name": name,
        "image": "alpine:3.10",
        "imagePullPolicy": "IfNotPresent",
        "resources": {"limits": {"cpu": "100m", "memory": "20Mi"}, "requests": {"cpu": "50m", "memory": "10Mi"}},
        "command": ["python", "-c", WAIT_SCRIPT, target, message],
    }


class LocalDns:
    """The records: `<root>/<namespace>/<service>`, written and removed by the runner."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def directory(self, namespace: str) -> str:
        return str(self.root / namespace)

    def publish(self, namespace: str, service: str, ips: list[str]) -> None:
        path = self.root / namespace / service
        if not ips:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            return
        text = "\n".join(ips) + "\n"
        with contextlib.suppress(OSError):
            if path.exists() and path.read_text() == text:
                return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{service}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
