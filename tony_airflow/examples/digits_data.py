"""What the digits examples share: the data set, the model, the arguments, the metrics file.

The data is scikit-learn's digits (1797 8x8 images); it ships inside
scikit-learn, so nothing is downloaded at run time.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import numpy as np


def digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits (as `load_digits(return_X_y=True)` returns them), read from the file it ships
    without importing scikit-learn: its import is about a second of every process's start, and an elastic
    group's processes all start again after a lost worker (issue 54). Its loader when the file is elsewhere."""
    import importlib.util

    spec = importlib.util.find_spec("sklearn")  # finds the package without running it
    where = list(spec.submodule_search_locations or []) if spec is not None else []
    path = os.path.join(where[0], "datasets", "data", "digits.csv.gz") if where else ""
    if path and os.path.exists(path):
        data = np.loadtxt(path, delimiter=",")
        return data[:, :-1], data[:, -1].astype(int)
    from sklearn.datasets import load_digits

    return load_digits(return_X_y=True)


def load(split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """Features in [0, 1] (64 floats) and labels 0..9; a fixed 80/20 split."""
    input_dir = os.environ.get("DTF_INPUT_PATH", "")
    staged = os.path.join(input_dir, f"digits_{split}.npz") if input_dir else ""
    if staged and os.path.exists(staged):  # prepared into HDFS by an upstream step
        data = np.load(staged)
        print(f"loaded {split} data from {staged}", flush=True)
        return data["x"], data["y"]
    x, y = digits()
    x = (x / 16.0).astype("float32")
    y = y.astype("int64")
    rng = np.random.default_rng(7)
    order = rng.permutation(len(x))
    cut = int(len(x) * 0.8)
    idx = order[:cut] if split == "train" else order[cut:]
    return x[idx], y[idx]


def training_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--steps-per-epoch", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--sleep-per-epoch", type=float, default=0.0)
    parser.add_argument("--no-progress", action="store_true",
                        help="do not report progress to the job (bench.progress_cost measures what it costs)")
    return parser.parse_args()


def progress_module(args: argparse.Namespace):
    """The job's progress helper `tony_progress`, shipped into every task (docs/progress.md); None with
    --no-progress, or by hand outside a task (these examples also run in images without the package)."""
    if args.no_progress:
        return None
    try:
        import tony_progress
    except ImportError:
        return None
    return tony_progress


def build_model(keras):
    """A small dense classifier (64 features -> 10 logits); `keras` is tf_keras."""
    return keras.Sequential([keras.layers.Input(shape=(64,)), keras.layers.Dense(64, activation="relu"),
                             keras.layers.Dense(10)])


def write_npz(directory: str) -> list[str]:
    """Write both splits as .npz files (what a 'prepare data' pipeline step uploads)."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for split in ("train", "test"):
        x, y = load(split)
        path = os.path.join(directory, f"digits_{split}.npz")
        np.savez(path, x=x, y=y)
        paths.append(path)
    return paths


def write_metrics(output_dir: str, name: str, metrics: dict) -> str:
    path = os.path.join(output_dir, name)
    os.makedirs(output_dir, exist_ok=True)
    # A name of its own for the temporary file (two writers never share one), then one rename. Written out
    # here, not imported: an example ships alone (--src-dir) into images without tony-airflow.
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=output_dir)
    os.fchmod(fd, 0o644)  # readable as a file written with open() is, not mkstemp's 0600
    with os.fdopen(fd, "w") as fh:
        json.dump(metrics, fh, indent=2)
    os.replace(tmp, path)
    return path
