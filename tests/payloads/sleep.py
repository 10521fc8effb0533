"""Payload: sleeps SLEEP_S seconds (default 600), or exits early for the type in EXIT_EARLY.
IGNORE_SIGTERM=1: SIGTERM does not end it, as it does not end TensorFlow's MultiWorkerMirroredStrategy workers."""
import os
import signal
import sys
import time

me = os.environ["DTF_TASK_JOB_NAME"]
if os.environ.get("IGNORE_SIGTERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.environ.get("EXIT_EARLY") == me:
    time.sleep(1)
    print(f"{me} dies early", file=sys.stderr)
    sys.exit(int(os.environ.get("EXIT_CODE", "0")))
seconds = float(os.environ.get("SLEEP_S", "600"))
print(f"{me} sleeping {seconds:.0f} s")
for second in range(int(seconds)):
    time.sleep(1)
    if os.environ.get("TICK"):
        print(f"{me} slept {second + 1} s")
time.sleep(seconds - int(seconds))
