"""What a job sensor's task does when it asks the cluster: the bodies of ``get_hook``, ``poke`` and
``execute``.

Contract: a run module of ``sensors.generic.KubeflowJobSensor``, whose module declares (its signature,
the parse-time check of its parameters); each entry point imports this module and hands it the sensor.
It imports what a run needs at its top (the Kubernetes client's hook, Kueue's view of a job's queue, the
condition trigger). ``execute_complete`` asks no cluster: its body is :mod:`airflow_tfjob.sensors.event_runs`,
which a deferred sensor's resumption imports without the client.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from airflow_tfjob.hooks.connection import connection_of
from airflow_tfjob.hooks.sync import KubeflowJobHook, task_hook
from airflow_tfjob.integrations.kueue.note import queue_note
from airflow_tfjob.jobs.status import JobState, condition_reached, failure_message, interpret, summarise
from airflow_tfjob.sensors.checks import check_sensor_parameters
from airflow_tfjob.triggers.deferral import KubeflowJobConditionTrigger
from airflow_tfjob.version_compat import AirflowFailException

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_tfjob.sensors.generic import KubeflowJobSensor


def hook(sensor: KubeflowJobSensor) -> KubeflowJobHook:
    """The body of the sensor's ``get_hook``: its synchronous hook, made once per sensor instance (one
    kubeconfig load, not one per poke)."""
    return task_hook(sensor)


def namespace_of(sensor: KubeflowJobSensor, hook: KubeflowJobHook) -> str:
    """The sensor's namespace, or its connection's (checked like the sensor's own), or ``default``."""
    namespace = sensor.namespace or hook.get_namespace() or "default"
    if not sensor.namespace:
        check_sensor_parameters({"namespace": namespace}, kind=sensor.kind)
    return namespace


def poke(sensor: KubeflowJobSensor, context: Context) -> bool:
    sensor._check_target()
    hook = sensor.get_hook()
    namespace = namespace_of(sensor, hook)
    job = hook.find_job(sensor.job_kind, sensor.name, namespace)
    if job is None:
        sensor.log.info("%s %s/%s does not exist yet", sensor.kind, namespace, sensor.name)
        return False
    status = interpret(job)
    if status.state is JobState.FAILED:
        raise AirflowFailException(failure_message(sensor.name, namespace, status, sensor.kind))
    note = queue_note(hook, job)  # a job with a Kueue queue: queued, admitted, preempted...
    sensor.log.info(
        "%s %s/%s: %s%s", sensor.kind, namespace, sensor.name, summarise(status), f"; {note}" if note else ""
    )
    return condition_reached(status, sensor.target_condition)


def defer(sensor: KubeflowJobSensor, context: Context) -> None:
    """Deferrable mode: one look first (a job already there needs no trip through the triggerer), then
    the wait in the triggerer."""
    if sensor.poke(context):
        return
    hook = sensor.get_hook()
    namespace = namespace_of(sensor, hook)
    sensor.log.info(
        "Waiting in the triggerer for %s %s/%s to reach %s",
        sensor.kind,
        namespace,
        sensor.name,
        sensor.target_condition,
    )
    sensor.defer(
        trigger=KubeflowJobConditionTrigger(
            name=sensor.name,
            namespace=namespace,
            target_condition=sensor.target_condition,
            **connection_of(sensor),
            kind=sensor.kind,
        ),
        method_name="execute_complete",
        timeout=timedelta(seconds=sensor.timeout),
    )
