"""Payload: a different worker fails first in each attempt (worker:1 with 3, then worker:0 with 4)."""
import os
import sys
import time

index, attempt = int(os.environ["DTF_TASK_INDEX"]), int(os.environ["TONY_ATTEMPT"])
failing = {1: (1, 3), 2: (0, 4)}.get(attempt)
ballast = bytearray(64 * 2**20)  # 64 MiB resident, so the sampled peak memory shows
print(f"worker:{index} attempt {attempt} starts; DB_PASSWORD as given: {os.environ.get('DB_PASSWORD') == 'hunter2'}",
      flush=True)
if failing and failing[0] == index:
    time.sleep(2)
    print(f"worker:{index} breaks in attempt {attempt}: simulated data error", file=sys.stderr, flush=True)
    sys.exit(failing[1])
time.sleep(60)  # the other worker is still busy when the first one fails
