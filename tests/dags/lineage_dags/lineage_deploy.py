"""Scheduled on the model asset: reads the training task's metrics from the triggering asset event
and promotes the model only when it beats the best so far, kept in the asset's state store."""

from __future__ import annotations

import json
from typing import Any

from airflow.sdk import DAG, Asset, task

MODEL = Asset("lineage_model", uri="file:///models/lineage")

with DAG("lineage_deploy", schedule=[MODEL], catchup=False, tags=["test"]):

    @task(inlets=[MODEL])
    def deploy(triggering_asset_events: Any = None, asset_state_store: Any = None) -> dict[str, Any]:
        event = max(triggering_asset_events[MODEL], key=lambda e: e.timestamp)  # the newest
        accuracy = float(event.extra["metrics"]["accuracy"])
        state = asset_state_store[MODEL]
        best = state.get("best_accuracy")
        promote = best is None or accuracy > float(best)
        if promote:
            state.set("best_accuracy", accuracy)
        decision = {"accuracy": accuracy, "best_before": best, "promote": promote, "job": event.extra["job"]}
        print("DEPLOY DECISION", json.dumps(decision))
        return decision

    deploy()
