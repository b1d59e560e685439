"""Kubeflow Trainer v2.3.0's own tests, ported as a black-box suite: the local cluster is driven only through
the official kubernetes client, and each case names the upstream file and case it reproduces
(`controller:` = test/integration/controller/trainjob_controller_test.go, `webhooks:` =
test/integration/webhooks/<file>, `plugins:` = pkg/runtime/framework/plugins/<plugin>/<plugin>_test.go,
`e2e:` = test/e2e/e2e_test.go).

What a single local node changes, case by case, is in the docstrings: upstream's envtest has no JobSet
controller, so it writes JobSet status by hand; here real processes finish. Shape cases create their
TrainJobs suspended (no process starts; upstream's non-suspended cases differ only in `spec.suspend`).
The cases table is in docs/reference/trainjob-behaviour.md, "Trainer's tests, ported"."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from waiting import until

from airflow_tfjob.local import LocalCluster

G, V = "trainer.kubeflow.org", "v1alpha1"
NS = "default"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
RES = {"requests": {"cpu": "1", "memory": "4Gi"}}
INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
TCP_29500 = [{"containerPort": 29500, "protocol": "TCP"}]


def rjob(name: str, ancestor: str, container: dict[str, Any], volumes: bool = True) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [container]}
    if volumes:
        pod["volumes"] = [{"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer"}}]
    return {"name": name, "template": {"metadata": {"labels": {ANCESTOR: ancestor}},
                                       "spec": {"template": {"spec": pod}}}}


def upstream_runtime(name: str, policy: dict[str, Any], *, kind: str = "TrainingRuntime",
                     init_containers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """testingutil.MakeTrainingRuntimeWrapper's shape: dataset-initializer, model-initializer and node, each
    container `test:runtime` with command/args `runtime` and 1 CPU / 4Gi, the `initializer` claim mounted."""
    def box(cname: str, mounts: list[str]) -> dict[str, Any]:
        return {"name": cname, "image": "test:runtime", "command": ["runtime"], "args": ["runtime"],
                "resources": RES, "volumeMounts": [{"name": "initializer", "mountPath": m} for m in mounts]}
    node = rjob("node", "trainer", box("node", ["/workspace/dataset", "/workspace/model"]))
    if init_containers:
        node["template"]["spec"]["template"]["spec"]["initContainers"] = init_containers
    meta: dict[str, Any] = {"name": name}
    if kind == "TrainingRuntime":
        meta["namespace"] = NS
    return {"apiVersion": f"{G}/{V}", "kind": kind, "metadata": meta, "spec": {
        "mlPolicy": policy,
        "template": {"spec": {"replicatedJobs": [
            rjob("dataset-initializer", "dataset-initializer", box("dataset-initializer", ["/workspace/dataset"])),
            rjob("model-initializer", "model-initializer", box("model-initializer", ["/workspace/model"])),
            node]}}}}


def running_runtime(name: str, policy: dict[str, Any]) -> dict[str, Any]:
    """A runtime whose node runs here: one `node` job, a python process, no claim."""
    node = rjob("node", "trainer", {"name": "node", "image": "python:3.12", "command": ["python", "-c", "pass"]},
                volumes=False)
    node["template"]["spec"]["backoffLimit"] = 0
    return {"apiVersion": f"{G}/{V}", "kind": "TrainingRuntime", "metadata": {"name": name, "namespace": NS},
            "spec": {"mlPolicy": policy, "template": {"spec": {"replicatedJobs": [node]}}}}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(apis=["trainjob"]) as c:
        yield c


@pytest.fixture(scope="module")
def api(cluster: LocalCluster) -> client.ApiClient:
    api = config.new_client_from_config(str(cluster.kubeconfig_path))
    objs = client.CustomObjectsApi(api)
    for name, policy in (("alpha", {"numNodes": 100}), ("testing", {"numNodes": 1}),
                         ("alpha-torch", {"numNodes": 100, "torch": {}}), ("alpha-jax", {"numNodes": 100, "jax": {}}),
                         ("alpha-xgboost", {"numNodes": 100, "xgboost": {}}), ("alpha-flux", {"flux": {}})):
        objs.create_namespaced_custom_object(G, V, NS, "trainingruntimes", upstream_runtime(name, policy))
    objs.create_cluster_custom_object(G, V, "clustertrainingruntimes",
                                      upstream_runtime("testing", {"numNodes": 1}, kind="ClusterTrainingRuntime"))
    # As upstream breaks its runtime: by an update, which the TrainingRuntime webhook does not check.
    broken = objs.create_namespaced_custom_object(G, V, NS, "trainingruntimes",
                                                  upstream_runtime("no-init-box", {"numNodes": 1}))
    jobs = broken["spec"]["template"]["spec"]["replicatedJobs"]
    jobs[0]["template"]["spec"]["template"]["spec"]["containers"][0]["name"] = "fetch"
    del jobs[1]["template"]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    objs.replace_namespaced_custom_object(G, V, NS, "trainingruntimes", "no-init-box", broken)
    objs.create_namespaced_custom_object(G, V, NS, "trainingruntimes", mpi_runtime("alpha-mpi-default", {}))
    objs.create_namespaced_custom_object(G, V, NS, "trainingruntimes", mpi_runtime(
        "mpi-as-node-no-launcher", {"runLauncherAsNode": True}, launcher=False))
    for name, policy in (("run-torch", {"numNodes": 1, "torch": {}}), ("run-plain", {"numNodes": 1}),
                         ("run-jax", {"numNodes": 1, "jax": {}}), ("run-xgboost", {"numNodes": 1, "xgboost": {}})):
        objs.create_namespaced_custom_object(G, V, NS, "trainingruntimes", running_runtime(name, policy))
    return api


def objs(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def trainjob(name: str, runtime: str, kind: str = "TrainingRuntime", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{G}/{V}", "kind": "TrainJob", "metadata": {"name": name, "namespace": NS},
            "spec": {"runtimeRef": {"apiGroup": G, "kind": kind, "name": runtime}, **spec}}


def create(api: client.ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    return objs(api).create_namespaced_custom_object(G, V, NS, "trainjobs", body)  # type: ignore[no-any-return]


def get(api: client.ApiClient, name: str, plural: str = "trainjobs", group: str = G, version: str = V) -> Any:
    return objs(api).get_namespaced_custom_object(group, version, NS, plural, name)


def jobset(api: client.ApiClient, name: str) -> dict[str, Any]:
    def found() -> Any:
        try:
            return get(api, name, "jobsets", "jobset.x-k8s.io", "v1alpha2")
        except client.ApiException:
            return None
    until(found, f"jobset {name}")
    return found()  # type: ignore[no-any-return]


def replicated(js: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for r in js["spec"]["replicatedJobs"] if r["name"] == name)


def pod_of(js: dict[str, Any], name: str) -> dict[str, Any]:
    return replicated(js, name)["template"]["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def box(js: dict[str, Any], name: str, cname: str | None = None) -> dict[str, Any]:
    return next(c for c in pod_of(js, name)["containers"] if c["name"] == (cname or name))


def counts(js: dict[str, Any]) -> dict[str, tuple[int, int, int]]:
    return {r["name"]: (r["replicas"], r["template"]["spec"]["parallelism"], r["template"]["spec"]["completions"])
            for r in js["spec"]["replicatedJobs"]}


def refused(api: client.ApiClient, call: Any) -> tuple[int, str]:
    with pytest.raises(client.ApiException) as exc:
        call()
    return exc.value.status, json.loads(exc.value.body)["message"]


def update(api: client.ApiClient, name: str, edit: Any) -> tuple[int, str]:
    """Edit a fresh read's spec and replace it, again on a conflict with the controller (upstream's Eventually):
    the status and message of the answer."""
    answer: list[tuple[int, str]] = []

    def attempt() -> bool:
        tj = get(api, name)
        edit(tj["spec"])
        try:
            objs(api).replace_namespaced_custom_object(G, V, NS, "trainjobs", name, tj)
        except client.ApiException as exc:
            if exc.status == 409:
                return False
            answer.append((exc.status, json.loads(exc.body)["message"]))
            return True
        answer.append((200, ""))
        return True
    until(attempt, f"an update of {name} without conflict")
    return answer[0]


def delete(api: client.ApiClient, name: str) -> None:
    """Delete a TrainJob and wait until the garbage collector has taken its JobSet too. Upstream runs each
    case in a namespace of its own, deleted after it; here the cases share one, and parametrized entries
    reuse a TrainJob's name: a loaded clean-clone run began an entry while the previous one's JobSet was
    still there, which the new TrainJob then read as its own (it never became active again on resume)."""
    objs(api).delete_namespaced_custom_object(G, V, NS, "trainjobs", name)

    def gone(group: str, version: str, plural: str) -> bool:
        listed = objs(api).list_namespaced_custom_object(group, version, NS, plural, field_selector=f"metadata.name={name}")
        return not listed["items"]
    until(lambda: gone(G, V, "trainjobs") and gone("jobset.x-k8s.io", "v1alpha2", "jobsets"), f"{name} and its JobSet gone", 60)


TRAINER = {"image": "test:trainjob", "command": ["trainjob"], "args": ["trainjob"], "resourcesPerNode": RES}
INITIALIZER = {"dataset": {"storageUri": "hf://trainjob-dataset"}, "model": {"storageUri": "hf://trainjob-model"}}
META_PATCH = {"manager": "test.io/manager", "trainingRuntimeSpec": {"template": {"metadata": {
    "labels": {"testingKey": "testingVal"}, "annotations": {"testingKey": "testingVal"}}}}}


def node_patch(manager: str, pod: dict[str, Any], **template: Any) -> dict[str, Any]:
    return {"manager": manager, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"spec": pod, **template}}}}]}}}}


# --- controller: the JobSet a TrainJob becomes ------------------------------------------------------------------


def assert_alpha_shape(js: dict[str, Any], uid: str, nodes: int) -> None:
    assert js["metadata"]["ownerReferences"] == [{"apiVersion": f"{G}/{V}", "kind": "TrainJob", "name": "alpha",
                                                  "uid": uid, "controller": True, "blockOwnerDeletion": True}]
    assert js["spec"]["suspend"] is True
    assert counts(js) == {"dataset-initializer": (1, 1, 1), "model-initializer": (1, 1, 1), "node": (1, nodes, nodes)}
    for which in ("dataset", "model"):
        c = box(js, f"{which}-initializer")
        assert (c["image"], c["command"], c["args"], c["resources"]) == ("test:runtime", ["runtime"], ["runtime"], RES)
        assert c["env"] == [{"name": "STORAGE_URI", "value": f"hf://trainjob-{which}"}]
    node = box(js, "node")
    assert (node["image"], node["command"], node["args"], node["resources"]) == (
        "test:trainjob", ["trainjob"], ["trainjob"], RES)
    assert "env" not in node and "ports" not in node


def test_plainml_trainjob_becomes_the_runtime_jobset(api: client.ApiClient) -> None:
    """controller: PlainML "Should succeed to create TrainJob with TrainingRuntime" (without the coscheduling
    PodGroup: no scheduler-plugins here). Initializers get parallelism/completions 1, the PlainML node
    container no env at all, the runtime patch's labels and annotations reach the JobSet."""
    tj = create(api, trainjob("alpha", "alpha", suspend=True, runtimePatches=[META_PATCH], trainer=TRAINER,
                              initializer=INITIALIZER))
    js = jobset(api, "alpha")
    assert_alpha_shape(js, tj["metadata"]["uid"], 100)
    assert js["metadata"]["labels"]["testingKey"] == js["metadata"]["annotations"]["testingKey"] == "testingVal"
    delete(api, "alpha")


def test_plainml_trainjob_numnodes_and_env(api: client.ApiClient) -> None:
    """plugins: plainml_test.go "trainJob trainer numNodes are respected rather than runtimeInfo" and "trainJob
    trainer env are respected rather than runtimeInfo"."""
    create(api, trainjob("plain-nodes", "alpha", suspend=True,
                         trainer={"numNodes": 3, "env": [{"name": "CONFIG", "value": "trainjob"}]}))
    js = jobset(api, "plain-nodes")
    assert (counts(js)["node"], box(js, "node")["env"]) == ((1, 3, 3), [{"name": "CONFIG", "value": "trainjob"}])
    delete(api, "plain-nodes")


def test_a_trainjob_managed_by_multikueue_is_left_alone(api: client.ApiClient) -> None:
    """controller: PlainML "Should not reconcile TrainJob managed by an external controller". Upstream waits a
    fixed time (Consistently); here a TrainJob created after it is reconciled first, then neither a JobSet
    nor a condition exists for the external one."""
    create(api, trainjob("external", "alpha", suspend=True, managedBy="kueue.x-k8s.io/multikueue", trainer=TRAINER))
    create(api, trainjob("witness", "alpha", suspend=True, trainer=TRAINER))
    until(lambda: (get(api, "witness").get("status") or {}).get("conditions"), "witness reconciled")
    status, _ = refused(api, lambda: get(api, "external", "jobsets", "jobset.x-k8s.io", "v1alpha2"))
    assert status == 404
    assert not (get(api, "external").get("status") or {}).get("conditions")
    delete(api, "external")
    delete(api, "witness")


def test_a_suspended_trainjobs_runtime_patch_updates_its_jobset(api: client.ApiClient) -> None:
    """controller: PlainML "Should succeeded to update JobSet when TrainJob is suspended": a node selector
    patched in while suspended reaches the JobSet; the trainer's image stays immutable (422)."""
    create(api, trainjob("alpha-upd", "alpha", suspend=True, runtimePatches=[META_PATCH], trainer=TRAINER,
                         initializer=INITIALIZER))
    jobset(api, "alpha-upd")
    patch = node_patch("test.io/manager", {"nodeSelector": {"updated": "selector"}})
    patch["trainingRuntimeSpec"]["template"]["metadata"] = META_PATCH["trainingRuntimeSpec"]["template"]["metadata"]
    assert update(api, "alpha-upd", lambda s: s.update(runtimePatches=[patch])) == (200, "")
    until(lambda: pod_of(jobset(api, "alpha-upd"), "node").get("nodeSelector") == {"updated": "selector"},
          "node selector in the JobSet")
    js = jobset(api, "alpha-upd")
    assert counts(js)["dataset-initializer"] == (1, 1, 1)
    assert js["metadata"]["labels"]["testingKey"] == "testingVal"
    status, message = update(api, "alpha-upd", lambda s: s["trainer"].update(image="new-image"))
    assert (status, "spec.trainer: Invalid value" in message) == (422, True)
    delete(api, "alpha-upd")


def test_a_runtime_patch_grace_period_reaches_the_node_pods(api: client.ApiClient) -> None:
    """controller: PlainML "Should propagate terminationGracePeriodSeconds from RuntimePatches to JobSet pods"."""
    create(api, trainjob("grace-period-job", "testing", suspend=True, trainer=TRAINER,
                         runtimePatches=[node_patch("test.io/manager", {"terminationGracePeriodSeconds": 300})]))
    js = jobset(api, "grace-period-job")
    assert pod_of(js, "node")["terminationGracePeriodSeconds"] == 300
    assert "terminationGracePeriodSeconds" not in pod_of(js, "dataset-initializer")
    assert counts(js) == {"dataset-initializer": (1, 1, 1), "model-initializer": (1, 1, 1), "node": (1, 1, 1)}
    delete(api, "grace-period-job")


def pet_env(nodes: int, name: str) -> list[dict[str, Any]]:
    return [{"name": "PET_NNODES", "value": str(nodes)}, {"name": "PET_NPROC_PER_NODE", "value": "1"},
            {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": INDEX}}},
            {"name": "PET_MASTER_ADDR", "value": f"{name}-node-0-0.{name}"}, {"name": "PET_MASTER_PORT", "value": "29500"}]


def test_torch_trainjob_env_has_its_own_env_before_pet_and_a_tcp_port(api: client.ApiClient) -> None:
    """controller: Torch "Should succeed to create TrainJob with Torch TrainingRuntime" (suspended here): the
    TrainJob's env first, then PET_* (nproc 1 from 1 CPU), port 29500/TCP, initializers 1/1/1."""
    create(api, trainjob("torch", "alpha-torch", suspend=True,
                         trainer={**TRAINER, "env": [{"name": "TRAIN_JOB", "value": "value"}]}))
    js = jobset(api, "torch")
    node = box(js, "node")
    assert node["env"] == [{"name": "TRAIN_JOB", "value": "value"}, *pet_env(100, "torch")]
    assert node["ports"] == TCP_29500
    assert counts(js) == {"dataset-initializer": (1, 1, 1), "model-initializer": (1, 1, 1), "node": (1, 100, 100)}
    delete(api, "torch")


def test_torch_runtime_patches_merge_pod_fields_and_init_container_env(api: client.ApiClient) -> None:
    """controller: Torch "Should succeed to create TrainJob with RuntimePatches" (suspended here; the runtime's
    node gets the init container upstream adds with InitContainer()): service account, pod labels and
    annotations on the node job only, and the init container's env in strategic-merge order
    (patched INIT_ENV, the patch's NEW_VALUE, then the runtime's DATASET_PATH)."""
    runtime = upstream_runtime("alpha-patches", {"numNodes": 100, "torch": {}}, init_containers=[{
        "name": "override-init-container", "image": "test:runtime",
        "env": [{"name": "INIT_ENV", "value": "original_init"}, {"name": "DATASET_PATH", "value": "runtime"}]}])
    objs(api).create_namespaced_custom_object(G, V, NS, "trainingruntimes", runtime)
    patch = node_patch("test.io/manager", {"serviceAccountName": "override-sa", "initContainers": [{
        "name": "override-init-container",
        "env": [{"name": "INIT_ENV", "value": "override_init"}, {"name": "NEW_VALUE", "value": "from_overrides"}]}]},
        metadata={"labels": {"override-label-key": "override-label-value", "custom-label": "custom-value"},
                  "annotations": {"override-annotation-key": "override-annotation-value",
                                  "custom-annotation": "custom-annotation-value"}})
    create(api, trainjob("patched", "alpha-patches", suspend=True, runtimePatches=[patch],
                         trainer={**TRAINER, "env": [{"name": "TRAIN_JOB", "value": "value"}]}))
    js = jobset(api, "patched")
    pod = pod_of(js, "node")
    assert pod["serviceAccountName"] == "override-sa"
    assert pod["initContainers"][0]["env"] == [{"name": "INIT_ENV", "value": "override_init"},
                                               {"name": "NEW_VALUE", "value": "from_overrides"},
                                               {"name": "DATASET_PATH", "value": "runtime"}]
    meta = replicated(js, "node")["template"]["spec"]["template"]["metadata"]
    assert meta["labels"]["custom-label"] == "custom-value"
    assert meta["annotations"]["custom-annotation"] == "custom-annotation-value"
    assert "custom-label" not in (replicated(js, "dataset-initializer")["template"]["spec"]["template"].get(
        "metadata") or {}).get("labels", {})
    assert box(js, "node")["env"] == [{"name": "TRAIN_JOB", "value": "value"}, *pet_env(100, "patched")]
    delete(api, "patched")


def test_jax_trainjob_env_and_port(api: client.ApiClient) -> None:
    """controller: Jax "Should succeed to create TrainJob with Jax TrainingRuntime" (suspended, no launcher job):
    JAX_NUM_PROCESSES, JAX_PROCESS_ID from the completion index, the coordinator on node-0-0, port 29500/TCP."""
    create(api, trainjob("jax", "alpha-jax", suspend=True, trainer=TRAINER))
    node = box(jobset(api, "jax"), "node")
    assert node["env"] == [{"name": "JAX_NUM_PROCESSES", "value": "100"},
                           {"name": "JAX_PROCESS_ID", "valueFrom": {"fieldRef": {"fieldPath": INDEX}}},
                           {"name": "JAX_COORDINATOR_ADDRESS", "value": "jax-node-0-0.jax:29500"}]
    assert node["ports"] == TCP_29500
    delete(api, "jax")


def test_xgboost_trainjob_env_and_port(api: client.ApiClient) -> None:
    """controller: XGBoost "Should succeed to create TrainJob with XGBoost TrainingRuntime" (suspended)."""
    create(api, trainjob("xgb", "alpha-xgboost", suspend=True, trainer=TRAINER))
    js = jobset(api, "xgb")
    node = box(js, "node")
    assert node["env"] == [{"name": "DMLC_TRACKER_URI", "value": "xgb-node-0-0.xgb"},
                           {"name": "DMLC_TRACKER_PORT", "value": "29500"},
                           {"name": "DMLC_TASK_ID", "valueFrom": {"fieldRef": {"fieldPath": INDEX}}},
                           {"name": "DMLC_NUM_WORKER", "value": "100"}]
    assert node["ports"] == TCP_29500
    assert counts(js)["node"] == (1, 100, 100)
    delete(api, "xgb")


def test_xgboost_workers_per_node_follow_the_gpus(api: client.ApiClient) -> None:
    """plugins: xgboost_test.go "XGBoost training with GPU resources" (2 nodes, 4 GPUs each, the TrainJob's
    resources replacing the runtime's 1 CPU as in "resources set in both Runtime and TrainJob"):
    DMLC_NUM_WORKER = nodes x GPUs."""
    create(api, trainjob("xgb-gpu", "alpha-xgboost", suspend=True, trainer={
        "numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "1", "example.com/gpu": "4"}}}))
    env = {e["name"]: e.get("value") for e in box(jobset(api, "xgb-gpu"), "node")["env"]}
    assert env["DMLC_NUM_WORKER"] == "8"
    delete(api, "xgb-gpu")


@pytest.mark.parametrize(("case", "requests", "nproc", "want"), [
    ("nproc_per_node=auto with CPU limit", {"cpu": "4"}, None, "4"),
    ("nproc_per_node=auto with no CPU resources", None, None, "1"),
    ("nproc_per_node=auto with low CPU limit", {"cpu": "2"}, None, "2"),
    ("nproc_per_node=auto with CPU request but no limit", {"cpu": "3"}, None, "3"),
    ("nproc_per_node=auto with millicore CPU limit", {"cpu": "2.5"}, None, "3"),
    ("nproc_per_node=auto with fractional CPU limit", {"cpu": "0.7"}, None, "1"),
    ("nproc_per_node=auto with GPU request should remain auto", {"example.com/gpu": "2"}, None, "auto"),
    ("explicitly set nproc_per_node should be preserved", {"cpu": "8"}, 3, "3"),
    ("nproc_per_node=auto with millicore CPU limit in m format", {"cpu": "2500m"}, None, "3"),
    ("nproc_per_node=cpu with CPU limit", {"cpu": "4"}, None, "4"),
    ("nproc_per_node=auto resolves to GPU count when GPU resources present", {"cpu": "6", "example.com/gpu": "2"},
     None, "auto"),
    ("nproc_per_node=cpu with fractional CPU", {"cpu": "3.7"}, None, "4"),
], ids=lambda v: v if isinstance(v, str) and v.startswith(("nproc", "explicitly")) else "")
def test_torch_nproc_per_node(api: client.ApiClient, case: str, requests: Any, nproc: Any, want: str) -> None:
    """plugins: torch_test.go, the PET_NPROC_PER_NODE cases named in `case` (TrainJob resourcesPerNode requests
    as upstream's trainer wrapper sets them; with none, the runtime's 1 CPU gives the same 1)."""
    spec: dict[str, Any] = {"command": ["trainjob"]}
    if requests:
        spec["resourcesPerNode"] = {"requests": requests}
    if nproc:
        spec["numProcPerNode"] = nproc
    name = f"np-{zlib.crc32(case.encode()):x}"  # short: 100 nodes' pod names must stay within 63 characters
    create(api, trainjob(name, "alpha-torch", suspend=True, trainer=spec))
    env = {e["name"]: e.get("value") for e in box(jobset(api, name), "node")["env"]}
    assert env["PET_NPROC_PER_NODE"] == want
    delete(api, name)


@pytest.mark.parametrize("runtime", ["run-torch", "run-jax", "run-xgboost"])
def test_suspend_resume_and_complete_conditions(api: client.ApiClient, runtime: str) -> None:
    """controller: Torch, Jax and XGBoost "Should succeed(ed) to reconcile TrainJob conditions with Complete
    condition", and "Should not fail TrainJob if ActiveDeadlineSeconds is not exceeded": Suspended
    (TrainJobSuspended, "TrainJob is suspended"), then Resumed ("TrainJob is resumed"), then Complete with
    JobSet's AllJobsCompleted reason, and jobsStatus from the JobSet ("Should synchronize JobsStatus")."""
    create(api, trainjob("done", runtime, suspend=True, activeDeadlineSeconds=600))
    until(lambda: any(c["type"] == "Suspended" for c in (get(api, "done").get("status") or {}).get("conditions", [])),
          "suspended")
    cond = {c["type"]: c for c in get(api, "done")["status"]["conditions"]}["Suspended"]
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", "Suspended", "TrainJob is suspended")
    objs(api).patch_namespaced_custom_object(G, V, NS, "trainjobs", "done", {"spec": {"suspend": False}})
    until(lambda: any(c["type"] == "Complete" for c in get(api, "done")["status"].get("conditions", [])), "complete",
          60)
    conds = {c["type"]: (c["status"], c["reason"], c["message"]) for c in get(api, "done")["status"]["conditions"]}
    assert conds["Suspended"] == ("False", "Resumed", "TrainJob is resumed")
    assert conds["Complete"] == ("True", "AllJobsCompleted", "jobset completed successfully")
    jobs = get(api, "done")["status"]["jobsStatus"]
    assert jobs == [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}]
    assert "Failed" not in conds
    delete(api, "done")


@pytest.mark.parametrize("runtime", ["run-torch", "run-jax", "run-xgboost"])
def test_failed_condition(api: client.ApiClient, runtime: str) -> None:
    """controller: Torch, Jax and XGBoost "Should succeed(ed) to reconcile TrainJob conditions with Failed
    condition": a node that fails with backoffLimit 0 fails the TrainJob with JobSet's FailedJobs reason."""
    create(api, trainjob("fails", runtime, trainer={"command": ["python", "-c", "raise SystemExit(3)"]}))
    until(lambda: any(c["type"] == "Failed" for c in (get(api, "fails").get("status") or {}).get("conditions", [])),
          "failed", 60)
    cond = {c["type"]: c for c in get(api, "fails")["status"]["conditions"]}["Failed"]
    assert (cond["status"], cond["reason"]) == ("True", "FailedJobs")
    delete(api, "fails")


def test_deadline_exceeded_and_a_suspended_job_does_not_time_out(api: client.ApiClient) -> None:
    """controller: Timeouts "Should fail TrainJob with DeadlineExceeded when ActiveDeadlineSeconds expires" and
    "Should not start deadline timer if TrainJob is suspended" (the second judged when the first has failed)."""
    create(api, trainjob("parked", "run-plain", suspend=True, activeDeadlineSeconds=1))
    create(api, trainjob("late", "run-plain", activeDeadlineSeconds=1,
                         trainer={"command": ["python", "-c", "import time; time.sleep(60)"]}))
    until(lambda: any(c["type"] == "Failed" for c in (get(api, "late").get("status") or {}).get("conditions", [])),
          "deadline", 60)
    cond = {c["type"]: c for c in get(api, "late")["status"]["conditions"]}["Failed"]
    assert (cond["status"], cond["reason"]) == ("True", "DeadlineExceeded")
    assert not any(c["type"] == "Failed" for c in get(api, "parked")["status"].get("conditions", []))
    delete(api, "late")
    delete(api, "parked")


def test_resume_restarts_the_deadline_clock(api: client.ApiClient) -> None:
    """controller: Timeouts "Should reset deadline timer upon resume": a TrainJob suspended past its deadline
    (judged by a witness with the same deadline failing) is resumed, and fails with DeadlineExceeded only a
    deadline after its Resumed condition."""
    create(api, trainjob("held", "run-plain", suspend=True, activeDeadlineSeconds=1,
                         trainer={"command": ["python", "-c", "import time; time.sleep(60)"]}))
    create(api, trainjob("witness-2", "run-plain", activeDeadlineSeconds=1,
                         trainer={"command": ["python", "-c", "import time; time.sleep(60)"]}))
    until(lambda: any(c["type"] == "Failed" for c in (get(api, "witness-2").get("status") or {}).get(
        "conditions", [])), "witness deadline", 60)
    assert update(api, "held", lambda s: s.update(suspend=False)) == (200, "")
    until(lambda: any(c["type"] == "Failed" for c in (get(api, "held").get("status") or {}).get("conditions", [])),
          "deadline after resume", 60)
    conds = {c["type"]: c for c in get(api, "held")["status"]["conditions"]}
    assert (conds["Suspended"]["reason"], conds["Failed"]["reason"]) == ("Resumed", "DeadlineExceeded")
    resumed = datetime.strptime(conds["Suspended"]["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ")
    failed = datetime.strptime(conds["Failed"]["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ")
    assert (failed - resumed).total_seconds() >= 1
    delete(api, "held")
    delete(api, "witness-2")


@pytest.mark.parametrize(("kind", "runtime"), [("TrainingRuntime", "alpha"),
                                               ("ClusterTrainingRuntime", "testing")])
def test_runtime_snapshot_configmap(api: client.ApiClient, kind: str, runtime: str) -> None:
    """controller: Runtime Snapshots "Should create snapshot ConfigMap with correct structure and ownerReference
    for a TrainingRuntime" / "... for a ClusterTrainingRuntime"."""
    name = f"snap-{kind.lower()}"
    tj = create(api, trainjob(name, runtime, kind, suspend=True))
    core = client.CoreV1Api(api)

    def snapshot() -> Any:
        try:
            return core.read_namespaced_config_map(f"{name}-runtime-snapshot", NS)
        except client.ApiException:
            return None
    until(snapshot, "snapshot")
    cm = snapshot()
    [owner] = cm.metadata.owner_references
    assert (owner.api_version, owner.kind, owner.name, owner.uid, owner.controller, owner.block_owner_deletion) == (
        f"{G}/{V}", "TrainJob", name, tj["metadata"]["uid"], True, True)
    assert f"kind: {kind}" in cm.data["runtime"] and f"name: {runtime}" in cm.data["runtime"]
    delete(api, name)


def test_reconcile_uses_the_runtime_snapshot(api: client.ApiClient) -> None:
    """controller: Runtime Snapshots "Should use the runtime snapshot during reconciliation rather than the
    current runtime contents": a label on the runtime's template, changed after the TrainJob was made, does
    not reach its JobSet when it is resumed; the suspend change does."""
    runtime = upstream_runtime("marked", {"numNodes": 1})
    runtime["spec"]["template"]["metadata"] = {"labels": {"snapshot-test-marker": "original"}}
    objs(api).create_namespaced_custom_object(G, V, NS, "trainingruntimes", runtime)
    create(api, trainjob("snapped", "marked", suspend=True, trainer={"command": ["python", "-c", "pass"]}))
    assert jobset(api, "snapped")["metadata"]["labels"]["snapshot-test-marker"] == "original"
    current = objs(api).get_namespaced_custom_object(G, V, NS, "trainingruntimes", "marked")
    current["spec"]["template"]["metadata"]["labels"]["snapshot-test-marker"] = "changed"
    objs(api).replace_namespaced_custom_object(G, V, NS, "trainingruntimes", "marked", current)
    assert update(api, "snapped", lambda s: s.update(suspend=False)) == (200, "")
    until(lambda: jobset(api, "snapped")["spec"]["suspend"] is False, "resumed jobset")
    assert jobset(api, "snapped")["metadata"]["labels"]["snapshot-test-marker"] == "original"
    delete(api, "snapped")


# --- webhooks: test/integration/webhooks/trainjob_test.go ------------------------------------------------------

LONG = 1048576


@pytest.mark.parametrize(("case", "body", "code", "message"), [
    ("Should succeed in creating trainJob with namespace scoped trainingRuntime",
     trainjob("ok-ns", "testing"), 201, ""),
    ("Should fail in creating trainJob referencing trainingRuntime not present in the namespace",
     trainjob("missing", "nope"), 403, "specified trainingRuntime must be created before the TrainJob is created"),
    ("Should succeed in creating trainJob with namespace scoped trainingRuntime (a ClusterTrainingRuntime)",
     trainjob("ok-cluster", "testing", "ClusterTrainingRuntime"), 201, ""),
    ("Should fail in creating trainJob with pre-trained model config when referencing a trainingRuntime without "
     "an initializer", trainjob("no-model-init", "run-plain", initializer={"model": {"storageUri": "hf://m"}}), 403,
     "must have model-initializer job when trainJob is configured with input modelConfig"),
    ("Should fail in creating trainJob with dataset initializer when referencing a trainingRuntime without an "
     "initializer", trainjob("no-data-init", "run-plain", initializer={"dataset": {"storageUri": "hf://d"}}), 403,
     "must have dataset-initializer job when trainJob is configured with input datasetConfig"),
    ("Should succeed in creating trainJob with dataset initializer when referencing a ClusterTrainingRuntime "
     "with an initializer", trainjob("data-init", "testing", "ClusterTrainingRuntime",
                                     initializer={"dataset": {"storageUri": "hf://trainjob-model"}}), 201, ""),
    ("Should succeed in creating trainJob with valid trainer config for torch runtime",
     trainjob("torch-ok", "alpha-torch", trainer={"numProcPerNode": 4}, suspend=True), 201, ""),
    ("Should fail in creating trainJob with trainer config having envs with reserved env names",
     trainjob("reserved", "alpha-torch", trainer={"env": [{"name": "PET_NODE_RANK", "value": "1"}]}), 403,
     "must not have reserved envs, invalid envs configured: [PET_NODE_RANK]"),
    ("plugins: xgboost_test.go error when using reserved DMLC_TRACKER_URI env",
     trainjob("dmlc-uri", "alpha-xgboost", trainer={"env": [{"name": "DMLC_TRACKER_URI", "value": "custom-tracker"}]}),
     403, "spec.trainer.env[0]: Forbidden: DMLC_TRACKER_URI is reserved for the XGBoost runtime"),
    ("plugins: xgboost_test.go multiple errors when using multiple reserved envs",
     trainjob("dmlc-two", "alpha-xgboost", trainer={"env": [{"name": "DMLC_TRACKER_URI", "value": "custom"},
                                                            {"name": "DMLC_TASK_ID", "value": "0"}]}), 403,
     "[spec.trainer.env[0]: Forbidden: DMLC_TRACKER_URI is reserved for the XGBoost runtime, spec.trainer.env[1]: "
     "Forbidden: DMLC_TASK_ID is reserved for the XGBoost runtime]"),
    ("plugins: xgboost_test.go no error when env does not contain reserved names",
     trainjob("dmlc-ok", "alpha-xgboost", suspend=True, trainer={"env": [{"name": "OTHER", "value": "1"}]}), 201, ""),
    ("Should fail in creating TrainJob with Flux numProcPerNode < 1",
     trainjob("flux-zero", "alpha-flux", trainer={"numProcPerNode": 0}), 403,
     "spec.trainer.numProcPerNode: Invalid value: 0: must be greater than or equal to 1 for Flux TrainJob"),
    ("Should fail with invalid dataset storageUri",
     trainjob("bad-uri", "testing", "ClusterTrainingRuntime", initializer={"dataset": {"storageUri": "invalid"}}),
     422, "storageUri may be empty, or it must be a valid URI"),
    ("Should succeed with valid dataset storageUri",
     trainjob("good-uri", "testing", "ClusterTrainingRuntime",
              initializer={"dataset": {"storageUri": "hf://kubeflow/dataset"}}), 201, ""),
    ("Should fail with invalid model storageUri",
     trainjob("bad-model-uri", "testing", "ClusterTrainingRuntime", initializer={"model": {"storageUri": "invalid"}}),
     422, "spec.initializer.model.storageUri"),
    ("Should succeed with valid model storageUri",
     trainjob("good-model-uri", "testing", "ClusterTrainingRuntime",
              initializer={"model": {"storageUri": "s3://bucket/model"}}), 201, ""),
    ("Should succeed with empty dataset storageUri",
     trainjob("empty-uri", "testing", "ClusterTrainingRuntime", initializer={"dataset": {"storageUri": ""}}),
     201, ""),
    ("Should fail with dataset storageUri missing path",
     trainjob("no-path", "testing", "ClusterTrainingRuntime", initializer={"dataset": {"storageUri": "hf://"}}),
     422, "storageUri may be empty, or it must be a valid URI"),
    ("Should succeed to create TrainJob with trainer command item at the max length",
     trainjob("cmd-max", "testing", "ClusterTrainingRuntime", trainer={"command": ["a" * LONG]}), 201, ""),
    ("Should fail to create TrainJob with trainer command item exceeding the max length",
     trainjob("cmd-long", "testing", "ClusterTrainingRuntime", trainer={"command": ["a" * (LONG + 1)]}), 422,
     "spec.trainer.command[0]: Too long: may not be more than 1048576 bytes"),
    ("Should succeed to create TrainJob with trainer args item at the max length",
     trainjob("args-max", "testing", "ClusterTrainingRuntime", trainer={"args": ["a" * LONG]}), 201, ""),
    ("Should fail to create TrainJob with trainer args item exceeding the max length",
     trainjob("args-long", "testing", "ClusterTrainingRuntime", trainer={"args": ["a" * (LONG + 1)]}), 422,
     "spec.trainer.args[0]: Too long: may not be more than 1048576 bytes"),
    ("Should succeed to create TrainJob with valid RFC1035-compliant name",
     trainjob("valid-job-name", "testing"), 201, ""),
    ("Should succeed to create TrainJob with name exactly 63 characters",
     trainjob("a" * 63, "testing"), 201, ""),
    ("Should fail to create TrainJob with uppercase letters in name",
     trainjob("Upper", "testing"), 422, 'metadata.name: Invalid value: "Upper"'),
    ("Should fail to create TrainJob starting with a digit",
     trainjob("1job", "testing"), 422, "metadata.name must match RFC 1035 DNS label format"),
    ("Should fail to create TrainJob ending with a hyphen",
     trainjob("job-", "testing"), 422, "metadata.name"),
    ("Should fail to create TrainJob with name exceeding 63 characters",
     trainjob("a" * 64, "testing"), 422, "metadata.name must be no more than 63 characters"),
    ("Should succeed to create TrainJob with 'managedBy: trainer.kubeflow.org/trainjob-controller'",
     trainjob("managed-trainer", "testing", managedBy="trainer.kubeflow.org/trainjob-controller"), 201, ""),
    ("Should succeed to create TrainJob with 'managedBy: kueue.x-k8s.io/multukueue'",
     trainjob("managed-kueue", "testing", managedBy="kueue.x-k8s.io/multikueue"), 201, ""),
    ("Should fail to create TrainJob with invalid managedBy",
     trainjob("bad-managed", "testing", managedBy="other-job-controller"), 422,
     "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set"),
    ("Should succeed to create trainJob with valid RuntimePatches manager",
     trainjob("good-manager", "testing", runtimePatches=[{"manager": "kueue.k8s.io/manager"}]), 201, ""),
    ("Should fail to create trainJob with invalid RuntimePatches manager",
     trainjob("bad-manager", "testing", runtimePatches=[{"manager": "kueue.k8s.io/"}]), 403,
     'spec.runtimePatches[0].manager: Invalid value: "kueue.k8s.io/": must be a domain-prefixed path '
     '(such as "acme.io/foo")'),
    ("Should succeed to create trainJob with runtimePatches containing two replicated job patches",
     trainjob("two-rjob-patches", "testing", runtimePatches=[
         node_patch("acme.io/manager-one", {"serviceAccountName": "custom-sa"}),
         node_patch("acme.io/manager-two", {"serviceAccountName": "custom-sa-two"})]), 201, ""),
    ("Should succeed to create TrainJob with valid terminationGracePeriodSeconds in RuntimePatches",
     trainjob("valid-grace", "testing", runtimePatches=[node_patch("acme.io/manager",
                                                                   {"terminationGracePeriodSeconds": 300})]), 201, ""),
    ("Should succeed to create TrainJob with zero terminationGracePeriodSeconds",
     trainjob("zero-grace", "testing", runtimePatches=[node_patch("acme.io/manager",
                                                                  {"terminationGracePeriodSeconds": 0})]), 201, ""),
    ("Should fail to create TrainJob with negative terminationGracePeriodSeconds",
     trainjob("neg-grace", "testing", runtimePatches=[node_patch("acme.io/manager",
                                                                 {"terminationGracePeriodSeconds": -1})]), 422,
     "terminationGracePeriodSeconds in body should be greater than or equal to 0"),
    ("plugins: jobset_test.go runtimePatches contain envs for reserved container",
     trainjob("patch-env", "testing", suspend=True, runtimePatches=[node_patch("acme.io/manager", {
         "containers": [{"name": "node", "env": [{"name": "A", "value": "b"}]}]})]), 403,
     "spec.runtimePatches: Invalid value: ...: must not have envs for the dataset-initializer, model-initializer, "
     "node containers"),
    ("plugins: jobset_test.go must have container with name - dataset initializer in the dataset initializer job",
     trainjob("no-data-box", "no-init-box", initializer={"dataset": {"storageUri": "hf://d"}}), 403,
     "must have container with name - dataset-initializer in the dataset-initializer job"),
    ("plugins: jobset_test.go must have volumeMount with name - initializer in the model initializer container",
     trainjob("no-model-mount", "no-init-box", initializer={"model": {"storageUri": "hf://m"}}), 403,
     "must have volumeMount with name - initializer in container model-initializer of the model-initializer job"),
], ids=lambda v: v if isinstance(v, str) and v.startswith(("Should", "plugins")) else "")
def test_trainjob_webhook_on_create(api: client.ApiClient, case: str, body: dict[str, Any], code: int,
                                    message: str) -> None:
    """webhooks: trainjob_test.go, "Validate TrainJob on creation", "RFC1035-compliant TrainJob name validation"
    and the managedBy/runtimePatches table; plugins: the jobset plugin's Validate cases a webhook answer shows.
    The case named in `case`, with the status code and the message's text."""
    if code == 201:
        create(api, body)
        delete(api, body["metadata"]["name"])
        return
    status, text = refused(api, lambda: create(api, body))
    assert status == code and message in text, text


def test_flux_reserved_init_container(api: client.ApiClient) -> None:
    """webhooks: trainjob_test.go "Should fail in creating TrainJob with reserved flux-installer init container"."""
    runtime = upstream_runtime("flux-reserved", {"flux": {}}, init_containers=[
        {"name": "flux-installer", "image": "ubuntu:22.04"}])
    objs(api).create_namespaced_custom_object(G, V, NS, "trainingruntimes", runtime)
    status, text = refused(api, lambda: create(api, trainjob("flux-init", "flux-reserved")))
    assert status == 403 and "InitContainer 'flux-installer' is reserved" in text, text


def test_trainjob_defaults(api: client.ApiClient) -> None:
    """webhooks: trainjob_test.go "Defaulting TrainJob on creation" (suspend=false, managedBy, runtimeRef's
    apiGroup and kind) and "Should set Time on each RuntimePatch when creating a TrainJob"."""
    body = trainjob("defaults", "testing", runtimePatches=[{"manager": "acme.io/manager-one"},
                                                           {"manager": "acme.io/manager-two"}])
    body["spec"]["runtimeRef"] = {"name": "testing"}
    body["spec"]["suspend"] = True
    made = create(api, body)
    spec = made["spec"]
    assert spec["managedBy"] == "trainer.kubeflow.org/trainjob-controller"
    assert spec["runtimeRef"] == {"apiGroup": G, "kind": "ClusterTrainingRuntime", "name": "testing"}
    times = [p["time"] for p in spec["runtimePatches"]]
    assert all(datetime.strptime(t, "%Y-%m-%dT%H:%M:%SZ") for t in times)
    delete(api, "defaults")
    body = trainjob("null-suspend", "testing")
    assert create(api, body)["spec"]["suspend"] is False
    delete(api, "null-suspend")


def test_trainjob_webhook_on_update(api: client.ApiClient) -> None:
    """webhooks: trainjob_test.go "Validate TrainJob on update": "Should fail to update managedBy", "...
    runtimeRef", "... initializer", "... trainer" (422, immutable), "Should succeed to update runtimePatches
    when suspend is true", "Should fail to update TrainJob terminationGracePeriodSeconds after creation"."""
    create(api, trainjob("upd", "testing", suspend=True, trainer={"image": "test-image"},
                         initializer={"model": {"storageUri": "s3://test/path"}},
                         runtimePatches=[node_patch("test.io/manager", {"nodeSelector": {"test": "test"},
                                                                        "terminationGracePeriodSeconds": 300})]))


    for key, edit in (("managedBy", lambda s: s.update(managedBy="kueue.x-k8s.io/multikueue")),
                      ("runtimeRef", lambda s: s["runtimeRef"].update(name="forbidden-update")),
                      ("initializer", lambda s: s["initializer"]["model"].update(storageUri="s3://forbidden-update")),
                      ("trainer", lambda s: s["trainer"].update(image="forbidden-update"))):
        status, text = update(api, "upd", edit)
        assert (status, f"spec.{key}: Invalid value" in text, "field is immutable" in text) == (422, True, True)

    def pod(s: dict[str, Any]) -> dict[str, Any]:
        return s["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"][
            "spec"]["template"]["spec"]  # type: ignore[no-any-return]
    before = get(api, "upd")["spec"]["runtimePatches"][0]["time"]
    assert update(api, "upd", lambda s: pod(s).update(nodeSelector={"allow": "update"})) == (200, "")
    assert pod(get(api, "upd")["spec"])["nodeSelector"] == {"allow": "update"}
    assert get(api, "upd")["spec"]["runtimePatches"][0]["time"] >= before
    status, text = update(api, "upd", lambda s: pod(s).update(terminationGracePeriodSeconds=600))
    assert (status, "terminationGracePeriodSeconds: Invalid value" in text, "field is immutable" in text) == (
        422, True, True)
    delete(api, "upd")


# --- webhooks: trainingruntime_webhook_test.go (marker validations and defaulting) -----------------------------


@pytest.mark.parametrize(("case", "policy"), [
    ("Should fail to create trainingRuntime with both MPI and Torch runtimes", {"mpi": {}, "torch": {}}),
    ("Should fail to create trainingRuntime with both JAX and Torch runtimes", {"jax": {}, "torch": {}}),
    ("Should fail to create trainingRuntime with both Torch and Flux runtimes", {"torch": {}, "flux": {}}),
    ("Should fail to create trainingRuntime with both MPI and Flux runtimes", {"mpi": {}, "flux": {}}),
    ("Should fail to create trainingRuntime with both JAX and Flux runtimes", {"jax": {}, "flux": {}}),
    ("Should fail to create trainingRuntime with both JAX and MPI runtimes", {"jax": {}, "mpi": {}}),
    ("Should fail to create trainingRuntime with all four runtimes configured",
     {"torch": {}, "mpi": {}, "jax": {}, "xgboost": {}}),
    ("Should fail to create trainingRuntime with non-supported mpi.mpiImplementation",
     {"mpi": {"mpiImplementation": "invalid"}}),
])
def test_runtime_markers_refuse(api: client.ApiClient, case: str, policy: dict[str, Any]) -> None:
    """webhooks: trainingruntime_webhook_test.go "TrainingRuntime marker validations and defaulting": the CRD's
    rules answer 422 (one ML policy at most; the mpiImplementation enum)."""
    body = upstream_runtime("two-policies", policy)
    status, text = refused(api, lambda: objs(api).create_namespaced_custom_object(
        G, V, NS, "trainingruntimes", body))
    want = "Unsupported value" if "mpiImplementation" in case else "Only one of the policy can be configured"
    assert status == 422 and want in text, text


def test_runtime_mpi_defaults(api: client.ApiClient) -> None:
    """webhooks: trainingruntime_webhook_test.go "Defaulting TrainingRuntime on creation": mpiImplementation
    OpenMPI, sshAuthMountPath /root/.ssh, runLauncherAsNode false, numProcPerNode 1; and "Should succeed to
    create TrainingRuntime" / clustertrainingruntime_webhook_test.go "Should succeed to create
    ClusterTrainingRuntime" (the fixture's runtimes)."""
    made = objs(api).create_namespaced_custom_object(G, V, NS, "trainingruntimes",
                                                     upstream_runtime("mpi-defaults", {"mpi": {}}))
    assert made["spec"]["mlPolicy"]["mpi"] == {"numProcPerNode": 1, "mpiImplementation": "OpenMPI",
                                               "sshAuthMountPath": "/root/.ssh", "runLauncherAsNode": False}


# --- plugins: jobset_test.go, runtime patches against the JobSet's state ----------------------------------------


def test_runtime_patches_only_change_while_suspended(api: client.ApiClient) -> None:
    """plugins: jobset_test.go "forbid changes to runtimePatches when trainJob is not suspended", "forbid atomic
    update: suspending trainJob with runtimePatches change is rejected when jobSet has an active replicatedJob",
    "allow atomic update: modify runtimePatches and unsuspend trainJob in a single request", "allow changes to
    runtimePatches when trainJob is suspended and jobSet exists but is inactive"."""
    create(api, trainjob("busy", "run-plain", trainer={"command": ["python", "-c", "import time; time.sleep(60)"]}))
    until(lambda: any(s.get("active") for s in (jobset(api, "busy").get("status") or {}).get(
        "replicatedJobsStatus") or []), "an active node")
    patched = [node_patch("acme.io/manager", {"nodeSelector": {"a": "b"}})]
    status, text = update(api, "busy", lambda s: s.update(runtimePatches=patched))
    assert (status, "RuntimePatches can only be modified when the TrainJob is suspended before or after the "
            "update" in text) == (403, True), text
    status, text = update(api, "busy", lambda s: s.update(runtimePatches=patched, suspend=True))
    assert (status, "RuntimePatches cannot be modified when the JobSet's ReplicatedJob node is still active"
            in text) == (403, True), text
    assert update(api, "busy", lambda s: s.update(suspend=True)) == (200, "")
    until(lambda: not any(s.get("active") for s in (jobset(api, "busy").get("status") or {}).get(
        "replicatedJobsStatus") or []), "no active node")
    assert update(api, "busy", lambda s: s.update(runtimePatches=patched)) == (200, "")
    other = [node_patch("acme.io/manager", {"nodeSelector": {"c": "d"}})]
    assert update(api, "busy", lambda s: s.update(runtimePatches=other, suspend=False)) == (200, "")
    delete(api, "busy")


# --- controller: OpenMPI; plugins: mpi_test.go ------------------------------------------------------------------


def mpi_runtime(name: str, mpi: dict[str, Any], launcher: bool = True, node: bool = True) -> dict[str, Any]:
    """The OpenMPI runtime of the controller test: a `launcher` job (no ancestor, container `node` running
    mpirun, dependsOn node Ready) before `node`."""
    runtime = upstream_runtime(name, {"numNodes": 1, "mpi": mpi})
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    box(runtime["spec"]["template"], "node")["image"] = "test:trainjob"
    box(runtime["spec"]["template"], "node").update(command=["trainjob"], args=["trainjob"])
    if launcher:
        jobs.insert(2, {"name": "launcher", "dependsOn": [{"name": "node", "status": "Ready"}], "template": {
            "spec": {"template": {"spec": {"containers": [
                {"name": "node", "image": "test:launcher", "command": ["mpirun"], "args": ["echo.sh"]}]}}}}})
    if not node:
        jobs[:] = [j for j in jobs if j["name"] != "node"]
    return runtime


def test_openmpi_trainjob_objects(api: client.ApiClient) -> None:
    """controller: OpenMPI "Should succeed to create TrainJob with OpenMPI TrainingRuntime" (suspended): the
    launcher's ssh and hostfile volumes, mounts and OMPI_* env, the node's ssh volume and mount and only the
    TrainJob's env, the hostfile ConfigMap (two nodes, 8 slots) and the immutable ssh-auth Secret, both owned
    by the TrainJob."""
    objs(api).create_namespaced_custom_object(G, V, NS, "trainingruntimes", mpi_runtime("alpha-mpi", {
        "numProcPerNode": 8, "mpiImplementation": "OpenMPI", "sshAuthMountPath": "/root/.ssh",
        "runLauncherAsNode": False}))
    tj = create(api, trainjob("mpi", "alpha-mpi", suspend=True, trainer={
        **TRAINER, "numNodes": 2, "env": [{"name": "TRAIN_JOB", "value": "value"}]}))
    js = jobset(api, "mpi")
    assert counts(js) == {"dataset-initializer": (1, 1, 1), "model-initializer": (1, 1, 1), "launcher": (1, 1, 1),
                          "node": (1, 2, 2)}
    ssh = {"name": "mpi-ssh-auth", "secret": {"secretName": "mpi-mpi-ssh-auth", "defaultMode": 0o400, "items": [
        {"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},
        {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
        {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644}]}}
    hostfile = {"name": "mpi-hostfile", "configMap": {"name": "mpi-mpi-hostfile", "items": [
        {"key": "hostfile", "path": "hostfile", "mode": 0o444}]}}
    assert pod_of(js, "launcher")["volumes"] == [ssh, hostfile]
    assert pod_of(js, "node")["volumes"][1:] == [ssh]
    launcher = box(js, "launcher", "node")
    assert launcher["volumeMounts"] == [{"name": "mpi-ssh-auth", "mountPath": "/root/.ssh"},
                                        {"name": "mpi-hostfile", "mountPath": "/etc/mpi"}]
    assert launcher["env"] == [{"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
                               {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
                               {"name": "OMPI_MCA_orte_set_default_slots", "value": "8"},
                               {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"}]
    assert (launcher["image"], launcher["command"]) == ("test:launcher", ["mpirun"])
    node = box(js, "node")
    assert node["volumeMounts"][-1] == {"name": "mpi-ssh-auth", "mountPath": "/root/.ssh"}
    assert node["env"] == [{"name": "TRAIN_JOB", "value": "value"}]
    core = client.CoreV1Api(api)
    until(lambda: core.list_namespaced_config_map(NS, field_selector="metadata.name=mpi-mpi-hostfile").items,
          "hostfile")
    cm = core.read_namespaced_config_map("mpi-mpi-hostfile", NS)
    assert cm.data == {"hostfile": "mpi-node-0-0.mpi slots=8\nmpi-node-0-1.mpi slots=8\n"}
    secret = core.read_namespaced_secret("mpi-mpi-ssh-auth", NS)
    assert (secret.type, secret.immutable, sorted(secret.data)) == (
        "kubernetes.io/ssh-auth", True, ["ssh-privatekey", "ssh-publickey"])
    for owned in (cm, secret):
        [owner] = owned.metadata.owner_references
        assert (owner.kind, owner.name, owner.uid, owner.controller) == ("TrainJob", "mpi", tj["metadata"]["uid"], True)
    delete(api, "mpi")


@pytest.mark.parametrize(("case", "trainer_spec", "want_nodes", "want_slots"), [
    ("trainJob numProcPerNode is respected rather than mlPolicy one", {"numNodes": 2, "numProcPerNode": 3}, 2, "3"),
    ("numProcPerNode is set to number of GPUs in TrainJob",
     {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}}}, 2, "4"),
], ids=lambda v: v if isinstance(v, str) and " " in v else "")
def test_mpi_slots(api: client.ApiClient, case: str, trainer_spec: dict[str, Any], want_nodes: int,
                   want_slots: str) -> None:
    """plugins: mpi_test.go, the EnforceMLPolicy case named in `case` (the runtime's numProcPerNode is the
    default 1)."""
    name = f"slots-{zlib.crc32(case.encode()):x}"
    create(api, trainjob(name, "alpha-mpi-default", suspend=True, trainer=trainer_spec))
    js = jobset(api, name)
    env = {e["name"]: e["value"] for e in box(js, "launcher", "node")["env"]}
    assert (counts(js)["node"][1], env["OMPI_MCA_orte_set_default_slots"]) == (want_nodes, want_slots)
    delete(api, name)


@pytest.mark.parametrize(("case", "runtime", "trainer_spec", "message"), [
    ("runtime does not have Launcher even though MPI with runLauncherAsNode has 2 numNodes", "mpi-as-node-no-launcher",
     {"numNodes": 2}, "spec.trainer.numNodes: Invalid value: 2: must have 1 when MPI trainingRuntime with enabled "
     "runLauncherAsNode does not have either launcher and node"),
    ("trainer has reserved MPI env OMPI_MCA_orte_default_hostfile", "alpha-mpi-default",
     {"env": [{"name": "OMPI_MCA_orte_default_hostfile", "value": "x"}]},
     "must not have reserved envs, invalid envs configured: [OMPI_MCA_orte_default_hostfile]"),
    ("trainer has multiple reserved MPI envs", "alpha-mpi-default",
     {"env": [{"name": "OMPI_MCA_plm_rsh_args", "value": "x"}, {"name": "OMPI_MCA_orte_default_hostfile", "value": "y"}]},
     "invalid envs configured: [OMPI_MCA_orte_default_hostfile OMPI_MCA_plm_rsh_args]"),
    ("runtime does not have Launcher but TrainJob has only 1 numNodes", "mpi-as-node-no-launcher", {"numNodes": 1}, ""),
    ("trainer has non-reserved env is valid", "alpha-mpi-default", {"env": [{"name": "OMPI_OTHER", "value": "x"}]}, ""),
], ids=lambda v: v if isinstance(v, str) and " " in v else "")
def test_mpi_webhook(api: client.ApiClient, case: str, runtime: str, trainer_spec: dict[str, Any], message: str) -> None:
    """plugins: mpi_test.go, the Validate case named in `case`."""
    body = trainjob(f"mpi-v-{zlib.crc32(case.encode()):x}", runtime, suspend=True, trainer=trainer_spec)
    if not message:
        create(api, body)
        delete(api, body["metadata"]["name"])
        return
    status, text = refused(api, lambda: create(api, body))
    assert status == 403 and message in text, text


def test_mpi_launcher_as_node(api: client.ApiClient) -> None:
    """plugins: mpi_test.go "runLauncherAsNode is true" and "trainJob numNodes is respected rather than mlPolicy
    one": 10 nodes with the launcher as one of them leave 9 in the node job, and the hostfile lists the
    launcher first (one replica per job, as the runtime webhook requires: upstream's unit case builds its
    info with a second node replica, which the API cannot)."""
    objs(api).create_namespaced_custom_object(G, V, NS, "trainingruntimes", mpi_runtime(
        "mpi-as-node", {"runLauncherAsNode": True}))
    create(api, trainjob("as-node", "mpi-as-node", suspend=True, trainer={"numNodes": 10}))
    assert counts(jobset(api, "as-node"))["node"] == (1, 9, 9)
    core = client.CoreV1Api(api)
    until(lambda: core.list_namespaced_config_map(NS, field_selector="metadata.name=as-node-mpi-hostfile").items,
          "hostfile")
    lines = core.read_namespaced_config_map("as-node-mpi-hostfile", NS).data["hostfile"].splitlines()
    assert lines == ["as-node-launcher-0-0.as-node slots=1", *[f"as-node-node-0-{i}.as-node slots=1" for i in range(9)]]
    delete(api, "as-node")


# --- the shipped MPI runtimes: manifests/base/runtimes/{deepspeed,mlx}_distributed.yaml; test/e2e/e2e_test.go ----

MPI_RUNTIMES = [("deepspeed-distributed", "deepspeed"), ("mlx-distributed", "mlx")]


@pytest.mark.parametrize(("runtime", "framework"), MPI_RUNTIMES)
def test_shipped_mpi_runtime(api: client.ApiClient, runtime: str, framework: str) -> None:
    """The ClusterTrainingRuntime as manifests/base/runtimes/<framework>_distributed.yaml of v2.3.0 defines it,
    with the overlay's (manifests/overlays/runtimes/kustomization.yaml) validation label and image tag."""
    got = objs(api).get_cluster_custom_object(G, V, "clustertrainingruntimes", runtime)
    assert got["metadata"]["labels"] == {"trainer.kubeflow.org/framework": framework,
                                         "trainer.kubeflow.org/webhook-validation": "disabled"}
    assert got["spec"]["mlPolicy"] == {"numNodes": 1, "mpi": {
        "numProcPerNode": 1, "mpiImplementation": "OpenMPI", "sshAuthMountPath": "/home/mpiuser/.ssh",
        "runLauncherAsNode": True}}
    spec = got["spec"]["template"]["spec"]
    assert (spec["network"], spec["successPolicy"]) == (
        {"publishNotReadyAddresses": True}, {"operator": "All", "targetReplicatedJobs": ["launcher"]})
    node, launcher = spec["replicatedJobs"]
    image = f"ghcr.io/kubeflow/trainer/{framework}-runtime:v2.3.0"
    as_user = {"runAsUser": 1000}
    assert (node["name"], "dependsOn" in node, "metadata" in node["template"]) == ("node", False, False)
    assert node["template"]["spec"]["template"]["spec"] == {"securityContext": {"fsGroup": 1000}, "containers": [{
        "name": "node", "image": image, "securityContext": as_user, "command": ["/usr/sbin/sshd"],
        "args": ["-De", "-f", "/home/mpiuser/.sshd_config"],
        "readinessProbe": {"tcpSocket": {"port": 2222}, "initialDelaySeconds": 5}}]}
    assert (launcher["name"], launcher["dependsOn"], launcher["template"]["metadata"]) == (
        "launcher", [{"name": "node", "status": "Ready"}], {"labels": {ANCESTOR: "trainer"}})
    assert launcher["template"]["spec"]["template"]["spec"] == {
        "securityContext": {"fsGroup": 1000}, "containers": [{"name": "node", "image": image, "securityContext": as_user}]}


@pytest.mark.parametrize(("runtime", "framework"), MPI_RUNTIMES)
def test_trainjob_on_a_shipped_mpi_runtime(api: client.ApiClient, runtime: str, framework: str) -> None:
    """e2e: "should create TrainJob with DeepSpeed runtime reference" (test/e2e/e2e_test.go: two nodes,
    command `mpirun sleep 10`), suspended, on each MPI runtime; the mlx one with numProcPerNode 2. The JobSet
    as the MPI plugin (pkg/runtime/framework/plugins/mpi/mpi.go) and the jobset builder write it: the
    launcher is a node, so the node job keeps 2 - 1 and the launcher (the trainer) 1; the TrainJob's command
    and env on the launcher, its env also on the node job; the ssh volume on both, the hostfile and OpenMPI env
    on the launcher; the hostfile lists node then launcher with numProcPerNode slots."""
    slots = 2 if framework == "mlx" else 1
    name = f"e2e-{framework}"
    extra = {"numProcPerNode": slots} if slots != 1 else {}
    env = [{"name": "TRAIN_JOB", "value": "value"}]
    create(api, trainjob(name, runtime, "ClusterTrainingRuntime", suspend=True, trainer={
        "numNodes": 2, "command": ["mpirun", "sleep", "10"], "env": env, **extra}))
    js = jobset(api, name)
    assert [r["name"] for r in js["spec"]["replicatedJobs"]] == ["node", "launcher"]
    assert counts(js) == {"node": (1, 1, 1), "launcher": (1, 1, 1)}
    assert js["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["launcher"]}
    assert js["spec"]["network"]["publishNotReadyAddresses"] is True
    ssh = {"name": "mpi-ssh-auth", "secret": {"secretName": f"{name}-mpi-ssh-auth", "defaultMode": 0o400, "items": [
        {"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},
        {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
        {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644}]}}
    hostfile = {"name": "mpi-hostfile", "configMap": {"name": f"{name}-mpi-hostfile", "items": [
        {"key": "hostfile", "path": "hostfile", "mode": 0o444}]}}
    assert (pod_of(js, "node")["volumes"], pod_of(js, "launcher")["volumes"]) == ([ssh], [ssh, hostfile])
    ssh_mount = {"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh"}
    node, launcher = box(js, "node"), box(js, "launcher", "node")
    assert (node["command"], node["volumeMounts"], node["env"]) == (["/usr/sbin/sshd"], [ssh_mount], env)
    assert launcher["command"] == ["mpirun", "sleep", "10"]
    assert launcher["image"] == f"ghcr.io/kubeflow/trainer/{framework}-runtime:v2.3.0"
    assert launcher["volumeMounts"] == [ssh_mount, {"name": "mpi-hostfile", "mountPath": "/etc/mpi"}]
    assert launcher["env"] == [*env, {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
                               {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
                               {"name": "OMPI_MCA_orte_set_default_slots", "value": str(slots)},
                               {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"}]
    core = client.CoreV1Api(api)
    until(lambda: core.list_namespaced_config_map(NS, field_selector=f"metadata.name={name}-mpi-hostfile").items,
          "hostfile")
    assert core.read_namespaced_config_map(f"{name}-mpi-hostfile", NS).data == {
        "hostfile": f"{name}-node-0-0.{name} slots={slots}\n{name}-launcher-0-0.{name} slots={slots}\n"}
    secret = core.read_namespaced_secret(f"{name}-mpi-ssh-auth", NS)
    assert (secret.type, secret.immutable, sorted(secret.data)) == (
        "kubernetes.io/ssh-auth", True, ["ssh-privatekey", "ssh-publickey"])
    delete(api, name)


@pytest.mark.parametrize(("runtime", "resume"), [("deepspeed-distributed", False), ("mlx-distributed", True)])
def test_a_started_trainjob_on_a_shipped_mpi_runtime_fails_naming_ssh(api: client.ApiClient, runtime: str,
                                                                      resume: bool) -> None:
    """A deliberate deviation: the launcher's mpirun would ssh into node pods running sshd, which a local
    process cannot be. Started (created running, or resumed), the TrainJob fails at once, saying so, and its
    JobSet stays suspended: no pod runs (upstream's e2e case completes)."""
    name = f"run-{runtime.split('-')[0]}"
    create(api, trainjob(name, runtime, "ClusterTrainingRuntime", suspend=resume,
                         trainer={"numNodes": 2, "command": ["mpirun", "sleep", "10"]}))
    if resume:
        jobset(api, name)
        assert update(api, name, lambda s: s.update(suspend=False)) == (200, "")

    def failed() -> Any:
        return next((c for c in get(api, name).get("status", {}).get("conditions", []) if c["type"] == "Failed"), None)
    until(failed, f"{name} Failed")
    cond = failed()
    assert (cond["status"], cond["reason"]) == ("True", "MPIOverSSHUnsupported")
    assert cond["message"] == (
        "the local cluster cannot run this MPI TrainJob: its launcher runs mpirun over ssh into the node pods, "
        "whose container node runs /usr/sbin/sshd, and local processes have no sshd to ssh into")
    assert jobset(api, name)["spec"]["suspend"] is True
    assert not client.CoreV1Api(api).list_namespaced_pod(NS, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items
    delete(api, name)


# --- e2e: test/e2e/e2e_test.go, TrainJobs on the shipped runtimes -----------------------------------------------

def conditions(api: client.ApiClient, name: str) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (get(api, name).get("status") or {}).get("conditions", [])}


def node_status(active: int, succeeded: int) -> list[dict[str, Any]]:
    return [{"name": "node", "ready": 0, "succeeded": succeeded, "failed": 0, "active": active, "suspended": 0}]


@pytest.mark.parametrize(("runtime", "case"), [
    ("torch-distributed", "should create TrainJob with PyTorch runtime reference"),
    ("jax-distributed", "should create TrainJob with JAX runtime reference"),
    ("xgboost-distributed", "should create TrainJob with XGBoost runtime reference")])
def test_trainjob_on_a_shipped_runtime_completes(api: client.ApiClient, tmp_path: Path, runtime: str,
                                                 case: str) -> None:
    """e2e (test/e2e/e2e_test.go): "should create TrainJob with PyTorch runtime reference", "... JAX ..." and
    "... XGBoost runtime reference": on the shipped ClusterTrainingRuntime, jobsStatus shows the node job active,
    then the TrainJob is Complete with JobSet's AllJobsCompleted reason and message, the node job succeeded.
    Adapted: the shipped runtimes' images run their own command, which a local process cannot, so the TrainJob
    brings `trainer.command`, a python program that waits for a file the test writes once it has seen the node
    active (upstream's images finish on their own). Upstream's active check sees `ready: 0` while the image
    is pulled; here the pod is Ready as soon as its process runs (no readiness probe), so `ready` is not
    compared while active."""
    release = tmp_path / "release"
    name = f"e2e-{runtime.split('-')[0]}"
    program = f"import os, time\nwhile not os.path.exists({str(release)!r}):\n    time.sleep(0.05)\n"
    create(api, trainjob(name, runtime, "ClusterTrainingRuntime", trainer={"command": ["python", "-c", program]}))
    def active() -> bool:
        jobs = (get(api, name).get("status") or {}).get("jobsStatus") or [{}]
        return [{**j, "ready": 0} for j in jobs] == node_status(1, 0)
    until(active, f"{name} active", 60)
    release.write_text("")
    until(lambda: "Complete" in conditions(api, name), f"{name} complete", 60)
    cond = conditions(api, name)["Complete"]
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", "AllJobsCompleted",
                                                                "jobset completed successfully")
    assert get(api, name)["status"]["jobsStatus"] == node_status(0, 1)
    delete(api, name)


def sa_patch(manager: str, account: str, **extra: Any) -> dict[str, Any]:
    return {**node_patch(manager, {"serviceAccountName": account}), **extra}


def test_runtime_patch_times_on_create(api: client.ApiClient) -> None:
    """e2e: "should preserve user-provided manager fields": of two runtime patches, the one with a user's
    time keeps it, the one without gets one. Created suspended (upstream's runs; the times are the webhook's,
    before any process)."""
    user_time = "2026-01-01T10:00:00Z"
    create(api, trainjob("e2e-patch-times", "torch-distributed", "ClusterTrainingRuntime", suspend=True,
                         runtimePatches=[sa_patch("test.io/manager-one", "test-sa-1", time=user_time),
                                         sa_patch("kueue.k8s.io/manager", "test-sa-2")]))
    patches = get(api, "e2e-patch-times")["spec"]["runtimePatches"]
    assert [p["manager"] for p in patches] == ["test.io/manager-one", "kueue.k8s.io/manager"]
    assert patches[0]["time"] == user_time
    assert patches[1]["time"]
    delete(api, "e2e-patch-times")


def test_runtime_patch_time_changes_only_for_the_changed_patch(api: client.ApiClient) -> None:
    """e2e: "should update Time only for the changed patch on update": on a suspended TrainJob, after an update
    that changes the second patch and adds one patch without a time and one with, the unchanged patch keeps
    its time, the changed one gets a new time, the new ones get one and keep the user's. Upstream sleeps one
    second (times have second precision); here the test waits until the clock's second has moved on."""
    user_time, new_time = "2026-01-01T10:00:00Z", "2026-01-01T10:30:00Z"

    def selector(manager: str, zone: str, **extra: Any) -> dict[str, Any]:
        return {**node_patch(manager, {"nodeSelector": {"zone": zone}}), **extra}
    create(api, trainjob("e2e-update-time", "torch-distributed", "ClusterTrainingRuntime", suspend=True,
                         runtimePatches=[selector("test.io/unchanged", "keep"),
                                         selector("test.io/will-change", "old", time=user_time)]))
    first = get(api, "e2e-update-time")["spec"]["runtimePatches"]
    assert first[1]["time"] == user_time
    stamped = first[0]["time"]
    until(lambda: datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") > stamped, "the next second")

    def edit(spec: dict[str, Any]) -> None:
        changed = spec["runtimePatches"][1]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
        changed["template"]["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "new"}
        spec["runtimePatches"] += [{"manager": "test.io/new-no-time"},
                                   {"manager": "test.io/new-with-time", "time": new_time}]
    assert update(api, "e2e-update-time", edit) == (200, "")
    patches = get(api, "e2e-update-time")["spec"]["runtimePatches"]
    assert len(patches) == 4
    assert patches[0]["time"] == stamped
    assert patches[1]["time"] not in (None, user_time)
    assert patches[2]["time"]
    assert patches[3]["time"] == new_time
    delete(api, "e2e-update-time")


def test_a_trainjob_on_torch_distributed_managed_by_multikueue_is_left_alone(api: client.ApiClient) -> None:
    """e2e: "should not be reconciled by the built-in controller": a TrainJob on torch-distributed managed by
    MultiKueue gets neither a JobSet nor a condition. Upstream watches for 15 s (Consistently); here until a
    TrainJob created after it has been reconciled."""
    create(api, trainjob("e2e-managed-by", "torch-distributed", "ClusterTrainingRuntime",
                         managedBy="kueue.x-k8s.io/multikueue"))
    create(api, trainjob("e2e-witness", "torch-distributed", "ClusterTrainingRuntime", suspend=True))
    until(lambda: conditions(api, "e2e-witness"), "witness reconciled")
    status, _ = refused(api, lambda: get(api, "e2e-managed-by", "jobsets", "jobset.x-k8s.io", "v1alpha2"))
    assert status == 404
    assert not conditions(api, "e2e-managed-by")
    delete(api, "e2e-managed-by")
    delete(api, "e2e-witness")


def test_deadline_exceeded_on_torch_distributed_deletes_the_jobset(api: client.ApiClient) -> None:
    """e2e: "should fail the TrainJob with DeadlineExceeded when active timeout expires": a TrainJob on
    torch-distributed whose trainer sleeps past activeDeadlineSeconds fails with DeadlineExceeded and its
    JobSet is deleted. Adapted: a 1 s deadline (upstream 10 s) and a python sleep instead of busybox's."""
    name = "e2e-deadline-job"
    create(api, trainjob(name, "torch-distributed", "ClusterTrainingRuntime", activeDeadlineSeconds=1,
                         trainer={"command": ["python", "-c", "import time; time.sleep(600)"]}))
    until(lambda: any(c.get("reason") == "DeadlineExceeded" for c in conditions(api, name).values()), "deadline", 60)

    def jobset_gone() -> bool:
        try:
            get(api, name, "jobsets", "jobset.x-k8s.io", "v1alpha2")
        except client.ApiException as exc:
            return exc.status == 404
        return False
    until(jobset_gone, "jobset deleted", 60)
    delete(api, name)


STATUS_UPDATE = """import datetime, json, os, ssl, urllib.request
context = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
token = open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read().strip()
body = {"trainerStatus": {"progressPercentage": 42, "estimatedRemainingSeconds": 120,
        "metrics": [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}],
        "lastUpdatedTime": datetime.datetime.now(datetime.timezone.utc).isoformat()}}
request = urllib.request.Request(os.environ["KUBEFLOW_TRAINER_SERVER_URL"], data=json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + token})
urllib.request.urlopen(request, context=context)
"""


@pytest.fixture(scope="module")
def gated_api() -> Iterator[client.ApiClient]:
    """A second cluster with the TrainJobStatus gate on, as upstream's e2e cluster runs."""
    with LocalCluster(apis=["trainjob"], feature_gates={"TrainJobStatus": True}) as c:
        yield config.new_client_from_config(str(c.kubeconfig_path))


def test_the_runtime_status_endpoint_can_be_called_from_a_node(gated_api: client.ApiClient) -> None:
    """e2e: "should inject runtime configuration which allows the runtime status endpoint to be called": a
    TrainJob on torch-distributed whose node POSTs a status (42 %, 120 s left, loss and accuracy) to the
    injected URL, with the injected CA and token, has it in status.trainerStatus, then Completes. The program
    is this file's own, doing what upstream's testdata/status_update.py does."""
    api = gated_api
    create(api, trainjob("e2e-test-runtime-status", "torch-distributed", "ClusterTrainingRuntime",
                         trainer={"command": ["python3", "-c"], "args": [STATUS_UPDATE]}))
    until(lambda: "Complete" in conditions(api, "e2e-test-runtime-status"), "complete", 60)
    got = get(api, "e2e-test-runtime-status")["status"]
    cond = conditions(api, "e2e-test-runtime-status")["Complete"]
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", "AllJobsCompleted",
                                                                "jobset completed successfully")
    status = got["trainerStatus"]
    assert (status["progressPercentage"], status["estimatedRemainingSeconds"]) == (42, 120)
    assert status["metrics"] == [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}]
    assert status["lastUpdatedTime"]


@pytest.mark.parametrize("kind", ["TrainingRuntime", "ClusterTrainingRuntime"])
def test_a_resumed_trainjob_keeps_its_runtime_snapshot(api: client.ApiClient, kind: str) -> None:
    """e2e: "a suspended TrainJob should use the original runtime configuration and not pick up the new
    configuration" (entries TrainingRuntime and ClusterTrainingRuntime): a running TrainJob is suspended, its
    runtime's node image changed, and it runs again on resume with the original image (the JobSet's images
    are immutable, so a controller reading the new runtime would fail); deleting it removes its runtime
    snapshot. Adapted: the node is a sleeping python process instead of `registry.k8s.io/pause`."""
    runtime = running_runtime(f"e2e-snapshot-{kind.lower()}", {"numNodes": 1})
    runtime["kind"] = kind
    node = pod_of(runtime["spec"]["template"], "node")["containers"][0]
    node.update(image="registry.k8s.io/pause:3.9", command=["python", "-c", "import time; time.sleep(600)"])
    plural = kind.lower() + "s"
    if kind == "TrainingRuntime":
        objs(api).create_namespaced_custom_object(G, V, NS, plural, runtime)
    else:
        del runtime["metadata"]["namespace"]
        objs(api).create_cluster_custom_object(G, V, plural, runtime)
    name = "e2e-test-runtime-update"

    def every(field: str) -> bool:
        jobs = (get(api, name).get("status") or {}).get("jobsStatus") or []
        return bool(jobs) and all(j[field] > 0 for j in jobs)
    create(api, trainjob(name, runtime["metadata"]["name"], kind))
    until(lambda: every("active"), "active", 60)
    assert update(api, name, lambda s: s.update(suspend=True)) == (200, "")
    until(lambda: every("suspended"), "suspended", 60)
    if kind == "TrainingRuntime":
        current = objs(api).get_namespaced_custom_object(G, V, NS, plural, runtime["metadata"]["name"])
    else:
        current = objs(api).get_cluster_custom_object(G, V, plural, runtime["metadata"]["name"])
    pod_of(current["spec"]["template"], "node")["containers"][0]["image"] = "registry.k8s.io/pause:3.10"
    if kind == "TrainingRuntime":
        objs(api).replace_namespaced_custom_object(G, V, NS, plural, runtime["metadata"]["name"], current)
    else:
        objs(api).replace_cluster_custom_object(G, V, plural, runtime["metadata"]["name"], current)
    assert update(api, name, lambda s: s.update(suspend=False)) == (200, "")
    until(lambda: every("active"), "active again", 60)
    assert box(jobset(api, name), "node")["image"] == "registry.k8s.io/pause:3.9"
    core = client.CoreV1Api(api)
    core.read_namespaced_config_map(f"{name}-runtime-snapshot", NS)
    delete(api, name)
    until(lambda: not core.list_namespaced_config_map(NS, field_selector=f"metadata.name={name}-runtime-snapshot").items,
          "snapshot collected", 60)
