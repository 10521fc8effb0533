"""A writer that pauses mid-file with the file open, as a save waiting on the network, the GPU or a parameter
server does (issue #50 item 2), and an attempt that fails while it is paused.

The chief rewrites `model.bin` in place: it opens it (truncated), writes the first half, sleeps PAUSE_S (3 s)
with the file open, writes the rest and closes it, VERSIONS times; then it writes the first half of one more
version and stays paused until it is stopped. Every version carries its own length and SHA-256
(`length(8) step(8) body sha256(32)`), so a half-written file is told exactly. In attempt 1 the worker fails
on purpose FAIL_AFTER_S seconds in, while the chief is paused. Attempt 2's chief checks what it restored
(exit 5 and one line when it is half-written), writes `restored.json` (the attempt, the step restored, 0 for
none) and one whole version of its own, and exits 0.
"""

import hashlib
import json
import os
import sys
import time
from pathlib import Path

SIZE = int(os.environ.get("BODY_KB", "1024")) << 10
PAUSE_S = float(os.environ.get("PAUSE_S", "3"))
out = Path(os.environ["DTF_OUTPUT_PATH"])
attempt = int(os.environ["TONY_ATTEMPT"])
kind = os.environ["JOB_NAME"]
model = out / "model.bin"


def version(step: int) -> bytes:
    body = step.to_bytes(8, "big") + bytes([step % 251]) * SIZE
    whole = (8 + len(body) + 32).to_bytes(8, "big") + body
    return whole + hashlib.sha256(whole).digest()


def restored() -> int:
    if not model.exists():
        return 0
    data = model.read_bytes()
    if (len(data) < 48 or int.from_bytes(data[:8], "big") != len(data)
            or hashlib.sha256(data[:-32]).digest() != data[-32:]):
        print(f"{kind}: attempt {attempt} restored a HALF-WRITTEN model.bin ({len(data)} bytes)", file=sys.stderr)
        sys.exit(5)
    return int.from_bytes(data[8:16], "big")


if kind == "worker":
    if attempt == 1:
        time.sleep(float(os.environ.get("FAIL_AFTER_S", "25")))
        print("worker: failing attempt 1 on purpose while the chief is paused", file=sys.stderr)
        sys.exit(3)
    time.sleep(3600)  # untracked: stopped once the chief is done

step = restored()
print(f"chief: attempt {attempt} restored step {step}", flush=True)
if attempt == 1:
    for n in range(1, int(os.environ.get("VERSIONS", "4")) + 2):
        data = version(n)
        with model.open("wb") as fh:  # in place, the file open the whole time
            fh.write(data[:len(data) // 2])
            fh.flush()
            print(f"chief: step {n} half written, paused", flush=True)
            if n > int(os.environ.get("VERSIONS", "4")):
                time.sleep(3600)  # the last one stays half-written: the attempt fails meanwhile
            time.sleep(PAUSE_S)
            fh.write(data[len(data) // 2:])
        print(f"chief: step {n} closed", flush=True)
        time.sleep(0.2)
model.write_bytes(version(1000 + step))
(out / "restored.json").write_text(json.dumps({"attempt": attempt, "restored_step": step}))
print("chief: done", flush=True)
