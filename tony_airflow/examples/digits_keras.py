"""Keras (tf_keras) training with MultiWorkerMirroredStrategy on the digits data set.

Reads only TF_CONFIG and DTF_OUTPUT_PATH, so the same file runs by hand with a
hand-written TF_CONFIG. BackupAndRestore makes a later attempt resume from the
last finished epoch; the chief writes the model, TensorBoard logs and
metrics.json into the output path. In a `ps:1,worker:2` job (the shape of the
first example of docs/submitting.md) the parameter servers have nothing to do for this strategy: they wait
until the AM stops them, and the workers leave them out of their cluster.

    python digits_keras.py [--epochs N] [--batch B] [--sleep-per-epoch S]
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # Keras 3's fit fails under MWMS on TF 2.21
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

from tony_airflow.examples.digits_data import (  # noqa: E402
    build_model,
    load,
    progress_module,
    training_args,
    write_metrics,
)


def is_chief() -> bool:
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    return task.get("type") in (None, "chief") or (
        task.get("type") == "worker" and task.get("index") == 0
        and "chief" not in json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {}))


class EpochLog(keras.callbacks.Callback):
    def __init__(self, sleep: float, steps_per_epoch: int):
        super().__init__()
        self.steps_per_epoch = steps_per_epoch
        self.sleep = sleep
        self.epochs: list[int] = []
        self.losses: list[float] = []
        self.steps = 0
        self.epoch_seconds: list[float] = []
        self.epoch_walls: list[tuple[float, float]] = []  # (begin, end), Unix time: what else ran meanwhile

    def on_epoch_begin(self, epoch, logs=None):
        self._t = time.perf_counter()
        self._wall = time.time()

    def on_epoch_end(self, epoch, logs=None):
        self.epoch_seconds.append(time.perf_counter() - self._t)
        self.epoch_walls.append((self._wall, time.time()))
        self.steps += self.steps_per_epoch
        self.epochs.append(epoch)
        self.losses.append(float(logs["loss"]))
        at = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
        print(f"epoch {epoch} loss {logs['loss']:.4f} accuracy {logs.get('accuracy', 0):.4f} at {at}", flush=True)
        time.sleep(self.sleep)

    def steps_per_second(self, skip_first: bool = False) -> float:
        """Training throughput; skip_first leaves out the first epoch, which also holds graph
        tracing and the wait for the other workers at the first collective (start-up, not speed)."""
        seconds = self.epoch_seconds[1:] if skip_first and len(self.epoch_seconds) > 1 else self.epoch_seconds
        return self.steps_per_epoch * len(seconds) / sum(seconds) if seconds and sum(seconds) else 0.0


def leave_out_parameter_servers() -> bool:
    """True for a `ps` task (it only waits); a worker drops `ps` from TF_CONFIG, which MWMS cannot use."""
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    if (config.get("task") or {}).get("type") == "ps":
        return True
    if "ps" in (config.get("cluster") or {}):
        del config["cluster"]["ps"]
        os.environ["TF_CONFIG"] = json.dumps(config)
    return False


def main() -> None:
    args = training_args()
    if leave_out_parameter_servers():
        print("parameter server: not used by MultiWorkerMirroredStrategy; waiting to be stopped", flush=True)
        while True:
            time.sleep(3600)

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    out = os.environ.get("DTF_OUTPUT_PATH") or tempfile.mkdtemp()
    chief = is_chief()
    x, y = load("train")
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    data = (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2048, seed=1).repeat()
            .batch(args.batch).with_options(options))

    with strategy.scope():
        model = build_model(keras)
        model.compile(optimizer=keras.optimizers.Adam(0.01),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])

    # Every worker saves (Keras needs all of them to); only the chief's copies are kept: the others'
    # go to a directory removed when this process ends.
    scratch = None if chief else tempfile.TemporaryDirectory(prefix="digits-worker-", ignore_cleanup_errors=True)
    own = scratch.name if scratch else out
    backup = os.path.join(out, "backup")  # read by every worker when resuming
    resumed = os.path.isdir(backup) and any(os.scandir(backup))
    print(f"attempt {os.environ.get('TONY_ATTEMPT', '1')}: {'resuming from ' + backup if resumed else 'starting fresh'}",
          flush=True)
    if chief:  # the run's settings, for TensorBoard's HParams dashboard
        from tensorboard.plugins.hparams import api as hparams

        with tf.summary.create_file_writer(os.path.join(own, "tensorboard", "hparams")).as_default():
            hparams.hparams({"learning_rate": 0.01, "batch": args.batch, "epochs": args.epochs},
                            trial_id=f"digits-{os.environ.get('TONY_APPLICATION_ID', 'local')}")
    log = EpochLog(args.sleep_per_epoch, args.steps_per_epoch)
    model.fit(data, epochs=args.epochs, steps_per_epoch=args.steps_per_epoch, verbose=0, callbacks=[
        keras.callbacks.BackupAndRestore(backup_dir=backup),
        keras.callbacks.TensorBoard(log_dir=os.path.join(own, "tensorboard"), update_freq="epoch"),
        log,
        *([progress.KerasCallback()] if (progress := progress_module(args)) else []),  # docs/progress.md
    ])
    model.save(os.path.join(own, "model.keras"))
    if chief:
        # a plain forward pass: model.evaluate would be a collective op needing every worker
        tx, ty = load("test")
        accuracy = float((tf.argmax(model(tx, training=False), axis=1).numpy() == ty).mean())
        write_metrics(out, "metrics.json", {
            "attempt": int(os.environ.get("TONY_ATTEMPT", "1")), "resumed": resumed,
            "epochs_run": log.epochs, "losses": log.losses, "test_accuracy": float(accuracy),
            "steps": log.steps, "steps_per_second": log.steps_per_second(),
            "steady_steps_per_second": log.steps_per_second(skip_first=True),
            "epoch_seconds": [round(t, 3) for t in log.epoch_seconds],
            "epoch_walls": [[round(b, 3), round(e, 3)] for b, e in log.epoch_walls],
            "workers": strategy.num_replicas_in_sync,
        })
        # the output as the job named it (hdfs://...), not the container's local mirror of it
        print(f"test accuracy {accuracy:.4f}; model written to {os.environ.get('DTF_OUTPUT_URI') or out}", flush=True)


if __name__ == "__main__":
    main()
