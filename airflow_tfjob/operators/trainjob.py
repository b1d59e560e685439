"""TrainJobOperator: run one Kubeflow Trainer v2 TrainJob as an Airflow task.

The story is KubeflowJobOperator's (build -> validate -> find again or create -> follow inline or
deferred -> drain -> clean up -> report); this class says how a TrainJob is built and checked
(:mod:`airflow_tfjob.trainjob`), and everything downstream reads the TrainJob row of the kind table.
Importing it stays cheap (see kubeflow.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseOperator, conf

from airflow_tfjob import cleanup
from airflow_tfjob.hooks.retry import DEFAULT_RETRY_TIMEOUT
from airflow_tfjob.operators import params
from airflow_tfjob.operators.kubeflow import KubeflowJobOperator
from airflow_tfjob.operators.trainjob_params import TRAINJOB_PARAMETERS, trainjob_arguments

if TYPE_CHECKING:
    from airflow.sdk import Asset

    from airflow_tfjob.tensorboard import TensorBoardSpec

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
    progress status where the cluster fills it: ``trainer_status`` in the result), cleanup, kill and
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
        log_rate_per_replica: int = 1000,
        log_total_cap: int = 1_000_000,
        tensorboard: bool | str | dict[str, Any] | TensorBoardSpec | None = None,
        tensorboard_log_dir: str | None = None,
        tensorboard_keep: bool = False,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        on_finish_action: str = "keep",
        on_kill_action: str = "delete",
        kill_grace_period: int | None = cleanup.KILL_GRACE_PERIOD,
        render_only: bool = False,
        model_asset: Asset | str | None = None,
        lineage_inputs: list[Asset | str] | None = None,
        lineage_outputs: list[Asset | str] | None = None,
        allow_template_outside_dag_folder: bool = False,
        allow_template_path_from_params: bool = False,
        **kwargs: Any,
    ) -> None:
        BaseOperator.__init__(self, **kwargs)
        given = {key: value for key, value in locals().items() if key in TRAINJOB_PARAMETERS.names}
        self._setup({**given, "kind": "TrainJob"})

    def assemble_manifest(self, base: dict[str, Any] | None) -> dict[str, Any]:
        from airflow_tfjob.trainjob.manifest import build_trainjob

        return build_trainjob(base, **trainjob_arguments(self))

    def max_name_length(self, manifest: Mapping[str, Any]) -> int | None:
        from airflow_tfjob.trainjob.validation import max_name_length

        nodes = ((manifest.get("spec") or {}).get("trainer") or {}).get("numNodes")
        return max_name_length(nodes if isinstance(nodes, int) else 100)

    def validate_manifest(self, manifest: dict[str, Any]) -> list[str]:
        from airflow_tfjob.logs import LogSelection
        from airflow_tfjob.trainjob.validation import validate_trainjob
        from airflow_tfjob.validation_checker import TFJobValidationError

        warnings = validate_trainjob(manifest)
        try:
            LogSelection.parse(self.log_replicas)
        except ValueError as error:
            raise TFJobValidationError(
                "log_replicas", str(error), "use 'all' or 'master'", kind="TrainJob"
            ) from None
        return warnings
