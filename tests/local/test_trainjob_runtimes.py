"""Kubeflow Trainer v2 on the local cluster, beyond the plain runtime (test_trainjob.py): initializers that
run before the trainer (dependsOn), the JAX and XGBoost plugins' env, runtime patches, and the
progress status behind the TrainJobStatus gate (reference §3-§4, §7)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from test_trainjob import NS, PRINT_ENV, G, V, create, custom, get, log_of, pods, trainer, wait_condition
from waiting import until

from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.controllers.trainjob.runtimes import runtime_manifest
from airflow_tfjob.local.model.trainerbuild import ANCESTOR

# As a program on a real cluster reports: HTTPS, the server verified against the CA file Trainer injects,
# the token file's token as a Bearer token.
REPORT = """import json, os, ssl, urllib.request
assert os.environ["KUBEFLOW_TRAINER_SERVER_URL"].startswith("https://")
context = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
request = urllib.request.Request(os.environ["KUBEFLOW_TRAINER_SERVER_URL"], method="POST",
    data=json.dumps({"trainerStatus": {"progressPercentage": 40, "estimatedRemainingSeconds": 12,
                     "metrics": [{"name": "loss", "value": "0.25"}], "lastUpdatedTime": "2026-01-01T00:00:00Z"}}).encode(),
    headers={"Authorization": "Bearer " + open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read(),
             "Content-Type": "application/json"})
print(urllib.request.urlopen(request, context=context).status)
"""


def with_initializer(name: str) -> dict[str, Any]:
    """A runtime `dataset-initializer` -> `node` (dependsOn Complete), as torch-distributed-with-cache."""
    runtime = runtime_manifest(name, "plain", {"numNodes": 1}, "python:3.12")
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    node["dependsOn"] = [{"name": "dataset-initializer", "status": "Complete"}]
    mount = {"name": "initializer", "mountPath": "/workspace"}
    init = {"name": "dataset-initializer", "template": {
        "metadata": {"labels": {ANCESTOR: "dataset-initializer"}},
        "spec": {"template": {"spec": {"containers": [{
            "name": "dataset-initializer", "image": "python:3.12", "volumeMounts": [mount],
            "command": ["python", "-c", "import os; print('fetched', os.environ['STORAGE_URI'])"]}]}}}}}
    runtime["spec"]["template"]["spec"]["replicatedJobs"].insert(0, init)
    return runtime


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(apis=["trainjob"], feature_gates={"TrainJobStatus": True}) as c:
        c.install_runtime(runtime_manifest("plain", "plain", {"numNodes": 1}, "python:3.12"))
        c.install_runtime(with_initializer("with-dataset"))
        yield c


@pytest.fixture(scope="module")
def api(cluster: LocalCluster) -> client.ApiClient:
    return config.new_client_from_config(str(cluster.kubeconfig_path))


def test_the_dataset_initializer_completes_before_the_trainer_starts(api: client.ApiClient) -> None:
    create(api, "init", "with-dataset", trainer=trainer("print('trained')"),
           initializer={"dataset": {"storageUri": "hf://tiny/set"}})
    wait_condition(api, "init", "Complete")
    batch = client.BatchV1Api(api)
    jobs = {j.metadata.name: j for j in batch.list_namespaced_job(NS, label_selector="jobset.sigs.k8s.io/jobset-name=init").items}
    assert set(jobs) == {"init-dataset-initializer-0", "init-node-0"}
    assert jobs["init-node-0"].metadata.creation_timestamp >= jobs["init-dataset-initializer-0"].status.completion_time
    by_step = {p.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"]: p for p in pods(api, "init")}
    assert by_step["dataset-initializer"].metadata.name.startswith("init-dataset-initializer-0-0-")
    raw = client.CoreV1Api(api).read_namespaced_pod_log(by_step["dataset-initializer"].metadata.name, NS,
                                                       _preload_content=False)
    assert raw.data.decode() == "fetched hf://tiny/set\n"
    assert [s["name"] for s in get(api, "init")["status"]["jobsStatus"]] == ["node", "dataset-initializer"]


def test_an_initializer_the_runtime_lacks_is_refused(api: client.ApiClient) -> None:
    with pytest.raises(client.ApiException) as exc:
        create(api, "no-init", "plain", initializer={"model": {"storageUri": "hf://m"}})
    assert exc.value.status == 403
    assert json.loads(exc.value.body)["message"].endswith(
        "spec.runtimeRef: Invalid value: ...: must have model-initializer job when trainJob is configured with "
        "input modelConfig")


@pytest.mark.parametrize(("runtime", "expected"), [
    ("jax-distributed", {"JAX_NUM_PROCESSES": "2", "JAX_COORDINATOR_ADDRESS": "127.0.0.1:{port}"}),
    ("xgboost-distributed", {"DMLC_TRACKER_URI": "127.0.0.1", "DMLC_TRACKER_PORT": "{port}", "DMLC_NUM_WORKER": "2"}),
])
def test_jax_and_xgboost_plugins_env(api: client.ApiClient, runtime: str, expected: dict[str, str]) -> None:
    name = runtime.split("-")[0] + "-env"
    create(api, name, runtime, trainer=trainer(PRINT_ENV, 2))
    wait_condition(api, name, "Complete")
    found = pods(api, name)
    port = found[0].metadata.annotations["local.tfjob.dev/host-port"]
    for index, pod in enumerate(found):
        env = json.loads(log_of(api, pod.metadata.name))
        rank = "JAX_PROCESS_ID" if runtime.startswith("jax") else "DMLC_TASK_ID"
        assert env == {**{k: v.format(port=port) for k, v in expected.items()}, rank: str(index),
                       "JOB_COMPLETION_INDEX": str(index)}


def test_runtime_patches_reach_the_pods_and_change_only_while_suspended(api: client.ApiClient) -> None:
    patch = {"manager": "example.com/tests", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"metadata": {"labels": {"team": "ml"}}}}}}]}}}}
    create(api, "patched", trainer=trainer("import time; time.sleep(3600)"), runtimePatches=[patch])
    until(lambda: pods(api, "patched"), "a node pod")
    assert pods(api, "patched")[0].metadata.labels["team"] == "ml"
    with pytest.raises(client.ApiException) as exc:
        custom(api).patch_namespaced_custom_object(G, V, NS, "trainjobs", "patched", {"spec": {"runtimePatches": []}})
    assert exc.value.status == 403
    assert "RuntimePatches can only be modified when the TrainJob is suspended before or after the update" in (
        json.loads(exc.value.body)["message"])


def test_progress_status_written_by_a_node_with_the_gate_on(api: client.ApiClient) -> None:
    create(api, "progress", trainer=trainer(REPORT))
    wait_condition(api, "progress", "Complete")
    assert get(api, "progress")["status"]["trainerStatus"] == {
        "progressPercentage": 40, "estimatedRemainingSeconds": 12, "metrics": [{"name": "loss", "value": "0.25"}],
        "lastUpdatedTime": "2026-01-01T00:00:00Z"}
    assert log_of(api, pods(api, "progress")[0].metadata.name) == "200\n"


def test_progress_status_works_on_a_cluster_with_token_authentication() -> None:
    """The status server is not the API server: its own CA and token, whether or not the cluster asks
    for its own tokens."""
    with LocalCluster(apis=["trainjob"], feature_gates={"TrainJobStatus": True}, auth=True) as secured:
        secured.install_runtime(runtime_manifest("plain", "plain", {"numNodes": 1}, "python:3.12"))
        with config.new_client_from_config(str(secured.kubeconfig_path)) as authed:
            create(authed, "progress", trainer=trainer(REPORT))
            wait_condition(authed, "progress", "Complete")
            assert get(authed, "progress")["status"]["trainerStatus"]["progressPercentage"] == 40


def test_progress_endpoint_refuses_a_wrong_token_and_an_unverified_client(
    cluster: LocalCluster, api: client.ApiClient
) -> None:
    import ssl
    import urllib.error
    import urllib.request

    create(api, "intruder", trainer=trainer("print('x')"))
    wait_condition(api, "intruder", "Complete")
    server = cluster.runtime.status_server
    assert server is not None
    url = f"{server.url}/apis/{G}/{V}/namespaces/{NS}/trainjobs/intruder/status"
    request = urllib.request.Request(url, method="POST", data=b'{"trainerStatus": null}',
                                     headers={"Authorization": "Bearer nope"})
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(request, context=ssl.create_default_context(cafile=server.tls.ca_path))
    assert exc.value.code == 403
    # The certificate is the status server's CA's, no public one: a client that trusts only the system CAs
    # refuses it, as it would refuse Trainer's.
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(request)
    assert "trainerStatus" not in get(api, "intruder")["status"]
    # The API server itself has no POST on the status subresource (405, as a real one).
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(
            f"{cluster.url}/apis/{G}/{V}/namespaces/{NS}/trainjobs/intruder/status", method="POST", data=b"{}"))
    assert refused.value.code == 405


def test_the_stable_pod_names_resolve_through_the_local_dns_records(api: client.ApiClient, tmp_path: Path) -> None:
    go = tmp_path / "go"
    # Each node looks up the other one's name, put together at run time (written whole in the command, the
    # cluster would have made it 127.0.0.1:<port>), and stays running until the test has read both answers:
    # a finished pod's record goes away.
    script = ("import os, time\nother = 1 - int(os.environ['JOB_COMPLETION_INDEX'])\n"
              "path = os.path.join(os.environ['TFJOB_LOCAL_DNS'], f'dns-node-0-{other}' + '.dns')\n"
              "while not os.path.exists(path): time.sleep(0.05)\nprint(open(path).read().strip(), flush=True)\n"
              f"while not os.path.exists({str(go)!r}): time.sleep(0.05)")
    create(api, "dns", trainer=trainer(script, 2))
    def answered() -> bool:
        found = pods(api, "dns")
        return len(found) == 2 and all(p.status.phase == "Running" and log_of(api, p.metadata.name) for p in found)

    until(answered, "both lookups", 60)
    first, second = pods(api, "dns")
    assert (log_of(api, first.metadata.name).strip(), log_of(api, second.metadata.name).strip()) == (
        second.status.pod_ip, first.status.pod_ip)
    go.touch()
    wait_condition(api, "dns", "Complete")


def test_runtime_patches_changed_while_suspended_apply_on_resume(api: client.ApiClient) -> None:
    def patch(team: str) -> dict[str, Any]:
        return {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            {"name": "node", "template": {"spec": {"template": {"metadata": {"labels": {"team": team}}}}}}]}}}}

    create(api, "repatched", trainer=trainer("print('ok')"), suspend=True, runtimePatches=[patch("a")])
    until(lambda: (get(api, "repatched")["status"].get("jobsStatus") or [{}])[0].get("suspended") == 1, "suspended")
    custom(api).patch_namespaced_custom_object(G, V, NS, "trainjobs", "repatched",
                                               {"spec": {"runtimePatches": [patch("b")], "suspend": False}})
    wait_condition(api, "repatched", "Complete")
    assert pods(api, "repatched")[0].metadata.labels["team"] == "b"


PEERS = """import json, os, socket, time
addresses = os.environ["WORKERS"].split(",")
me = int(os.environ["JOB_COMPLETION_INDEX"])
host, port = addresses[me].rsplit(":", 1)
server = socket.create_server((host, int(port)))
other_host, other_port = addresses[1 - me].rsplit(":", 1)
for _ in range(600):
    try:
        peer = socket.create_connection((other_host, int(other_port)), timeout=1)
        break
    except OSError:
        time.sleep(0.05)
peer.sendall(b"hello from %d" % me)
peer.close()
conn, _ = server.accept()
print(json.dumps({"cluster": addresses, "heard": conn.recv(64).decode()}))
"""


def test_a_tf_config_style_worker_list_of_stable_names_connects_the_nodes(api: client.ApiClient) -> None:
    """What a TF_CONFIG built from the JobSet's stable names needs: each node binds its own address and
    reaches the others' (the local cluster turns each name into 127.0.0.1 and that pod's port)."""
    workers = ",".join(f"mesh-node-0-{i}.mesh:2222" for i in range(2))
    create(api, "mesh", trainer=trainer(PEERS, 2, env=[{"name": "WORKERS", "value": workers}]))
    wait_condition(api, "mesh", "Complete")
    first, second = pods(api, "mesh")
    ports = [p.metadata.annotations["local.tfjob.dev/host-port"] for p in (first, second)]
    cluster = [f"127.0.0.1:{port}" for port in ports]
    assert json.loads(log_of(api, first.metadata.name)) == {"cluster": cluster, "heard": "hello from 1"}
    assert json.loads(log_of(api, second.metadata.name)) == {"cluster": cluster, "heard": "hello from 0"}


def test_success_policy_on_the_trainer_ends_a_never_ending_ps_job(cluster: LocalCluster, api: client.ApiClient) -> None:
    """A Chief/PS-style runtime: `ps` never exits, the success policy targets `node`; once `node` completes
    the JobSet is Completed and JobSet deletes the still-active `ps` Job with its pods (§5.5, §10)."""
    runtime = runtime_manifest("with-ps", "tensorflow", {"numNodes": 1}, "python:3.12")
    spec = runtime["spec"]["template"]["spec"]
    spec["successPolicy"] = {"operator": "All", "targetReplicatedJobs": ["node"]}
    spec["replicatedJobs"].append({"name": "ps", "template": {"spec": {"template": {"spec": {"containers": [
        {"name": "ps", "image": "python:3.12", "command": ["python", "-c", "import time; time.sleep(3600)"]}]}}}}})
    cluster.install_runtime(runtime)
    create(api, "with-ps", "with-ps", trainer=trainer("print('done')"))
    wait_condition(api, "with-ps", "Complete")
    batch = client.BatchV1Api(api)
    until(lambda: [j.metadata.name for j in batch.list_namespaced_job(
        NS, label_selector="jobset.sigs.k8s.io/jobset-name=with-ps").items] == ["with-ps-node-0"], "ps Job deleted")
    until(lambda: [p.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"] for p in pods(api, "with-ps")] == ["node"],
          "ps pod deleted")
