"""TrainJobOperator's parameter table and signature cannot drift apart, nor from the TFJob story's own
parameters (a behaviour every operator has: connection, logs, follow, lifecycle) which it shares."""

from __future__ import annotations

import inspect

from airflow_tfjob.jobs.trainjob.manifest import PARAMETER_NAMES
from airflow_tfjob.operators import params
from airflow_tfjob.operators.trainjob import TrainJobOperator
from airflow_tfjob.operators.trainjob_params import TRAINJOB_PARAMETERS


def test_the_signature_is_the_table() -> None:
    signature = inspect.signature(TrainJobOperator.__init__).parameters.values()
    keyword_only = [p.name for p in signature if p.kind is inspect.Parameter.KEYWORD_ONLY]
    assert keyword_only == list(TRAINJOB_PARAMETERS.names)
    assert tuple(TrainJobOperator.template_fields) == TRAINJOB_PARAMETERS.template_fields
    assert set(TRAINJOB_PARAMETERS.manifest_params) <= set(PARAMETER_NAMES)
    written = {p.name: p.default for p in signature if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert written == TRAINJOB_PARAMETERS.defaults  # "all" its own log_replicas default
    op = TrainJobOperator(task_id="drift", runtime="torch-distributed")
    assert all(hasattr(op, name) for name in TRAINJOB_PARAMETERS.names)


def test_every_behaviour_parameter_of_the_story_is_trainjobs_too() -> None:
    # A parameter added to the shared story (an "own" or "policy" row every kind has) must reach
    # TrainJobOperator's table and signature as well: the story reads it from every operator.
    shared = [p.name for p in params.GENERIC.rows if p.role in ("own", "policy") and p.kinds is None]
    assert [name for name in shared if name not in TRAINJOB_PARAMETERS.names] == []


def test_api_trainjob_is_refused_for_other_kinds() -> None:
    import pytest

    from airflow_tfjob.build.checker import JobValidationError
    from airflow_tfjob.operators.generic import KubeflowJobOperator
    from airflow_tfjob.operators.tfjob import TFJobOperator

    with pytest.raises(JobValidationError, match="TrainJobOperator"):
        KubeflowJobOperator(task_id="t", kind="PyTorchJob", api="trainjob")
    with pytest.raises(JobValidationError, match="'tfjbo' is not an API a TFJob runs on"):
        TFJobOperator(task_id="t", api="tfjbo")
    assert TFJobOperator(task_id="t", api="trainjob").job_kind.kind == "TrainJob"
    assert TFJobOperator(task_id="t").job_kind.kind == "TFJob"  # "auto" before asking a cluster
