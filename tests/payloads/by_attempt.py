"""Payload: workers fail in attempt 1 and succeed in attempt 2 (reading the attempt number); ps serves."""
import os
import sys
import time

me = os.environ["DTF_TASK_JOB_NAME"]
attempt = int(os.environ["TONY_ATTEMPT"])
print(f"{me}:{os.environ['DTF_TASK_INDEX']} attempt {attempt}", flush=True)
if me == "ps":
    time.sleep(600)  # a parameter server serves until the AM stops it
if attempt == 1:
    print("simulated crash in attempt 1", file=sys.stderr)
    sys.exit(3)
