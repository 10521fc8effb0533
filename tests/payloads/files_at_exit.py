"""A program that writes its results just before it exits 0, as batch predictions do (issue #50 item 4/5).

It sleeps WAIT_S, then writes COUNT small shards (`part-00000` …, each holding its own name), then LAST_KB of
`model.bin` (if LAST_KB > 0), then an empty `_SUCCESS`, and exits 0 at once: everything reaches HDFS only
through the final push.
"""

import os
import time
from pathlib import Path

out = Path(os.environ["DTF_OUTPUT_PATH"])
time.sleep(float(os.environ.get("WAIT_S", "0")))
shards = out / "shards"
shards.mkdir(parents=True, exist_ok=True)
for n in range(int(os.environ.get("COUNT", "300"))):
    (shards / f"part-{n:05d}").write_text(f"part-{n:05d}\n")
last_kb = int(os.environ.get("LAST_KB", "0"))
if last_kb:
    (out / "model.bin").write_bytes(b"m" * (last_kb << 10))
(out / "_SUCCESS").write_bytes(b"")
print("wrote everything; exiting 0", flush=True)
