"""TrainJobSensor: wait for a named Kubeflow Trainer v2 TrainJob to reach a condition (KubeflowJobSensor with the kind fixed)."""

from __future__ import annotations

from typing import ClassVar

from airflow_tfjob.sensors.generic import KubeflowJobSensor

__all__ = ["TrainJobSensor"]


class TrainJobSensor(KubeflowJobSensor):
    """Wait for the TrainJob ``name`` to reach ``target_condition`` (Succeeded, Running or Created).

    A TrainJob has no Running or Created condition (trainjob-behaviour.md §6): "Running" is read from
    its jobsStatus (a replicated job with an active Job), "Created" from its existence.
    """

    default_kind: ClassVar[str | None] = "TrainJob"
