"""Digits classifier trained with ParameterServerStrategy (Chief, PS and Worker replicas).

The chief drives training through a ClusterCoordinator and prints the Katib-format metrics;
PS and Worker replicas only run a TensorFlow server and never return on their own: the TFJob's
cleanPodPolicy (Running, the default) stops them once the chief has succeeded.

Without TF_CONFIG there is nobody to coordinate, so it falls back to a single-process run of the
same training step, which is how it is debugged by hand.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from digits_common import (
    SEED,
    Role,
    exit_code,
    load_digits_split,
    parse_args,
    report_epoch,
    report_test_accuracy,
    write_result,
)


def serve(role: Role) -> None:
    """A PS or Worker replica: hosts variables or runs the steps the coordinator schedules."""
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=role.task_type,
        task_index=role.task_index,
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    print(f"{role}: server started", flush=True)
    server.join()


def train(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    role = Role.from_env()
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(SEED)
    data = load_digits_split()
    if role.cluster:
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        strategy: tf.distribute.Strategy = tf.distribute.ParameterServerStrategy(resolver)
        coordinator: Any = tf.distribute.coordinator.ClusterCoordinator(strategy)
    else:
        strategy = tf.distribute.get_strategy()
        coordinator = None
    batch = args.batch_size
    steps_per_epoch = args.steps_per_epoch or len(data.x_train) // batch
    print(f"{role}: {steps_per_epoch} steps per epoch, batch {batch}", flush=True)

    def make_dataset() -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices((data.x_train, data.y_train))
        return ds.shuffle(len(data.x_train), seed=SEED).repeat().batch(batch, drop_remainder=True)

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
        loss_sum = tf.Variable(0.0, trainable=False, dtype=tf.float32)
        correct_sum = tf.Variable(0.0, trainable=False, dtype=tf.float32)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(iterator: Any) -> None:
        def replica_step(x: tf.Tensor, y: tf.Tensor) -> None:
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss = loss_fn(y, logits)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            loss_sum.assign_add(loss)
            correct_sum.assign_add(tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=1), y), tf.float32)))

        x, y = next(iterator)
        strategy.run(replica_step, args=(x, y))

    if coordinator is not None:
        iterator = iter(coordinator.create_per_worker_dataset(lambda: make_dataset()))
    else:
        iterator = iter(make_dataset())

    writer = tf.summary.create_file_writer(args.log_dir) if args.log_dir else None
    result: dict[str, Any] = {}
    for epoch in range(1, args.epochs + 1):
        loss_sum.assign(0.0)
        correct_sum.assign(0.0)
        for _ in range(steps_per_epoch):
            if coordinator is not None:
                coordinator.schedule(step, args=(iterator,))
            else:
                step(iterator)
        if coordinator is not None:
            coordinator.join()
        epoch_loss = float(loss_sum.numpy()) / steps_per_epoch
        accuracy = float(correct_sum.numpy()) / (steps_per_epoch * batch)
        report_epoch(writer, epoch, epoch_loss, accuracy, result)

    report_test_accuracy(model, data, writer, args.epochs, result)
    if args.model_dir:
        # Under ParameterServerStrategy only the chief saves: variables live on the PS tasks.
        os.makedirs(args.model_dir, exist_ok=True)
        model.save(os.path.join(args.model_dir, "model.keras"))
        write_result(args.model_dir, result)
        print(f"model saved to {args.model_dir}", flush=True)
    return result


def main() -> None:
    role = Role.from_env()
    if role.task_type in ("ps", "worker") and role.cluster:
        serve(role)
    else:
        train()


if __name__ == "__main__":
    sys.exit(exit_code(main))
