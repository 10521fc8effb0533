"""A custom training loop with ParameterServerStrategy on the digits data set.

The chief coordinates (ClusterCoordinator); workers and parameter servers only
serve (`tf.distribute.Server(...).join()`), so they never exit on their own:
run it with `--tracked chief --untracked worker,ps` and the AM stops them when
the chief is done. The chief checkpoints into the output path every epoch and
resumes from the latest checkpoint on a later attempt.

    python digits_ps.py [--epochs N] [--steps-per-epoch S]
"""

from __future__ import annotations

import os
import tempfile
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

from tony_airflow.examples.digits_data import build_model, load, training_args, write_metrics  # noqa: E402


def serve(resolver) -> None:
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                  task_index=resolver.task_id, protocol="grpc", start=True)
    print(f"{resolver.task_type}:{resolver.task_id} serving", flush=True)
    server.join()


def coordinate(resolver, args) -> None:
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    out = os.environ.get("DTF_OUTPUT_PATH") or tempfile.mkdtemp()
    x, y = load("train")

    def dataset_fn(_context=None):
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2048).repeat().batch(args.batch)

    with strategy.scope():
        model = build_model(keras)
        optimizer = keras.optimizers.Adam(0.01)
        epoch_var = tf.Variable(0, dtype=tf.int64)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=epoch_var)
    manager = tf.train.CheckpointManager(checkpoint, os.path.join(out, "checkpoints"), max_to_keep=2)
    resumed = manager.latest_checkpoint is not None
    if resumed:
        checkpoint.restore(manager.latest_checkpoint)
    print(f"attempt {os.environ.get('TONY_ATTEMPT', '1')}: "
          f"{'resuming at epoch ' + str(int(epoch_var.numpy())) if resumed else 'starting fresh'}", flush=True)

    per_worker = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def train_step(iterator):
        def step(batch_x, batch_y):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(loss_fn(batch_y, model(batch_x, training=True)))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        batch_x, batch_y = next(iterator)
        return strategy.run(step, args=(batch_x, batch_y))

    losses, epochs, started = [], [], time.perf_counter()
    steps = 0
    writer = tf.summary.create_file_writer(os.path.join(out, "tensorboard", "train"))
    for epoch in range(int(epoch_var.numpy()), args.epochs):
        results = [coordinator.schedule(train_step, args=(per_worker,)) for _ in range(args.steps_per_epoch)]
        coordinator.join()
        steps += args.steps_per_epoch
        loss = float(sum(r.fetch() for r in results) / len(results))
        losses.append(loss)
        epochs.append(epoch)
        with writer.as_default():
            tf.summary.scalar("epoch_loss", loss, step=epoch)
        writer.flush()
        epoch_var.assign(epoch + 1)
        manager.save()
        print(f"epoch {epoch} loss {loss:.4f}", flush=True)
        time.sleep(args.sleep_per_epoch)
    elapsed = time.perf_counter() - started
    model.save_weights(os.path.join(out, "model.weights.h5"))
    tx, ty = load("test")
    accuracy = float(tf.reduce_mean(tf.cast(tf.argmax(model(tx), axis=1) == ty, tf.float32)))
    write_metrics(out, "metrics.json", {
        "attempt": int(os.environ.get("TONY_ATTEMPT", "1")), "resumed": resumed, "epochs_run": epochs,
        "losses": losses, "test_accuracy": accuracy, "steps": steps,
        "steps_per_second": steps / elapsed if elapsed else 0.0,
    })
    # the output as the job named it (hdfs://...), not the container's local mirror of it
    print(f"test accuracy {accuracy:.4f}; checkpoints and weights in {os.environ.get('DTF_OUTPUT_URI') or out}",
          flush=True)


def main() -> None:
    args = training_args()
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type in ("worker", "ps"):
        serve(resolver)
    else:
        coordinate(resolver, args)


if __name__ == "__main__":
    main()
