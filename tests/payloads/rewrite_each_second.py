"""A Keras-style program that rewrites its 48 MiB model in place about every second (issue #40 item 10).

Attempt 1 rewrites it for RUN_S seconds, PAUSE_S (default 1.2) apart (or one rewrite starting every PERIOD_S),
then fails right after a rewrite (so the final push has no quiet version to publish: what HDFS holds came from
the rounds while it ran); its last stderr line names the last step it saved. Attempt 2 says which step it
restored (RESUMED-FROM n; 0: nothing whole was there) and exits 0. With PERIOD_S at most the mirror's old quiet
time (1 s) the file is never left alone that long (issue #50).
"""

import hashlib
import os
import sys
import time
from pathlib import Path

SIZE = 48 << 20
out = Path(os.environ["DTF_OUTPUT_PATH"])
attempt = int(os.environ["TONY_ATTEMPT"])
model = out / "model.keras"


def write(step: int) -> None:
    body = step.to_bytes(8, "big") + bytes([step % 251]) * (SIZE - 40)
    with model.open("wb") as fh:  # in place: truncated, then written
        fh.write(body)
        fh.write(hashlib.sha256(body).digest())


def restored() -> int:
    if not model.exists():
        return 0
    data = model.read_bytes()
    if len(data) != SIZE or hashlib.sha256(data[:-32]).digest() != data[-32:]:
        print(f"attempt {attempt}: model.keras is TORN ({len(data)} bytes)", file=sys.stderr)
        sys.exit(5)
    return int.from_bytes(data[:8], "big")


step = restored()
print(f"attempt {attempt}: RESUMED-FROM {step}", flush=True)
(out / "resumed.txt").write_text(f"{attempt} {step}\n")
if attempt == 1:
    began = time.time()
    deadline = began + float(os.environ.get("RUN_S", "21"))
    period = float(os.environ.get("PERIOD_S", "0"))
    while True:
        step += 1
        write(step)
        if time.time() > deadline:
            print(f"attempt 1: failing right after writing step {step}", file=sys.stderr)
            sys.exit(1)
        if period:  # the next rewrite starts on the period's tick: the file is never left alone a whole period
            time.sleep(max(0.0, began + period * step - time.time()))
        else:
            time.sleep(float(os.environ.get("PAUSE_S", "1.2")))
