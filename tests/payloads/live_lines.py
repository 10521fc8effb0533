"""Payload: worker:0 prints numbered lines with the time it printed them (no flush: the executor makes
Python unbuffered) and ends without a newline; worker:1 fails with a traceback after worker:0 is done."""
import os
import sys
import time

index = int(os.environ["DTF_TASK_INDEX"])
if index == 0:
    for i in range(8):
        print(f"line {i} printed at {time.time():.3f}")
        time.sleep(0.5)
    print("the end without a newline", end="")
    sys.exit(0)
time.sleep(7)
print("worker:1 about to fail", flush=True)
time.sleep(0.3)  # stdout and stderr are two pipes: lines written within moments of each other may swap
print("Traceback (most recent call last):\nValueError: loss is NaN at step 7", file=sys.stderr)
sys.exit(1)
