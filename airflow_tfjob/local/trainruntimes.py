"""The ClusterTrainingRuntimes Kubeflow Trainer v2.3.0 ships (docs/reference/trainjob-behaviour.md §9),
written here from the reference, installed by the local cluster at start so that
`runtimeRef: {name: torch-distributed}` works out of the box: `torch-distributed`, `jax-distributed`,
and `xgboost-distributed`. The MPI (deepspeed, mlx) and torchtune runtimes are not installed:
the local cluster has no MPI plugin and no PersistentVolumeClaims. Tests add their own runtimes with
`LocalCluster.install_runtime(manifest)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_tfjob.local.resources import TRAINER_GROUP, TRAINER_VERSION, ApiError, JsonDict
from airflow_tfjob.local.trainbuild import ANCESTOR, NODE

if TYPE_CHECKING:
    from airflow_tfjob.local.store import Store

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


SYSTEM_NAMESPACE = "kubeflow-system"
TRAINER_VERSION_INFO = "2.3.0"


def install_trainer(store: Store) -> None:
    """What the Trainer install leaves besides its CRDs and runtimes: the namespace `kubeflow-system` and
    the ConfigMap `kubeflow-trainer-public` whose `kubeflow_trainer_version` the SDK reads on start (§11)."""
    store.create("namespaces", None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}})
    store.create("configmaps", SYSTEM_NAMESPACE, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kubeflow-trainer-public", "namespace": SYSTEM_NAMESPACE},
        "data": {"kubeflow_trainer_version": TRAINER_VERSION_INFO},
    })


def install_runtime(store: Store, manifest: JsonDict) -> JsonDict:
    """Create or replace a ClusterTrainingRuntime or a namespaced TrainingRuntime, as `kubectl apply` of its
    manifest would (through admission: a runtime webhook's refusal is raised as ApiError)."""
    plural = "clustertrainingruntimes" if manifest.get("kind") == "ClusterTrainingRuntime" else "trainingruntimes"
    meta = manifest.get("metadata") or {}
    namespace = None if plural.startswith("cluster") else meta.get("namespace") or "default"
    try:
        current = store.get(plural, namespace, meta.get("name", ""))
    except ApiError:
        return store.create(plural, namespace, manifest)
    version = current["metadata"]["resourceVersion"]
    return store.replace(plural, namespace, current["metadata"]["name"],
                         {**manifest, "metadata": {**meta, "resourceVersion": version}})
