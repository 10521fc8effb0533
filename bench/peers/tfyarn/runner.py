"""Running the trivial benchmark job with tf-yarn, from our benchmark process.

tf-yarn lives in a venv of its own (`.venv-tfyarn`: tf-yarn 0.7.0 and TensorFlow 2.15, which
still has tf.estimator), named by TONY_BENCH_TFYARN_PYTHON; `make bench` makes it. Without it,
or when it does not import, the benchmark's row says so.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from bench.peers.tfyarn import pack

SUBMIT = Path(__file__).with_name("submit.py")
# where the containers (all on this host) unpack the pex: one place, so only the first run pays
PEX_ROOT = pack.CACHE / "pex-root"
PYTHON_ENV = "TONY_BENCH_TFYARN_PYTHON"


@dataclass(frozen=True)
class TfYarn:
    python: str
    pex_uri: str


def available() -> tuple[TfYarn | None, str]:
    """tf-yarn's Python and its packed environment on HDFS, or why not (one line for the report)."""
    python = os.environ.get(PYTHON_ENV)
    if not python:
        return None, f"tf-yarn: {PYTHON_ENV} is not set (`make bench` makes .venv-tfyarn and sets it)"
    python = str(Path(python).absolute())  # the tf-yarn runs start elsewhere (cwd: this package)
    t0 = time.time()
    probe = subprocess.run([python, "-c", "import tf_yarn.tensorflow, tensorflow as tf; print(tf.__version__)"],
                           capture_output=True, text=True, timeout=300)
    sweep_tmp(t0)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["(no output)"])[-1]
        return None, f"tf-yarn: `{python} -c 'import tf_yarn.tensorflow'` -> {last}"
    try:
        pex_uri = pack.uploaded(pack.build_pex(python))
    except pack.PackError as exc:
        return None, f"tf-yarn: {exc}"
    tf_version = probe.stdout.strip().splitlines()[-1]
    return TfYarn(python, pex_uri), f"tf-yarn 0.7.0 with TensorFlow {tf_version} from {python}, pex {pex_uri}"


def submit(tfyarn: TfYarn, env: dict[str, str], memory_mb: int, task: str = "trivial_task",
           types: str = "chief,worker,ps", timeout: float = 900) -> tuple[str, float]:
    """(application id, the client's wall time) of a job through tf-yarn's run_on_yarn; `env` goes to
    every container."""
    t0 = time.time()
    proc = subprocess.run([tfyarn.python, str(SUBMIT), "--pex", tfyarn.pex_uri, "--task", task, "--types", types,
                           "--memory", str(memory_mb), "--pex-root", str(PEX_ROOT),
                           *(f"--env={k}={v}" for k, v in env.items())],
                          capture_output=True, text=True, timeout=timeout, cwd=SUBMIT.parent)
    wall = time.time() - t0
    sweep_tmp(t0)
    last = (proc.stdout.strip().splitlines() or [""])[-1]
    if proc.returncode != 0 or not last.startswith("application_"):
        raise RuntimeError(f"tf-yarn run failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-3:]}")
    return last, wall


def sweep_tmp(since: float, tmp: Path = Path("/tmp")) -> int:
    """Remove the empty `/tmp/<uuid1>` directories made since `since` (how many): tf-yarn and
    cluster-pack make one in every process that imports them (client and containers, which share this
    host's /tmp) and never remove it."""
    removed = 0
    for path in tmp.iterdir():
        try:
            if uuid.UUID(path.name).version != 1 or path.lstat().st_mtime < since:
                continue
            path.rmdir()  # only when empty
        except (ValueError, OSError):
            continue
        removed += 1
    return removed
