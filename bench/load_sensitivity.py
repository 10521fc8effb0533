"""Benchmark: how much a little CPU used beside the training slows a hand launch of it.

Why: through YARN the launcher's own processes and the daemons they keep busy use
a few hundredths of a core beside the workers (bench/training_overhead.py's CPU
table). Whether that is what costs the training its few per cent is a question
for the hand launch itself: the same two workers, with nothing beside them and
with a synthetic load beside them that uses a set share of one core in short
bursts (a stand-in for daemons that wake up), rounds interleaved, medians and the
ratio of each round. Not part of `make bench` (it answers one question; about
ten minutes):

    .venv/bin/python -m bench.load_sensitivity [--runs 3] [--epochs 10] [--steps 100]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from dataclasses import dataclass

from bench.local import local_cluster
from bench.peers.tfyarn import runner as tfyarn_runner
from bench.report import Report
from bench.training_overhead import Program, Run, by_hand, measured

# a process that uses `share` of one core in bursts of `burst` seconds, until it is killed
BURNER = """import sys, time
share, burst = float(sys.argv[1]), float(sys.argv[2])
while True:
    end = time.process_time() + burst
    while time.process_time() < end:
        pass
    time.sleep(burst / share - burst)
"""


@dataclass(frozen=True)
class Load:
    share: float  # of one core
    burst: float  # seconds

    @property
    def label(self) -> str:
        return f"{self.share:.2f} core in {self.burst * 1000:.0f} ms bursts"


LOADS = (Load(0.07, 0.005), Load(0.07, 0.05), Load(0.2, 0.02))


def beside(load: Load | None, launch) -> Run:
    """One measured hand launch with `load` running beside it."""
    burner = (subprocess.Popen([sys.executable, "-c", BURNER, str(load.share), str(load.burst)])
              if load else None)
    try:
        return measured(launch)
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()


def run(runs: int = 3, epochs: int = 10, steps: int = 100) -> Report:
    local_cluster()  # tf-yarn's venv (TensorFlow 2.15, as in the training table) is found through it
    tfyarn, _ = tfyarn_runner.available()
    program = Program(tfyarn.python, "tf-yarn's venv") if tfyarn else Program(sys.executable, "ours")
    loads: list[Load | None] = [None, *LOADS]
    done: dict[Load | None, list[Run]] = {load: [] for load in loads}
    for n in range(runs):
        for load in loads:
            done[load].append(beside(load, lambda: by_hand(program, epochs, steps)))
        print(f"round {n + 1}: " + ", ".join(f"{load.label if load else 'alone'} {done[load][-1].speeds.steady:.1f}"
                                             for load in loads), file=sys.stderr)
    alone = done[None]
    rows = []
    for load in loads:
        steady = [r.speeds.steady for r in done[load]]
        ratios = [r.speeds.steady / a.speeds.steady for r, a in zip(done[load], alone)]
        other = statistics.median(r.cores["other"] for r in done[load])
        rows.append([load.label if load else "nothing", f"{other:.2f}", f"{statistics.median(steady):.1f}",
                     f"{statistics.median(ratios):.3f}" if load else "", ", ".join(f"{v:.1f}" for v in steady)])
    return Report(
        name="load_sensitivity", title="A hand launch of the training with a little CPU used beside it",
        command=f".venv/bin/python -m bench.load_sensitivity --runs {runs} --epochs {epochs} --steps {steps}",
        columns=["beside the training", "other processes (cores)", "steps/s, epochs 2-N (median)",
                 "against alone, same round (median)", "runs"],
        rows=rows,
        notes=[f"MultiWorkerMirroredStrategy, 2 workers by hand, {epochs}x{steps} steps, {runs} interleaved "
               f"rounds, Python {program.python}; 'other processes': every process but the training and the "
               "YARN and HDFS daemons, measured while epochs 2-N ran (bench/cpu_share.py)"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    print(run(args.runs, args.epochs, args.steps).table())


if __name__ == "__main__":
    main()
