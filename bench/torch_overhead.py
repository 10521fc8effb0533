"""Benchmark: PyTorch DDP (the digits example) under torchrun, through YARN and launched by hand.

Through YARN: `ytf-submit -r worker:2 --framework pytorch "torchrun -m tony_airflow.examples.digits_torch"`,
one process per container; the executors give torchrun its settings (PET_*). By hand: the same two torchrun
commands on this machine, with the same settings written out (a static rendezvous on a free port, and
OMP_NUM_THREADS=1: one vcore per container; without it each process takes every core, and the hand launch of
two processes on this 2-core machine ran at less than half the speed). Steps per
second are measured by the training program itself, from each epoch's begin to its end, without the first
epoch (the processes' rendezvous and the first collective). Runs are interleaved; medians and the ratio.
Aim: YARN / by hand >= 0.97, as for TensorFlow (bench/training_overhead.py).

    .venv/bin/python -m bench.torch_overhead [--runs 5] [--epochs 10] [--steps 300]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.local import local_cluster
from bench.report import Report
from bench.scratch import scratch_dir
from tony_airflow.local.cluster.config import free_ports
from tony_airflow.yarn.hdfs import webhdfs

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent
AIM_RATIO = 0.97
PROGRAM = "-m tony_airflow.examples.digits_torch --epochs {epochs} --steps-per-epoch {steps}"


def steady_steps_per_second(metrics: dict, steps: int) -> float:
    """Steps/s over epochs 2-N (the first holds the rendezvous and the first collective)."""
    seconds = metrics["epoch_seconds"][1:] or metrics["epoch_seconds"]
    return steps * len(seconds) / sum(seconds)


def by_hand(epochs: int, steps: int) -> float:
    out = scratch_dir("torch-hand-")
    port = free_ports(1)[0]
    settings = {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "1", "PET_RDZV_BACKEND": "static",
                "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": str(port), "PET_MAX_RESTARTS": "0",
                "OMP_NUM_THREADS": "1",  # as the executor sets it for a 1-vcore container (torchrun: only if N > 1)
                "DTF_OUTPUT_PATH": out, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([str(BIN / "torchrun"), *PROGRAM.format(epochs=epochs, steps=steps).split()],
                              env=dict(os.environ, **settings, PET_NODE_RANK=str(rank)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for rank in range(2)]
    if any(proc.wait(timeout=900) != 0 for proc in procs):
        raise RuntimeError("the hand-launched torchrun failed")
    return steady_steps_per_second(json.loads(Path(out, "metrics.json").read_text()), steps)


def through_yarn(epochs: int, steps: int) -> float:
    out = f"/tmp/bench/torch/{time.time_ns()}"
    proc = subprocess.run(
        [str(BIN / "ytf-submit"), "-r", "worker:2", "--framework", "pytorch", "-m", "2048", "-o", f"hdfs://{out}",
         "-n", "bench-torch", "torchrun " + PROGRAM.format(epochs=epochs, steps=steps)],
        capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"the YARN run failed: {proc.stderr.strip().splitlines()[-1:]}")
    fs = webhdfs()
    try:
        return steady_steps_per_second(json.loads(fs.cat(f"{out}/metrics.json")), steps)
    finally:
        fs.rm(out, recursive=True)


def run(runs: int = 5, epochs: int = 10, steps: int = 300) -> Report:
    local_cluster()
    done: dict[str, list[float]] = {"YARN": [], "by hand": []}
    for n in range(runs):
        done["YARN"].append(through_yarn(epochs, steps))
        done["by hand"].append(by_hand(epochs, steps))
        print(f"run {n + 1}: YARN {done['YARN'][-1]:.1f}, by hand {done['by hand'][-1]:.1f} steps/s", file=sys.stderr)
    y, h = statistics.median(done["YARN"]), statistics.median(done["by hand"])
    rounds = [a / b for a, b in zip(done["YARN"], done["by hand"])]
    return Report(
        name="torch_overhead", title="PyTorch DDP under torchrun: through YARN vs. a hand launch",
        command=f".venv/bin/python -m bench.torch_overhead --runs {runs} --epochs {epochs} --steps {steps}",
        columns=["launch", "steps/s, epochs 2-N (median)", "runs"],
        rows=[["YARN", f"{y:.1f}", ", ".join(f"{v:.1f}" for v in done["YARN"])],
              ["by hand", f"{h:.1f}", ", ".join(f"{v:.1f}" for v in done["by hand"])],
              ["ratio", f"{y / h:.3f}", "each round: " + ", ".join(f"{r:.3f}" for r in rounds)]],
        aims=[f"YARN / by hand >= {AIM_RATIO} (epochs 2-N)"],
        verdicts=[f"ratio {y / h:.3f}: aim {'met' if y / h >= AIM_RATIO else 'missed'}"],
        notes=[f"DDP (gloo, CPU), 2 nodes x 1 process, digits, {epochs}x{steps} steps of 64 samples per rank, "
               f"median of {runs} interleaved runs, {os.cpu_count()} cores; steps/s measured by the program"],
        data=done)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    print(run(args.runs, args.epochs, args.steps).table())


if __name__ == "__main__":
    main()
