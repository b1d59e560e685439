"""The PyTorchJob controller (training-operator v1.9.4, docs/reference/kubeflow-v1-kinds.md §1) against
real processes: pods, services, labels, the environment each replica prints, the init container that
holds Workers until the master runs, success and failure rules and the conditions sequences."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kind_harness import SLEEP, KindHarness, exit_with, job, print_env, replica, running_harness, wait_file

from airflow_tfjob.jobs.kinds import PYTORCHJOB as K

CREATED = ("Created", "True", "PyTorchJobCreated")
RUNNING = ("Running", "True", "PyTorchJobRunning")
RUNNING_F = ("Running", "False", "PyTorchJobRunning")
SUCCEEDED = ("Succeeded", "True", "PyTorchJobSucceeded")
FAILED = ("Failed", "True", "PyTorchJobFailed")
TORCH_ENV = ("PYTHONUNBUFFERED", "MASTER_PORT", "PET_MASTER_PORT", "MASTER_ADDR", "PET_MASTER_ADDR",
             "WORLD_SIZE", "RANK", "PET_NODE_RANK", "PET_NPROC_PER_NODE", "PET_NNODES")


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[KindHarness]:
    async for harness in running_harness(tmp_path):
        yield harness



async def test_master_and_workers_pods_services_env_and_success(h: KindHarness) -> None:
    go = h.tmp / "go"
    created = h.create(job(K, "mnist", {
        "Master": replica(K, print_env(wait_file(go))),
        "Worker": replica(K, print_env(wait_file(go)), 2),
    }))
    names = ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    await h.until(lambda: all(h.pod(n) for n in names) and len(h.services("mnist")) == 3, "pods and services")
    for name in names:
        pod = h.pod(name)
        assert pod is not None
        rt, index = name.split("-")[1], name.split("-")[2]
        labels = pod["metadata"]["labels"]
        assert labels == {
            "training.kubeflow.org/operator-name": "pytorchjob-controller",
            "training.kubeflow.org/job-name": "mnist",
            "training.kubeflow.org/replica-type": rt,
            "training.kubeflow.org/replica-index": index,
            **({"training.kubeflow.org/job-role": "master"} if rt == "master" else {}),
        }
        assert pod["metadata"]["ownerReferences"] == [{
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "mnist",
            "uid": created["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True,
        }]
        assert pod["spec"]["restartPolicy"] == "OnFailure"
        container = pod["spec"]["containers"][0]
        assert container["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}]
        assert [e["name"] for e in container["env"]] == list(TORCH_ENV)
        init = [c["name"] for c in pod["spec"].get("initContainers") or []]
        assert init == (["init-pytorch"] if rt == "worker" else [])
        svc = h.store.get("services", "default", name)
        assert svc["spec"]["clusterIP"] == "None"
        assert svc["spec"]["ports"] == [{"name": "pytorchjob-port", "port": 23456, "protocol": "TCP",
                                         "targetPort": int(h.host_port(name))}]
    master_port = h.host_port("mnist-master-0")
    env = await h.env_of("mnist-worker-1", "pytorch")
    assert {k: env[k] for k in TORCH_ENV} == {
        "PYTHONUNBUFFERED": "1", "MASTER_PORT": master_port, "PET_MASTER_PORT": master_port,
        "MASTER_ADDR": "127.0.0.1", "PET_MASTER_ADDR": "127.0.0.1", "WORLD_SIZE": "3", "RANK": "2",
        "PET_NODE_RANK": "2", "PET_NPROC_PER_NODE": "auto", "PET_NNODES": "3",
    }
    assert (await h.env_of("mnist-master-0", "pytorch"))["RANK"] == "0"
    assert (await h.env_of("mnist-worker-0", "pytorch"))["RANK"] == "1"
    await h.until(lambda: h.has(K, "mnist", "Running"), "Running")
    assert h.message(K, "mnist", "Running") == "PyTorchJob mnist is running."
    selectors = {t: s.get("selector") for t, s in h.status(K, "mnist")["replicaStatuses"].items()}
    assert selectors == {
        t: "training.kubeflow.org/job-name=mnist,training.kubeflow.org/operator-name=pytorchjob-controller,"
           f"training.kubeflow.org/replica-type={t.lower()}"
        for t in ("Master", "Worker")
    }
    go.write_text("")
    await h.until(lambda: h.has(K, "mnist", "Succeeded"), "Succeeded")
    assert h.message(K, "mnist", "Succeeded") == "PyTorchJob mnist is successfully completed."
    assert await h.settled(K, "mnist") == [[CREATED], [CREATED, RUNNING], [CREATED, RUNNING_F, SUCCEEDED]]
    # The stored spec is what was submitted: the defaults live in memory only.
    assert h.job(K, "mnist")["spec"] == created["spec"]


async def test_a_worker_waits_in_its_init_container_until_the_master_runs(h: KindHarness) -> None:
    # The master cannot start before its secret exists: its pod stays Pending, and so must the worker.
    secret_env = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "late", "key": "token"}}}]
    go = h.tmp / "go"
    master = replica(K, wait_file(go))
    master["template"]["spec"]["containers"][0]["env"] = secret_env
    h.create(job(K, "gate", {"Master": master, "Worker": replica(K, print_env(SLEEP))}))
    await h.until(lambda: any("waiting for master" in line for line in h.lines("gate-worker-0", "init-pytorch")),
                  "the init container to wait")
    worker = h.pod("gate-worker-0")
    assert worker is not None and worker["status"]["phase"] == "Pending"
    assert h.lines("gate-worker-0", "pytorch") == []
    h.store.create("secrets", "default", {"metadata": {"name": "late"}, "stringData": {"token": "t"}})
    await h.until(lambda: h.printed_env("gate-worker-0", "pytorch") is not None, "the worker to start")
    assert any(line.startswith("Address: 127.0.") for line in h.lines("gate-worker-0", "init-pytorch"))
    go.write_text("")
    await h.until(lambda: h.has(K, "gate", "Succeeded"), "the master to decide success")


async def test_workers_only_all_must_succeed_and_worker0_has_the_master_role(h: KindHarness) -> None:
    go = h.tmp / "go"
    h.create(job(K, "w", {"Worker": replica(K, print_env(wait_file(go)), 2, "Never")}))
    env = await h.env_of("w-worker-1", "pytorch")
    for absent in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PET_NODE_RANK"):
        assert absent not in env
    assert (env["PET_NPROC_PER_NODE"], env["PET_NNODES"]) == ("auto", "2")
    roles = {p["metadata"]["name"]: p["metadata"]["labels"].get("training.kubeflow.org/job-role") for p in h.pods("w")}
    assert roles == {"w-worker-0": "master", "w-worker-1": None}
    assert all(not p["spec"].get("initContainers") for p in h.pods("w"))
    await h.until(lambda: h.has(K, "w", "Running"), "Running")
    assert h.message(K, "w", "Running") == "PyTorchJob default/w is running."
    go.write_text("")
    await h.until(lambda: h.has(K, "w", "Succeeded"), "Succeeded")
    assert h.message(K, "w", "Succeeded") == "PyTorchJob default/w successfully completed."


async def test_elastic_env_and_one_finished_worker_is_success(h: KindHarness) -> None:
    worker0_ends = "import os, sys, time\nif os.environ['HOSTNAME'].endswith('-0'): sys.exit(0)\ntime.sleep(3600)"
    h.create(job(
        K, "el", {"Worker": replica(K, print_env(worker0_ends), 2)},
        elasticPolicy={"maxReplicas": 3, "maxRestarts": 2, "rdzvId": "r1",
                       "rdzvConf": [{"key": "a", "value": "1"}, {"key": "b", "value": "2"}]},
        nprocPerNode="2",
    ))
    env = await h.env_of("el-worker-1", "pytorch")
    pod = h.pod("el-worker-1")
    assert pod is not None
    assert [e["name"] for e in pod["spec"]["containers"][0]["env"]] == [
        "PYTHONUNBUFFERED", "PET_NPROC_PER_NODE", "PET_RDZV_ENDPOINT", "PET_RDZV_BACKEND", "PET_NNODES",
        "PET_MAX_RESTARTS", "PET_RDZV_ID", "PET_RDZV_CONF"]
    assert {k: v for k, v in env.items() if k.startswith("PET_")} == {
        "PET_NPROC_PER_NODE": "2", "PET_RDZV_ENDPOINT": f"127.0.0.1:{h.host_port('el-worker-0')}",
        "PET_RDZV_BACKEND": "c10d", "PET_NNODES": "3:3", "PET_MAX_RESTARTS": "2", "PET_RDZV_ID": "r1",
        "PET_RDZV_CONF": "a=1,b=2",
    }
    # With an elasticPolicy one succeeded Worker is enough while the other still runs.
    await h.until(lambda: h.has(K, "el", "Succeeded"), "Succeeded")
    running = h.pod("el-worker-1")
    assert running is not None and running["status"]["phase"] == "Running"


async def test_never_worker_failure_fails_the_job_even_with_a_master(h: KindHarness) -> None:
    h.create(job(K, "f", {"Master": replica(K, SLEEP), "Worker": replica(K, exit_with(3), 1, "Never")}))
    await h.until(lambda: h.has(K, "f", "Failed"), "Failed")
    assert h.message(K, "f", "Failed") == "PyTorchJob f is failed because 1 Worker replica(s) failed."
    assert ("Normal", "PyTorchJobFailed", "PyTorchJob f is failed because 1 Worker replica(s) failed.") in h.events("f")
    assert (await h.settled(K, "f"))[-1][-1] == FAILED


async def test_default_on_failure_restarts_in_place_and_the_master_still_decides(h: KindHarness) -> None:
    marker = h.tmp / "ran"
    crash_once = (f"import os, sys\np = {str(marker)!r}\n"
                  "if not os.path.exists(p):\n    open(p, 'w').close()\n    sys.exit(1)\n")
    h.create(job(K, "r", {"Master": replica(K, crash_once)}))
    await h.until(lambda: h.has(K, "r", "Succeeded"), "Succeeded")
    pod = h.pod("r-master-0")
    assert pod is not None and pod["status"]["containerStatuses"][0]["restartCount"] == 1
    assert h.conditions(K, "r")[-1] == SUCCEEDED
    assert not any(c[0] in ("Restarting", "Failed") for c in h.conditions(K, "r"))
