"""TrainJobOperator's parameters, declared once (the same table form as operators/params.py).

The connection, logging, follow and lifecycle rows are the TFJob table's own (one definition each);
the manifest rows are :class:`~airflow_tfjob.trainjob.manifest.TrainJobParameters` fields.
"""

from __future__ import annotations

from typing import Any

from airflow_tfjob.operators.params import PARAMETERS, Param, ParameterSet

_SHARED = {p.name: p for p in PARAMETERS}
T = True


def _shared(*names: str) -> tuple[Param, ...]:
    return tuple(_SHARED[name] for name in names)


def _manifest(name: str, templated: bool = False) -> Param:
    return Param(name, "manifest", templated)


#: In the order of TrainJobOperator's signature.
TRAINJOB_ROWS: tuple[Param, ...] = (
    Param("trainjob", "job", T),
    *_shared("name", "namespace", "kubernetes_conn_id", "cluster_context", "config_file", "in_cluster"),
    *_shared("api_retry_timeout"),
    _manifest("runtime", T),
    _manifest("runtime_kind"),
    *(_manifest(n, T) for n in ("image", "command", "args", "hyperparameters", "env", "secret_env")),
    _manifest("num_nodes", T),
    _manifest("resources_per_node", T),
    _manifest("num_proc_per_node"),
    _manifest("dataset_storage_uri", T),
    _manifest("model_storage_uri", T),
    _manifest("runtime_patches", T),
    *(_manifest(n, T) for n in ("labels", "annotations")),
    *(_manifest(n) for n in ("suspend", "active_deadline_seconds", "managed_by")),
    _manifest("kueue_queue", T),
    *_shared("log_replicas", "get_logs", "metrics", "metrics_history", "progress", "startup_timeout"),
    *_shared("queue_timeout", "on_preemption", "kueue_require_admission", "kueue_workload_window"),
    *_shared(
        "log_rate_per_replica", "log_total_cap", "tensorboard", "tensorboard_log_dir", "tensorboard_keep"
    ),
    *_shared("deferrable", "on_finish_action", "on_kill_action", "kill_grace_period", "render_only"),
    *_shared("model_asset", "lineage_inputs", "lineage_outputs"),
    *_shared("allow_template_outside_dag_folder", "allow_template_path_from_params"),
)
TRAINJOB_PARAMETERS = ParameterSet(TRAINJOB_ROWS)


def trainjob_arguments(operator: Any) -> dict[str, Any]:
    """The keyword arguments of trainjob.manifest.build_trainjob: the manifest parameters that are set."""
    return {
        name: getattr(operator, name)
        for name in TRAINJOB_PARAMETERS.manifest_params
        if getattr(operator, name, None) is not None
    }
