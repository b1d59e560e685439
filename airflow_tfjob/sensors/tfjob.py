"""TFJobSensor: wait for a named TFJob to reach a condition (Succeeded, Running or Created).

:class:`~airflow_tfjob.sensors.generic.KubeflowJobSensor` with the kind fixed and the parameters TFJob
DAGs were written with.
"""

from __future__ import annotations

from typing import Any, ClassVar

from airflow_tfjob.sensors.generic import KubeflowJobSensor
from airflow_tfjob.version_compat import conf

__all__ = ["TFJobSensor"]


class TFJobSensor(KubeflowJobSensor):
    """Wait for the TFJob ``name`` to reach ``target_condition`` ("Succeeded", "Running" or "Created").

    Fails at once (AirflowFailException, no retries) when the job fails; ``soft_fail`` turns that and
    a timeout into a skip. Works in poke, reschedule and deferrable mode.
    """

    default_kind: ClassVar[str | None] = "TFJob"

    def __init__(
        self,
        *,
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
        super().__init__(
            kind="TFJob",
            name=name,
            namespace=namespace,
            target_condition=target_condition,
            kubernetes_conn_id=kubernetes_conn_id,
            cluster_context=cluster_context,
            config_file=config_file,
            in_cluster=in_cluster,
            api_retry_timeout=api_retry_timeout,
            deferrable=deferrable,
            **kwargs,
        )
