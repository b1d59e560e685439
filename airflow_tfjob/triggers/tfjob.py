"""Release 0.1.0's trigger names, kept for what Airflow stored with them.

A task deferred by 0.1.0 is stored in Airflow's database with the classpath
``airflow_tfjob.triggers.tfjob.TFJobTrigger`` (or ``TFJobConditionTrigger`` for a sensor) and its kwargs;
the triggerer that picks it up after an upgrade imports that path. The triggers serve every kind and now
carry kind-neutral names in ``triggers/deferral.py``; the old names are the same classes, so such a task
runs to its end (tests/integration/test_trigger_compat.py replays kwargs recorded from 0.1.0).
"""

from __future__ import annotations

from airflow_tfjob.triggers.deferral import KubeflowJobConditionTrigger, KubeflowJobTrigger

TFJobTrigger = KubeflowJobTrigger
TFJobConditionTrigger = KubeflowJobConditionTrigger

__all__ = ["TFJobConditionTrigger", "TFJobTrigger"]
