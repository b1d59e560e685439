"""TFJobOperator: run one Kubeflow TFJob (distributed TensorFlow training) as an Airflow task.

The story lives in :class:`~airflow_tfjob.operators.generic.KubeflowJobOperator`; this class fixes
the kind and keeps the parameters TFJob DAGs were written with (``tfjob=`` for the manifest or
template, TFJob's replica shortcuts, no PyTorch-only ones). Importing it stays cheap (see generic.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_tfjob.constants import JOB_STATE_KEY, KILL_GRACE_PERIOD, RESULT_KEYS, TRIGGER_TIMEOUT_MARGIN
from airflow_tfjob.hooks.retry import DEFAULT_RETRY_TIMEOUT
from airflow_tfjob.operators import params
from airflow_tfjob.operators.generic import KubeflowJobOperator
from airflow_tfjob.version_compat import conf

if TYPE_CHECKING:
    from airflow.sdk import Asset

    from airflow_tfjob.integrations.tensorboard import TensorBoardSpec

# Re-exported: tests, DAGs and the decorator import them from here.
__all__ = ["MANIFEST_PARAMS", "REPLICA_SHORTCUTS", "RESULT_KEYS", "STATE_KEY", "TRIGGER_TIMEOUT_MARGIN"]
__all__ += ["TFJobOperator"]
MANIFEST_PARAMS = params.MANIFEST_PARAMS
REPLICA_SHORTCUTS = params.REPLICA_SHORTCUTS
STATE_KEY = JOB_STATE_KEY


class TFJobOperator(KubeflowJobOperator):
    """Run a Kubeflow TFJob (distributed TensorFlow training) and wait for its outcome.

    :class:`~airflow_tfjob.operators.generic.KubeflowJobOperator` with ``kind="TFJob"``, the manifest
    or template given as ``tfjob`` (a dict, a YAML string, or a ``.yaml``/``.yml``/``.json`` file
    rendered with Jinja); everything else is described there.
    """

    parameter_table: ClassVar[params.ParameterSet] = params.TFJOB_PARAMETERS
    job_field = "tfjob"
    default_kind: ClassVar[str | None] = "TFJob"
    template_fields: Sequence[str] = params.TEMPLATE_FIELDS
    template_fields_renderers = params.RENDERERS

    def __init__(
        self,
        *,
        tfjob: dict[str, Any] | str | None = None,
        name: str | None = None,
        namespace: str | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
        cluster_context: str | None = None,
        config_file: str | None = None,
        in_cluster: bool | None = None,
        api_retry_timeout: float | None = DEFAULT_RETRY_TIMEOUT,
        chief: int | None = None,
        master: int | None = None,
        ps: int | None = None,
        worker: int | None = None,
        evaluator: int | None = None,
        replicas: dict[str, int] | None = None,
        restart_policy: str | dict[str, str] | None = None,
        image: str | None = None,
        images: dict[str, str] | None = None,
        image_pull_policy: str | None = None,
        command: str | list[str] | None = None,
        args: str | list[Any] | None = None,
        hyperparameters: dict[str, Any] | None = None,
        env: dict[str, Any] | list[dict[str, Any]] | None = None,
        secret_env: dict[str, str] | None = None,
        env_from_secrets: dict[str, Any] | None = None,
        env_from_config_maps: dict[str, Any] | None = None,
        env_from: list[Any] | None = None,
        container_resources: dict[str, Any] | None = None,
        gpus: int | None = None,
        replica_resources: dict[str, dict[str, Any]] | None = None,
        replica_placement: dict[str, dict[str, Any]] | None = None,
        volume_mounts: list[dict[str, Any]] | None = None,
        working_dir: str | None = None,
        ports: dict[str, int] | list[Any] | None = None,
        volumes: list[dict[str, Any]] | None = None,
        pvc: str | dict[str, Any] | list[Any] | None = None,
        secret_volumes: dict[str, str] | list[dict[str, Any]] | None = None,
        config_map_volumes: dict[str, str] | list[dict[str, Any]] | None = None,
        node_selector: dict[str, str] | None = None,
        tolerations: list[dict[str, Any]] | None = None,
        service_account: str | None = None,
        image_pull_secrets: list[str] | None = None,
        pod_labels: dict[str, str] | None = None,
        pod_annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        kueue_queue: str | None = None,
        clean_pod_policy: str | None = None,
        ttl_seconds_after_finished: int | None = None,
        active_deadline_seconds: int | None = None,
        backoff_limit: int | None = None,
        suspend: bool | None = None,
        managed_by: str | None = None,
        scheduling: dict[str, Any] | None = None,
        success_policy: str | None = None,
        enable_dynamic_worker: bool | None = None,
        log_replicas: str = "master",
        get_logs: bool = True,
        metrics: list[str] | None = None,
        metrics_history: bool = False,
        progress: dict[str, Any] | None = None,
        startup_timeout: float | None = 600.0,
        queue_timeout: float | None = None,
        on_preemption: str = "wait",
        kueue_require_admission: bool = False,
        kueue_workload_window: float = 30.0,
        multikueue_connections: dict[str, str] | None = None,
        log_rate_per_replica: int = 1000,
        log_total_cap: int = 1_000_000,
        tensorboard: bool | str | dict[str, Any] | TensorBoardSpec | None = None,
        tensorboard_log_dir: str | None = None,
        tensorboard_keep: bool = False,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        on_finish_action: str = "keep",
        keep_failed_for: float | timedelta | None = None,
        on_kill_action: str = "delete",
        kill_grace_period: int | None = KILL_GRACE_PERIOD,
        render_only: bool = False,
        preflight: bool = False,
        model_asset: Asset | str | None = None,
        lineage_inputs: list[Asset | str] | None = None,
        lineage_outputs: list[Asset | str] | None = None,
        checkpoint: str | dict[str, str] | None = None,
        allow_template_outside_dag_folder: bool = False,
        allow_template_path_from_params: bool = False,
        api: str = "auto",
        retry_policy: Any = None,
        **kwargs: Any,
    ) -> None:
        given = {key: value for key, value in locals().items() if key in params.NAMES}
        super().__init__(kind="TFJob", job=given.pop("tfjob"), **given, **kwargs)
