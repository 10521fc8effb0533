"""Payload: worker:1 fails with exit code 1 after a line on stderr; the others succeed; ps serves."""
import os
import sys
import time

me, index = os.environ["DTF_TASK_JOB_NAME"], int(os.environ["DTF_TASK_INDEX"])
if me == "ps":
    time.sleep(600)
if (me, index) == ("worker", 1):
    print("Traceback (most recent call last):\nValueError: loss is NaN at step 7", file=sys.stderr)
    sys.exit(1)
time.sleep(float(os.environ.get("OTHERS_SLEEP", "1")))
