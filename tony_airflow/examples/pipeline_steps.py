"""The non-training steps of the example pipelines (Airflow, Azkaban, Oozie): prepare, evaluate, report.

    python3 -m tony_airflow.examples.pipeline_steps prepare hdfs:///tmp/run1
    python3 -m tony_airflow.examples.pipeline_steps report KEY=VALUE ...
"""

from __future__ import annotations

import sys
import tempfile
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from tony_airflow.examples.digits_data import write_npz
from tony_airflow.yarn.hdfs import hdfs_path, webhdfs

if TYPE_CHECKING:
    from fsspec.implementations.webhdfs import WebHDFS


def prepare(run_dir: str, fs: WebHDFS | None = None) -> dict[str, str]:
    """Write the digits train/test split as .npz into `run_dir`/data on HDFS (replacing an earlier run).

    `fs`: the HDFS to write to (an Airflow connection's); default: the cluster's, as this process is."""
    fs, root = fs or webhdfs(uri=_hdfs_uri(run_dir)), hdfs_path(run_dir).rstrip("/")
    if fs.exists(root):
        fs.rm(root, recursive=True)
    with tempfile.TemporaryDirectory() as local:
        for path in write_npz(local):
            fs.put(path, f"{root}/data/{path.rsplit('/', 1)[1]}")
    authority = urlparse(run_dir).netloc if run_dir.startswith("hdfs:") else ""  # kept: another nameservice's
    return {"input": f"hdfs://{authority}{root}/data", "output": f"hdfs://{authority}{root}/model"}


def _hdfs_uri(path: str) -> str | None:
    return path if path.startswith("hdfs:") else None


def evaluate(input_dir: str, output_dir: str, fs: WebHDFS | None = None) -> dict[str, float]:
    """Load the trained model from `output_dir` and score it on the held-out split in `input_dir`."""
    import os

    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    import numpy as np
    import tf_keras as keras

    fs = fs or webhdfs(uri=_hdfs_uri(output_dir))
    with tempfile.TemporaryDirectory() as local:
        fs.get(f"{hdfs_path(output_dir)}/model.keras", f"{local}/model.keras")
        fs.get(f"{hdfs_path(input_dir)}/digits_test.npz", f"{local}/test.npz")
        model = keras.models.load_model(f"{local}/model.keras")
        data = np.load(f"{local}/test.npz")
        predicted = np.argmax(model.predict(data["x"], verbose=0), axis=1)
    accuracy = float((predicted == data["y"]).mean())
    print(f"evaluated {output_dir}/model.keras on {len(data['y'])} held-out digits: accuracy {accuracy:.4f}")
    return {"accuracy": accuracy, "examples": int(len(data["y"]))}


def report(pairs: list[str]) -> None:
    for pair in pairs:
        key, _, value = pair.partition("=")
        print(f"{key:>16}: {value}")


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "prepare":
        for key, value in prepare(argv[1]).items():
            print(f"{key}={value}")
        return 0
    if argv and argv[0] == "report":
        report(argv[1:])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
