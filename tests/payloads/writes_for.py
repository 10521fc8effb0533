"""Payload: write one small checkpoint file into DTF_OUTPUT_PATH every STEP_S seconds for DURATION_S
seconds (`ckpt-<n>`, its number inside), then exit 0: a job that writes to HDFS, through the output
mirror, for longer than its delegation tokens live."""

import os
import time

out = os.environ["DTF_OUTPUT_PATH"]
duration, step = float(os.environ.get("DURATION_S", "360")), float(os.environ.get("STEP_S", "20"))
start, n = time.monotonic(), 0
while time.monotonic() - start < duration:
    with open(os.path.join(out, f"ckpt-{n}"), "w") as f:
        f.write(str(n))
    print(f"wrote ckpt-{n}", flush=True)
    n += 1
    time.sleep(step)
print(f"done: {n} checkpoints", flush=True)
