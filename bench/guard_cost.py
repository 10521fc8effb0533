"""Benchmark: what the command's guard (core/executor/guard.py) costs a task, against `bash -c` alone.

The executor starts every command behind the guard, so that the command's process group dies with
the executor whatever kills it. It is one more Python process per task: time to the command's first
act (the process start to a time.time() stamp the command writes, one machine, one clock), and the
guard's resident memory, which YARN counts against the container. No cluster: the executor's own
UserProcess against subprocess.Popen of `bash -c`, RUNS interleaved runs each.

    .venv/bin/python -m bench.guard_cost [--runs 30]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from bench.report import Report
from tony_airflow.core.executor.child import UserProcess

AIM_START_S = 0.05  # the guard may add at most this much to a task's start
AIM_RSS_MIB = 16.0  # and hold at most this much of the container's memory
ENV = {"PATH": "/usr/bin:/bin"}
COLUMNS = ["how the command starts", "start -> first act ms", "cost ms", "resident memory MiB"]


def _stamp_command(stamp: Path) -> str:
    return f"{sys.executable} -c \"import time; open('{stamp}', 'w').write(repr(time.time()))\""


def _start(guarded: bool, stamp: Path) -> float:
    stamp.unlink(missing_ok=True)
    t0 = time.time()
    if guarded:
        proc = UserProcess(_stamp_command(stamp), ENV)
        code = proc.wait()
        proc.kill_group()
    else:
        code = subprocess.run(["bash", "-c", _stamp_command(stamp)], env=ENV, stdin=subprocess.DEVNULL).returncode
    if code != 0 or not stamp.exists():
        raise RuntimeError(f"the stamp command failed (guarded={guarded}, exit {code})")
    return float(stamp.read_text()) - t0


def guard_rss_mib() -> float:
    proc = UserProcess("sleep 5", ENV)
    try:
        time.sleep(0.5)  # the guard has started its command and is waiting
        return psutil.Process(proc.proc.pid).memory_info().rss / 2**20
    finally:
        proc.stop(grace=0.1)
        proc.wait()
        proc.kill_group()


def run(runs: int = 30) -> Report:
    samples: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        stamp = Path(tmp) / "stamp"
        for guarded in (False, True):  # warm-up: the interpreter's files in the page cache
            _start(guarded, stamp)
        for _ in range(runs):
            for guarded in samples:
                samples[guarded].append(_start(guarded, stamp))
    plain, guarded = (statistics.median(samples[g]) for g in (False, True))
    rss = guard_rss_mib()
    cost = guarded - plain
    return Report(
        name="guard_cost", title="The command's guard: what it adds to each task",
        command=f".venv/bin/python -m bench.guard_cost --runs {runs}", columns=COLUMNS,
        rows=[["bash -c (no guard)", f"{plain * 1000:.1f}", "-", "-"],
              ["the executor's UserProcess (guard)", f"{guarded * 1000:.1f}", f"{cost * 1000:+.1f}", f"{rss:.1f}"]],
        notes=[f"median of {runs} interleaved runs after a warm-up; the command is `python3 -c` writing "
               "time.time(); the memory is the guard's RSS while its command runs (YARN counts RSS)"],
        aims=[f"the guard adds at most {AIM_START_S * 1000:.0f} ms to a task's start and holds at most "
              f"{AIM_RSS_MIB:.0f} MiB"],
        verdicts=[f"start: +{cost * 1000:.1f} ms: {'met' if cost <= AIM_START_S else 'MISSED'}",
                  f"memory: {rss:.1f} MiB: {'met' if rss <= AIM_RSS_MIB else 'MISSED'}"],
        plot=None)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.guard_cost")
    parser.add_argument("--runs", type=int, default=30)
    print(run(parser.parse_args(argv).runs).table())


if __name__ == "__main__":
    main(sys.argv[1:])
