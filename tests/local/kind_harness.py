"""Store + every kind's controller + runner on the test's event loop, for the PyTorchJob, XGBoostJob,
JAXJob and PaddleJob controller tests. Replica commands are tiny Python scripts; every wait is on a
condition with a timeout (a bound for a hung cluster, not an expectation)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from store_reads import NS, StoreReads
from waiting import until_async

from airflow_tfjob.jobs.kinds import JobKind, kind_named
from airflow_tfjob.local.admission.v1jobs import TFJobAdmission
from airflow_tfjob.local.controllers.v1.registry import CONTROLLERS
from airflow_tfjob.local.node.podlogs import PodLogs
from airflow_tfjob.local.node.ports import ANNOTATION_HOST_PORT
from airflow_tfjob.local.node.runner import Runner
from airflow_tfjob.local.store.core import Store

TIMEOUT = 30.0
SLEEP = "import time; time.sleep(3600)"
ENV_MARK = "ENV "


def exit_with(code: int) -> str:
    return f"import sys; sys.exit({code})"


def print_env(then: str = "") -> str:
    """Prints the environment as one JSON line (read back from the replica's log), then runs `then`."""
    return f"import json, os\nprint({ENV_MARK!r} + json.dumps(dict(os.environ)), flush=True)\n{then}"


def wait_file(path: Path, then: str = "") -> str:
    return f"import os, sys, time\nwhile not os.path.exists({str(path)!r}): time.sleep(0.02)\n{then}"


def replica(kind: JobKind, script: str, n: int | None = 1, policy: str | None = None, **pod: Any) -> dict[str, Any]:
    container = {"name": kind.container, "image": "python:3.11", "command": [sys.executable, "-c", script]}
    spec: dict[str, Any] = {"template": {"spec": {"containers": [container], **pod}}}
    if n is not None:
        spec["replicas"] = n
    if policy:
        spec["restartPolicy"] = policy
    return spec


def job(kind: JobKind, name: str, replicas: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind.kind,
        "metadata": {"name": name, "namespace": NS},
        "spec": {kind.spec_key: replicas, **spec},
    }


Condition = tuple[str, str, str]


@dataclass
class KindHarness(StoreReads):
    store: Store
    podlogs: PodLogs
    tmp: Path
    history: dict[tuple[str, str], list[list[Condition]]] = field(default_factory=dict)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.store.create(kind_named(obj["kind"]).plural, NS, obj)

    def job(self, kind: JobKind, name: str) -> dict[str, Any]:
        return self.store.get(kind.plural, NS, name)

    def status(self, kind: JobKind, name: str) -> dict[str, Any]:
        return self.job(kind, name).get("status") or {}

    def conditions(self, kind: JobKind, name: str) -> list[Condition]:
        return [(c["type"], c["status"], c["reason"]) for c in self.status(kind, name).get("conditions") or []]

    def message(self, kind: JobKind, name: str, ctype: str) -> str:
        for c in self.status(kind, name).get("conditions") or []:
            if c["type"] == ctype:
                return str(c["message"])
        raise AssertionError(f"no {ctype} condition on {name}")

    def has(self, kind: JobKind, name: str, ctype: str, status: str = "True") -> bool:
        return any(t == ctype and s == status for t, s, _ in self.conditions(kind, name))

    def host_port(self, pod: str) -> str:
        """The replica's host port, recorded on its pod (ports.py)."""
        found = self.pod(pod)
        assert found is not None
        return str(found["metadata"]["annotations"][ANNOTATION_HOST_PORT])

    def lines(self, pod: str, container: str) -> list[str]:
        log = self.podlogs.current(NS, pod, container)
        return [] if log is None else [line.decode() for _, line in log.entries]

    def printed_env(self, pod: str, container: str) -> dict[str, str] | None:
        for line in self.lines(pod, container):
            if line.startswith(ENV_MARK):
                return dict(json.loads(line[len(ENV_MARK):]))
        return None

    async def until(self, predicate: Callable[[], object], what: str = "", timeout: float = TIMEOUT) -> None:
        await until_async(predicate, what, timeout)

    async def env_of(self, pod: str, container: str) -> dict[str, str]:
        await self.until(lambda: self.printed_env(pod, container) is not None, f"{pod} to print its env")
        found = self.printed_env(pod, container)
        assert found is not None
        return found

    async def settled(self, kind: JobKind, name: str) -> list[list[Condition]]:
        """The distinct conditions lists the job went through, once the recorder has read the latest."""
        def caught_up() -> bool:
            seq = self.history.get((kind.plural, name)) or []
            return bool(seq) and seq[-1] == self.conditions(kind, name)

        await self.until(caught_up, "the recorder to catch up")
        return [s for s in self.history[(kind.plural, name)] if s]


async def running_harness(tmp: Path) -> AsyncIterator[KindHarness]:
    store = Store(admission=TFJobAdmission())
    podlogs = PodLogs()
    controllers = [c(store) for c in CONTROLLERS.values()]
    runner = Runner(store, podlogs, workdir=tmp)
    harness = KindHarness(store, podlogs, tmp)
    tasks = [asyncio.create_task(c.run()) for c in controllers] + [asyncio.create_task(runner.run())]

    async def record(plural: str) -> None:
        async for _etype, obj in store.watch(plural):
            conds = [(c["type"], c["status"], c["reason"]) for c in (obj.get("status") or {}).get("conditions") or []]
            seq = harness.history.setdefault((plural, obj["metadata"]["name"]), [])
            if not seq or seq[-1] != conds:
                seq.append(conds)

    tasks += [asyncio.create_task(record(c.job_pass.plural)) for c in controllers]
    try:
        yield harness
    finally:
        await runner.shutdown()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
