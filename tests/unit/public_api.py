"""The public API as a JSON-able description: signatures of the classes users and Airflow call, and the
XCom result's keys. tests/unit/test_public_api.py compares it with tests/unit/recorded/public_api.json, so a
refactor cannot change what DAG authors wrote against without saying so (regenerate with
`python tests/unit/public_api.py > tests/unit/recorded/public_api.json` when a change is intended)."""

from __future__ import annotations

import inspect
import json
from typing import Any

PUBLIC_METHODS = {
    "airflow_tfjob.hooks.kubeflow_job.KubeflowJobHook": None,
    "airflow_tfjob.hooks.kubeflow_job.AsyncKubeflowJobHook": None,
}
CONSTRUCTORS = (
    "airflow_tfjob.operators.tfjob.TFJobOperator",
    "airflow_tfjob.sensors.tfjob.TFJobSensor",
    "airflow_tfjob.operators.generic.KubeflowJobOperator",
    "airflow_tfjob.sensors.generic.KubeflowJobSensor",
    "airflow_tfjob.operators.pytorchjob.PyTorchJobOperator",
    "airflow_tfjob.operators.xgboostjob.XGBoostJobOperator",
    "airflow_tfjob.operators.jaxjob.JAXJobOperator",
    "airflow_tfjob.operators.paddlejob.PaddleJobOperator",
    "airflow_tfjob.sensors.pytorchjob.PyTorchJobSensor",
    "airflow_tfjob.sensors.xgboostjob.XGBoostJobSensor",
    "airflow_tfjob.sensors.jaxjob.JAXJobSensor",
    "airflow_tfjob.sensors.paddlejob.PaddleJobSensor",
    "airflow_tfjob.operators.trainjob.TrainJobOperator",
    "airflow_tfjob.sensors.trainjob.TrainJobSensor",
    "airflow_tfjob.triggers.tfjob.TFJobTrigger",
    "airflow_tfjob.triggers.tfjob.TFJobConditionTrigger",
    # The triggers under their own classpaths (the TFJob ones above are what the 0.1.0 builds stored).
    "airflow_tfjob.triggers.deferral.KubeflowJobTrigger",
    "airflow_tfjob.triggers.deferral.KubeflowJobConditionTrigger",
    "airflow_tfjob.triggers.assets.KubeflowJobSucceededTrigger",
    "airflow_tfjob.hooks.kubeflow_job.KubeflowJobHook",
    "airflow_tfjob.hooks.kubeflow_job.AsyncKubeflowJobHook",
    # Airflow 3.3's retry_policy= for training tasks (issue 26).
    "airflow_tfjob.operators.retry_policy.TrainingRetryPolicy",
)
FUNCTIONS = (
    "airflow_tfjob.decorators.tfjob.tfjob_task",
    "airflow_tfjob.decorators.pytorchjob.pytorchjob_task",
    "airflow_tfjob.follow.core.follow_job",
)


def _load(path: str) -> Any:
    module, _, name = path.rpartition(".")
    return getattr(__import__(module, fromlist=[name]), name)


def _parameters(func: Any) -> list[list[str]]:
    out = []
    for p in inspect.signature(func).parameters.values():
        if p.name == "self":
            continue
        default = "" if p.default is inspect.Parameter.empty else repr(p.default)
        out.append([p.name, p.kind.name, default])
    return out


def _own_methods(cls: type) -> dict[str, list[list[str]]]:
    """Public methods defined by the provider's class (not inherited from Airflow or the clients)."""
    methods = {}
    for name, member in vars(cls).items():
        if name.startswith("_") or not callable(member):
            continue
        methods[name] = _parameters(member)
    return dict(sorted(methods.items()))


def describe() -> dict[str, Any]:
    from airflow_tfjob.operators.tfjob import RESULT_KEYS, TFJobOperator

    api: dict[str, Any] = {"constructors": {}, "methods": {}, "functions": {}}
    for path in CONSTRUCTORS:
        api["constructors"][path] = _parameters(_load(path).__init__)
    for path in PUBLIC_METHODS:
        api["methods"][path] = _own_methods(_load(path))
    for path in FUNCTIONS:
        api["functions"][path] = _parameters(_load(path))
    api["operator_template_fields"] = sorted(TFJobOperator.template_fields)
    api["result_keys"] = list(RESULT_KEYS)
    return api


if __name__ == "__main__":
    print(json.dumps(describe(), indent=1, sort_keys=True))
