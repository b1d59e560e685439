"""How a task reaches its cluster: the connection parameters the operator, the sensor and both
triggers take under the same names, handed on to the hooks (which call the first one ``conn_id``).

Pure and cheap to import (the operator and sensor modules import it at DAG parse time); the hook an
operator or sensor makes from them is :func:`airflow_tfjob.hooks.sync.task_hook`, their run modules'.
"""

from __future__ import annotations

from typing import Any

#: The parameter names, as the operator, the sensor and the triggers spell them.
CONNECTION_PARAMS: tuple[str, ...] = (
    "kubernetes_conn_id",
    "cluster_context",
    "config_file",
    "in_cluster",
    "api_retry_timeout",
)


def connection_of(owner: Any) -> dict[str, Any]:
    """The connection parameters of an operator, sensor or trigger, by their parameter names."""
    return {name: getattr(owner, name) for name in CONNECTION_PARAMS}


def hook_kwargs(owner: Any) -> dict[str, Any]:
    """The keyword arguments of KubeflowJobHook / AsyncKubeflowJobHook for the owner's connection."""
    connection = connection_of(owner)
    return {"conn_id": connection.pop("kubernetes_conn_id"), **connection}
