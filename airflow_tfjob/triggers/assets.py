"""KubeflowJobSucceededTrigger: an asset event each time a labelled training job succeeds, whoever created it.

For Airflow's ``AssetWatcher`` (event-driven scheduling): an evaluation DAG scheduled on the asset runs
after every training job that carries the labels, whether this provider, the Kubeflow SDK, kubectl or
another tool submitted it::

    from airflow.sdk import Asset, AssetWatcher, dag
    from airflow_tfjob.triggers.assets import KubeflowJobSucceededTrigger

    trained = Asset(
        "resnet-trained",
        watchers=[
            AssetWatcher(
                name="resnet-jobs",
                trigger=KubeflowJobSucceededTrigger(
                    label_selector="model=resnet", namespace="team-a", kind="PyTorchJob",
                    metrics=["accuracy", "loss"],
                ),
            )
        ],
    )

    @dag(schedule=[trained])
    def evaluate(): ...

Each event's extra holds ``{"from_trigger": True, "payload": {...}}`` (Airflow wraps the trigger's
payload); the payload is ``integrations.assets.event_payload``'s: the job's kind, namespace, name,
uid and labels, who created it (``airflow-tfjob`` or ``other``), its start and completion times, and
``metrics`` (the named metrics from the rank-0 replica's log) with ``metrics_source``,
``metrics_missing`` and ``metrics_note`` (why some are missing: the pods were cleaned up, the
log could not be read, the metric was not printed).

Airflow keeps one trigger per distinct (classpath, kwargs), shared by every asset whose watcher has the
same kwargs, and sends each event to all of them. The trigger runs for as long as a DAG is scheduled
on the asset; every trigger of one namespace and kind in a triggerer shares one LIST+WATCH of the
jobs (``integrations.assets``). A job is emitted once per trigger: it is annotated after its event,
so neither a restarted triggerer nor a second triggerer taking the trigger over emits it again, and a
job that succeeded while no triggerer ran is emitted when one starts (a job deleted before any
triggerer saw it is not: nothing is left to see). A failed job emits nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_tfjob.follow.metric_names import check_metric_names
from airflow_tfjob.hooks.connection import connection_of
from airflow_tfjob.integrations.label_selector import LabelSelector
from airflow_tfjob.jobs.kinds import kind_named
from airflow_tfjob.triggers.loader import load_run_modules


class KubeflowJobSucceededTrigger(BaseEventTrigger):
    """Fires an asset event for every job of ``kind`` in ``namespace`` matching ``label_selector`` that succeeds.

    :param label_selector: the labels that mark the jobs to watch, in the Kubernetes syntax
        (``model=resnet,stage in (prod,staging)``); required, so that a watcher never fires for every
        job of a namespace by accident.
    :param namespace: the namespace of the jobs; None: the connection's.
    :param kind: the job kind by name (``TFJob``, ``PyTorchJob``, ``XGBoostJob``, ``JAXJob``,
        ``PaddleJob``, ``TrainJob``).
    :param metrics: metric names to read from the rank-0 replica's log (Katib's ``name=value`` format, as
        the operators' ``metrics``); empty: the event carries only what the job's status reports.
    :param kubernetes_conn_id, cluster_context, config_file, in_cluster, api_retry_timeout: the
        connection, as the operators and sensors take it.
    """

    def __init__(
        self,
        label_selector: str,
        namespace: str | None = None,
        kind: str = "TFJob",
        metrics: list[str] | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
        cluster_context: str | None = None,
        config_file: str | None = None,
        in_cluster: bool | None = None,
        api_retry_timeout: float | None = None,
    ) -> None:
        super().__init__()
        # Bad input fails here, in the DAG file, before any request: each error names its parameter.
        self.selector = LabelSelector.parse(label_selector)
        self.label_selector = label_selector
        if namespace is not None and (not isinstance(namespace, str) or not namespace):
            raise ValueError(
                f"namespace: {namespace!r} is not a namespace name; give one, or None for the connection's"
            )
        self.namespace = namespace
        try:
            self.kind = kind_named(kind).kind
        except (KeyError, ValueError) as error:
            raise ValueError(f"kind: {error}") from None
        if metrics is not None and (isinstance(metrics, str) or not isinstance(metrics, (list, tuple))):
            raise ValueError(f"metrics: give a list of metric names (e.g. ['accuracy']), not {metrics!r}")
        try:
            check_metric_names(list(metrics or ()))
        except ValueError as error:
            raise ValueError(f"metrics: {error}") from None
        self.metrics = list(metrics or ())
        self.kubernetes_conn_id = kubernetes_conn_id
        self.cluster_context = cluster_context
        self.config_file = config_file
        self.in_cluster = in_cluster
        self.api_retry_timeout = api_retry_timeout

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "label_selector": self.label_selector,
                "namespace": self.namespace,
                "kind": self.kind,
                "metrics": list(self.metrics),
                **connection_of(self),
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        await load_run_modules()
        from airflow_tfjob.triggers import asset_runs  # the run module, loaded off the loop by the await

        async for event in asset_runs.watch(self):
            yield event
