"""A job of STEPS one-second steps on every task that resumes where it stopped (issue #29, preemption).

The chief (worker 0) records the step it reached in `progress.json` of DTF_OUTPUT_PATH every third
step (a checkpoint every few seconds, as training programs save); a later attempt starts from there.
At the end the chief writes `metrics.json` with the attempt and the step it resumed from.
"""

import json
import os
import time
from pathlib import Path

steps = int(os.environ.get("STEPS", "25"))
out = Path(os.environ["DTF_OUTPUT_PATH"])
progress = out / "progress.json"
chief = os.environ.get("IS_CHIEF") == "true"
start = json.loads(progress.read_text())["step"] if progress.exists() else 0
print(f"{os.environ['JOB_NAME']}:{os.environ['TASK_INDEX']} attempt {os.environ['TONY_ATTEMPT']} from step {start}",
      flush=True)
for step in range(start + 1, steps + 1):
    time.sleep(1)
    if chief and step % 3 == 0:
        tmp = progress.with_name("progress.json.tmp")
        tmp.write_text(json.dumps({"step": step}))
        os.replace(tmp, progress)
if chief:
    (out / "metrics.json").write_text(json.dumps({"attempt": int(os.environ["TONY_ATTEMPT"]), "resumed_from": start}))
