"""The ClusterTrainingRuntimes Kubeflow Trainer v2.3.0 ships (docs/reference/trainjob-behaviour.md §9),
written here from the reference, installed by the local cluster at start so that
`runtimeRef: {name: torch-distributed}` works out of the box: `torch-distributed`, `jax-distributed`,
and `xgboost-distributed`. The MPI (deepspeed, mlx) and torchtune runtimes are not installed:
the local cluster has no MPI plugin and no PersistentVolumeClaims. Tests add their own runtimes with
`LocalCluster.install_runtime(manifest)`.
"""

from __future__ import annotations

from airflow_tfjob.local.resources import TRAINER_GROUP, TRAINER_VERSION, JsonDict
from airflow_tfjob.local.trainbuild import ANCESTOR, NODE

FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"


def runtime_manifest(name: str, framework: str, ml_policy: JsonDict, image: str, *,
                     cluster: bool = True, namespace: str | None = None,
                     command: list[str] | None = None) -> JsonDict:
    """A runtime of the shipped shape: one replicated job `node` (ancestor trainer) with container `node`."""
    container: JsonDict = {"name": NODE, "image": image}
    if command is not None:
        container["command"] = command
    metadata: JsonDict = {"name": name, "labels": {FRAMEWORK_LABEL: framework,
                                                   "trainer.kubeflow.org/webhook-validation": "disabled"}}
    if not cluster:
        metadata["namespace"] = namespace or "default"
    return {
        "apiVersion": f"{TRAINER_GROUP}/{TRAINER_VERSION}",
        "kind": "ClusterTrainingRuntime" if cluster else "TrainingRuntime",
        "metadata": metadata,
        "spec": {
            "mlPolicy": ml_policy,
            "template": {"spec": {"replicatedJobs": [{
                "name": NODE,
                "template": {
                    "metadata": {"labels": {ANCESTOR: "trainer"}},
                    "spec": {"template": {"spec": {"containers": [container]}}},
                },
            }]}},
        },
    }


SHIPPED_RUNTIMES: tuple[JsonDict, ...] = (
    runtime_manifest("torch-distributed", "torch", {"numNodes": 1, "torch": {}},
                     "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"),
    runtime_manifest("jax-distributed", "jax", {"numNodes": 1, "jax": {}}, "nvcr.io/nvidia/jax:25.10-py3"),
    runtime_manifest("xgboost-distributed", "xgboost", {"numNodes": 1, "xgboost": {}},
                     "ghcr.io/kubeflow/trainer/xgboost-runtime:v2.3.0"),
)
