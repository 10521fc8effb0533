"""Benchmark: the same training launched through YARN and by hand with a hand-written TF_CONFIG.

Both runs are the shipped MultiWorkerMirroredStrategy example (2 workers, the
digits data set). Steps per second are measured by the training program itself,
from each epoch's begin to its end (checkpoint and TensorBoard callbacks
included), so the figure is training throughput, not start-up: the main figure
leaves out the first epoch, which also holds graph tracing and the wait for the
other worker at the first collective; the figure over all epochs is shown too.
With TONY_SRC set, the same program also runs through TonY's own submitter
(bench/peers/tony); with tf-yarn's venv (TONY_BENCH_TFYARN_PYTHON), through
tf-yarn (bench/peers/tfyarn), and then every launcher trains with that venv's
Python and TensorFlow 2.15, the one tf-yarn needs. Runs are interleaved; the
table shows medians and the ratios. Aim: YARN / by hand >= 0.97. Ten epochs
of 100 steps, five runs: an epoch lasts about a second here, and fewer made the
ratio swing by +-5 % from run to run. A second table (bench/cpu_share.py) shows,
for the same runs, how many cores the training, the launcher's own processes and
the YARN and HDFS daemons used while epochs 2-N ran: what a launcher takes from
the workers on a small machine.

    .venv/bin/python -m bench.training_overhead [--runs 5] [--epochs 10] [--steps 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.cpu_share import GROUPS, SAMPLE_S, CpuShare, grouped
from bench.local import local_cluster
from bench.peers.tfyarn import runner as tfyarn_runner
from bench.peers.tony import adapt as tony_adapt
from bench.peers.tony import run as tony_run
from bench.report import Report
from bench.scratch import scratch_dir, scratch_file
from tony_airflow.core.spec import DEFAULT_MEMORY_MB
from tony_airflow.local.cluster.config import free_ports
from tony_airflow.yarn.hdfs import webhdfs

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent
AIM_RATIO = 0.97  # steps/s through YARN against a hand launch, epochs 2-N
PROGRAM = "-m tony_airflow.examples.digits_keras --epochs {epochs} --steps-per-epoch {steps}"


@dataclass(frozen=True)
class Program:
    """The Python that runs the training in every launcher: tf-yarn's (TensorFlow 2.15, which tf-yarn
    needs) when it is there, so that all of them train with the same TensorFlow, else ours."""

    python: str
    label: str

    def command(self, epochs: int, steps: int) -> str:
        """A shell command (ours, TonY's); the repository on PYTHONPATH: one host."""
        return f"env PYTHONPATH={REPO} {self.python} " + PROGRAM.format(epochs=epochs, steps=steps)

    def argv(self, epochs: int, steps: int) -> list[str]:
        return [self.python, *PROGRAM.format(epochs=epochs, steps=steps).split()]


def by_hand(program: Program, epochs: int, steps: int) -> Speeds:
    out = scratch_dir("overhead-hand-")
    hosts = [f"localhost:{p}" for p in free_ports(2)]
    procs = []
    for index in range(2):
        env = dict(os.environ, DTF_OUTPUT_PATH=out, TMPDIR=out, PYTHONPATH=str(REPO), TF_CONFIG=json.dumps(
            {"cluster": {"worker": hosts}, "task": {"type": "worker", "index": index}}))
        procs.append(subprocess.Popen(program.argv(epochs, steps), env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    for proc in procs:
        if proc.wait(timeout=900) != 0:
            raise RuntimeError("the hand-launched run failed")
    return _speeds(json.loads(Path(out, "metrics.json").read_text()))


def through_yarn(program: Program, epochs: int, steps: int) -> Speeds:
    out = f"/tmp/bench/overhead/{time.time_ns()}"
    proc = subprocess.run(
        [str(BIN / "ytf-submit"), "-r", "worker:2", "-o", f"hdfs://{out}", "-n", "bench-overhead",
         program.command(epochs, steps)], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"the YARN run failed: {proc.stderr.strip().splitlines()[-1:]}")
    fs = webhdfs()
    try:
        return _speeds(json.loads(fs.cat(f"{out}/metrics.json")))
    finally:
        fs.rm(out, recursive=True)


def through_tony(jar: Path, program: Program, epochs: int, steps: int) -> Speeds:
    """The same program with TonY's own submitter (bench/peers/tony): TonY writes TF_CONFIG itself; the
    output is a local directory (one host), named to the tasks by the environment as ours is."""
    out = scratch_dir("overhead-tony-")
    conf = tony_run.write_conf(scratch_file(Path(out + ".xml")), {"worker": 2}, DEFAULT_MEMORY_MB,
                               {"DTF_OUTPUT_PATH": out})
    run = tony_run.submit(jar, program.command(epochs, steps), conf, timeout=900)
    if run.returncode != 0:
        raise RuntimeError(f"the TonY run {run.app_id} failed: {run.log.strip().splitlines()[-2:]}")
    return _speeds(json.loads(Path(out, "metrics.json").read_text()))


def through_tfyarn(tfyarn: tfyarn_runner.TfYarn, epochs: int, steps: int) -> Speeds:
    """The same program between tf-yarn's barriers (bench/peers/tfyarn/train_task.py), chief + worker:
    the same two replicas as the others' two workers."""
    out = scratch_dir("overhead-tfyarn-")
    os.chmod(out, 0o777)
    env = {"DTF_OUTPUT_PATH": out, "PYTHONPATH": f".:{REPO}",
           "BENCH_TRAIN_ARGS": f"--epochs {epochs} --steps-per-epoch {steps}"}
    tfyarn_runner.submit(tfyarn, env, DEFAULT_MEMORY_MB, task="train_task", types="chief,worker")
    return _speeds(json.loads(Path(out, "metrics.json").read_text()))


def _speeds(metrics: dict) -> Speeds:
    """Steps/s without the first epoch and over all epochs, and when epochs 2-N ran."""
    walls = metrics["epoch_walls"]
    return Speeds(metrics["steady_steps_per_second"], metrics["steps_per_second"],
                  walls[1][0] if len(walls) > 1 else walls[0][0], walls[-1][1])


@dataclass(frozen=True)
class Speeds:
    steady: float        # steps/s, epochs 2-N
    overall: float       # steps/s, all epochs
    steady_begin: float  # Unix time epoch 2 began
    steady_end: float    # Unix time the last epoch ended


@dataclass(frozen=True)
class Run:
    """One launch of the training: its speeds and what each group of processes used meanwhile."""

    speeds: Speeds
    cores: dict[str, float]  # GROUPS -> cores used while epochs 2-N ran


def measured(launch: Callable[[], Speeds]) -> Run:
    """A launch inside a CpuShare window; the cores each group used while epochs 2-N ran."""
    with CpuShare() as share:
        speeds = launch()
    seconds, over = share.between(speeds.steady_begin, speeds.steady_end)
    return Run(speeds, grouped(seconds, over))


LAUNCHERS = ("YARN", "by hand", "TonY", "tf-yarn")


def run(runs: int = 5, epochs: int = 10, steps: int = 100) -> list[Report]:
    """The throughput table and the CPU table of the same runs."""
    local_cluster()
    try:
        tony_jar: Path | None = tony_adapt.build()
        tony_why = "TonY built from TONY_SRC with bench/peers/tony/pom.xml, same program, same Python and TensorFlow"
    except tony_adapt.TonyBuildError as exc:
        tony_jar, tony_why = None, f"TonY: {exc}"
    tfyarn, tfyarn_why = tfyarn_runner.available()
    program = (Program(tfyarn.python, f"the training runs with tf-yarn's venv ({tfyarn.python}) in every launcher")
               if tfyarn else Program(sys.executable, f"the training runs with {sys.executable} (no tf-yarn venv)"))
    launches: dict[str, Callable[[], Speeds]] = {"YARN": lambda: through_yarn(program, epochs, steps)}
    if tony_jar is not None:
        launches["TonY"] = lambda: through_tony(tony_jar, program, epochs, steps)
    if tfyarn is not None:
        launches["tf-yarn"] = lambda: through_tfyarn(tfyarn, epochs, steps)
    launches["by hand"] = lambda: by_hand(program, epochs, steps)
    done: dict[str, list[Run]] = {name: [] for name in LAUNCHERS}
    failures: dict[str, list[str]] = {}
    for n in range(runs):
        for name, launch in launches.items():
            _launch(done[name], failures, name, launch, peer=name in ("TonY", "tf-yarn"))
        print(f"run {n + 1}: " + ", ".join(f"{name} {done[name][-1].speeds.steady:.1f} "
                                          f"({done[name][-1].speeds.overall:.1f})"
                                          for name in LAUNCHERS if done[name]) + " steps/s", file=sys.stderr)
    y, h = _medians(done["YARN"]), _medians(done["by hand"])
    peer_rows = (_peer_rows("TonY", done["TonY"], y, h) if done["TonY"] else [["TonY", "n/a", "n/a", "TONY_SRC not set"]])
    peer_rows += (_peer_rows("tf-yarn", done["tf-yarn"], y, h) if done["tf-yarn"]
                  else [["tf-yarn", "n/a", "n/a", "no tf-yarn venv"]])
    command = f".venv/bin/python -m bench.training_overhead --runs {runs} --epochs {epochs} --steps {steps}"
    throughput = Report(
        name="training_overhead", title="Training throughput through YARN vs. a hand launch", command=command,
        columns=["launch", "steps/s, epochs 2-N (median)", "steps/s, all epochs (median)", "runs (epochs 2-N)"],
        rows=[["YARN", f"{y[0]:.1f}", f"{y[1]:.1f}", _listed(done["YARN"])],
              ["by hand", f"{h[0]:.1f}", f"{h[1]:.1f}", _listed(done["by hand"])],
              ["ratio", f"{y[0] / h[0]:.3f}", f"{y[1] / h[1]:.3f}", ""],
              _per_round(done["YARN"], done["by hand"]), *peer_rows],
        aims=[f"YARN / by hand >= {AIM_RATIO} (epochs 2-N)"],
        verdicts=[f"ratio {y[0] / h[0]:.3f}: aim {'met' if y[0] / h[0] >= AIM_RATIO else 'missed'}"],
        notes=[f"MultiWorkerMirroredStrategy, 2 workers, digits, {epochs}x{steps} steps, median of {runs} "
               f"interleaved runs, {os.cpu_count()} cores; steps/s measured by the training program; the first "
               "epoch also holds graph tracing and the workers' rendezvous at the first collective",
               program.label, tony_why, tfyarn_why,
               *(f"{name}: {len(errors)} of {runs} runs failed (medians over the others); last: {errors[-1]}"
                 for name, errors in failures.items())],
        data={name: [[r.speeds.steady, r.speeds.overall] for r in done[name]] for name in LAUNCHERS},
        plot=_plot, panels=1)
    return [throughput, cpu_report(done, command)]


def cpu_report(done: dict[str, list[Run]], command: str) -> Report:
    """Where the machine's CPU went while epochs 2-N ran, per launcher: what the training did not get."""
    rows, shown = [], {}
    for name in LAUNCHERS:
        if not done[name]:
            continue
        cores = {group: statistics.median(r.cores[group] for r in done[name]) for group in GROUPS}
        beside = statistics.median(sum(v for g, v in r.cores.items() if g != "training") for r in done[name])
        shown[name] = cores
        rows.append([name, *(f"{cores[g]:.2f}" for g in GROUPS), f"{beside:.2f}",
                     f"{statistics.median(r.speeds.steady for r in done[name]):.1f}"])
    ours, hand = shown.get("YARN"), shown.get("by hand")
    notes = [f"cores used while the training's epochs 2-N ran (its own time stamps), from /proc/<pid>/stat "
             f"sampled every {SAMPLE_S} s (bench/cpu_share.py), median of the runs; {os.cpu_count()} cores",
             "launcher: the client, the AM (ours and skein's, TonY's), the executors (ours, TonY's "
             "TaskExecutor JVMs, tf-yarn's task runner); YARN and HDFS: ResourceManager, NodeManager, "
             "NameNode, DataNode; other: every other process of the machine"]
    if ours and hand:
        more = sum(ours[g] - hand[g] for g in GROUPS if g != "training")
        notes.append(f"through YARN the processes beside the training used {more:+.2f} cores more than "
                     f"beside the hand launch (of which the launcher's own "
                     f"{ours['launcher'] - hand['launcher']:+.2f}, YARN and HDFS "
                     f"{ours['YARN and HDFS'] - hand['YARN and HDFS']:+.2f}); the training itself "
                     f"{ours['training'] - hand['training']:+.2f}")
    return Report(name="training_cpu", title="CPU while the training runs, per launcher", command=command,
                  columns=["launch", *(f"{g} (cores)" for g in GROUPS), "beside the training (cores)",
                           "steps/s, epochs 2-N"], rows=rows, notes=notes)


def _launch(runs: list[Run], failures: dict[str, list[str]], name: str, launch: Callable[[], Speeds],
            peer: bool) -> None:
    """One measured launch; a peer's failure is counted and named in the report, not the end of the benchmark."""
    try:
        runs.append(measured(launch))
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as exc:
        if not peer:
            raise
        failures.setdefault(name, []).append(" ".join(str(exc).split())[:300])
        print(f"{name} failed: {exc}", file=sys.stderr)


def _per_round(ours: list[Run], hand: list[Run]) -> list[str]:
    """The ratio of each round's two runs (run back to back), and their median: the machine's slower and
    faster spells, which move both runs of a round, drop out of it."""
    steady = [o.speeds.steady / h.speeds.steady for o, h in zip(ours, hand)]
    overall = [o.speeds.overall / h.speeds.overall for o, h in zip(ours, hand)]
    return ["ratio of each round (median)", f"{statistics.median(steady):.3f}", f"{statistics.median(overall):.3f}",
            ", ".join(f"{r:.3f}" for r in steady)]


def _medians(runs: list[Run]) -> tuple[float, float]:
    return (statistics.median(r.speeds.steady for r in runs), statistics.median(r.speeds.overall for r in runs))


def _listed(runs: list[Run]) -> str:
    return ", ".join(f"{r.speeds.steady:.1f}" for r in runs)


def _peer_rows(name: str, runs: list[Run], ours: tuple[float, float], hand: tuple[float, float]) -> list[list[str]]:
    p = _medians(runs)
    return [[name, f"{p[0]:.1f}", f"{p[1]:.1f}", _listed(runs)],
            [f"{name} / by hand", f"{p[0] / hand[0]:.3f}", f"{p[1] / hand[1]:.3f}", ""],
            [f"ours / {name}", f"{ours[0] / p[0]:.3f}", f"{ours[1] / p[1]:.3f}", ""]]


def _plot(report: Report, axes: list) -> None:
    ax = axes[0]
    bars = {"YARN (ours)": report.data["YARN"], "by hand": report.data["by hand"], "TonY": report.data["TonY"],
            "tf-yarn": report.data["tf-yarn"]}
    shown = {name: statistics.median(r[0] for r in runs) for name, runs in bars.items() if runs}
    ax.bar(list(shown), list(shown.values()), color=["#1a73e8", "#999999", "#e37400", "#188038"][:len(shown)])
    ax.set(ylabel="steps per second, epochs 2-N (median)", title="training throughput")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    for report in run(args.runs, args.epochs, args.steps):
        print(report.table())


if __name__ == "__main__":
    main()
