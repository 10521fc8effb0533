"""Run a command (the rest of argv) with a 32 MiB file beside its output, rewritten in place every few
seconds by the chief: its pushes take long enough that a host can be lost in the middle of one (#29).

The file ends with the SHA-256 of the rest, so a torn copy in HDFS is told at once.
"""

import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

SIZE = 32 << 20
PIECE = 4 << 20


def keep_rewriting(path: Path) -> None:
    step = 0
    while True:
        step += 1
        body = step.to_bytes(8, "big") + bytes([step % 251]) * (SIZE - 40)
        with path.open("wb") as fh:
            for i in range(0, len(body), PIECE):
                fh.write(body[i:i + PIECE])
            fh.write(hashlib.sha256(body).digest())
        time.sleep(2.5)


if os.environ.get("IS_CHIEF") == "true":
    target = Path(os.environ["DTF_OUTPUT_PATH"]) / "ballast.bin"
    threading.Thread(target=keep_rewriting, args=(target,), daemon=True).start()
sys.exit(subprocess.call(sys.argv[1:]))
