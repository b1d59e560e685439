"""The hooks' public import path: the names DAGs and the documentation use.

``KubeflowJobHook`` (hooks/sync.py) is synchronous: the operator's submit and the sensor's pokes.
``AsyncKubeflowJobHook`` (hooks/aio.py) is what the follow core uses in both modes. Both serve every job
kind; ``TFJobHook`` and ``AsyncTFJobHook`` are release 0.1.0's names of the same classes. The provider's
own modules import the defining modules, not this one.
"""

from __future__ import annotations

from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook
from airflow_tfjob.hooks.sync import KubeflowJobHook

TFJobHook = KubeflowJobHook
AsyncTFJobHook = AsyncKubeflowJobHook

__all__ = ["AsyncKubeflowJobHook", "AsyncTFJobHook", "KubeflowJobHook", "TFJobHook"]
