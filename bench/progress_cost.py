"""Benchmark: what reporting progress costs the training (issue #52).

The same digits_keras job through YARN twice per round, interleaved: as shipped (tony_progress.KerasCallback:
its hook runs after every step, a report with Keras's logs at most every 0.5 s, relayed by the executor to
the AM every second) and with `--no-progress` (no callback). Steps per second are the program's own, epochs
2-N (bench/training_overhead.py's measure). The AM's status page is read while each run goes, so the
reporting run is known to have reached the AM. Aim: with / without >= 0.99.

    .venv/bin/python -m bench.progress_cost [--runs 5] [--epochs 10] [--steps 100]
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
from tony_airflow.core.protocol import STATUS_JSON, am_page_url
from tony_airflow.yarn.hdfs import webhdfs

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent
AIM_RATIO = 0.99
PROGRAM = "python3 -m tony_airflow.examples.digits_keras --epochs {epochs} --steps-per-epoch {steps}"


def ratio(with_progress: list[float], without: list[float]) -> float:
    """Median of with / median of without (throughput: above 1 is faster with reporting)."""
    return statistics.median(with_progress) / statistics.median(without)


def one_run(report: bool, epochs: int, steps: int) -> tuple[float, int]:
    """(steps/s of epochs 2-N, the training reports the AM's status page showed while the job ran)."""
    from tony_airflow.core.client import TonyClient

    out = f"/tmp/bench/progress/{time.time_ns()}"
    command = PROGRAM.format(epochs=epochs, steps=steps) + ("" if report else " --no-progress")
    submit = subprocess.Popen([str(BIN / "ytf-submit"), "-r", "worker:2", "-o", f"hdfs://{out}", "-n",
                               "bench-progress", command], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    seen: set[float] = set()
    app_id = None
    with TonyClient() as client:
        assert submit.stdout is not None
        for line in submit.stdout:
            if "Submitted application" in line:
                app_id = line.split()[-1]
                break
        while submit.poll() is None and app_id:
            rep = client.rm.application(app_id)
            if rep.state == "RUNNING" and "/proxy/" in rep.tracking_url:
                try:
                    status = client.rm.fetch(am_page_url(rep.tracking_url, STATUS_JSON), timeout=10).json()
                    if status.get("training"):
                        seen.add(status["training"]["updated"])
                except Exception:  # the AM not up yet, or gone: the count is a check, not the figure
                    pass
            time.sleep(1.0)
    if submit.wait(timeout=900) != 0:
        raise RuntimeError(f"the run {app_id} (report={report}) failed")
    fs = webhdfs()
    try:
        metrics = json.loads(fs.cat(f"{out}/metrics.json"))
    finally:
        fs.rm(out, recursive=True)
    return float(metrics["steady_steps_per_second"]), len(seen)


def run(runs: int = 5, epochs: int = 10, steps: int = 100) -> Report:
    local_cluster()
    speeds: dict[bool, list[float]] = {True: [], False: []}
    updates: list[int] = []
    for n in range(runs):
        for report in (n % 2 == 0, n % 2 == 1):  # which goes first alternates
            speed, seen = one_run(report, epochs, steps)
            speeds[report].append(speed)
            if report:
                updates.append(seen)
        print(f"run {n + 1}: with {speeds[True][-1]:.1f}, without {speeds[False][-1]:.1f} steps/s", file=sys.stderr)
    r = ratio(speeds[True], speeds[False])
    rounds = [w / wo for w, wo in zip(speeds[True], speeds[False])]
    return Report(
        name="progress_cost", title="Reporting progress every step: training throughput with and without",
        command=f".venv/bin/python -m bench.progress_cost --runs {runs} --epochs {epochs} --steps {steps}",
        columns=["digits_keras through YARN", "steps/s, epochs 2-N (median)", "runs"],
        rows=[["with tony_progress.KerasCallback", f"{statistics.median(speeds[True]):.1f}",
               ", ".join(f"{s:.1f}" for s in speeds[True])],
              ["--no-progress", f"{statistics.median(speeds[False]):.1f}",
               ", ".join(f"{s:.1f}" for s in speeds[False])],
              ["ratio (with / without)", f"{r:.3f}", "per round: " + ", ".join(f"{x:.3f}" for x in rounds)]],
        notes=[f"MultiWorkerMirroredStrategy, 2 workers, {epochs}x{steps} steps, {runs} interleaved rounds, "
               f"{os.cpu_count()} cores; the callback's hook runs after every step and reads Keras's logs at "
               "most every 0.5 s (the helper's rate); the executor relays the newest report every second",
               "distinct `training.updated` values the AM's status page showed while each reporting run went "
               f"(read every second): {updates}"],
        aims=[f"with / without >= {AIM_RATIO}"],
        verdicts=[f"ratio {r:.3f}: aim {'met' if r >= AIM_RATIO else 'missed'}"],
        data={"with": speeds[True], "without": speeds[False], "updates": updates}, panels=1)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.progress_cost")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args(argv)
    print(run(args.runs, args.epochs, args.steps).table())


if __name__ == "__main__":
    main(sys.argv[1:])
