"""``api="auto"``: which API a TensorFlow job runs on, read from the cluster's API discovery.

TFJob where the cluster serves ``kubeflow.org/v1`` ``tfjobs`` (the training-operator is installed:
nothing changes for a cluster that has it), else a TrainJob where ``trainer.kubeflow.org/v1alpha1``
serves ``trainjobs``; neither is an error naming both and the fix. Without a cluster
(``render_only``) "auto" renders the TFJob: it is what the DAG describes, and what a cluster with the
training-operator runs; ``api="trainjob"`` renders the TrainJob.
"""

from __future__ import annotations

from typing import Protocol

from airflow_tfjob.jobs.kinds import TFJOB, TRAINJOB

APIS = ("auto", "tfjob", "trainjob")


class Discovery(Protocol):
    def served_resources(self, group_version: str) -> set[str] | None: ...


class NoTrainingApi(RuntimeError):
    """The cluster serves neither TFJob nor TrainJob."""


def choose_api(hook: Discovery) -> str:
    """ "tfjob" or "trainjob" for api="auto" on the hook's cluster."""
    if TFJOB.plural in (hook.served_resources(TFJOB.api_version) or set()):
        return "tfjob"
    if TRAINJOB.plural in (hook.served_resources(TRAINJOB.api_version) or set()):
        return "trainjob"
    raise NoTrainingApi(
        f"the cluster serves neither {TFJOB.api_version} {TFJOB.plural} (Kubeflow training-operator) nor "
        f"{TRAINJOB.api_version} {TRAINJOB.plural} (Kubeflow Trainer v2): install one of them, or check "
        "the connection (kubernetes_conn_id) points at the cluster you mean"
    )
