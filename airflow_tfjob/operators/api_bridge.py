"""TFJob's ``api`` parameter in a try: the TFJob -> TrainJob bridge (:mod:`airflow_tfjob.jobs.trainjob.from_tfjob`)
for a TFJob that the API choice (:mod:`airflow_tfjob.operators.api_choice`) runs as a TrainJob.

The builder (:mod:`airflow_tfjob.operators.building`) asks it the name limit of the job it stamps and the
manifest it hands the cluster; no adapter knows of the bridge. Apart from the choice, which a DAG file's
parse imports (the kind before a try, the parameter's check), so that the bridge and TrainJob's building
modules are a try's imports only.
"""

# names-job-apis: the TFJob -> TrainJob bridge of TFJob's api parameter, asked for a TFJob run as a
# TrainJob (tests/unit/test_api_blind_core.py).
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_tfjob.jobs.adapter import adapter_for
from airflow_tfjob.jobs.trainjob import from_tfjob
from airflow_tfjob.operators.api_choice import ApiChoice


def name_limit(api: ApiChoice, manifest: Mapping[str, Any]) -> int | None:
    """The longest name the job built from ``manifest`` may get on the API chosen: the bridge's limit for
    a TFJob run as a TrainJob, else its own kind's adapter's (None: the kind's default)."""
    if api.api_changed_kind():
        return from_tfjob.name_limit(manifest)
    return adapter_for(api.job_kind).max_name_length(manifest)


def on_chosen_api(api: ApiChoice, manifest: dict[str, Any]) -> dict[str, Any]:
    """The validated manifest as the API chosen takes it: a TFJob run as a TrainJob mapped onto the
    TrainJob that runs it (refusals name the replica types and the fix); any other as it is."""
    if not api.api_changed_kind():
        return manifest
    return from_tfjob.as_trainjob(manifest)
