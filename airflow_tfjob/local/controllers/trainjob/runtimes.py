"""The ClusterTrainingRuntimes Kubeflow Trainer v2.3.0 ships (docs/reference/trainjob-behaviour.md §9),
written here from the reference, installed by the local cluster at start so that
`runtimeRef: {name: torch-distributed}` works out of the box: `torch-distributed`, `jax-distributed`,
`xgboost-distributed`, and the MPI runtimes `deepspeed-distributed` and `mlx-distributed` (their JobSet,
Secret and hostfile are upstream's, but a started TrainJob on them fails at once: their launcher runs
mpirun over ssh into node pods running sshd, which local processes cannot be; model/trainermpi.py). The torchtune
runtimes are not installed: they need PersistentVolumeClaims. Tests add their own runtimes with
`LocalCluster.install_runtime(manifest)`.
"""

from __future__ import annotations

from airflow_tfjob.local.model.resources import TRAINER_GROUP, TRAINER_VERSION, ApiError, JsonDict
from airflow_tfjob.local.model.trainerbuild import ANCESTOR, LAUNCHER, NODE
from airflow_tfjob.local.store.core import Store

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


def mpi_runtime_manifest(name: str, framework: str, image: str) -> JsonDict:
    """The shape of Trainer's `deepspeed-distributed` and `mlx-distributed` (manifests/base/runtimes/
    deepspeed_distributed.yaml, mlx_distributed.yaml): OpenMPI with the launcher as a node, a `node` job
    whose container runs sshd on port 2222 as uid 1000, and a `launcher` job (ancestor trainer, started
    once the nodes are Ready, the image's own command) whose success finishes the JobSet."""
    def pod(container: JsonDict) -> JsonDict:
        return {"securityContext": {"fsGroup": 1000},
                "containers": [{"name": NODE, "image": image, "securityContext": {"runAsUser": 1000}, **container}]}
    manifest = runtime_manifest(name, framework, {"numNodes": 1, "mpi": {
        "numProcPerNode": 1, "mpiImplementation": "OpenMPI", "sshAuthMountPath": "/home/mpiuser/.ssh",
        "runLauncherAsNode": True}}, image)
    manifest["spec"]["template"] = {"spec": {
        "network": {"publishNotReadyAddresses": True},
        "successPolicy": {"operator": "All", "targetReplicatedJobs": [LAUNCHER]},
        "replicatedJobs": [
            {"name": NODE, "template": {"spec": {"template": {"spec": pod({
                "command": ["/usr/sbin/sshd"], "args": ["-De", "-f", "/home/mpiuser/.sshd_config"],
                "readinessProbe": {"tcpSocket": {"port": 2222}, "initialDelaySeconds": 5}})}}}},
            {"name": LAUNCHER, "dependsOn": [{"name": NODE, "status": "Ready"}], "template": {
                "metadata": {"labels": {ANCESTOR: "trainer"}},
                "spec": {"template": {"spec": pod({})}}}},
        ]}}
    return manifest


SHIPPED_RUNTIMES: tuple[JsonDict, ...] = (
    runtime_manifest("torch-distributed", "torch", {"numNodes": 1, "torch": {}},
                     "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"),
    runtime_manifest("jax-distributed", "jax", {"numNodes": 1, "jax": {}}, "nvcr.io/nvidia/jax:25.10-py3"),
    runtime_manifest("xgboost-distributed", "xgboost", {"numNodes": 1, "xgboost": {}},
                     "ghcr.io/kubeflow/trainer/xgboost-runtime:v2.3.0"),
    mpi_runtime_manifest("deepspeed-distributed", "deepspeed", "ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.3.0"),
    mpi_runtime_manifest("mlx-distributed", "mlx", "ghcr.io/kubeflow/trainer/mlx-runtime:v2.3.0"),
)


SYSTEM_NAMESPACE = "kubeflow-system"
TRAINER_VERSION_INFO = "2.3.0"


def install_trainer(store: Store, version: str = TRAINER_VERSION_INFO) -> None:
    """What the Trainer install leaves besides its CRDs and runtimes: the namespace `kubeflow-system` and
    the ConfigMap `kubeflow-trainer-public` whose `kubeflow_trainer_version` the SDK reads on start (§11):
    `version`, the release the cluster's version profile names."""
    store.create("namespaces", None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}})
    store.create("configmaps", SYSTEM_NAMESPACE, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kubeflow-trainer-public", "namespace": SYSTEM_NAMESPACE},
        "data": {"kubeflow_trainer_version": version},
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
