"""Benchmark: what reporting progress costs the training (issue #52).

The same digits_keras job through YARN twice per round, interleaved: as shipped (tony_progress.KerasCallback:
the step every 0.5 s, Keras's logs at each epoch's end, relayed by the executor to the AM every second)
and with `--no-progress` (no callback). Steps per second are the program's own, epochs 2-N
(bench/training_overhead.py's measure). The AM's status page is read while each run goes, so the
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


CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
import tony_progress
rate, seconds = float(sys.argv[2]), float(sys.argv[3])
end, step = time.monotonic() + seconds, 0
while time.monotonic() < end:
    step += 1
    tony_progress.report(step=step, total_steps=10**9, epoch=1, total_epochs=1, metrics={"loss": 1.0 / step})
    time.sleep(1.0 / rate)
tony_progress.flush()
print(step)
"""


def reporting_cpu(rate: float = 1000.0, seconds: float = 10.0, rounds: int = 3) -> dict[str, float]:
    """The CPU that reporting every step takes, with no training to disturb the figure: a program calling
    `tony_progress.report` `rate` times a second (a torch loop's every step) against a live endpoint, less
    the same program outside a task (its calls return at once); and the endpoint's own CPU (this process).
    Median of `rounds`: ms of CPU per second, program and endpoint, and the reports per second."""
    import resource
    import tempfile

    from tony_airflow.core.executor.status_channel import StatusEndpoint, program_env, ship_helper

    program, endpoint_ms, calls = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        helper = ship_helper(Path(tmp))
        for _ in range(rounds):
            used = {}
            for report in (True, False):
                ep = StatusEndpoint().start()
                env = {"PATH": os.environ.get("PATH", "")}
                env |= program_env(ep, helper, {}) if report else {}
                before, mine = resource.getrusage(resource.RUSAGE_CHILDREN), time.process_time()
                out = subprocess.run([sys.executable, "-c", CHILD, str(helper), str(rate), str(seconds)], env=env,
                                     capture_output=True, text=True, check=True)
                after, mine = resource.getrusage(resource.RUSAGE_CHILDREN), time.process_time() - mine
                ep.stop()
                used[report] = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, mine)
                if report:
                    calls.append(int(out.stdout) / seconds)
            program.append((used[True][0] - used[False][0]) / seconds * 1000)
            endpoint_ms.append((used[True][1] - used[False][1]) / seconds * 1000)
    return {"program_ms_per_s": statistics.median(program), "endpoint_ms_per_s": statistics.median(endpoint_ms),
            "calls_per_s": statistics.median(calls)}


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
    cpu = reporting_cpu()
    bound = 1 - (cpu["program_ms_per_s"] + cpu["endpoint_ms_per_s"]) / 1000 / (os.cpu_count() or 1)
    return Report(
        name="progress_cost", title="Reporting progress every step: training throughput with and without",
        command=f".venv/bin/python -m bench.progress_cost --runs {runs} --epochs {epochs} --steps {steps}",
        columns=["digits_keras through YARN", "steps/s, epochs 2-N (median)", "runs"],
        rows=[["with tony_progress.KerasCallback", f"{statistics.median(speeds[True]):.1f}",
               ", ".join(f"{s:.1f}" for s in speeds[True])],
              ["--no-progress", f"{statistics.median(speeds[False]):.1f}",
               ", ".join(f"{s:.1f}" for s in speeds[False])],
              ["ratio (with / without)", f"{r:.3f}", "per round: " + ", ".join(f"{x:.3f}" for x in rounds)],
              ["CPU of reporting every step (no training)",
               f"{cpu['program_ms_per_s']:.1f} + {cpu['endpoint_ms_per_s']:.1f} ms/s",
               f"{cpu['calls_per_s']:.0f} report() calls/s; the machine's share: {1 - bound:.2%}"]],
        notes=[f"MultiWorkerMirroredStrategy, 2 workers, {epochs}x{steps} steps, {runs} interleaved rounds, "
               f"{os.cpu_count()} cores; the callback reads the optimizer's step count every 0.5 s and Keras's "
               "logs at each epoch's end; the executor relays the newest report every second",
               "CPU of reporting every step: a program calling report() after every step of a loop of "
               f"~{cpu['calls_per_s']:.0f} steps/s against a live endpoint, less the same program outside a task "
               "(program ms/s), and the endpoint's own (executor side, ms/s); median of 3 rounds of 10 s; the "
               "relay to the AM (one signed request a second) is not in it",
               "distinct `training.updated` values the AM's status page showed while each reporting run went "
               f"(read every second): {updates}"],
        aims=[f"with / without >= {AIM_RATIO}"],
        verdicts=[f"ratio {r:.3f}: aim {'met' if r >= AIM_RATIO else 'missed'}; the CPU reporting takes bounds "
                  f"the cost at {1 - bound:.2%} of the machine ({bound:.4f})"],
        data={"with": speeds[True], "without": speeds[False], "updates": updates, "cpu": cpu}, panels=1)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.progress_cost")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--cpu-only", action="store_true", help="only the CPU of reporting (no cluster)")
    args = parser.parse_args(argv)
    if args.cpu_only:
        print(reporting_cpu())
        return
    print(run(args.runs, args.epochs, args.steps).table())


if __name__ == "__main__":
    main(sys.argv[1:])
