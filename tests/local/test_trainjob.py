"""Kubeflow Trainer v2 on the local cluster (docs/reference/trainjob-behaviour.md): a cluster started in
TrainJob-only mode, driven with the official kubernetes client over HTTP; TrainJobs whose nodes are
`python -c` processes. Names, labels, env, conditions and garbage collection as the reference states."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from kubectl_support import needs_kubectl, run_kubectl
from kubernetes import client, config
from waiting import until

from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.controllers.trainjob.runtimes import runtime_manifest

G, V = "trainer.kubeflow.org", "v1alpha1"
NS = "default"
PRINT_ENV = ("import json, os; print(json.dumps({k: v for k, v in os.environ.items() "
             "if k.startswith(('PET_', 'JOB_', 'JAX_', 'DMLC_'))}))")
PRINT_HOSTNAME = "import os; print(os.environ['HOSTNAME'])"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(apis=["trainjob"]) as c:
        # A plain runtime (no ML policy) whose Job gives up after one in-place restart.
        plain = runtime_manifest("plain", "plain", {"numNodes": 1}, "python:3.12")
        plain["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = 1
        c.install_runtime(plain)
        yield c


@pytest.fixture(scope="module")
def api(cluster: LocalCluster) -> client.ApiClient:
    return config.new_client_from_config(str(cluster.kubeconfig_path))


def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def create(api: client.ApiClient, name: str, runtime: str = "plain", **spec: Any) -> dict[str, Any]:
    body = {"apiVersion": f"{G}/{V}", "kind": "TrainJob", "metadata": {"name": name},
            "spec": {"runtimeRef": {"name": runtime}, **spec}}
    return custom(api).create_namespaced_custom_object(G, V, NS, "trainjobs", body)  # type: ignore[no-any-return]


def get(api: client.ApiClient, name: str) -> dict[str, Any]:
    return custom(api).get_namespaced_custom_object(G, V, NS, "trainjobs", name)  # type: ignore[no-any-return]


def conditions(api: client.ApiClient, name: str) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["reason"]) for c in (get(api, name).get("status") or {}).get("conditions") or []]


def wait_condition(api: client.ApiClient, name: str, type_: str, timeout: float = 60.0) -> dict[str, Any]:
    until(lambda: (type_, "True") in [(t, s) for t, s, _ in conditions(api, name)], f"{name} {type_}", timeout)
    cond = next(c for c in get(api, name)["status"]["conditions"] if c["type"] == type_)
    return cond  # type: ignore[no-any-return]


def pods(api: client.ApiClient, name: str) -> list[client.V1Pod]:
    items = client.CoreV1Api(api).list_namespaced_pod(NS, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items
    return sorted(items, key=lambda p: p.metadata.name)


def log_of(api: client.ApiClient, pod: str) -> str:
    raw = client.CoreV1Api(api).read_namespaced_pod_log(pod, NS, container="node", _preload_content=False)
    return raw.data.decode()  # type: ignore[no-any-return]


def trainer(command: str, nodes: int = 1, **more: Any) -> dict[str, Any]:
    return {"numNodes": nodes, "command": ["python", "-c", command], **more}


# ---------------------------------------------------------------------------------------------------
# API surface


def test_trainjob_only_mode_serves_trainer_jobset_and_batch_but_not_tfjobs(api: client.ApiClient) -> None:
    groups = {g.name: g.preferred_version.version for g in client.ApisApi(api).get_api_versions().groups}
    assert groups[G] == V and groups["jobset.x-k8s.io"] == "v1alpha2" and groups["batch"] == "v1"
    assert "kubeflow.org" not in groups
    resources = {r.name: r for r in custom(api).get_api_resources(G, V).resources}
    assert {n: (r.namespaced, r.kind) for n, r in resources.items()} == {
        "trainjobs": (True, "TrainJob"), "trainjobs/status": (True, "TrainJob"),
        "trainingruntimes": (True, "TrainingRuntime"), "clustertrainingruntimes": (False, "ClusterTrainingRuntime")}
    with pytest.raises(client.ApiException) as exc:
        custom(api).list_namespaced_custom_object("kubeflow.org", "v1", NS, "tfjobs")
    assert exc.value.status == 404
    openapi = json.loads(api.call_api("/openapi/v3", "GET", _preload_content=False).data)["paths"]
    assert "apis/trainer.kubeflow.org/v1alpha1" in openapi and "apis/kubeflow.org/v1" not in openapi
    runtimes = custom(api).list_cluster_custom_object(G, V, "clustertrainingruntimes")["items"]
    assert {r["metadata"]["name"] for r in runtimes} >= {"torch-distributed", "jax-distributed", "xgboost-distributed"}
    assert all(r["kind"] == "ClusterTrainingRuntime" for r in runtimes)  # the SDK needs `kind` on list items


def test_default_mode_serves_both_apis() -> None:
    with LocalCluster(controller=False, runner=False) as c:
        api = config.new_client_from_config(str(c.kubeconfig_path))
        groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    assert {"kubeflow.org", G, "jobset.x-k8s.io", "batch"} <= groups


def test_unknown_api_family_is_refused_before_start() -> None:
    with pytest.raises(ValueError, match="apis must be a non-empty list of v1, trainjob"):
        LocalCluster(apis=["tfjob"])


# ---------------------------------------------------------------------------------------------------
# A plain runtime


def test_plain_runtime_runs_nodes_as_processes_named_as_jobset_names_them(api: client.ApiClient) -> None:
    tj = create(api, "plain-ok", trainer=trainer(PRINT_ENV, 2, env=[{"name": "EPOCHS", "value": "3"}]))
    assert tj["spec"]["runtimeRef"] == {"name": "plain", "apiGroup": G, "kind": "ClusterTrainingRuntime"}
    assert tj["spec"]["suspend"] is False and tj["spec"]["managedBy"] == "trainer.kubeflow.org/trainjob-controller"
    done = wait_condition(api, "plain-ok", "Complete")
    assert (done["reason"], done["message"]) == ("AllJobsCompleted", "jobset completed successfully")
    status = get(api, "plain-ok")["status"]
    assert [c["type"] for c in status["conditions"]] == ["Complete"]
    assert status["jobsStatus"] == [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0,
                                     "suspended": 0}]
    jobset = custom(api).get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets", "plain-ok")
    assert jobset["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    assert jobset["status"]["terminalState"] == "Completed"
    (job,) = client.BatchV1Api(api).list_namespaced_job(NS, label_selector="jobset.sigs.k8s.io/jobset-name=plain-ok").items
    assert job.metadata.name == "plain-ok-node-0"
    assert (job.spec.completion_mode, job.spec.parallelism, job.spec.completions) == ("Indexed", 2, 2)
    assert job.metadata.labels["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
    found = pods(api, "plain-ok")
    assert [p.metadata.name[:-6] for p in found] == ["plain-ok-node-0-0", "plain-ok-node-0-1"]
    for index, pod in enumerate(found):
        assert re.fullmatch(rf"plain-ok-node-0-{index}-[a-z0-9]{{5}}", pod.metadata.name)
        assert (pod.spec.hostname, pod.spec.subdomain) == (f"plain-ok-node-0-{index}", "plain-ok")
        assert [c.name for c in pod.spec.containers] == ["node"]
        labels = pod.metadata.labels
        assert {k: labels[k] for k in ("jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/replicatedjob-name",
                                      "jobset.sigs.k8s.io/job-index", "batch.kubernetes.io/job-completion-index")} == {
            "jobset.sigs.k8s.io/jobset-name": "plain-ok", "jobset.sigs.k8s.io/replicatedjob-name": "node",
            "jobset.sigs.k8s.io/job-index": "0", "batch.kubernetes.io/job-completion-index": str(index)}
        assert pod.metadata.annotations["batch.kubernetes.io/job-completion-index"] == str(index)
        assert json.loads(log_of(api, pod.metadata.name)) == {"JOB_COMPLETION_INDEX": str(index)}
        assert pod.spec.containers[0].env == [client.V1EnvVar(name="EPOCHS", value="3"), client.V1EnvVar(
            name="JOB_COMPLETION_INDEX", value_from=client.V1EnvVarSource(field_ref=client.V1ObjectFieldSelector(
                api_version="v1", field_path="metadata.annotations['batch.kubernetes.io/job-completion-index']")))]
    snapshot = client.CoreV1Api(api).read_namespaced_config_map("plain-ok-runtime-snapshot", NS)
    assert "name: plain" in snapshot.data["runtime"]
    service = client.CoreV1Api(api).read_namespaced_service("plain-ok", NS)
    assert service.spec.cluster_ip == "None" and service.spec.selector == {"jobset.sigs.k8s.io/jobset-name": "plain-ok"}


def test_torch_runtime_injects_pet_env_with_local_addresses(api: client.ApiClient) -> None:
    create(api, "torch-env", "torch-distributed", trainer=trainer(PRINT_ENV, 2, resourcesPerNode={"requests": {"cpu": "2"}}))
    wait_condition(api, "torch-env", "Complete")
    found = pods(api, "torch-env")
    master_port = found[0].metadata.annotations["local.tfjob.dev/host-port"]
    for index, pod in enumerate(found):
        assert json.loads(log_of(api, pod.metadata.name)) == {
            "PET_NNODES": "2", "PET_NPROC_PER_NODE": "2", "PET_NODE_RANK": str(index), "PET_MASTER_ADDR": "127.0.0.1",
            "PET_MASTER_PORT": master_port, "JOB_COMPLETION_INDEX": str(index)}
    jobset = custom(api).get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets", "torch-env")
    node = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in node["env"]}
    assert (env["PET_MASTER_ADDR"], env["PET_MASTER_PORT"]) == ("torch-env-node-0-0.torch-env", "29500")
    assert node["ports"] == [{"containerPort": 29500, "protocol": "TCP"}]


# ---------------------------------------------------------------------------------------------------
# Failure, restarts, suspend, deadline, deletion


def test_node_failure_fails_the_trainjob_after_the_backoff_limit(api: client.ApiClient) -> None:
    create(api, "node-fails", trainer=trainer("import os, sys; sys.exit(int(os.environ['JOB_COMPLETION_INDEX']) * 3)", 2))
    failed = wait_condition(api, "node-fails", "Failed")
    # backoffLimit 1 under OnFailure: the Job fails once a container restarted in place once.
    assert (failed["reason"], failed["message"]) == (
        "FailedJobs", "jobset failed due to one or more job failures (first failed job: node-fails-node-0)")
    job = client.BatchV1Api(api).read_namespaced_job("node-fails-node-0", NS)
    assert [(c.type, c.reason) for c in job.status.conditions] == [("Failed", "BackoffLimitExceeded")]
    assert get(api, "node-fails")["status"]["jobsStatus"][0]["failed"] == 1


def test_a_node_restarts_in_place_and_the_trainjob_completes(api: client.ApiClient, tmp_path: Any) -> None:
    marker = tmp_path / "once"
    script = f"import os, sys\nif not os.path.exists({str(marker)!r}):\n    open({str(marker)!r}, 'w').close(); sys.exit(2)"
    create(api, "restarts", "torch-distributed", trainer=trainer(script))  # backoffLimit 6 by default
    wait_condition(api, "restarts", "Complete")
    (pod,) = pods(api, "restarts")
    assert pod.status.container_statuses[0].restart_count == 1
    assert pod.status.container_statuses[0].last_state.terminated.exit_code == 2


def test_suspend_then_resume(api: client.ApiClient) -> None:
    create(api, "susp", trainer=trainer("print('ran')"), suspend=True)
    wait_condition(api, "susp", "Suspended")
    until(lambda: (get(api, "susp")["status"].get("jobsStatus") or [{}])[0].get("suspended") == 1, "suspended Job")
    assert pods(api, "susp") == []
    custom(api).patch_namespaced_custom_object(G, V, NS, "trainjobs", "susp", {"spec": {"suspend": False}})
    wait_condition(api, "susp", "Complete")
    assert conditions(api, "susp") == [("Suspended", "False", "Resumed"), ("Complete", "True", "AllJobsCompleted")]
    assert log_of(api, pods(api, "susp")[0].metadata.name) == "ran\n"


def test_a_node_process_sees_its_hostname(api: client.ApiClient) -> None:
    create(api, "host", trainer=trainer(PRINT_HOSTNAME))
    wait_condition(api, "host", "Complete")
    assert log_of(api, pods(api, "host")[0].metadata.name) == "host-node-0-0\n"


def test_active_deadline_fails_the_trainjob_and_deletes_its_jobset(api: client.ApiClient) -> None:
    create(api, "late", trainer=trainer("import time; time.sleep(3600)"), activeDeadlineSeconds=1)
    failed = wait_condition(api, "late", "Failed")
    assert (failed["reason"], failed["message"]) == ("DeadlineExceeded", "TrainJob exceeded its active deadline")
    until(lambda: not custom(api).list_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", NS, "jobsets", field_selector="metadata.name=late")["items"], "JobSet deleted")
    until(lambda: not pods(api, "late"), "pods gone")


def test_deleting_the_trainjob_collects_everything(api: client.ApiClient) -> None:
    create(api, "gone", trainer=trainer("import time; time.sleep(3600)"))
    until(lambda: pods(api, "gone") and pods(api, "gone")[0].status.phase == "Running", "node running")
    custom(api).delete_namespaced_custom_object(G, V, NS, "trainjobs", "gone")
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    until(lambda: not pods(api, "gone"), "pods collected")
    until(lambda: not batch.list_namespaced_job(NS, label_selector="jobset.sigs.k8s.io/jobset-name=gone").items, "Jobs")
    names = [m.metadata.name for m in core.list_namespaced_config_map(NS).items]
    assert "gone-runtime-snapshot" not in names
    assert "gone" not in [s.metadata.name for s in core.list_namespaced_service(NS).items]


# ---------------------------------------------------------------------------------------------------
# Admission


@pytest.mark.parametrize(("name", "spec", "code", "message"), [
    ("no-runtime", {"runtimeRef": {"name": "nope"}}, 403,
     'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: spec.RuntimeRef: Invalid value: '
     '...: clustertrainingruntimes.trainer.kubeflow.org "nope" not found: specified clusterTrainingRuntime must be '
     "created before the TrainJob is created"),
    ("reserved", {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"env": [{"name": "PET_NNODES", "value": "1"}]}},
     403, "spec.trainer.env: Invalid value: ...: must not have reserved envs, invalid envs configured: [PET_NNODES]"),
    ("dotted.name", {"runtimeRef": {"name": "plain"}}, 422, "metadata.name must match RFC 1035 DNS label format"),
    ("no-ref", {}, 422, "spec.runtimeRef: Required value"),
])
def test_admission_refusals(api: client.ApiClient, name: str, spec: dict[str, Any], code: int, message: str) -> None:
    body = {"apiVersion": f"{G}/{V}", "kind": "TrainJob", "metadata": {"name": name}, "spec": spec}
    with pytest.raises(client.ApiException) as exc:
        custom(api).create_namespaced_custom_object(G, V, NS, "trainjobs", body)
    assert exc.value.status == code
    assert message in json.loads(exc.value.body)["message"]


def test_runtime_webhook_refuses_a_trainer_job_with_two_replicas(api: client.ApiClient) -> None:
    bad = runtime_manifest("two", "plain", {"numNodes": 1}, "python:3.12")
    del bad["metadata"]["labels"]["trainer.kubeflow.org/webhook-validation"]
    bad["spec"]["template"]["spec"]["replicatedJobs"][0]["replicas"] = 2
    with pytest.raises(client.ApiException) as exc:
        custom(api).create_cluster_custom_object(G, V, "clustertrainingruntimes", bad)
    assert exc.value.status == 403
    assert json.loads(exc.value.body)["message"] == (
        'admission webhook "validator.clustertrainingruntime.trainer.kubeflow.org" denied the request: '
        "spec.template.spec.replicatedJobs[0].replicas: Invalid value: 2: always must be 1")


@needs_kubectl
def test_kubectl_lists_trainjobs_jobsets_and_jobs(cluster: LocalCluster, api: client.ApiClient, tmp_path: Any) -> None:
    create(api, "kubectl-tj", trainer=trainer("print('hi')"))
    wait_condition(api, "kubectl-tj", "Complete")
    out = run_kubectl(cluster, "get", "trainjobs,jobsets,jobs", cache_dir=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = [line.split() for line in out.stdout.splitlines() if line.strip()]
    assert ["NAME", "STATE", "AGE"] in lines
    assert next(line for line in lines if line[0] == "trainjob.trainer.kubeflow.org/kubectl-tj")[1] == "Complete"
    jobset = next(line for line in lines if line[0] == "jobset.jobset.x-k8s.io/kubectl-tj")
    assert jobset[1:5] == ["Completed", "0", "True", "false"]  # TERMINALSTATE RESTARTS COMPLETED SUSPENDED
    assert next(line for line in lines if line[0] == "job.batch/kubectl-tj-node-0")[1:3] == ["Complete", "1/1"]
    runtimes = run_kubectl(cluster, "get", "clustertrainingruntimes", "-o", "name", cache_dir=tmp_path)
    assert set(runtimes.stdout.split()) >= {f"clustertrainingruntime.trainer.kubeflow.org/{name}-distributed" for name in (
        "torch", "jax", "xgboost", "deepspeed", "mlx")}


def test_suspending_a_running_trainjob_deletes_its_pods_and_resuming_makes_new_ones(api: client.ApiClient) -> None:
    create(api, "pause", trainer=trainer("import time; time.sleep(3600)"))
    until(lambda: [p.status.phase for p in pods(api, "pause")] == ["Running"], "node running")
    first = pods(api, "pause")[0].metadata.name
    custom(api).patch_namespaced_custom_object(G, V, NS, "trainjobs", "pause", {"spec": {"suspend": True}})
    wait_condition(api, "pause", "Suspended")
    until(lambda: not pods(api, "pause"), "pods deleted")
    custom(api).patch_namespaced_custom_object(G, V, NS, "trainjobs", "pause", {"spec": {"suspend": False}})
    until(lambda: [p.status.phase for p in pods(api, "pause")] == ["Running"], "a new node running")
    assert pods(api, "pause")[0].metadata.name != first
    assert conditions(api, "pause") == [("Suspended", "False", "Resumed")]


def test_a_name_too_long_for_the_pods_is_a_warning_event_not_a_condition(api: client.ApiClient) -> None:
    name = "n" * 52  # admitted (<= 63), but <name>-node-0-0-xxxxx would exceed 63 characters
    create(api, name, trainer=trainer("print(1)"))
    events = client.CoreV1Api(api)

    def warned() -> list[str]:
        items = events.list_namespaced_event(NS, field_selector=f"involvedObject.name={name}").items
        return [e.message for e in items if e.reason == "TrainJobResourcesCreationFailed"]

    until(warned, "TrainJobResourcesCreationFailed")
    assert (f'spec.replicatedJobs[0].name: Invalid value: "{name}-node-0": JobSet name is too long, pod names '
            "generated for this JobSet will exceed 63 characters") in warned()[0]
    assert "conditions" not in (get(api, name).get("status") or {})


def test_a_finished_batch_jobs_ttl_deletes_it_and_garbage_collection_its_dependents(
    api: client.ApiClient,
) -> None:
    """The TTL-after-finished controller's part (keep_failed_for's expiry Job): a Job of completions 0
    completes without a pod, is deleted ttlSecondsAfterFinished after it finished, and a TrainJob it owns
    goes with it; a Job without a TTL stays."""
    batch = client.BatchV1Api(api)
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "expiry", "image": "pause"}]}}
    body = {"metadata": {"name": "expiry"}, "spec": {"completions": 0, "ttlSecondsAfterFinished": 2,
                                                     "template": template}}
    kept = {"metadata": {"name": "no-ttl"}, "spec": {"completions": 0, "template": template}}
    expiry = batch.create_namespaced_job(NS, body)
    batch.create_namespaced_job(NS, kept)
    create(api, "owned", trainer=trainer("import time; time.sleep(3600)"))
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "expiry", "uid": expiry.metadata.uid}
    custom(api).patch_namespaced_custom_object(G, V, NS, "trainjobs", "owned",
                                               {"metadata": {"ownerReferences": [owner]}})
    until(lambda: any(c.type == "Complete" and c.status == "True"
                      for c in batch.read_namespaced_job("no-ttl", NS).status.conditions or ()),
          "the Job of completions 0 complete")
    assert not client.CoreV1Api(api).list_namespaced_pod(NS, label_selector="job-name=no-ttl").items
    until(lambda: "expiry" not in [j.metadata.name for j in batch.list_namespaced_job(NS).items], "TTL deletion")
    until(lambda: not custom(api).list_namespaced_custom_object(
        G, V, NS, "trainjobs", field_selector="metadata.name=owned")["items"], "the owned TrainJob collected")
    until(lambda: not pods(api, "owned"), "its pods collected")
    assert batch.read_namespaced_job("no-ttl", NS).status.completion_time is not None
