"""The Airflow-facing sensors: wait for a named job of any kind to reach a condition.

Contract: one generic ``KubeflowJobSensor`` (poke, reschedule or deferred through the condition trigger)
and a thin class per kind; API access through the hooks, a job's state through ``follow.status``. Cheap
to import at DAG parse, like the operators.
"""
