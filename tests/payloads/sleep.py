"""Payload: sleeps SLEEP_S seconds (default 600), or exits early for the type in EXIT_EARLY."""
import os
import sys
import time

me = os.environ["DTF_TASK_JOB_NAME"]
if os.environ.get("EXIT_EARLY") == me:
    time.sleep(1)
    print(f"{me} dies early", file=sys.stderr)
    sys.exit(int(os.environ.get("EXIT_CODE", "0")))
time.sleep(float(os.environ.get("SLEEP_S", "600")))
