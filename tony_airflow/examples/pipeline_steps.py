"""The non-training steps of the example pipelines (Airflow, Azkaban, Oozie): prepare and report.

    python3 -m tony_airflow.examples.pipeline_steps prepare hdfs:///tmp/run1
    python3 -m tony_airflow.examples.pipeline_steps report KEY=VALUE ...
"""

from __future__ import annotations

import sys
import tempfile
from typing import TYPE_CHECKING

from tony_airflow.examples.digits_data import write_npz
from tony_airflow.yarn.hdfs import hdfs_path, webhdfs

if TYPE_CHECKING:
    from fsspec.implementations.webhdfs import WebHDFS


def prepare(run_dir: str, fs: WebHDFS | None = None) -> dict[str, str]:
    """Write the digits train/test split as .npz into `run_dir`/data on HDFS (replacing an earlier run).

    `fs`: the HDFS to write to (an Airflow connection's); default: the cluster's, as this process is."""
    fs, root = fs or webhdfs(), hdfs_path(run_dir).rstrip("/")
    if fs.exists(root):
        fs.rm(root, recursive=True)
    with tempfile.TemporaryDirectory() as local:
        for path in write_npz(local):
            fs.put(path, f"{root}/data/{path.rsplit('/', 1)[1]}")
    return {"input": f"hdfs://{root}/data", "output": f"hdfs://{root}/model"}


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
