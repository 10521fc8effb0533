"""Benchmark: what running a task's command in an image costs (issue #31), against running it natively.

The same worker:2 job, runs interleaved: natively, in `tony image build`'s image with docker, and in
the same image with podman. Each task's command stamps time.time() as its first act (one machine, one
clock), so:
(a) submit -> the last task's first line; (b) its cost over native (the container's start);
(c) the job's wall time (ytf-submit's). A first, unreported round warms the cluster up.
Then the engine alone, outside YARN: the executor's own command line (`ContainerPlan.argv()`, the
lease included) against `bash -c`, from the process start to the command's first line, ENGINE_RUNS
times each: the per-task cost without the job's noise.

    .venv/bin/python -m bench.container_cost [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.local import local_cluster
from bench.report import Report
from bench.scratch import scratch_dir
from tony_airflow.core.executor import engine
from tony_airflow.local.containers import daemon, image

BIN = Path(sys.executable).parent
WORKERS = 2
MEMORY_MB = 1024
AIM_COST_S = 2.0  # a container may add at most this much to a task's start
STAMP = ("python3 -c \"import os,time; open(os.path.join(os.environ['DTF_OUTPUT_PATH'], "
         "os.environ['DTF_TASK_JOB_NAME'] + os.environ['DTF_TASK_INDEX']), 'w').write(repr(time.time()))\"")
COLUMNS = ["runtime", "submit -> first line s", "cost over native s", "job wall s", "engine alone: start -> "
           "first line s", "engine alone: cost s"]
ENGINE_RUNS = 10


def _one(runtime: str) -> tuple[float, float]:
    stamps = scratch_dir(f"container-cost-{runtime}-")
    args = ["-r", f"worker:{WORKERS}", "-m", str(MEMORY_MB), "-o", stamps, "-n", f"bench-container-{runtime}"]
    if runtime != "native":
        args += ["--docker_image", image.IMAGE, "--docker_engine", runtime]
    t0 = time.time()
    proc = subprocess.run([str(BIN / "ytf-submit"), *args, STAMP], capture_output=True, text=True, timeout=600)
    wall = time.time() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{runtime}: {proc.stderr.strip().splitlines()[-1:]}")
    times = [float(p.read_text()) for p in Path(stamps).iterdir()]
    if len(times) != WORKERS:
        raise RuntimeError(f"{runtime}: {len(times)} of {WORKERS} tasks stamped")
    return max(times) - t0, wall


def _alone(runtime: str, workdir: str) -> float:
    """Process start -> the command's first line, on this host, as the executor starts it."""
    stamp = Path(workdir) / "stamp"
    stamp.unlink(missing_ok=True)
    command = f"python3 -c \"import time; open('{stamp}', 'w').write(repr(time.time()))\""
    if runtime == "native":
        argv = ["bash", "-c", command]
    else:
        argv = engine.ContainerPlan(
            engine=runtime, image=image.IMAGE, name=f"tony-bench-{runtime}", workdir=workdir, command=command,
            env_names=[], mounts=[f"{workdir}:{workdir}:rw"], memory_mb=MEMORY_MB, vcores=1,
            user=f"{os.getuid()}:{os.getgid()}", labels={engine.LABEL: "1"}, home=workdir,
            ulimits=engine.node_ulimits(), runtime=engine.podman_runtime() if runtime == "podman" else "").argv()
    t0 = time.time()
    with tempfile.TemporaryFile() as err:
        # stdin stays open until the command ends: it is the container's lease, as in the executor
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err)
        proc.wait(timeout=300)
        assert proc.stdin is not None
        proc.stdin.close()
        err.seek(0)
        if proc.returncode != 0 or not stamp.exists():
            raise RuntimeError(f"{runtime} alone: exit {proc.returncode}: {err.read().decode()[-300:]}")
    return float(stamp.read_text()) - t0


def run(runs: int = 3) -> Report:
    local_cluster()
    log = Path(scratch_dir("dockerd-")) / "dockerd.log"
    pid = daemon.ensure_running("docker", log, log=lambda *a: print(*a, file=sys.stderr))
    try:
        built = {}
        for engine in ("docker", "podman"):
            started = time.monotonic()
            image.build(engine, log=lambda *a: print(*a, file=sys.stderr))
            built[engine] = time.monotonic() - started
        samples: dict[str, list[tuple[float, float]]] = {"native": [], "docker": [], "podman": []}
        for runtime in samples:  # warm-up: the cluster's first containers, the engines' first runs
            _one(runtime)
        for n in range(runs):
            for runtime in samples:
                samples[runtime].append(_one(runtime))
            print(f"run {n + 1}: " + ", ".join(f"{k} {v[-1][0]:.2f}/{v[-1][1]:.2f} s" for k, v in samples.items()),
                  file=sys.stderr)
        workdir = scratch_dir("container-alone-")
        alone: dict[str, list[float]] = {k: [] for k in samples}
        for _ in range(ENGINE_RUNS):
            for runtime in alone:
                alone[runtime].append(_alone(runtime, workdir))
    finally:
        daemon.stop_daemon(pid)
    medians = {k: (statistics.median(s[0] for s in v), statistics.median(s[1] for s in v))
               for k, v in samples.items()}
    native = medians["native"][0]
    alone_medians = {k: statistics.median(v) for k, v in alone.items()}
    rows = [[k, f"{first:.2f}", "-" if k == "native" else f"{first - native:+.2f}", f"{wall:.2f}",
             f"{alone_medians[k]:.2f}", "-" if k == "native" else f"{alone_medians[k] - alone_medians['native']:+.2f}"]
            for k, (first, wall) in medians.items()]
    verdicts = []
    for name in ("docker", "podman"):
        cost = alone_medians[name] - alone_medians["native"]
        verdicts.append(f"{name}: a container adds {cost:.2f} s to a task's start (engine alone): "
                        f"{'met' if cost <= AIM_COST_S else 'MISSED'}")
    return Report(
        name="container_cost", title="Tasks in an image: the cost of the container per task (docker, podman)",
        command=f".venv/bin/python -m bench.container_cost --runs {runs}", columns=COLUMNS, rows=rows,
        notes=[f"worker:{WORKERS}, {MEMORY_MB} MiB per task, median of {runs} interleaved runs after a warm-up "
               "round; the first line is the command's own (python3 -c, the image's Python in a container, the "
               "host's natively)",
               f"engine alone: median of {ENGINE_RUNS} interleaved runs of the executor's command line "
               "(ContainerPlan.argv(): --rm -i, host network, limits, the lease) against bash -c, on this host",
               f"`tony image build` this run: docker {built['docker']:.1f} s, podman {built['podman']:.1f} s "
               "(seconds when up to date; from nothing it debootstraps, pip-installs and imports)"],
        aims=[f"a task's command starts at most {AIM_COST_S:.0f} s later in a container than natively"],
        verdicts=verdicts, plot=None)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.container_cost")
    parser.add_argument("--runs", type=int, default=3)
    print(run(parser.parse_args(argv).runs).table())


if __name__ == "__main__":
    main(sys.argv[1:])
