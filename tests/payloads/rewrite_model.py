"""A program that rewrites its model file in place, as many Keras-style scripts do (issue #29).

The chief writes a 32 MiB model.bin (a step number, a body, and the SHA-256 of both at its end),
leaves it alone for a while, then keeps rewriting it in place without a pause. In attempt 1 the
worker fails on purpose while the chief is rewriting; attempt 2's chief must find a whole model
in its output (restored from HDFS), says which step, writes its own and exits 0.
"""

import hashlib
import json
import os
import sys
import time
from pathlib import Path

SIZE = int(os.environ.get("MODEL_MB", "32")) << 20
CHUNK = 4 << 20
out = Path(os.environ["DTF_OUTPUT_PATH"])
attempt = int(os.environ["TONY_ATTEMPT"])
kind = os.environ["JOB_NAME"]
model = out / "model.bin"


def write(step: int) -> None:
    body = step.to_bytes(8, "big") + bytes([step % 251]) * (SIZE - 40)
    with model.open("wb") as fh:  # in place: truncated, then written piece by piece
        for i in range(0, len(body), CHUNK):
            fh.write(body[i:i + CHUNK])
            fh.flush()
            time.sleep(0.02)
        fh.write(hashlib.sha256(body).digest())


def restored() -> int | None:
    if not model.exists():
        return None
    data = model.read_bytes()
    if len(data) != SIZE or hashlib.sha256(data[:-32]).digest() != data[-32:]:
        print(f"{kind}: attempt {attempt} restored a TORN model.bin ({len(data)} bytes)", file=sys.stderr)
        sys.exit(5)
    return int.from_bytes(data[:8], "big")


if kind == "worker":
    if attempt == 1:
        time.sleep(float(os.environ.get("FAIL_AFTER_S", "16")))
        print("worker: failing attempt 1 on purpose", file=sys.stderr)
        sys.exit(3)
    time.sleep(3600)  # untracked: stopped once the chief is done

step = restored()
print(f"chief: attempt {attempt} restored step {step}", flush=True)
if attempt == 1:
    write(1)
    time.sleep(8)  # left alone: whole, so it may be published
    n = 2
    while True:  # then rewritten in place without a pause until the attempt is stopped
        write(n)
        n += 1
if step is None:
    print("chief: nothing to resume from", file=sys.stderr)
    sys.exit(6)
write(1000 + step)
(out / "metrics.json").write_text(json.dumps({"attempt": attempt, "restored_step": step}))
print("chief: done", flush=True)
