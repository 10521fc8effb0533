"""Payload: fails in attempt 1, succeeds in attempt 2 (reads the attempt number)."""
import os
import sys

attempt = int(os.environ["TONY_ATTEMPT"])
print(f"{os.environ['DTF_TASK_JOB_NAME']}:{os.environ['DTF_TASK_INDEX']} attempt {attempt}")
if attempt == 1 and os.environ["DTF_TASK_JOB_NAME"] == "worker":
    print("simulated crash in attempt 1", file=sys.stderr)
    sys.exit(3)
