"""The XGBoostJob, JAXJob and PaddleJob controllers (training-operator v1.9.4, docs/reference/
kubeflow-v1-kinds.md §§2-4), and the ExitCode restarts of the shared status rules, against real
processes: pods, services, labels, the environment each replica prints, success and failure rules, and
the conditions sequences. PyTorchJob has its own file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kind_harness import SLEEP, KindHarness, exit_with, job, print_env, replica, running_harness, wait_file

from airflow_tfjob.jobs.kinds import JAXJOB, PADDLEJOB, PYTORCHJOB, XGBOOSTJOB, JobKind

ROLE = "training.kubeflow.org/job-role"


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[KindHarness]:
    async for harness in running_harness(tmp_path):
        yield harness



def env_names(h: KindHarness, pod: str) -> list[str]:
    found = h.pod(pod)
    assert found is not None
    return [e["name"] for e in found["spec"]["containers"][0]["env"]]


def roles(h: KindHarness, name: str) -> dict[str, str | None]:
    return {p["metadata"]["name"]: p["metadata"]["labels"].get(ROLE) for p in h.pods(name)}


def conds(kind: JobKind, *steps: tuple[str, str, str]) -> list[tuple[str, str, str]]:
    return [(t, s, f"{kind.kind}{r}") for t, s, r in steps]


C, R, RF = ("Created", "True", "Created"), ("Running", "True", "Running"), ("Running", "False", "Running")
S, F = ("Succeeded", "True", "Succeeded"), ("Failed", "True", "Failed")
ONLY_INDEX_0_ENDS = "import os, sys, time\nif os.environ['HOSTNAME'].endswith('-0'): sys.exit(0)\ntime.sleep(3600)"


# ---------------------------------------------------------------------------------------------------
# XGBoostJob


async def test_xgboost_env_labels_and_the_master_decides(h: KindHarness) -> None:
    K = XGBOOSTJOB
    go = h.tmp / "go"
    h.create(job(K, "xgb", {"Master": replica(K, print_env(wait_file(go))), "Worker": replica(K, print_env(SLEEP), 2)}))
    env = await h.env_of("xgb-worker-1", "xgboost")
    names = ["MASTER_PORT", "MASTER_ADDR", "WORLD_SIZE", "RANK", "PYTHONUNBUFFERED", "WORKER_PORT", "WORKER_ADDRS"]
    assert env_names(h, "xgb-worker-1") == names
    assert {k: env[k] for k in names} == {
        "MASTER_PORT": h.host_port("xgb-master-0"), "MASTER_ADDR": "127.0.0.1", "WORLD_SIZE": "3", "RANK": "2",
        "PYTHONUNBUFFERED": "1", "WORKER_PORT": h.host_port("xgb-worker-0"), "WORKER_ADDRS": "127.0.0.1,127.0.0.1",
    }
    assert (await h.env_of("xgb-master-0", "xgboost"))["RANK"] == "0"
    assert roles(h, "xgb") == {"xgb-master-0": "master", "xgb-worker-0": None, "xgb-worker-1": None}
    pod = h.pod("xgb-master-0")
    assert pod is not None and pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["containers"][0]["ports"] == [{"name": "xgboostjob-port", "containerPort": 9999, "protocol": "TCP"}]
    assert pod["metadata"]["labels"]["training.kubeflow.org/operator-name"] == "xgboostjob-controller"
    await h.until(lambda: h.has(K, "xgb", "Running"), "Running")
    assert h.message(K, "xgb", "Running") == "XGBoostJob xgb is running."
    assert all("selector" not in s for s in h.status(K, "xgb")["replicaStatuses"].values())
    go.write_text("")  # the master ends; the workers still run
    await h.until(lambda: h.has(K, "xgb", "Succeeded"), "Succeeded")
    assert h.message(K, "xgb", "Succeeded") == "XGBoostJob xgb is successfully completed."
    assert await h.settled(K, "xgb") == [conds(K, C), conds(K, C, R), conds(K, C, RF, S)]


async def test_xgboost_a_failed_worker_fails_the_job_unless_exit_code(h: KindHarness) -> None:
    K = XGBOOSTJOB
    h.create(job(K, "xf", {"Master": replica(K, SLEEP), "Worker": replica(K, exit_with(1))}))
    await h.until(lambda: h.has(K, "xf", "Failed"), "Failed")
    assert h.message(K, "xf", "Failed") == "XGBoostJob xf is failed because 1 Worker replica(s) failed."

    counter = h.tmp / "runs"
    once_137 = (f"import os, sys\np = {str(counter)!r}\n"
                "if not os.path.exists(p):\n    open(p, 'w').close()\n    sys.exit(137)\n")
    h.create(job(K, "xr", {"Master": replica(K, wait_file(counter, "import time; time.sleep(0.5)")),
                           "Worker": replica(K, once_137, 1, "ExitCode")}))
    await h.until(lambda: h.has(K, "xr", "Succeeded"), "Succeeded after the Worker's restart")
    restarting = ("Warning", "XGBoostJobRestarting", "XGBoostJob xr is restarting because 1 Worker replica(s) failed.")
    assert restarting in h.events("xr")


# ---------------------------------------------------------------------------------------------------
# JAXJob


async def test_jax_env_worker0_role_and_every_worker_must_succeed(h: KindHarness) -> None:
    K = JAXJOB
    go = h.tmp / "go"
    ends = print_env("import os, sys\nif os.environ['HOSTNAME'].endswith('-0'): sys.exit(0)\n" + wait_file(go))
    h.create(job(K, "jx", {"Worker": replica(K, ends, 2)}))
    env = await h.env_of("jx-worker-1", "jax")
    names = ["PYTHONUNBUFFERED", "COORDINATOR_PORT", "COORDINATOR_ADDRESS", "NUM_PROCESSES", "PROCESS_ID"]
    assert env_names(h, "jx-worker-1") == names
    assert {k: env[k] for k in names} == {
        "PYTHONUNBUFFERED": "1", "COORDINATOR_PORT": h.host_port("jx-worker-0"), "COORDINATOR_ADDRESS": "127.0.0.1",
        "NUM_PROCESSES": "2", "PROCESS_ID": "1",
    }
    assert roles(h, "jx") == {"jx-worker-0": "master", "jx-worker-1": None}
    await h.until(lambda: h.status(K, "jx").get("replicaStatuses", {}).get("Worker", {}).get("succeeded") == 1,
                  "worker 0 to succeed")
    assert not h.has(K, "jx", "Succeeded")
    assert h.message(K, "jx", "Running") == "JAXJob default/jx is running."
    assert h.status(K, "jx")["replicaStatuses"]["Worker"]["selector"] == (
        "training.kubeflow.org/job-name=jx,training.kubeflow.org/operator-name=jaxjob-controller,"
        "training.kubeflow.org/replica-type=worker")
    go.write_text("")
    await h.until(lambda: h.has(K, "jx", "Succeeded"), "Succeeded")
    assert h.message(K, "jx", "Succeeded") == "JAXJob default/jx successfully completed."
    assert await h.settled(K, "jx") == [conds(K, C), conds(K, C, R), conds(K, C, RF, S)]


async def test_jax_failure_and_managed_by_is_not_honoured(h: KindHarness) -> None:
    K = JAXJOB
    h.create(job(K, "jf", {"Worker": replica(K, exit_with(2))},
                 runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"}))
    await h.until(lambda: h.has(K, "jf", "Failed"), "Failed")
    assert h.message(K, "jf", "Failed") == "JAXJob jf is failed because 1 Worker replica(s) failed."
    # Whether a pass saw the worker Running before it exited depends on timing; Failed comes last.
    final = (await h.settled(K, "jf"))[-1]
    assert final[0] == conds(K, C)[0] and final[-1] == conds(K, F)[0]


# ---------------------------------------------------------------------------------------------------
# PaddleJob


async def test_paddle_collective_env_rendezvous_on_worker0_and_no_master_role(h: KindHarness) -> None:
    K = PADDLEJOB
    h.create(job(K, "pd", {"Worker": replica(K, print_env(ONLY_INDEX_0_ENDS), 2)}))
    w0, w1 = await h.env_of("pd-worker-0", "paddle"), await h.env_of("pd-worker-1", "paddle")
    rendezvous = f"127.0.0.1:{h.host_port('pd-worker-0')}"
    assert env_names(h, "pd-worker-0") == ["PYTHONUNBUFFERED", "PADDLE_JOB_ID", "PADDLE_NNODES", "POD_IP_DUMMY",
                                           "PADDLE_MASTER"]
    pod = h.pod("pd-worker-0")
    assert pod is not None
    assert pod["spec"]["containers"][0]["env"][-1]["value"] == f"$(POD_IP_DUMMY):{h.host_port('pd-worker-0')}"
    assert pod["spec"]["containers"][0]["ports"] == [{"name": "master", "containerPort": 36543, "protocol": "TCP"}]
    assert pod["spec"]["restartPolicy"] == "OnFailure"
    assert (w0["PADDLE_MASTER"], w0["POD_IP_DUMMY"]) == (rendezvous, "127.0.0.1")
    assert {k: w1[k] for k in ("PYTHONUNBUFFERED", "PADDLE_JOB_ID", "PADDLE_NNODES", "PADDLE_MASTER")} == {
        "PYTHONUNBUFFERED": "1", "PADDLE_JOB_ID": "pd", "PADDLE_NNODES": "2", "PADDLE_MASTER": rendezvous}
    assert "POD_IP_DUMMY" not in w1
    assert roles(h, "pd") == {"pd-worker-0": None, "pd-worker-1": None}
    await h.until(lambda: h.status(K, "pd").get("replicaStatuses", {}).get("Worker", {}).get("succeeded") == 1,
                  "worker 0 to succeed")
    assert not h.has(K, "pd", "Succeeded")
    assert h.message(K, "pd", "Running") == "PaddleJob default/pd is running."


async def test_paddle_ps_mode_env_and_the_master_decides(h: KindHarness) -> None:
    K = PADDLEJOB
    go = h.tmp / "go"
    h.create(job(K, "ps", {"Master": replica(K, print_env(wait_file(go))), "Worker": replica(K, print_env(SLEEP))}))
    master, worker = await h.env_of("ps-master-0", "paddle"), await h.env_of("ps-worker-0", "paddle")
    rendezvous = f"127.0.0.1:{h.host_port('ps-master-0')}"
    assert (master["PADDLE_MASTER"], master["PADDLE_SERVER_NUM"]) == (rendezvous, "1")
    assert (worker["PADDLE_MASTER"], worker["PADDLE_TRAINER_NUM"]) == (rendezvous, "1")
    assert "PADDLE_TRAINER_NUM" not in master and "PADDLE_SERVER_NUM" not in worker
    assert roles(h, "ps") == {"ps-master-0": "master", "ps-worker-0": None}
    await h.until(lambda: h.has(K, "ps", "Running"), "Running")
    assert h.message(K, "ps", "Running") == "PaddleJob ps is running."
    go.write_text("")
    await h.until(lambda: h.has(K, "ps", "Succeeded"), "Succeeded")
    assert h.message(K, "ps", "Succeeded") == "PaddleJob ps is successfully completed."
    assert await h.settled(K, "ps") == [conds(K, C), conds(K, C, R), conds(K, C, RF, S)]


# ---------------------------------------------------------------------------------------------------
# Restarting (a non-Never policy whose pod did fail: ExitCode with a retryable code)


@pytest.mark.parametrize("kind", [PYTORCHJOB, PADDLEJOB])
async def test_exit_code_retryable_restarts_with_the_kinds_message(h: KindHarness, kind: JobKind) -> None:
    counter = h.tmp / "runs"
    once_137 = (f"import os, sys, time\np = {str(counter)!r}\n"
                "if not os.path.exists(p):\n    open(p, 'w').close()\n    sys.exit(137)\n")
    h.create(job(kind, "ec", {"Master": replica(kind, once_137, 1, "ExitCode")}))
    await h.until(lambda: h.has(kind, "ec", "Succeeded"), "Succeeded after the restart")
    message = f"{kind.kind} ec is restarting because 1 Master replica(s) failed."
    assert ("Warning", f"{kind.kind}Restarting", message) in h.events("ec")
    assert ("Restarting", "True", f"{kind.kind}Restarting") in [c for step in await h.settled(kind, "ec") for c in step]
