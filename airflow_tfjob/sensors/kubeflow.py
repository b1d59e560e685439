"""KubeflowJobSensor: wait for a named job of any kind to reach a condition (Succeeded, Running or
Created). TFJobSensor and the named sensors are this class with a kind.

The sensor fails at once when the job fails (whatever the target), and waits for a job that does not
exist yet until its own timeout. In deferrable mode the wait runs in the triggerer through
:class:`airflow_tfjob.triggers.kubeflow.KubeflowJobConditionTrigger`, which subscribes to the shared
per-namespace watch (no polling).

Kept import-light like the operator: the Kubernetes clients and hooks are imported where used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseSensorOperator

from airflow_tfjob.hooks.connection import connection_of, task_hook
from airflow_tfjob.jobs.kinds import JobKind, kind_named
from airflow_tfjob.jobs.status import JobState, condition_reached, failure_message, interpret, summarise
from airflow_tfjob.operators.checks import kind_name_of
from airflow_tfjob.triggers.kubeflow import KubeflowJobConditionTrigger
from airflow_tfjob.version_compat import AirflowException, AirflowFailException, conf

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
        from airflow_tfjob.sensors.checks import check_sensor_parameters

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
        return task_hook(self)

    def _namespace(self, hook: KubeflowJobHook) -> str:
        namespace = self.namespace or hook.get_namespace() or "default"
        if not self.namespace:
            from airflow_tfjob.sensors.checks import check_sensor_parameters

            check_sensor_parameters(
                {"namespace": namespace}, kind=self.kind
            )  # the connection's, checked like ours
        return namespace

    def poke(self, context: Context) -> bool:
        self._check_target()
        hook = self.get_hook()
        namespace = self._namespace(hook)
        job = hook.find_job(self.job_kind, self.name, namespace)
        if job is None:
            self.log.info("%s %s/%s does not exist yet", self.kind, namespace, self.name)
            return False
        status = interpret(job)
        if status.state is JobState.FAILED:
            raise AirflowFailException(failure_message(self.name, namespace, status, self.kind))
        from airflow_tfjob.integrations.kueue.note import queue_note

        note = queue_note(hook, job)  # a job with a Kueue queue: queued, admitted, preempted...
        self.log.info(
            "%s %s/%s: %s%s", self.kind, namespace, self.name, summarise(status), f"; {note}" if note else ""
        )
        return condition_reached(status, self.target_condition)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        # One look first: a job already there needs no trip through the triggerer.
        if self.poke(context):
            return None
        hook = self.get_hook()
        namespace = self._namespace(hook)
        self.log.info(
            "Waiting in the triggerer for %s %s/%s to reach %s",
            self.kind,
            namespace,
            self.name,
            self.target_condition,
        )
        self.defer(
            trigger=KubeflowJobConditionTrigger(
                name=self.name,
                namespace=namespace,
                target_condition=self.target_condition,
                **connection_of(self),
                kind=self.kind,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: Mapping[str, Any]) -> None:
        # Raised exceptions go through BaseSensorOperator.resume_execution, which applies soft_fail.
        if event["event"] == "reached":
            self.log.info("%s %s/%s: %s", self.kind, event["namespace"], event["name"], event["message"])
            return
        if event["event"] == "failed":
            raise AirflowFailException(event["message"])
        raise AirflowException(
            f"Could not watch {self.kind} {event['namespace']}/{event['name']}: {event['message']}"
        )
