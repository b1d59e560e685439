"""PaddleJobSensor: wait for a named PaddleJob to reach a condition (KubeflowJobSensor with the kind fixed)."""

from __future__ import annotations

from typing import ClassVar

from airflow_tfjob.sensors.generic import KubeflowJobSensor

__all__ = ["PaddleJobSensor"]


class PaddleJobSensor(KubeflowJobSensor):
    """Wait for the PaddleJob ``name`` to reach ``target_condition`` (Succeeded, Running or Created)."""

    default_kind: ClassVar[str | None] = "PaddleJob"
