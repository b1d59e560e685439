"""The hooks' public import path: the names DAGs and the documentation use.

``KubeflowJobHook`` (hooks/sync.py) is synchronous: the operator's submit and the sensor's pokes.
``AsyncKubeflowJobHook`` (hooks/aio.py) is what the follow core uses in both modes. Both serve every job
kind. The provider's own modules import the defining modules, not this one, so that a DAG's import path
stays one module however the hooks' code is laid out.
"""

from __future__ import annotations

from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook
from airflow_tfjob.hooks.sync import KubeflowJobHook

__all__ = ["AsyncKubeflowJobHook", "KubeflowJobHook"]
