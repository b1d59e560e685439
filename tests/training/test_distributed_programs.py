"""The TensorFlow (MultiWorkerMirroredStrategy), PyTorch and XGBoost digits programs across real
processes, without a cluster.

Each replica is started by hand with the environment training-operator v1.9.4 injects into a
PyTorchJob's or XGBoostJob's replicas (kubeflow-v1-kinds.md §1.4, §2.3), with loopback addresses
and a free port in place of the master's Service and container port. The tests check what a
DAG relies on: the Katib metric lines, a sensible accuracy, every replica exiting 0, and that the
replicas trained one model together rather than each its own.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_tfjob.local.node.ports import host_ports

pytestmark = pytest.mark.timeout(240)

TRAINING = Path(__file__).resolve().parents[2] / "example_dags" / "training"
KATIB = re.compile(r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)")
INJECTED = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "WORKER_PORT", "WORKER_ADDRS", "TF_CONFIG")


def _operator_env(kind: str, world_size: int, rank: int, port: int) -> dict[str, str]:
    """What the operator sets in replica RANK (Master 0, Worker i+1), loopback standing in for Services."""
    env = {k: v for k, v in os.environ.items() if k not in INJECTED}
    env.update(
        PYTHONUNBUFFERED="1",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        WORLD_SIZE=str(world_size),
        RANK=str(rank),
    )
    if kind == "XGBoostJob" and world_size > 1:
        env.update(WORKER_PORT=str(port), WORKER_ADDRS=",".join(["127.0.0.1"] * (world_size - 1)))
    return env


def _tf_config_env(world_size: int, index: int, ports: list[int]) -> dict[str, str]:
    """A TFJob of Workers only, as the operator describes it to worker ``index`` (no TF settings of ours)."""
    env = {k: v for k, v in os.environ.items() if k not in INJECTED and not k.startswith("TF_")}
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    env.update(
        PYTHONUNBUFFERED="1",
        TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}),
    )
    return env


def _run_job(kind: str, program: str, world_size: int, *args: str) -> list[subprocess.CompletedProcess[str]]:
    """Starts every replica at once (as the local cluster does), waits for all, returns them by rank."""
    port = host_ports().reserve()
    ports = [host_ports().reserve() for _ in range(world_size)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(TRAINING / program), *args],
            env=(
                _tf_config_env(world_size, rank, ports)
                if kind == "TFJob"
                else _operator_env(kind, world_size, rank, port)
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(world_size)
    ]
    done = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=200)
            done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return done


def _metric_lines(stdout: str) -> list[list[tuple[str, float]]]:
    return [
        [(m[0], float(m[1])) for m in KATIB.findall(line)]
        for line in stdout.splitlines()
        if KATIB.match(line) and not line.startswith("[")
    ]


def _assert_all_succeeded(replicas: list[subprocess.CompletedProcess[str]]) -> None:
    for rank, replica in enumerate(replicas):
        assert replica.returncode == 0, f"rank {rank} exited {replica.returncode}:\n{replica.stderr[-3000:]}"


@pytest.mark.tensorflow
def test_mirrored_workers_print_only_their_own_lines_and_leave_together(tmp_path: Path) -> None:
    """Nothing on stderr from either worker: no TensorFlow start-up notice (the program's defaults),
    and no coordination error from a worker outliving the leader (they leave together)."""
    replicas = _run_job("TFJob", "digits_mwms.py", 2, "--epochs=2", f"--model_dir={tmp_path}")
    _assert_all_succeeded(replicas)
    for replica in replicas:
        assert replica.stderr == ""
    lines = _metric_lines(replicas[0].stdout)
    assert [line[0] for line in lines[:2]] == [("epoch", 1), ("epoch", 2)]
    assert _metric_lines(replicas[1].stdout) == lines
    assert (tmp_path / "model.keras").exists()


@pytest.mark.pytorch
def test_pytorch_ddp_on_master_and_worker_reports_the_same_metrics_everywhere() -> None:
    # Master + 1 Worker: torch's import dominates the run time, and two replicas show DDP as well as more.
    replicas = _run_job("PyTorchJob", "digits_torch.py", 2, "--epochs=5", "--learning_rate=0.01")
    _assert_all_succeeded(replicas)
    for rank, replica in enumerate(replicas):
        assert f"rank {rank} of 2, master 127.0.0.1:" in replica.stdout
    lines = _metric_lines(replicas[0].stdout)
    assert [[name for name, _ in line] for line in lines] == [["epoch", "loss", "accuracy"]] * 5 + [
        ["test_accuracy"]
    ]
    assert [line[0][1] for line in lines[:5]] == [1, 2, 3, 4, 5]
    # Loss and accuracy are all-reduced, the weights kept equal by DDP: every replica prints the same.
    assert all(_metric_lines(r.stdout) == lines for r in replicas[1:])
    losses = [line[1][1] for line in lines[:5]]
    assert losses[-1] < losses[0]
    (test_accuracy,) = lines[-1]
    assert 0.9 < test_accuracy[1] <= 1.0


@pytest.mark.xgboost
def test_xgboost_tracker_on_master_trains_one_model_with_the_workers() -> None:
    args = ("--num_rounds=20", "--log_every=10")
    replicas = _run_job("XGBoostJob", "digits_xgboost.py", 3, *args)
    _assert_all_succeeded(replicas)
    for rank, replica in enumerate(replicas):
        # The tracker ranks by task id, so the collective's rank is the operator's RANK.
        assert f"collective rank {rank} of 3, tracker 127.0.0.1:" in replica.stdout
    lines = _metric_lines(replicas[0].stdout)
    assert [[name for name, _ in line] for line in lines] == [
        ["round", "train-mlogloss", "train-merror"],
        ["round", "train-mlogloss", "train-merror"],
        ["test_accuracy", "test_mlogloss"],
    ]
    assert all(_metric_lines(r.stdout) == lines for r in replicas[1:])
    test = dict(lines[-1])
    assert 0.9 < test["test_accuracy"] <= 1.0
    # Each replica holds a third of the rows: only trees built from all of them (histograms summed
    # through the collective) match the model one process trains on the whole split.
    (alone,) = _run_job("XGBoostJob", "digits_xgboost.py", 1, *args)
    _assert_all_succeeded([alone])
    assert dict(_metric_lines(alone.stdout)[-1]) == pytest.approx(test, abs=0.005)


@pytest.mark.parametrize("program", ["digits_torch.py", "digits_xgboost.py"])
def test_master_addr_without_rank_is_refused_by_name(program: str) -> None:
    env = _operator_env("PyTorchJob", 2, 0, host_ports().reserve())
    del env["RANK"]
    done = subprocess.run(
        [sys.executable, str(TRAINING / program)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "RANK='' is not a non-negative integer" in done.stderr
