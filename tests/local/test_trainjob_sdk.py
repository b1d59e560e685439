"""The Kubeflow Trainer v2 SDK (`kubeflow==0.5.0`) against a TrainJob-only local cluster: list the
runtimes, train a function on two nodes of the shipped torch-distributed runtime (torchrun with the
PET_* env the cluster injects), wait for Complete and read a node's logs (reference §11); and, with
Trainer's TrainJobStatus gate on, the SDK's `update_trainjob_status` inside a node (reference §7).

kubeflow 0.5.0 requires kubernetes<36 while this project pins kubernetes>=36, so the SDK cannot share the
test environment: it runs in its own virtualenv (the project's pinned uv installs it from uv's cache or
the package index), in a subprocess that talks to the cluster over HTTP like any client."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_tfjob.local import LocalCluster

ROOT = Path(__file__).resolve().parents[2]
SDK = "kubeflow==0.5.0"

SCRIPT = """
import json, sys
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import CustomTrainer, TrainerClient

def train():
    import os
    print("node", os.environ["JOB_COMPLETION_INDEX"], "of", os.environ["PET_NNODES"], flush=True)

client = TrainerClient(backend_config=KubernetesBackendConfig(config_file=sys.argv[1]))
runtimes = sorted(r.name for r in client.list_runtimes())
name = client.train(runtime=client.get_runtime("torch-distributed"), trainer=CustomTrainer(func=train, num_nodes=2))
job = client.wait_for_job_status(name, status={"Complete"}, timeout=240, polling_interval=1)
print(json.dumps({"name": name, "runtimes": runtimes, "status": job.status, "num_nodes": job.num_nodes,
                  "steps": [[s.name, s.status, s.pod_name] for s in job.steps],
                  "logs": list(client.get_job_logs(name, step="node-1"))}))
"""


@pytest.fixture(scope="module")
def sdk_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    uv = subprocess.run([str(ROOT / "scripts" / "venv.sh"), "uv"], capture_output=True, text=True, check=True,
                        cwd=ROOT).stdout.strip()
    venv = tmp_path_factory.mktemp("kubeflow-sdk") / "venv"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    # Every package pinned by `make lock` (requirements/kubeflow-sdk.txt, from kubeflow-sdk.in naming SDK).
    assert SDK in (ROOT / "requirements" / "kubeflow-sdk.txt").read_text().split(), "run make lock"
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
                    "-r", str(ROOT / "requirements" / "kubeflow-sdk.txt")], check=True)
    return venv / "bin" / "python"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(apis=["trainjob"], feature_gates={"TrainJobStatus": True}) as c:
        yield c


def test_sdk_lists_runtimes_trains_waits_and_reads_logs(cluster: LocalCluster, sdk_python: Path,
                                                        tmp_path: Path) -> None:
    script = tmp_path / "sdk_train.py"  # a file: the SDK sends the function's source (inspect.getsource)
    script.write_text(SCRIPT)
    done = subprocess.run([str(sdk_python), str(script), str(cluster.kubeconfig_path)], capture_output=True,
                          text=True, timeout=280, env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    assert done.returncode == 0, done.stderr
    assert "Trainer control-plane version info is not available" not in done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["runtimes"] == ["deepspeed-distributed", "jax-distributed", "mlx-distributed", "torch-distributed",
                                 "xgboost-distributed"]
    assert (result["status"], result["num_nodes"]) == ("Complete", 2)
    assert [s[:2] for s in result["steps"]] == [["node-0", "Succeeded"], ["node-1", "Succeeded"]]
    assert result["steps"][1][2].startswith(f"{result['name']}-node-0-1-")
    # The function's line comes first, once. torchrun's agent on node 1 may then log its teardown when node
    # 0's agent, which hosts the rendezvous store, exits first: c10d warnings with their C++ frames, and in
    # one clean-clone run an error with the closed store's traceback. That is torch's agents ending in an
    # order torch does not fix, not a failure: the job is Complete with both steps Succeeded (above).
    assert result["logs"][0] == "node 1 of 2", result["logs"]
    assert not [line for line in result["logs"][1:] if line.startswith("node ")]


# What a training program on a real cluster calls: the SDK reads the injected env, verifies the status
# server against the CA file with requests, and sends the token file's token.
REPORT = """
import sys
from kubeflow.trainer import update_trainjob_status
sent = update_trainjob_status(progress_percent=30, estimated_remaining_seconds=70, metrics={"loss": 0.5})
print("sent", sent, flush=True)
sys.exit(0 if sent else 1)
"""


def test_sdk_update_trainjob_status_in_a_node_writes_the_trainer_status(
    cluster: LocalCluster, sdk_python: Path
) -> None:
    from kubernetes import client, config
    from waiting import until

    api = client.CustomObjectsApi(config.new_client_from_config(str(cluster.kubeconfig_path)))
    group, version = "trainer.kubeflow.org", "v1alpha1"
    body = {"apiVersion": f"{group}/{version}", "kind": "TrainJob", "metadata": {"name": "sdk-progress"},
            "spec": {"runtimeRef": {"name": "torch-distributed"},
                     "trainer": {"numNodes": 1, "command": [str(sdk_python), "-c", REPORT]}}}
    api.create_namespaced_custom_object(group, version, "default", "trainjobs", body)

    def ended() -> set[str]:
        job = api.get_namespaced_custom_object(group, version, "default", "trainjobs", "sdk-progress")
        return {c["type"] for c in job.get("status", {}).get("conditions", []) if c["status"] == "True"} & {
            "Complete", "Failed"}

    until(ended, "the TrainJob finished", timeout=60)
    assert ended() == {"Complete"}
    job = api.get_namespaced_custom_object(group, version, "default", "trainjobs", "sdk-progress")
    status = job["status"]["trainerStatus"]
    assert (status["progressPercentage"], status["estimatedRemainingSeconds"]) == (30, 70)
    assert status["metrics"] == [{"name": "loss", "value": "0.5"}] and status["lastUpdatedTime"]
