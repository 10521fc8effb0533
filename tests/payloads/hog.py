"""Holds HOG_MB of resident memory (touched, not just reserved), then sleeps: YARN must kill it."""
import os
import time

block = b"x" * (int(os.environ.get("HOG_MB", "2048")) * 2**20)
print(f"holding {len(block) >> 20} MiB", flush=True)
time.sleep(float(os.environ.get("SLEEP_S", "120")))
