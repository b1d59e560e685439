"""What a deferred job sensor's task does when it resumes: the body of ``execute_complete``, the trigger's
event told.

Contract: a run module of ``sensors.generic.KubeflowJobSensor`` (the others' are in
:mod:`airflow_tfjob.sensors.runs`), imported at that entry point. Apart from them because it asks no
cluster: a resumed sensor loads neither the Kubernetes client nor the trigger.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_tfjob.version_compat import AirflowException, AirflowFailException

if TYPE_CHECKING:
    from airflow_tfjob.sensors.generic import KubeflowJobSensor


def complete(sensor: KubeflowJobSensor, event: Mapping[str, Any]) -> None:
    # Raised exceptions go through BaseSensorOperator.resume_execution, which applies soft_fail.
    if event["event"] == "reached":
        sensor.log.info("%s %s/%s: %s", sensor.kind, event["namespace"], event["name"], event["message"])
        return
    if event["event"] == "failed":
        raise AirflowFailException(event["message"])
    raise AirflowException(f"Could not watch {sensor.kind} {event['namespace']}/{event['name']}: {event['message']}")
