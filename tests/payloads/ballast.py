"""Run a command (the rest of argv) with a 32 MiB file beside its output, rewritten in place every few
seconds by the chief: its pushes take long enough that a host can be lost in the middle of one (#29).

The file ends with the SHA-256 of the rest, so a torn copy in HDFS is told at once. When the command ends, the
rewriting finishes the copy under way before this exits, as a program that means its output to be whole does: a
copy cut off by the interpreter's exit would be the program's own torn file, and a clean exit publishes everything
(a run on the 3-host cluster left 16 of the 32 MiB in HDFS after exit 0).
"""

import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

SIZE = 32 << 20
PIECE = 4 << 20


def keep_rewriting(path: Path, stop: threading.Event) -> None:
    step = 0
    while not stop.is_set():
        step += 1
        body = step.to_bytes(8, "big") + bytes([step % 251]) * (SIZE - 40)
        with path.open("wb") as fh:
            for i in range(0, len(body), PIECE):
                fh.write(body[i:i + PIECE])
            fh.write(hashlib.sha256(body).digest())
        stop.wait(2.5)


stop = threading.Event()
rewriter = None
if os.environ.get("IS_CHIEF") == "true":
    target = Path(os.environ["DTF_OUTPUT_PATH"]) / "ballast.bin"
    rewriter = threading.Thread(target=keep_rewriting, args=(target, stop), daemon=True)
    rewriter.start()
code = subprocess.call(sys.argv[1:])
stop.set()
if rewriter is not None:
    rewriter.join()
sys.exit(code)
