"""Distributed training of a digits classifier with MultiWorkerMirroredStrategy.

Run as the command of every Worker (and Chief) replica of a TFJob; TF_CONFIG tells each process its
peers. Without TF_CONFIG it trains alone, which is how it is debugged by hand.

Keras 3 ``model.fit`` does not work under MultiWorkerMirroredStrategy (keras-team/keras#20585), so
the loop is written with ``strategy.run`` / ``strategy.reduce`` around Keras layers and optimizer.

Output (Katib StdOut format, from every worker so that any replica's log tells the story):
``epoch=N loss=... accuracy=...`` per epoch and ``test_accuracy=...`` at the end. The workers leave
together (:func:`leave_together`), so a successful run logs no coordination error.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from typing import Any

from digits_common import (
    Role,
    checkpoint_path,
    checkpoint_to_resume,
    exit_code,
    load_digits_split,
    open_checkpoint,
    parse_args,
    report_epoch,
    report_test_accuracy,
    write_checkpoint,
    write_result,
)


def train(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    role = Role.from_env()

    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(1234)
    # The strategy must exist before any other TensorFlow op runs in this process.
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    replicas = strategy.num_replicas_in_sync
    global_batch = args.batch_size * replicas
    print(f"{role}: {replicas} replica(s) in sync, global batch {global_batch}", flush=True)

    data = load_digits_split()

    def make_dataset(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices((data.x_train, data.y_train))
        # Each worker reads its own share of the examples: in-memory data cannot be sharded by file.
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        ds = ds.shuffle(len(data.x_train), seed=1234, reshuffle_each_iteration=True)
        # drop_remainder keeps every worker on the same number of steps, so no collective waits forever.
        return ds.batch(ctx.get_per_replica_batch_size(global_batch), drop_remainder=True).prefetch(2)

    dataset = strategy.distribute_datasets_from_function(make_dataset)

    with strategy.scope():
        model = keras.Sequential(
            [
                keras.Input(shape=(64,)),
                keras.layers.Dense(args.hidden_units, activation="relu"),
                keras.layers.Dense(args.hidden_units, activation="relu"),
                keras.layers.Dense(10),
            ]
        )
        optimizer = keras.optimizers.Adam(learning_rate=args.learning_rate)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def step(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            per_example = loss_fn(y, logits)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=1), y), tf.float32))
        return loss, correct

    @tf.function
    def distributed_step(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        loss, correct = strategy.run(step, args=(x, y))
        return (
            strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None),
            strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None),
        )

    # checkpoint=: every worker starts from the newest checkpoint (the weights are mirrored, so all
    # load the same file); the master writes one after every epoch and says so in its log.
    first = resume(model, optimizer, strategy) + 1
    writer = tf.summary.create_file_writer(args.log_dir) if args.log_dir and role.is_master else None
    result: dict[str, Any] = {}
    for epoch in range(first, args.epochs + 1):
        total_loss, total_correct, steps = 0.0, 0.0, 0
        for x, y in dataset:
            loss, correct = distributed_step(x, y)
            total_loss += float(loss)
            total_correct += float(correct)
            steps += 1
        epoch_loss = total_loss / max(steps, 1)
        accuracy = total_correct / max(steps * global_batch, 1)
        report_epoch(writer, epoch, epoch_loss, accuracy, result)
        if role.is_master:
            save_checkpoint(model, optimizer, epoch)

    # Weights are mirrored, so every worker evaluates the same model locally: no collective needed.
    report_test_accuracy(model, data, writer, args.epochs, result)

    save(model, args.model_dir, role, result)
    leave_together(role)
    return result


def _optimizer_state(optimizer: Any) -> list[Any]:
    return list(optimizer.variables)


def save_checkpoint(model: Any, optimizer: Any, epoch: int) -> None:
    """The weights and the optimizer's state after ``epoch``, as numpy arrays (read from this worker's
    copy of the mirrored variables: no collective, so only the master writes)."""
    target = checkpoint_path(epoch, "npz")
    if target is None:
        return
    import numpy as np

    weights = model.get_weights()
    state = [v.numpy() for v in _optimizer_state(optimizer)]

    def write(path: str) -> None:
        with open(path, "wb") as fh:
            np.savez(fh, *weights, *state, n_weights=len(weights))

    write_checkpoint(target, write)


def resume(model: Any, optimizer: Any, strategy: Any) -> int:
    """Load the newest checkpoint into the model and the optimizer; the epoch it was written after
    (0: none, start from the beginning)."""
    found = checkpoint_to_resume("npz")
    if found is None:
        return 0
    import numpy as np

    with np.load(open_checkpoint(found)) as data:
        arrays = [data[f"arr_{i}"] for i in range(len(data.files) - 1)]
        count = int(data["n_weights"])
    with strategy.scope():
        model.set_weights(arrays[:count])
        optimizer.build(model.trainable_variables)
        for variable, value in zip(_optimizer_state(optimizer), arrays[count:], strict=True):
            variable.assign(value)
    return found.epoch


# Generous: a worker may still be saving its copy of the model when the others arrive.
BARRIER_TIMEOUT_MS = 300_000
LEAVE_GRACE_S = 2.0


def leave_together(role: Role) -> None:
    """End the run with no worker logging a coordination error.

    Every worker sends heartbeats to the coordination service, which runs in the leader (the
    chief, else worker-0). A worker still running after the leader exited logs "Failed to send RPC
    to coordination service" on its next heartbeat, in a run that succeeded. So all wait at a barrier,
    then the others leave first (at once: no heartbeat in between) and the leader last, once each
    has said it is leaving. Every worker ends with ``os._exit(0)``: only a run in a cluster gets here,
    and nothing is left to do but the interpreter's teardown.
    """
    if not role.cluster:
        return
    from tensorflow.python.eager import context

    ctx = context.context()
    ctx.wait_at_barrier("digits-finished", BARRIER_TIMEOUT_MS)
    if not role.is_master:
        ctx.set_config_key_value(f"digits-left/{role}", "1")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # the interpreter's slow teardown would leave the heartbeat thread running
    for task_type in ("chief", "worker"):
        for index in range(len(role.cluster.get(task_type, []))):
            other = Role(task_type, index, role.cluster)
            if other.is_master:
                continue
            ctx.get_config_key_value(f"digits-left/{other}", BARRIER_TIMEOUT_MS)
    # The leader hosts the coordination service. A worker that said it is leaving may still be a moment
    # from its exit, and a heartbeat it sends after the service is gone is an error in its log (seen at
    # load 13 when the leader left at once); a service still up past its heartbeat timeout (seconds)
    # logs the departed workers as unhealthy instead (seen when the leader's interpreter teardown was
    # slow on a busy core). So the leader gives the others LEAVE_GRACE_S, far inside that timeout, and
    # leaves as they did: everything is written (the model, the result, the summary writer closed).
    time.sleep(LEAVE_GRACE_S)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def save(model: Any, model_dir: str, role: Role, result: dict[str, Any]) -> None:
    """Every worker saves: saving may run collective ops, and a worker that skips it hangs the rest.

    Only the master's copy is kept; the others write into a temporary directory that is removed.
    """
    if not model_dir:
        return
    target = model_dir if role.is_master else tempfile.mkdtemp(prefix=f"digits-{role}-")
    os.makedirs(target, exist_ok=True)
    model.save(os.path.join(target, "model.keras"))
    if role.is_master:
        write_result(target, result)
        print(f"model saved to {target}", flush=True)
    else:
        shutil.rmtree(target, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(exit_code(train))
