"""checkpoint= against the local cluster: a try killed after a checkpoint, and the next try resuming from it.

The TFJob is the digits example's program (real TensorFlow, MultiWorkerMirroredStrategy): its replica
is killed with SIGKILL once its log shows the checkpoint of epoch 2 (exit 137, restartPolicy Never, so
the job fails), the try records the newest checkpoint, and the next try's job starts from it, says so
in the task log, and passes the example's accuracy gate. The TrainJob runs a small program on a claim
(``pvc://``: the local node's host directory for it), fails its first try after epoch 2, and its next,
deferred try resumes from the checkpoint the trigger's follow and the first try recorded. Behind Kueue,
a job preempted and readmitted is told where its recreated pods start over, and a try that a
preemption failed (``on_preemption="fail"``) is retried from its newest checkpoint.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_support import StateStore, TaskInstance, context_for, defer, fire, wait_for

from airflow_tfjob.build.checkpoints import MOUNT_ROOT
from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.operators.trainjob import TrainJobOperator
from airflow_tfjob.version_compat import AirflowException

pytestmark = [pytest.mark.cluster]

TRAINING = Path(__file__).resolve().parents[2] / "example_dags" / "training"
GATE = 0.9  # the digits example's min_test_accuracy


def context(ti: TaskInstance, state: StateStore) -> dict[str, Any]:
    return {**context_for(ti), "task_state_store": state}


def processes_with(variable: str) -> list[int]:
    """The pids whose environment holds ``variable`` (NAME=value): the replica processes of one job."""
    wanted = variable.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.tensorflow
@pytest.mark.timeout(600)
def test_the_digits_example_killed_after_epoch_k_resumes_from_it_on_the_next_try(
    hook: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    store, state, ti = (
        f"file://{tmp_path}/checkpoints",
        StateStore(),
        TaskInstance(dag_id="example_tfjob_digits"),
    )

    def operator() -> TFJobOperator:
        return TFJobOperator(
            task_id="train", namespace="default", worker=1, image="tensorflow/tensorflow:2.21.0",
            command=[sys.executable, str(TRAINING / "digits_mwms.py")],
            # Many epochs after the kill's: the kill lands long before the training could end.
            hyperparameters={"epochs": 14, "batch_size": 32, "learning_rate": 0.01},
            env={"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"},
            restart_policy="Never", metrics=["test_accuracy"], checkpoint=store, startup_timeout=120,
        )  # fmt: skip

    first = operator()
    errors: list[BaseException] = []

    def run_first() -> None:
        try:
            first.execute(context(ti, state))
        except BaseException as error:  # the try fails: its replica is killed
            errors.append(error)

    thread = threading.Thread(target=run_first)
    thread.start()
    wait_for(lambda: first._job_ref is not None, 60, "the first try's job")
    assert first._job_ref is not None
    name = first._job_ref[0]
    pod = f"{name}-worker-0"

    def saved_epoch_2() -> bool:
        try:
            return "epoch=2" in "".join(
                line for line in hook.read_pod_log(pod, "default").splitlines() if "checkpoint saved:" in line
            )
        except Exception:
            return False

    wait_for(saved_epoch_2, 300, "the log of the checkpoint of epoch 2", interval=0.1)
    directory = f"{store}/example_tfjob_digits/train/{ti.run_id}/unmapped"
    victims = processes_with(f"CHECKPOINT_DIR={directory}")
    assert victims, "the replica's process"
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    thread.join(120)
    assert not thread.is_alive()
    assert errors and isinstance(errors[0], AirflowException), errors
    assert "worker-0 failed: Error, exit code 137" in "".join(capfd.readouterr())  # the kill, nothing else
    recorded = state.values["checkpoint"]
    assert recorded["directory"] == directory and recorded["epoch"] >= 2
    assert recorded["path"] == f"{directory}/epoch-{recorded['epoch']:04d}.npz"
    assert ti.xcoms["checkpoint"] == recorded

    second_ti = ti.next_try()
    result = operator().execute(context(second_ti, state))
    logged = "".join(capfd.readouterr())
    k = recorded["epoch"]
    assert f"resuming from {recorded['path']} (epoch {k})" in logged  # the task's line, and the replica's
    assert f"epoch={k + 1} " in logged and f"epoch={k} " not in logged  # it went on from epoch k
    assert result["state"] == "succeeded"
    assert result["metrics"]["test_accuracy"] >= GATE
    assert state.values["checkpoint"]["epoch"] == 14
    assert second_ti.xcoms["checkpoint"]["path"] == f"{directory}/epoch-0014.npz"


# ---- a TrainJob on a claim -------------------------------------------------------------------------

NODE_PROGRAM = r"""
import os, sys
directory, resume = os.environ["CHECKPOINT_DIR"], os.environ.get("RESUME_FROM", "")
index = os.environ["JOB_COMPLETION_INDEX"]
start = int(open(resume).read()) if resume else 0
print(f"node {index} starts after epoch {start} (RESUME_FROM={resume or '-'})", flush=True)
for epoch in range(start + 1, 5):
    print(f"epoch={epoch}", flush=True)
    if index == "0":
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"epoch-{epoch}")
        open(path, "w").write(str(epoch))
        print(f"checkpoint saved: {path} epoch={epoch}", flush=True)
    if epoch == 2 and not resume and index == "0":
        # Node 0 alone fails, after saying so: were node 1 to fail first, the JobSet's failure would end
        # node 0's pod before the follow had read its "checkpoint saved" line.
        print("the first try fails after epoch 2", flush=True)
        sys.exit(1)
"""


@pytest.fixture(scope="module")
def trainjob_cluster() -> Iterator[Any]:
    from airflow_tfjob.jobs.trainjob.runtimes import cluster_hook, install
    from airflow_tfjob.local import LocalCluster

    with LocalCluster(apis=["trainjob"]) as cluster:
        install(cluster_hook(str(cluster.kubeconfig_path)), log=lambda _: None)
        yield cluster


@pytest.mark.timeout(240)
def test_a_trainjob_on_a_claim_resumes_on_its_next_deferred_try(
    trainjob_cluster: Any, k8s_conn: str, capfd: pytest.CaptureFixture[str]
) -> None:
    state, ti = StateStore(), TaskInstance(task_id="nodes")
    kubeconfig = str(trainjob_cluster.kubeconfig_path)

    def operator(**kwargs: Any) -> TrainJobOperator:
        return TrainJobOperator(
            task_id="nodes", namespace="default", runtime="tensorflow-distributed", image="python:3.12",
            command=[sys.executable, "-c", NODE_PROGRAM], num_nodes=2, config_file=kubeconfig,
            checkpoint="pvc://ckpt-claim/runs", startup_timeout=60, **kwargs,
        )  # fmt: skip

    with pytest.raises(AirflowException):
        operator().execute(context(ti, state))
    directory = f"{MOUNT_ROOT}/ckpt-claim/runs/it_dag/nodes/{ti.run_id}/unmapped"
    host = (
        Path(trainjob_cluster.runtime.workdir)
        / "volumes"
        / "default"
        / "ckpt-claim"
        / "runs"
        / "it_dag"
        / "nodes"
    )
    host_dir = host / ti.run_id / "unmapped"
    # The node wrote into the claim's host directory, and said so with the path it was given.
    assert sorted(p.name for p in host_dir.iterdir()) == ["epoch-1", "epoch-2"]
    assert state.values["checkpoint"] == {
        "path": f"{host_dir}/epoch-2", "epoch": 2, "step": None, "directory": directory,
    }  # fmt: skip

    second = ti.next_try()
    op = operator(deferrable=True)
    capfd.readouterr()
    deferred = defer(op, second, context(second, state))
    assert f"resuming from {host_dir}/epoch-2 (epoch 2) (recorded by an earlier try)" in "".join(
        capfd.readouterr()
    )
    assert deferred.trigger.options["resume_from"]["epoch"] == 2
    event = fire(deferred)
    assert event["parts"]["checkpoint"]["epoch"] == 4
    result = operator(deferrable=True).execute_complete(context(second, state), event)
    assert result["state"] == "succeeded"
    assert sorted(p.name for p in host_dir.iterdir()) == [f"epoch-{i}" for i in range(1, 5)]
    assert state.values["checkpoint"]["epoch"] == 4 and second.xcoms["checkpoint"]["epoch"] == 4
    logs = KubeflowJobHook(conn_id=k8s_conn, config_file=kubeconfig)
    job = op._job_ref
    assert job is not None
    pods = logs.list_job_pods(job[0], "default", kind="TrainJob")
    node0 = next(p for p in pods if "-node-0-0" in p["metadata"]["name"])
    assert f"starts after epoch 2 (RESUME_FROM={host_dir}/epoch-2)" in logs.read_pod_log(
        node0["metadata"]["name"], "default", container="node"
    )


# ---- a job Kueue preempts and resumes --------------------------------------------------------------

# Writes a checkpoint file per epoch (STEP seconds apart) and says so; starts after the newest one the
# directory holds (its pods recreated after a preemption get the RESUME_FROM the job was created with).
EPOCHS = r"""
import os, time
directory = os.environ["CHECKPOINT_DIR"]
local = directory.removeprefix("file://")
os.makedirs(local, exist_ok=True)
done = sorted(int(name.split("-")[1]) for name in os.listdir(local) if name.startswith("epoch-"))
start = done[-1] if done else 0
print(f"starting after epoch {start}", flush=True)
for epoch in range(start + 1, int(os.environ["EPOCHS"]) + 1):
    time.sleep(float(os.environ["STEP"]))
    open(os.path.join(local, f"epoch-{epoch}"), "w").close()
    print(f"checkpoint saved: {directory}/epoch-{epoch} epoch={epoch}", flush=True)
print("done", flush=True)
"""


@pytest.fixture(scope="module")
def kueue_cluster() -> Iterator[Any]:
    """test_kueue's cluster: Kueue with the TFJob integration and its ClusterQueues (``prio`` preempts)."""
    from test_kueue import queues

    from airflow_tfjob.local import LocalCluster

    with LocalCluster(kueue={"integrations": ["kubeflow.org/tfjob"], "objects": queues()}) as cluster:
        yield cluster


@pytest.mark.timeout(300)
def test_a_job_kueue_preempts_resumes_from_its_newest_checkpoint(
    kueue_cluster: Any, k8s_conn: str, tmp_path: Path
) -> None:
    from test_deferred_parity import TaskLog
    from test_kueue import first, operator, run_in_thread

    config = {"config_file": str(kueue_cluster.kubeconfig_path)}
    store = f"file://{tmp_path}/checkpoints"
    low_log, ti = TaskLog(), TaskInstance(task_id="low")
    low = operator(
        low_log, task_id="low", kueue_queue="prio", labels={"kueue.x-k8s.io/priority-class": "low"},
        command=[sys.executable, "-c", EPOCHS], env={"EPOCHS": "40", "STEP": "0.1"}, checkpoint=store, **config,
    )  # fmt: skip
    thread, out = run_in_thread(low, ti)

    def saved(log: TaskLog, epoch: int) -> bool:
        return any(
            line.startswith("[worker-0] checkpoint saved:") and f"epoch={epoch}" in line for line in log.lines
        )

    wait_for(lambda: saved(low_log, 5), 90, "the low-priority job's checkpoint of epoch 5")
    high = operator(
        TaskLog(), task_id="high", kueue_queue="prio", labels={"kueue.x-k8s.io/priority-class": "high"}, **config
    )  # fmt: skip
    assert high.execute(context_for(TaskInstance(task_id="high")))["state"] == "succeeded"
    thread.join(120)
    assert "result" in out, out.get("error")
    assert out["result"]["state"] == "succeeded" and out["result"]["preemptions"] == 1

    lines = low_log.lines
    resumed = first(lines, "[kueue] resumed")
    resuming = first(lines, "[checkpoint] resuming from ")
    # The newest checkpoint the follow saw before Kueue suspended the job (its pods deleted) is where
    # the task log says the recreated pods start over, and where they did start over.
    before = [line for line in lines[:resumed] if line.startswith("[worker-0] checkpoint saved:")]
    k = int(before[-1].rsplit("epoch=", 1)[1])
    directory = f"{store}/it_dag/low/{ti.run_id}/unmapped"
    assert (
        resumed < resuming
        and lines[resuming] == f"[checkpoint] resuming from {directory}/epoch-{k} (epoch {k})"
    )
    restarted = [line for line in lines[resumed:] if line.startswith("[worker-0] starting after epoch ")]
    assert restarted and int(restarted[0].rsplit(" ", 1)[1]) in (k, k + 1)  # a file written, its line cut off
    assert ti.xcoms["checkpoint"]["epoch"] == 40


@pytest.mark.timeout(300)
def test_a_try_failed_by_a_preemption_is_retried_from_its_newest_checkpoint(
    kueue_cluster: Any, k8s_conn: str, tmp_path: Path
) -> None:
    """on_preemption="fail": the preempted try fails, having recorded its newest checkpoint; the retry
    (Airflow's, or a retry policy's) creates a new job that starts from it."""
    from test_deferred_parity import TaskLog
    from test_kueue import operator

    config = {"config_file": str(kueue_cluster.kubeconfig_path)}
    store, state, ti = f"file://{tmp_path}/checkpoints", StateStore(), TaskInstance(task_id="spot")

    def low(log: TaskLog) -> Any:
        return operator(
            log, task_id="spot", kueue_queue="prio", labels={"kueue.x-k8s.io/priority-class": "low"},
            command=[sys.executable, "-c", EPOCHS], env={"EPOCHS": "30", "STEP": "0.1"}, checkpoint=store,
            on_preemption="fail", **config,
        )  # fmt: skip

    first_log = TaskLog()
    first_try = low(first_log)
    out: dict[str, Any] = {}

    def run_first() -> None:
        try:
            out["result"] = first_try.execute(context(ti, state))
        except BaseException as error:  # the preemption fails it
            out["error"] = error

    thread = threading.Thread(target=run_first, daemon=True)
    thread.start()
    wait_for(
        lambda: any("checkpoint saved:" in line and "epoch=5" in line for line in first_log.lines),
        90,
        "epoch 5",
    )
    high = operator(
        TaskLog(), task_id="urgent", kueue_queue="prio", labels={"kueue.x-k8s.io/priority-class": "high"}, **config
    )  # fmt: skip
    assert high.execute(context_for(TaskInstance(task_id="urgent")))["state"] == "succeeded"
    thread.join(60)
    assert "was preempted (on_preemption='fail')" in str(out.get("error")), out
    recorded = state.values["checkpoint"]
    assert recorded["epoch"] >= 5

    second_log = TaskLog()
    result = low(second_log).execute(context(ti.next_try(), state))
    k = recorded["epoch"]
    assert f"resuming from {recorded['path']} (epoch {k}) (recorded by an earlier try)" in "\n".join(
        second_log.lines
    )
    assert any(line.startswith("[worker-0] starting after epoch ") for line in second_log.lines)
    assert result["state"] == "succeeded" and state.values["checkpoint"]["epoch"] == 30
