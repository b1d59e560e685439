"""Reads of a job's pods, services and events straight from an in-process store, shared by the
controller tests of every kind."""

from __future__ import annotations

from typing import Any

from airflow_tfjob.local.model.resources import ApiError
from airflow_tfjob.local.store.core import Store

NS = "default"


class StoreReads:
    store: Store

    def pod(self, name: str) -> dict[str, Any] | None:
        try:
            return self.store.get("pods", NS, name)
        except ApiError:
            return None

    def pods(self, job: str) -> list[dict[str, Any]]:
        items, _ = self.store.list("pods", NS, label_selector=f"training.kubeflow.org/job-name={job}")
        return items

    def services(self, job: str) -> list[dict[str, Any]]:
        items, _ = self.store.list("services", NS, label_selector=f"training.kubeflow.org/job-name={job}")
        return items

    def events(self, name: str) -> list[tuple[str, str, str]]:
        items, _ = self.store.list("events", NS, field_selector=f"involvedObject.name={name}")
        return [(e["type"], e["reason"], e["message"]) for e in items]
