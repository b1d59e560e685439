"""The trigger classpaths the 0.1.0 builds serialized, kept for the rows Airflow stored with them.

A task those builds deferred is stored in Airflow's database with the classpath
``airflow_tfjob.triggers.tfjob.TFJobTrigger`` (or ``TFJobConditionTrigger`` for a sensor) and its kwargs,
and the triggerer that picks it up after an upgrade imports that path. The two names are the triggers of
``triggers/deferral.py`` themselves, so such a task runs to its end (the kwargs recorded from those builds
are replayed by tests/integration/test_trigger_compat.py); what the operators and sensors defer with now
serializes the classes' own paths.
"""

from __future__ import annotations

from airflow_tfjob.triggers.deferral import KubeflowJobConditionTrigger, KubeflowJobTrigger

TFJobTrigger = KubeflowJobTrigger
TFJobConditionTrigger = KubeflowJobConditionTrigger

__all__ = ["TFJobConditionTrigger", "TFJobTrigger"]
