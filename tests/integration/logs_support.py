"""Helpers for the log/follow tests: TFJobs whose replicas are small Python programs, and a list sink."""

from __future__ import annotations

import re
import sys
import textwrap
import threading
from typing import Any

from airflow_tfjob.constants import API_VERSION, KIND


def replica(
    script: str, replicas: int = 1, restart_policy: str = "Never", **container: Any
) -> dict[str, Any]:
    """A replica spec running `script` with this interpreter (the local runner runs processes)."""
    return {
        "replicas": replicas,
        "restartPolicy": restart_policy,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "tensorflow",
                        "image": "python:3.11",
                        "command": [sys.executable, "-u", "-c", textwrap.dedent(script)],
                        **container,
                    }
                ]
            }
        },
    }


def job(name: str, replicas: dict[str, dict[str, Any]], **run_policy: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"runPolicy": {"cleanPodPolicy": "None", **run_policy}, "tfReplicaSpecs": replicas}
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": spec}


class ListSink:
    """Collects sink records and their lines, as the task log view shows them.

    The follow core writes several lines per record (joined with newlines, each with its own prefix);
    `lines` is what a reader of the task log sees, `records` what the logger was called with.
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.records: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, record: str) -> None:
        with self._lock:
            self.records.append(record)
            self.lines.extend(record.split("\n"))

    def of(self, replica: str) -> list[str]:
        prefix = f"[{replica}] "
        return [line[len(prefix) :] for line in self.lines if line.startswith(prefix)]

    def count(self, pattern: str) -> int:
        rx = re.compile(pattern)
        return sum(1 for line in self.lines if rx.search(line))

    def text(self) -> str:
        return "\n".join(self.lines)
