"""JAXJobSensor: wait for a named JAXJob to reach a condition (KubeflowJobSensor with the kind fixed)."""

from __future__ import annotations

from typing import ClassVar

from airflow_tfjob.sensors.generic import KubeflowJobSensor

__all__ = ["JAXJobSensor"]


class JAXJobSensor(KubeflowJobSensor):
    """Wait for the JAXJob ``name`` to reach ``target_condition`` (Succeeded, Running or Created)."""

    default_kind: ClassVar[str | None] = "JAXJob"
