"""XGBoostJobOperator: a XGBoostJob as an Airflow task (KubeflowJobOperator with the kind fixed; import stays cheap)."""

from __future__ import annotations

from typing import ClassVar

from airflow_tfjob.operators.generic import KubeflowJobOperator

__all__ = ["XGBoostJobOperator"]


class XGBoostJobOperator(KubeflowJobOperator):
    """Run a Kubeflow XGBoostJob and wait for its outcome; the parameters are KubeflowJobOperator's
    (the manifest or template as ``job``), without ``kind``."""

    default_kind: ClassVar[str | None] = "XGBoostJob"
