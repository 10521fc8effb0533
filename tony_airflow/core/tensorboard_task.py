"""The TensorBoard sidecar's command: TensorBoard on the reserved port, reading the output.

The executor has already mirrored an HDFS output path into a local directory
(and keeps pulling it), so TensorBoard reads a plain local logdir.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    logdir = os.environ.get("DTF_OUTPUT_PATH") or "."
    port = os.environ["TB_PORT"]
    argv = [sys.executable, "-m", "tensorboard.main", "--logdir", logdir, "--port", port,
            "--bind_all", "--reload_interval", "5"]
    os.execv(sys.executable, argv)


if __name__ == "__main__":
    main()
