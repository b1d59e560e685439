"""TrainJobOperator: run one Kubeflow Trainer v2 TrainJob as an Airflow task.

The story is KubeflowJobOperator's (build -> validate -> find again or create -> follow inline or
deferred -> drain -> clean up -> report); this class says how a TrainJob is built and checked
(:mod:`airflow_tfjob.jobs.trainjob`), and everything downstream reads the TrainJob row of the kind table.
Importing it stays cheap (see generic.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseOperator

from airflow_tfjob.constants import KILL_GRACE_PERIOD
from airflow_tfjob.hooks.retry import DEFAULT_RETRY_TIMEOUT
from airflow_tfjob.operators import params, retry_fallback
from airflow_tfjob.operators.generic import KubeflowJobOperator
from airflow_tfjob.operators.trainjob_params import TRAINJOB_PARAMETERS, trainjob_arguments
from airflow_tfjob.version_compat import conf

if TYPE_CHECKING:
    from airflow.sdk import Asset

    from airflow_tfjob.integrations.tensorboard import TensorBoardSpec

__all__ = ["TrainJobOperator"]


class TrainJobOperator(KubeflowJobOperator):
    """Run a Kubeflow Trainer v2 TrainJob (``trainer.kubeflow.org/v1alpha1``) and wait for its outcome.

    The runtime is named by reference: ``runtime="torch-distributed"`` (a ClusterTrainingRuntime, or a
    TrainingRuntime of the job's namespace with ``runtime_kind="TrainingRuntime"``). The trainer's
    ``image``, ``command``, ``args`` and ``env`` replace the runtime's; ``hyperparameters`` are appended
    to the arguments as ``--key=value`` (as TFJobOperator does); ``secret_env`` values are masked in the
    task log. ``num_nodes``, ``resources_per_node`` and ``num_proc_per_node`` size the training;
    ``dataset_storage_uri`` / ``model_storage_uri`` feed the runtime's initializers; ``runtime_patches``
    (Trainer's RuntimePatch list, ``manager`` defaulted to the provider's) adjust the runtime's pods;
    ``suspend``, ``active_deadline_seconds``, ``managed_by``, ``labels`` and ``annotations`` go to the
    TrainJob. A full manifest or template can be given as ``trainjob`` (parameters override it).

    Everything else is the TFJob story's: validation before submit, reattach on retry, deferral on
    the shared watch, every node's log with a ``[node-0-1]`` prefix (``log_replicas``: ``"all"`` by
    default, or ``"master"`` for node 0), diagnostics, metrics from node 0's log (and the TrainJob's
    progress status where the cluster fills it: a ``[progress] Trainer reports ...`` line each time it
    changes, throttled, and ``trainer_status`` in the result and XCom), cleanup, kill and
    ``render_only``. The result has the same keys as TFJobOperator's, ``api`` being ``"trainjob"``.
    """

    parameter_table: ClassVar[params.ParameterSet] = TRAINJOB_PARAMETERS
    job_field = "trainjob"
    default_kind: ClassVar[str | None] = "TrainJob"
    template_fields: Sequence[str] = TRAINJOB_PARAMETERS.template_fields
    template_fields_renderers = params.renderers("trainjob")

    def __init__(
        self,
        *,
        trainjob: dict[str, Any] | str | None = None,
        name: str | None = None,
        namespace: str | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
        cluster_context: str | None = None,
        config_file: str | None = None,
        in_cluster: bool | None = None,
        api_retry_timeout: float | None = DEFAULT_RETRY_TIMEOUT,
        runtime: str | None = None,
        runtime_kind: str | None = None,
        image: str | None = None,
        command: str | list[str] | None = None,
        args: str | list[Any] | None = None,
        hyperparameters: dict[str, Any] | None = None,
        env: dict[str, Any] | list[dict[str, Any]] | None = None,
        secret_env: dict[str, str] | None = None,
        num_nodes: int | None = None,
        resources_per_node: dict[str, Any] | None = None,
        num_proc_per_node: int | None = None,
        dataset_storage_uri: str | None = None,
        model_storage_uri: str | None = None,
        runtime_patches: list[dict[str, Any]] | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        suspend: bool | None = None,
        active_deadline_seconds: int | None = None,
        managed_by: str | None = None,
        kueue_queue: str | None = None,
        log_replicas: str = "all",
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
        retry_policy: Any = None,
        **kwargs: Any,
    ) -> None:
        BaseOperator.__init__(self, **kwargs, **retry_fallback.passed_on(retry_policy))
        given = {key: value for key, value in locals().items() if key in TRAINJOB_PARAMETERS.names}
        self._setup({**given, "kind": "TrainJob"})

    # Its own parameter table: the TrainJob builder's arguments and the one log_replicas check its
    # nodes allow; the build steps themselves are the adapter's (operators/building.py).

    def manifest_arguments(self) -> dict[str, Any]:
        return trainjob_arguments(self)

    def check_log_replicas(self, manifest: Mapping[str, Any]) -> None:
        """Nothing to match against the manifest: ``log_replicas`` was checked with the other
        parameters (its row's rule), and a TrainJob's nodes are named apart from its replica types."""
