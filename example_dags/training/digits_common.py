"""Pieces shared by the digits training programs: arguments, TF_CONFIG, data, metric lines.

The programs run as the container command of TFJob, PyTorchJob and XGBoostJob replicas, so
everything here must work with nothing but scikit-learn and the program's own framework installed
(no Airflow, no provider, no TensorFlow for the PyTorch and XGBoost programs).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

# Keeps replica logs down to the program's own lines; must be set before TensorFlow is imported.
# TF_CPP_MIN_LOG_LEVEL does not reach the oneDNN notice, printed before TensorFlow's logging is set
# up (with a warning that it is): turning oneDNN's custom operations off, which this small model does
# not need, silences both.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

SEED = 1234


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Hyperparameters arrive as ``--key=value`` (the operator's and Katib's convention)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=32, help="per replica")
    parser.add_argument("--learning_rate", type=float, default=0.01)
    parser.add_argument("--hidden_units", type=int, default=64)
    parser.add_argument("--model_dir", default="", help="where the chief (or worker-0) exports the model")
    parser.add_argument("--log_dir", default="", help="TensorBoard summaries")
    parser.add_argument("--steps_per_epoch", type=int, default=0, help="ParameterServerStrategy only")
    return parser.parse_args(argv)


@dataclass(frozen=True)
class Role:
    """This process's place in the job, read from TF_CONFIG (absent: a single local process)."""

    task_type: str
    task_index: int
    cluster: dict[str, list[str]]

    @classmethod
    def from_env(cls) -> Role:
        raw = os.environ.get("TF_CONFIG", "")
        if not raw:
            return cls("worker", 0, {})
        config: dict[str, Any] = json.loads(raw)
        task = config.get("task", {})
        return cls(str(task.get("type", "worker")), int(task.get("index", 0)), config.get("cluster", {}))

    @property
    def is_master(self) -> bool:
        """The replica whose output counts: the chief, or worker-0 when the job has no chief."""
        if self.task_type in ("chief", "master"):
            return True
        has_chief = bool(self.cluster.get("chief") or self.cluster.get("master"))
        return self.task_type == "worker" and self.task_index == 0 and not has_chief

    @property
    def num_workers(self) -> int:
        return max(1, len(self.cluster.get("worker", [])))

    def __str__(self) -> str:
        return f"{self.task_type}-{self.task_index}"


@dataclass(frozen=True)
class Rendezvous:
    """Where a PyTorchJob's or XGBoostJob's replicas meet, from the variables the operator injects.

    training-operator v1.9.4 sets MASTER_ADDR and MASTER_PORT (the master-0 replica's Service and
    port), WORLD_SIZE (all replicas) and RANK (Master 0, Worker i+1) in every replica of both kinds.
    Absent, the program trains alone on a free local port, which is how it is debugged by hand.
    """

    addr: str
    port: int
    world_size: int
    rank: int

    @classmethod
    def from_env(cls) -> Rendezvous:
        if "MASTER_ADDR" not in os.environ:
            return cls("127.0.0.1", 0, 1, 0)
        values = []
        for name in ("MASTER_PORT", "WORLD_SIZE", "RANK"):
            raw = os.environ.get(name, "")
            if not raw.isdigit():
                raise SystemExit(
                    f"MASTER_ADDR is set but {name}={raw!r} is not a non-negative integer: set MASTER_PORT, "
                    f"WORLD_SIZE and RANK too, as the training operator does in a job with a Master replica"
                )
            values.append(int(raw))
        rv = cls(os.environ["MASTER_ADDR"], *values)
        if not 0 <= rv.rank < rv.world_size:
            raise SystemExit(f"RANK={rv.rank} is outside WORLD_SIZE={rv.world_size}")
        return rv

    @property
    def is_master(self) -> bool:
        return self.rank == 0

    def __str__(self) -> str:
        return "master-0" if self.rank == 0 else f"worker-{self.rank - 1}"


@dataclass(frozen=True)
class Digits:
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_digits_split() -> Digits:
    """scikit-learn's bundled 8x8 digits (no download), the same split on every replica."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = (data.data / 16.0).astype("float32")
    y = data.target.astype("int64")
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=SEED, stratify=y)
    return Digits(x_train, y_train, x_test, y_test)


def emit(**values: float | int) -> None:
    """One Katib StdOut-format line (``name=value`` pairs); flushed so live logs show it at once."""
    print(" ".join(f"{k}={_fmt(v)}" for k, v in values.items()), flush=True)


def _fmt(value: float | int) -> str:
    return str(value) if isinstance(value, int) else f"{value:.4f}"


def write_result(model_dir: str, result: dict[str, Any]) -> None:
    """The metrics next to the exported model, so a later validation step can compare models."""
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "metrics.json"), "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2, sort_keys=True)


def report_epoch(writer: Any, epoch: int, loss: float, accuracy: float, result: dict[str, Any]) -> None:
    """The epoch's metric line, its TensorBoard scalars (when summaries are written), the running result."""
    emit(epoch=epoch, loss=loss, accuracy=accuracy)
    if writer is not None:
        import tensorflow as tf

        with writer.as_default():
            tf.summary.scalar("loss", loss, step=epoch)
            tf.summary.scalar("accuracy", accuracy, step=epoch)
        writer.flush()
    result.update(epoch=epoch, loss=loss, accuracy=accuracy)


def report_test_accuracy(model: Any, data: Digits, writer: Any, step: int, result: dict[str, Any]) -> None:
    """Evaluate on the held-out split, print `test_accuracy=...`, and close the summary writer."""
    import tensorflow as tf

    logits = model(data.x_test, training=False)
    test_accuracy = float(
        tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, axis=1), data.y_test), tf.float32))
    )
    emit(test_accuracy=test_accuracy)
    result["test_accuracy"] = test_accuracy
    if writer is not None:
        with writer.as_default():
            tf.summary.scalar("test_accuracy", test_accuracy, step=step)
        writer.close()


# ---- checkpoints (the provider's checkpoint=: CHECKPOINT_DIR and RESUME_FROM in every replica)

_CHECKPOINT_NAME = re.compile(r"^epoch-(\d+)\.(npz|pt)$")


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint file of this training: where (as the replicas address it) and after which epoch."""

    path: str
    epoch: int


def _local(path: str) -> str:
    """A local path from a file:// URI (these programs write to a shared filesystem: a PVC, or a host
    directory on the local cluster); other stores would need their own client (fsspec, boto3...)."""
    return path[len("file://") :] if path.startswith("file://") else path


def checkpoint_to_resume(suffix: str) -> Checkpoint | None:
    """The newest of RESUME_FROM (what the provider knew when it created the job) and the newest
    ``epoch-N.<suffix>`` in CHECKPOINT_DIR: a job that Kueue preempted and resumed, or a replica restarted
    in place, runs its pods again with the same RESUME_FROM, while the directory has the newer ones."""
    found: list[Checkpoint] = []
    resume = os.environ.get("RESUME_FROM", "")
    match = _CHECKPOINT_NAME.match(os.path.basename(resume))
    if match and os.path.exists(_local(resume)):
        found.append(Checkpoint(resume, int(match.group(1))))
    directory = os.environ.get("CHECKPOINT_DIR", "")
    if directory and os.path.isdir(_local(directory)):
        for name in os.listdir(_local(directory)):
            match = _CHECKPOINT_NAME.match(name)
            if match and match.group(2) == suffix:
                found.append(Checkpoint(f"{directory.rstrip('/')}/{name}", int(match.group(1))))
    return max(found, key=lambda c: c.epoch, default=None)


def checkpoint_path(epoch: int, suffix: str) -> Checkpoint | None:
    """Where the checkpoint after ``epoch`` goes (None: the task gave no CHECKPOINT_DIR)."""
    directory = os.environ.get("CHECKPOINT_DIR", "")
    if not directory:
        return None
    os.makedirs(_local(directory), exist_ok=True)
    return Checkpoint(f"{directory.rstrip('/')}/epoch-{epoch:04d}.{suffix}", epoch)


def write_checkpoint(checkpoint: Checkpoint, write: Callable[[str], None]) -> None:
    """``write(path)`` into a temporary name, then the rename (a reader never sees half a file), then
    the line the provider reads the newest checkpoint from."""
    target = _local(checkpoint.path)
    partial = os.path.join(os.path.dirname(target), f".incomplete-{os.getpid()}")
    write(partial)
    os.replace(partial, target)
    print(f"checkpoint saved: {checkpoint.path} epoch={checkpoint.epoch}", flush=True)


def open_checkpoint(checkpoint: Checkpoint) -> str:
    """The local file to load ``checkpoint`` from (and one line saying so)."""
    print(f"resuming from {checkpoint.path} (epoch {checkpoint.epoch})", flush=True)
    return _local(checkpoint.path)


def exit_code(program: Callable[[], object]) -> int:
    """Runs a replica's program: 0 on success, 1 with the traceback on stderr (the pod's exit code
    is what the operator's success and restart rules read)."""
    try:
        program()
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()
        return 1
    return 0
