"""How a task reaches its cluster: the connection parameters the operator, the sensor and both
triggers take under the same names, handed on to the hooks (which call the first one ``conn_id``).

Pure and cheap to import (the operator and sensor modules import it at DAG parse time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_tfjob.hooks.sync import KubeflowJobHook

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


def task_hook(owner: Any) -> KubeflowJobHook:
    """The synchronous hook of an operator or sensor, made once per instance.

    A new hook loads the kubeconfig again, and for an exec credential plugin (EKS, GKE, AKS: a second
    or more per run) that means running the plugin again: a task made one per step, a poking sensor
    one per poke. The one hook keeps its client; its token is refreshed by the client and a 401 makes
    it reload its credentials (hooks/sync.py).
    """
    hook: KubeflowJobHook | None = owner.__dict__.get("_task_hook")
    if hook is None:
        # The Kubernetes client comes with the hook: imported when a task first asks for one, as the
        # operator and sensor modules import this one at DAG parse time (the light-dag-parse contract).
        from airflow_tfjob.hooks.sync import KubeflowJobHook

        hook = owner.__dict__["_task_hook"] = KubeflowJobHook(**hook_kwargs(owner))
    return hook
