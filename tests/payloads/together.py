"""Every task exits 0 at EXIT_AT (epoch seconds); the tracked ones LATE_S later: an untracked ps
and the workers ending in the same moment (issue #15, item 23)."""
import os
import time

late = float(os.environ.get("LATE_S", "0.3")) if os.environ["DTF_TASK_JOB_NAME"] != "ps" else 0.0
time.sleep(max(0.0, float(os.environ["EXIT_AT"]) + late - time.time()))
print(f"{os.environ['DTF_TASK_JOB_NAME']}:{os.environ['DTF_TASK_INDEX']} exits now", flush=True)
