"""XGBoostJobSensor: wait for a named XGBoostJob to reach a condition (KubeflowJobSensor with the kind fixed)."""

from __future__ import annotations

from typing import ClassVar

from airflow_tfjob.sensors.generic import KubeflowJobSensor

__all__ = ["XGBoostJobSensor"]


class XGBoostJobSensor(KubeflowJobSensor):
    """Wait for the XGBoostJob ``name`` to reach ``target_condition`` (Succeeded, Running or Created)."""

    default_kind: ClassVar[str | None] = "XGBoostJob"
