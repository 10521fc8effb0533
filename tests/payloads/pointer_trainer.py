"""A trainer without TensorFlow that saves as PyTorch users and hand-written programs do (issue #40):
each step writes `ckpt/ckpt-N.data` and `ckpt/ckpt-N.index` in place, then the pointer `ckpt/checkpoint`
by rename, and drops the checkpoint before the one it keeps. A retry restores the checkpoint the pointer
names and checks it is whole and of one save (exit 5 and one line when not).

Switches (environment):
- STEPS (default 30), STEP_S (default 1.0): how many steps in all, the time each takes.
- CUT_ATTEMPT=N: in attempt N, after the first step, the next checkpoint's data and index are written
  but not its pointer; the attempt fails 3 s later (cut between a checkpoint's files and its pointer).
- STOP_ATTEMPT=N: in attempt N, the first checkpoint is saved again, its data left quiet for 1.5 s, then
  its index and pointer written, and the attempt fails 0.9 s later (stopped right after a save).
- FAIL_AFTER_S=S (with FAIL_ATTEMPT, default 1): that attempt fails by itself right after its first save past S
  seconds of training; its last stderr line names that save (issue #50: saves every 0.4 s are never quiet).
An evaluator (JOB_NAME=evaluator) writes `eval/metrics.json` with its attempt and the attempt of the
metrics it found in its output (pulled from HDFS), then waits to be stopped, or exits 0 in the last attempt.
"""

import hashlib
import json
import os
import sys
import time
from pathlib import Path

out = Path(os.environ["DTF_OUTPUT_PATH"])
attempt = int(os.environ["TONY_ATTEMPT"])
kind = os.environ["JOB_NAME"]
steps, step_s = int(os.environ.get("STEPS", "30")), float(os.environ.get("STEP_S", "1.0"))
ckpt = out / "ckpt"
KEEP = 2

if kind == "evaluator":
    metrics = out / "eval" / "metrics.json"
    found = json.loads(metrics.read_text())["attempt"] if metrics.exists() else None
    metrics.parent.mkdir(parents=True, exist_ok=True)
    metrics.write_text(json.dumps({"attempt": attempt, "found": found}))
    print(f"evaluator: attempt {attempt} found the metrics of attempt {found}", flush=True)
    if attempt < int(os.environ.get("LAST_ATTEMPT", "3")):
        time.sleep(3600)  # stopped when the chief's attempt fails
    sys.exit(0)


def save(n: int, data_quiet_s: float = 0.0, pointer: bool = True) -> None:
    tag = f"a{attempt}-{n}".encode()
    data = tag + b"|" + bytes([n % 251]) * (256 << 10)
    ckpt.mkdir(parents=True, exist_ok=True)
    with (ckpt / f"ckpt-{n}.data").open("wb") as fh:  # in place, as torch.save does
        fh.write(data)
    time.sleep(data_quiet_s)
    with (ckpt / f"ckpt-{n}.index").open("wb") as fh:
        fh.write(tag + b"|" + hashlib.sha256(data).hexdigest().encode())
    if pointer:
        tmp = ckpt / ".checkpoint.tmp"
        tmp.write_text(f'model_checkpoint_path: "ckpt-{n}"\n')
        os.replace(tmp, ckpt / "checkpoint")
        for old in ckpt.glob(f"ckpt-{n - KEEP}.*"):
            old.unlink()


def restore() -> int | None:
    pointer = ckpt / "checkpoint"
    if not pointer.exists():
        return None
    n = int(pointer.read_text().split('"')[1].split("-")[1])
    try:
        data = (ckpt / f"ckpt-{n}.data").read_bytes()
        index = (ckpt / f"ckpt-{n}.index").read_bytes()
    except FileNotFoundError as exc:
        print(f"restore: the pointer names ckpt-{n}, whose file is missing: {exc}", file=sys.stderr)
        sys.exit(5)
    tag, digest = index.split(b"|", 1)
    if data.split(b"|", 1)[0] != tag or hashlib.sha256(data).hexdigest().encode() != digest:
        print(f"restore: ckpt-{n} is MIXED or torn: data of {data.split(b'|', 1)[0]!r}, index of {tag!r}",
              file=sys.stderr)
        sys.exit(5)
    return n


chief = os.environ.get("IS_CHIEF") == "true"
restored = restore() if chief else None
began = time.monotonic()
fail_after = float(os.environ.get("FAIL_AFTER_S", "inf"))
fail_attempt = int(os.environ.get("FAIL_ATTEMPT", "1"))
start = 0 if restored is None else restored + 1
print(f"{kind}: attempt {attempt} RESUMED from {restored}", flush=True)
for n in range(start, steps):
    time.sleep(step_s)
    if not chief:
        continue
    if attempt == int(os.environ.get("CUT_ATTEMPT", "0")) and n > start:
        save(n, pointer=False)
        time.sleep(3)
        print(f"chief: attempt {attempt} cut after ckpt-{n}'s files, before its pointer", file=sys.stderr)
        sys.exit(1)
    if attempt == int(os.environ.get("STOP_ATTEMPT", "0")):
        save(n, data_quiet_s=1.5)
        time.sleep(0.9)
        print(f"chief: attempt {attempt} stopped right after saving ckpt-{n}", file=sys.stderr)
        sys.exit(1)
    save(n)
    if attempt == fail_attempt and time.monotonic() - began > fail_after:
        print(f"chief: attempt {attempt} failing right after saving ckpt-{n}", file=sys.stderr)
        sys.exit(1)
if chief:
    (out / "metrics.json").write_text(json.dumps({"attempt": attempt, "resumed_from": restored,
                                                  "steps_run": steps - start}))
