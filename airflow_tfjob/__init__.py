"""Apache Airflow provider for Kubeflow training jobs (TFJob, the training-operator's other kinds and
Trainer v2's TrainJob, on Kubernetes): its provider info (:func:`get_provider_info`).

This module must stay import-light: Airflow's providers manager imports it in every process.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# The product runs every Kubeflow training kind: it is named apart from TFJob, the first of them.
_INTEGRATION = "Kubeflow Training"


def get_provider_info() -> dict[str, Any]:
    """Describe the provider to Airflow's providers manager (entry point `apache_airflow_provider`)."""
    return {
        "package-name": "airflow-provider-tfjob",
        "name": _INTEGRATION,
        "description": (
            "Run Kubeflow training jobs (TFJob, PyTorchJob, XGBoostJob, JAXJob, PaddleJob, and Kubeflow "
            "Trainer v2 TrainJob) from Airflow DAGs."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": _INTEGRATION,
                "external-doc-url": "https://www.kubeflow.org/docs/components/trainer/",
                "tags": ["software"],
            }
        ],
        "operators": [{"integration-name": _INTEGRATION, "python-modules": _modules("operators")}],
        "sensors": [{"integration-name": _INTEGRATION, "python-modules": _modules("sensors")}],
        "hooks": [{"integration-name": _INTEGRATION, "python-modules": ["airflow_tfjob.hooks.kubeflow_job"]}],
        "triggers": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": ["airflow_tfjob.triggers.deferral", "airflow_tfjob.triggers.assets"],
            }
        ],
        "extra-links": [
            "airflow_tfjob.integrations.links.TensorBoardLink",
            "airflow_tfjob.integrations.links.ReplicaLogsLink",
        ],
        "task-decorators": [
            {"name": "tfjob", "class-name": "airflow_tfjob.decorators.tfjob.tfjob_task"},
            {"name": "pytorchjob", "class-name": "airflow_tfjob.decorators.pytorchjob.pytorchjob_task"},
        ],
    }


# One module per kind (and the generic one), for operators and sensors alike.
_KIND_MODULES = ("generic", "tfjob", "pytorchjob", "xgboostjob", "jaxjob", "paddlejob", "trainjob")


def _modules(package: str) -> list[str]:
    return [f"airflow_tfjob.{package}.{name}" for name in _KIND_MODULES]
