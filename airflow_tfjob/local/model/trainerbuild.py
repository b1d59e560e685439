"""From a TrainingRuntime / ClusterTrainingRuntime and a TrainJob to the JobSet Kubeflow Trainer v2.3.0
applies (`runtime.NewObjects`, docs/reference/trainjob-behaviour.md §3.2-§4): runtime patches merged,
the trainer replicated job's node count, image, command, args, env and resources from `spec.trainer`,
the initializers' STORAGE_URI/env/secretRef, and the environment each ML-policy plugin injects:

- PlainML (no torch/mpi/jax policy): nothing of its own;
- Torch: PET_NNODES, PET_NPROC_PER_NODE (numProcPerNode, else `auto` with a GPU, else max(1, CPU)),
  PET_NODE_RANK (completion index), PET_MASTER_ADDR `<tj>-node-0-0.<tj>`, PET_MASTER_PORT 29500;
- JAX: JAX_NUM_PROCESSES, JAX_PROCESS_ID, JAX_COORDINATOR_ADDRESS `<tj>-node-0-0.<tj>:29500`;
- XGBoost: DMLC_TRACKER_URI, DMLC_TRACKER_PORT, DMLC_TASK_ID, DMLC_NUM_WORKER;
- containerPort 29500 on the node container for the three; the TrainJob's env before PET_* (torch), after
  the plugin's variables otherwise (JAX, XGBoost), as Trainer's plugins and builder upsert them;
- MPI: the ssh and hostfile volumes, mounts and OpenMPI env on `node`/`launcher` (trainermpi.py);
- with the TrainJobStatus gate: the KUBEFLOW_TRAINER_SERVER_* env of §4.7 (controllers/trainjob/status.py).

Pure: no store access. The JobSet webhook's defaults are applied by the admission (admission/trainjobs.py).
"""

from __future__ import annotations

import math
from typing import Any

from airflow_tfjob.local.model import trainermpi as mpi
from airflow_tfjob.local.model.profiles import TrainerRules
from airflow_tfjob.local.model.resources import JOBSET_GROUP, JOBSET_VERSION, TRAINER_GROUP, JsonDict, clone

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
NODE = "node"
PORT = 29500
INDEX_REF = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
TORCH_RESERVED = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
XGBOOST_RESERVED = ("DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER")
MPI_RESERVED = mpi.RESERVED
PRTE_RESERVED = mpi.PRTE_RESERVED
LAUNCHER = mpi.LAUNCHER
RUNTIME_KINDS = {"TrainingRuntime": "trainingruntimes", "ClusterTrainingRuntime": "clustertrainingruntimes"}


def runtime_plural(ref: JsonDict) -> str | None:
    """The runtime's resource for a runtimeRef, None for a kind/group Trainer has no runtime for."""
    if (ref.get("apiGroup") or TRAINER_GROUP) != TRAINER_GROUP:
        return None
    return RUNTIME_KINDS.get(ref.get("kind") or "ClusterTrainingRuntime")


def ancestor_of(rjob: JsonDict) -> str | None:
    return (((rjob.get("template") or {}).get("metadata") or {}).get("labels") or {}).get(ANCESTOR)


def pod_spec(rjob: JsonDict) -> JsonDict:
    return rjob.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})


def find_container(rjob: JsonDict, name: str) -> JsonDict | None:
    spec = (((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    for container in spec.get("containers") or []:
        if container.get("name") == name:
            return container
    return None


def upsert_env(container: JsonDict, env: list[JsonDict]) -> None:
    """Trainer's apply.UpsertEnvVars: replace by name in place, append the new; no `env` key for nothing."""
    if not env:
        return
    current = container.setdefault("env", [])
    for entry in env:
        for i, old in enumerate(current):
            if old.get("name") == entry.get("name"):
                current[i] = clone(entry)
                break
        else:
            current.append(clone(entry))


def merge_named(base: list[Any], patch: list[Any], key: str = "name") -> list[Any]:
    """A strategic merge of a list of objects keyed by `key` (containers, env, volumes...), in the order
    apimachinery's strategicpatch writes: the patch's items in patch order, the others interleaved by their
    place in `base` (`normalizeElementOrder` / `mergeSortedSlice`)."""
    merged = [clone(b) for b in base]
    for item in patch:
        for i, old in enumerate(merged):
            if isinstance(old, dict) and isinstance(item, dict) and old.get(key) == item.get(key):
                merged[i] = merge(old, item)
                break
        else:
            merged.append(clone(item))
    patch_keys = [p.get(key) for p in patch if isinstance(p, dict)]
    base_keys = [b.get(key) for b in base if isinstance(b, dict)]
    ours = sorted((m for m in merged if m.get(key) in patch_keys), key=lambda m: patch_keys.index(m.get(key)))
    theirs = [m for m in merged if m.get(key) not in patch_keys]
    out: list[Any] = []
    while theirs or ours:
        if ours and theirs:
            left, right = theirs[0].get(key), ours[0].get(key)
            first = left in base_keys and right in base_keys and base_keys.index(left) < base_keys.index(right)
        else:
            first = bool(theirs)
        out.append(theirs.pop(0) if first else ours.pop(0))
    return out


def merge(base: Any, patch: Any) -> Any:
    """Strategic merge as far as runtime patches go: maps merge, named lists merge by name, others replace."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            out[key] = merge(base.get(key), value) if key in base else clone(value)
        return out
    if (isinstance(base, list) and isinstance(patch, list) and patch and all(isinstance(p, dict) and "name" in p
                                                                               for p in patch)):
        return merge_named(base, patch)
    return clone(patch)


def _cpu(quantity: Any) -> int:
    text = str(quantity)
    value = float(text[:-1]) / 1000 if text.endswith("m") else float(text)
    return math.ceil(value)


def nproc_per_node(trainer: JsonDict, resources: JsonDict) -> str:
    """Torch's PET_NPROC_PER_NODE: numProcPerNode, else `auto` with a GPU, else max(1, CPUs) (request, else
    limit, rounded up)."""
    if trainer.get("numProcPerNode") is not None:
        return str(trainer["numProcPerNode"])
    if gpus_per_node(resources):
        return "auto"
    cpu = (resources.get("requests") or {}).get("cpu") or (resources.get("limits") or {}).get("cpu")
    return str(max(1, _cpu(cpu) if cpu is not None else 0))


def gpus_per_node(resources: JsonDict) -> int:
    """runtime.GetNumGPUPerNode: the first resource whose name contains "gpu", from requests, else limits."""
    for part in ("requests", "limits"):
        for name, value in (resources.get(part) or {}).items():
            if "gpu" in name.lower() and _cpu(value):
                return _cpu(value)
    return 0


def mpi_slots(trainjob: JsonDict, runtime: JsonDict) -> int:
    """The MPI plugin's slots per node, from the TrainJob's resourcesPerNode, else the runtime's node container."""
    trainer = (trainjob.get("spec") or {}).get("trainer") or {}
    resources = trainer.get("resourcesPerNode")
    if resources is None:
        for rjob in (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or []:
            if rjob.get("name") == NODE or ancestor_of(rjob) == "trainer":
                resources = (find_container(rjob, NODE) or {}).get("resources")
                if resources:
                    break
    return mpi.slots((runtime.get("spec") or {}).get("mlPolicy") or {}, trainer, gpus_per_node(resources or {}))


def build_jobset(trainjob: JsonDict, runtime: JsonDict, *, status_env: list[JsonDict] | None = None,
                 rules: TrainerRules | None = None) -> JsonDict:
    """The JobSet for `trainjob` from `runtime` (a runtime object, e.g. the snapshot's copy). `rules`: what
    the profile's Trainer release changes (v2.3.0's by default; 2.4 sets the TrainJob's image on an MPI
    runtime's `node` job too, kubeflow/trainer#4301, and the launcher's PRTE variables, #4029)."""
    rules = rules or TrainerRules()
    meta, tspec = trainjob["metadata"], trainjob.get("spec") or {}
    name = meta["name"]
    rspec = runtime.get("spec") or {}
    template = clone(rspec.get("template") or {})
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    annotations = dict((template.get("metadata") or {}).get("annotations") or {})
    js_spec: JsonDict = template.get("spec") or {}
    order = [r.get("name") for r in js_spec.get("replicatedJobs") or []]
    for patch in tspec.get("runtimePatches") or []:
        ptemplate = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {})
        labels.update((ptemplate.get("metadata") or {}).get("labels") or {})
        annotations.update((ptemplate.get("metadata") or {}).get("annotations") or {})
        js_spec = merge(js_spec, ptemplate.get("spec") or {})
    js_spec["replicatedJobs"] = sorted(js_spec.get("replicatedJobs") or [],
                                       key=lambda r: order.index(r.get("name")) if r.get("name") in order else 0)
    policy = rspec.get("mlPolicy")
    trainer = tspec.get("trainer")
    mpi_policy = (policy or {}).get("mpi")
    as_node = bool(mpi_policy is not None and mpi_policy.get("runLauncherAsNode"))
    for rjob in js_spec["replicatedJobs"]:
        role = ancestor_of(rjob)
        job_spec = rjob["template"].setdefault("spec", {}) if "template" in rjob else {}
        # Every replicated job is a PodSet whose count the jobset plugin writes back as parallelism and
        # completions (`SyncParallelCount`): the template's parallelism (at least 1), numNodes for the trainer.
        count = max(1, int(job_spec.get("parallelism") or 1))
        if role in ("dataset-initializer", "model-initializer"):
            rjob["replicas"] = 1
            _initializer(rjob, role, ((tspec.get("initializer") or {}).get(role.split("-")[0]) or {}))
        elif role == "trainer":
            rjob["replicas"] = 1
            if policy is not None:
                count = int(policy.get("numNodes") or 1)
            if trainer and trainer.get("numNodes") is not None and mpi_policy is None:
                count = int(trainer["numNodes"])
            _trainer(name, rjob, policy or {}, trainer, count, status_env)
        elif as_node and rjob.get("name") == NODE and trainer and (node := find_container(rjob, NODE)):
            # The launcher is a node: the node job's container gets the TrainJob's resources and env too.
            if trainer.get("resourcesPerNode"):
                node["resources"] = merge(node.get("resources") or {}, trainer["resourcesPerNode"])
            upsert_env(node, trainer.get("env") or [])
        if (rules.image_on_mpi_nodes and mpi_policy is not None and role != "trainer" and rjob.get("name") == NODE
                and trainer and trainer.get("image") is not None and (node := find_container(rjob, NODE))):
            node["image"] = trainer["image"]
        if mpi_policy is not None and rjob.get("name") == NODE and trainer and trainer.get("numNodes") is not None:
            # MPI sizes the job named `node`, not the trainer's: numNodes, less the launcher when it is a node.
            count = max(int(trainer["numNodes"]) - 1, 1) if as_node else int(trainer["numNodes"])
        if "template" in rjob:
            job_spec["parallelism"] = job_spec["completions"] = count
    if policy is not None and "mpi" in policy:
        mpi.enforce(name, js_spec, policy, mpi_slots(trainjob, runtime), prte=rules.prte_env)
    return {
        "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}", "kind": "JobSet",
        "metadata": {"name": name, "namespace": meta["namespace"], "labels": labels, "annotations": annotations,
                     "ownerReferences": [{"apiVersion": trainjob["apiVersion"], "kind": "TrainJob", "name": name,
                                          "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
        "spec": {**js_spec, "suspend": bool(tspec.get("suspend"))},
    }


def _initializer(rjob: JsonDict, role: str, config: JsonDict) -> None:
    container = find_container(rjob, role)
    if container is None or not config:
        return
    if config.get("storageUri"):
        upsert_env(container, [{"name": "STORAGE_URI", "value": config["storageUri"]}])
    upsert_env(container, config.get("env") or [])
    if (config.get("secretRef") or {}).get("name"):
        container.setdefault("envFrom", []).append({"secretRef": {"name": config["secretRef"]["name"]}})


def _trainer(name: str, rjob: JsonDict, policy: JsonDict, trainer: JsonDict | None, count: int,
             status_env: list[JsonDict] | None) -> None:
    node = find_container(rjob, NODE)
    if node is None:
        return
    if trainer:
        if trainer.get("resourcesPerNode"):
            node["resources"] = merge(node.get("resources") or {}, trainer["resourcesPerNode"])
        for key in ("image", "command", "args"):
            if trainer.get(key) is not None:
                node[key] = clone(trainer[key])
        master = f"{name}-{NODE}-0-0.{name}"
        # Torch and XGBoost size a node by the TrainJob's resourcesPerNode alone when given, else the runtime's.
        resources = trainer.get("resourcesPerNode") or node.get("resources") or {}
        plugin_env: list[JsonDict] = []
        if "torch" in policy:
            plugin_env = [{"name": "PET_NNODES", "value": str(count)},
                          {"name": "PET_NPROC_PER_NODE", "value": nproc_per_node(trainer, resources)},
                          {"name": "PET_NODE_RANK", "valueFrom": INDEX_REF},
                          {"name": "PET_MASTER_ADDR", "value": master},
                          {"name": "PET_MASTER_PORT", "value": str(PORT)}]
        elif "jax" in policy:
            plugin_env = [{"name": "JAX_NUM_PROCESSES", "value": str(count)},
                          {"name": "JAX_PROCESS_ID", "valueFrom": INDEX_REF},
                          {"name": "JAX_COORDINATOR_ADDRESS", "value": f"{master}:{PORT}"}]
        elif "xgboost" in policy:
            plugin_env = [{"name": "DMLC_TRACKER_URI", "value": master},
                          {"name": "DMLC_TRACKER_PORT", "value": str(PORT)},
                          {"name": "DMLC_TASK_ID", "valueFrom": INDEX_REF},
                          {"name": "DMLC_NUM_WORKER", "value": str(count * max(1, gpus_per_node(resources)))}]
        # Torch writes the TrainJob's env into its PodSet before PET_*; JAX and XGBoost leave it to the
        # jobset builder, which upserts it after their variables; PlainML writes only the TrainJob's env.
        own_env = trainer.get("env") or []
        if "torch" in policy:
            upsert_env(node, own_env)
        upsert_env(node, plugin_env)
        if plugin_env:
            ports = node.setdefault("ports", [])
            if not any(p.get("containerPort") == PORT for p in ports):
                ports.append({"containerPort": PORT})
        upsert_env(node, own_env)
    for container in pod_spec(rjob).get("containers") or []:
        if status_env:
            upsert_env(container, status_env)
