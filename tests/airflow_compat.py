"""What the tests take from Airflow where its releases differ (the compatibility lane runs them on 3.0
to 3.3): the task SDK's exceptions, from ``airflow.sdk.exceptions`` from 3.2 and ``airflow.exceptions``
before, and the DAG serializer. The provider's own code takes what it uses from
``airflow_tfjob.version_compat``."""

from __future__ import annotations

from airflow_tfjob.version_compat import AIRFLOW_V_3_2_PLUS

if AIRFLOW_V_3_2_PLUS:
    from airflow.sdk import exceptions as _exceptions
else:
    from airflow import exceptions as _exceptions  # type: ignore[no-redef]

AirflowException = _exceptions.AirflowException
AirflowFailException = _exceptions.AirflowFailException
AirflowNotFoundException = _exceptions.AirflowNotFoundException
AirflowRescheduleException = _exceptions.AirflowRescheduleException
AirflowSensorTimeout = _exceptions.AirflowSensorTimeout
AirflowSkipException = _exceptions.AirflowSkipException
AirflowTaskTimeout = _exceptions.AirflowTaskTimeout
TaskDeferralTimeout = _exceptions.TaskDeferralTimeout
TaskDeferred = _exceptions.TaskDeferred


def dag_serialization() -> type:
    """Airflow's DAG (de)serializer: ``DagSerialization`` from 3.2, ``SerializedDAG`` (the same
    ``to_dict``/``from_dict``) before."""
    from airflow.serialization import serialized_objects

    found = getattr(serialized_objects, "DagSerialization", None) or serialized_objects.SerializedDAG
    return found  # type: ignore[no-any-return]


__all__ = [
    "AirflowException",
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowRescheduleException",
    "AirflowSensorTimeout",
    "AirflowSkipException",
    "AirflowTaskTimeout",
    "TaskDeferralTimeout",
    "TaskDeferred",
]

