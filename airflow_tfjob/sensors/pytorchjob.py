"""PyTorchJobSensor: wait for a named PyTorchJob to reach a condition (KubeflowJobSensor with the kind fixed)."""

from __future__ import annotations

from typing import ClassVar

from airflow_tfjob.sensors.generic import KubeflowJobSensor

__all__ = ["PyTorchJobSensor"]


class PyTorchJobSensor(KubeflowJobSensor):
    """Wait for the PyTorchJob ``name`` to reach ``target_condition`` (Succeeded, Running or Created)."""

    default_kind: ClassVar[str | None] = "PyTorchJob"
