"""KubeflowJobSensor: wait for a named job of any kind to reach a condition (Succeeded, Running or
Created). TFJobSensor and the named sensors are this class with a kind.

The sensor fails at once when the job fails (whatever the target), and waits for a job that does not
exist yet until its own timeout. In deferrable mode the wait runs in the triggerer through
:class:`airflow_tfjob.triggers.deferral.KubeflowJobConditionTrigger`, which subscribes to the shared
per-namespace watch (no polling).

This module declares (a DAG file's parse imports it); what the sensor does when it runs is
:mod:`airflow_tfjob.sensors.runs`, imported at each entry point.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseSensorOperator

from airflow_tfjob.jobs.kinds import JobKind, kind_named
from airflow_tfjob.operators.shared_checks import kind_name_of
from airflow_tfjob.sensors.checks import check_sensor_parameters
from airflow_tfjob.version_compat import conf

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_tfjob.hooks.sync import KubeflowJobHook


class KubeflowJobSensor(BaseSensorOperator):
    """Wait for the job ``name`` of ``kind`` to reach ``target_condition`` ("Succeeded", "Running" or
    "Created").

    Fails at once (AirflowFailException, no retries) when the job fails; ``soft_fail`` turns that and
    a timeout into a skip. Works in poke, reschedule and deferrable mode.
    """

    template_fields: Sequence[str] = ("name", "namespace", "target_condition")
    ui_color = "#ffb74d"
    #: The kind of the named classes (TFJobSensor, PyTorchJobSensor...); None: `kind` required.
    default_kind: ClassVar[str | None] = None

    def __init__(
        self,
        *,
        kind: str | None = None,
        name: str,
        namespace: str | None = None,
        target_condition: str = "Succeeded",
        kubernetes_conn_id: str = "kubernetes_default",
        cluster_context: str | None = None,
        config_file: str | None = None,
        in_cluster: bool | None = None,
        api_retry_timeout: float | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kind = kind_name_of(kind, self.default_kind, type(self).__name__)
        self.name = name
        self.namespace = namespace
        self.target_condition = target_condition
        self.kubernetes_conn_id = kubernetes_conn_id
        self.cluster_context = cluster_context
        self.config_file = config_file
        self.in_cluster = in_cluster
        self.api_retry_timeout = api_retry_timeout
        self.deferrable = deferrable
        # Values that are not templates are checked when the DAG is parsed, all again before the first call.
        self._check_parameters(at_parse=True)

    def _check_parameters(self, *, at_parse: bool = False) -> None:
        check_sensor_parameters(
            {
                "name": self.name,
                "namespace": self.namespace,
                "target_condition": self.target_condition,
                "kubernetes_conn_id": self.kubernetes_conn_id,
                "cluster_context": self.cluster_context,
                "config_file": self.config_file,
                "in_cluster": self.in_cluster,
                "deferrable": self.deferrable,
            },
            at_parse=at_parse,
            kind=self.kind,
        )

    @property
    def job_kind(self) -> JobKind:
        return kind_named(self.kind)

    def _check_target(self) -> None:
        self._check_parameters()

    def get_hook(self) -> KubeflowJobHook:
        from airflow_tfjob.sensors.runs import hook  # the run module: the cluster's client, not parsed

        return hook(self)

    def poke(self, context: Context) -> bool:
        from airflow_tfjob.sensors import runs  # the run module: what a run does, not parsed

        return runs.poke(self, context)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        from airflow_tfjob.sensors import runs  # the run module: what a run does, not parsed

        runs.defer(self, context)
        return None

    def execute_complete(self, context: Context, event: Mapping[str, Any]) -> None:
        from airflow_tfjob.sensors import event_runs  # the run module: the trigger's event told, no client

        event_runs.complete(self, event)
