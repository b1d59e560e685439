"""The local node's PersistentVolumeClaims: a host directory per namespace and claim, and the paths under a
claim's mountPath rewritten to it where the container is told them (env values, command and args)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow_tfjob.local.node.podenv import PodEnvironment, host_path
from airflow_tfjob.local.store.core import Store


def pod(
    volumes: list[dict[str, Any]], mounts: list[dict[str, Any]], env: list[dict[str, Any]]
) -> dict[str, Any]:
    container = {"name": "tensorflow", "volumeMounts": mounts, "env": env}
    return {
        "metadata": {"name": "p", "namespace": "ml", "uid": "u"},
        "spec": {"volumes": volumes, "containers": [container]},
    }


def test_a_claim_is_a_host_directory_and_its_paths_are_rewritten(tmp_path: Path) -> None:
    spec = pod(
        [
            {"name": "ckpt", "persistentVolumeClaim": {"claimName": "checkpoints"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}},
            {"name": "scratch", "emptyDir": {}},
        ],
        [
            {"name": "ckpt", "mountPath": "/mnt/ckpt"},
            {"name": "data", "mountPath": "/mnt/ckpt/data", "subPath": "digits"},
            {"name": "scratch", "mountPath": "/scratch"},
        ],
        [
            {"name": "CHECKPOINT_DIR", "value": "/mnt/ckpt/dag/task"},
            {"name": "DATA", "value": "/mnt/ckpt/data/train.csv"},
            {"name": "OTHER", "value": "/mnt/ckptx"},
            {"name": "SCRATCH", "value": "/scratch/x"},
        ],
    )
    env = PodEnvironment(
        Store(), spec, "127.0.1.1", [], node_name="local", gpus_configured=False, workdir=None,
        volumes_dir=tmp_path,
    )  # fmt: skip
    container = spec["spec"]["containers"][0]
    mounts = env.claim_mounts(container)
    claim, data = tmp_path / "ml" / "checkpoints", tmp_path / "ml" / "datasets" / "digits"
    assert mounts == [("/mnt/ckpt/data", str(data)), ("/mnt/ckpt", str(claim))]  # the longest first
    assert claim.is_dir() and data.is_dir()
    _, own = env.environment(container)
    assert own["CHECKPOINT_DIR"] == f"{claim}/dag/task"
    assert own["DATA"] == f"{data}/train.csv"
    assert own["OTHER"] == "/mnt/ckptx"  # another path that only starts alike
    assert own["SCRATCH"] == "/scratch/x"  # not a claim: the host's path as it is
    assert host_path("--model_dir=/mnt/ckpt/m", mounts) == f"--model_dir={claim}/m"
    assert host_path("/mnt/ckpt", mounts) == str(claim)
    assert host_path("-c", mounts) == "-c" and host_path("print('/mnt/ckpt')", mounts) == "print('/mnt/ckpt')"


def test_without_a_volumes_directory_nothing_is_rewritten() -> None:
    spec = pod(
        [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "c"}}],
        [{"name": "ckpt", "mountPath": "/mnt/ckpt"}],
        [{"name": "CHECKPOINT_DIR", "value": "/mnt/ckpt/x"}],
    )
    env = PodEnvironment(
        Store(), spec, "127.0.1.1", [], node_name="local", gpus_configured=False, workdir=None
    )
    assert env.claim_mounts(spec["spec"]["containers"][0]) == []
    assert env.environment(spec["spec"]["containers"][0])[1]["CHECKPOINT_DIR"] == "/mnt/ckpt/x"
