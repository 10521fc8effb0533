"""Benchmark: how long a trivial ps:1,worker:2 job takes to start and to finish, against the YARN floor.

Variants, interleaved run by run on the local cluster:
- `ytf-submit` (a fresh process: Python start, submission over REST and WebHDFS, waiting),
- the Python API (`TonyClient.submit` + `JobHandle.wait` in this process),
- the floor: a bare skein application with the same three containers running the same command, no
  registry, no AM of ours (skein's own AM starts them all at once),
- TonY's own submitter (`ClusterSubmitter`, built from TONY_SRC by bench/peers/tony), when TONY_SRC is set,
- tf-yarn's run_on_yarn (bench/peers/tfyarn, its own venv named by TONY_BENCH_TFYARN_PYTHON), when set.

(a) gang start: submit -> the last of the three tasks has started the user command (each task writes
    time.time() into a shared directory; one machine, one clock);
(b) submit -> SUCCEEDED: the ResourceManager's finishedTime.
(c) the client's wall time minus the application's RM lifetime (what the client adds).
Also the peak resident memory of our AM and of one executor, sampled from /proc during a run.
A peer that cannot run has a row or a note that says why.

    .venv/bin/python -m bench.launch_latency [--runs 5]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import skein

from bench import launch_timeline
from bench.local import local_cluster
from bench.peers.tfyarn import runner as tfyarn_runner
from bench.peers.tony import adapt as tony_adapt
from bench.peers.tony import run as tony_run
from bench.report import Report
from bench.scratch import scratch_dir, scratch_file
from tony_airflow.core.client import TonyClient
from tony_airflow.core.history.store import HistoryStore
from tony_airflow.core.spec import build_job_spec
from tony_airflow.local.cluster import LocalCluster
from tony_airflow.local.cluster.processes import rss_kib
from tony_airflow.yarn.rest import ApplicationReport, ResourceManagerClient

BIN = Path(sys.executable).parent
TYPES = {"ps": 1, "worker": 2}
MEMORY_MB = 512
AIM_OVER_FLOOR_S = 0.3  # issue #41: gang start at most this much later than a bare skein application's
AIM_CLIENT_OVERHEAD_S = 1.0  # issue #41: ytf-submit's wall time over the application's own RM lifetime
AIM_WALL_VS_TONY = 0.5       # issues #20 and #54: ytf-submit's wall time against TonY's, same job
COLUMNS = ["variant", "gang start s", "to SUCCEEDED s", "client wall s", "gang - floor s", "done / floor",
           "client wall - RM life s"]
TONY = "TonY (ClusterSubmitter)"
TF_YARN = "tf-yarn (run_on_yarn)"
# every task stamps its start; workers then exit 0, ps serves until stopped (ours) or exits (the floor)
STAMP = ("python3 -c \"import os,time; open(os.path.join('{d}', os.environ['DTF_TASK_JOB_NAME'] + '-' + "
         "os.environ['DTF_TASK_INDEX']), 'w').write(repr(time.time()))\"")
PS_SERVES = " && if [ \"$DTF_TASK_JOB_NAME\" = ps ]; then sleep 600; fi"


def _command(stamps: str) -> str:
    return STAMP.format(d=stamps) + PS_SERVES


def _last_stamp(stamps: str) -> float:
    """When the last of the tasks began the user's command (seconds since the epoch)."""
    times = [float(p.read_text()) for p in Path(stamps).iterdir()]
    if len(times) != sum(TYPES.values()):
        raise RuntimeError(f"{len(times)} of {sum(TYPES.values())} tasks started")
    return max(times)


def _gang_start(stamps: str, t0: float) -> float:
    return _last_stamp(stamps) - t0


def _ended(rm: ResourceManagerClient, app_id: str) -> ApplicationReport:
    while True:
        report = rm.application(app_id)
        if report.is_terminal:
            if report.final_status != "SUCCEEDED":
                raise RuntimeError(f"{app_id} {report.final_status}: {report.diagnostics[:200]}")
            return report
        time.sleep(0.2)


def _finished(rm: ResourceManagerClient, app_id: str, t0: float) -> float:
    return _ended(rm, app_id).finished_time / 1000.0 - t0


def _overhead(rm: ResourceManagerClient, app_id: str, wall: float) -> float:
    """What the client adds to the application's own life: its wall time minus the RM's start -> finish."""
    report = _ended(rm, app_id)
    return wall - (report.finished_time - report.started_time) / 1000.0


# one run: submit -> gang start, submit -> SUCCEEDED (the RM's finishedTime), the client's wall time
# minus the application's RM lifetime, the client's wall time (both nan when no client waits)
Sample = tuple[float, float, float, float]


def run_cli(rm: ResourceManagerClient, timelines: list[dict[str, float]] | None = None) -> Sample:
    """One run of ytf-submit; its phase timeline (bench/launch_timeline.py) is added to `timelines`."""
    stamps = scratch_dir("latency-cli-")
    t0 = time.time()
    proc = subprocess.run([str(BIN / "ytf-submit"), "-r", "ps:1,worker:2", "-m", str(MEMORY_MB), "-n",
                           "bench-latency-cli", _command(stamps)], capture_output=True, text=True, timeout=300)
    wall = time.time() - t0
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1:])
    app_id = proc.stdout.split("Submitted application ", 1)[1].split()[0]
    sample = _gang_start(stamps, t0), _finished(rm, app_id, t0), _overhead(rm, app_id, wall), wall
    if timelines is not None:
        try:
            timelines.append(_timeline(rm, app_id, t0, wall, _last_stamp(stamps)))
        except (RuntimeError, launch_timeline.TimelineError, OSError) as exc:  # the latency figures stand
            print(f"{app_id}: no timeline: {exc}", file=sys.stderr)
    return sample


def _timeline(rm: ResourceManagerClient, app_id: str, t0: float, wall: float,
              command_started: float) -> dict[str, float]:
    """The run's phases, from the RM's report and the job's event log in the history store."""
    store = HistoryStore.open()
    files = store.find(app_id)
    if files is None:
        raise RuntimeError(f"{app_id}: no event log in {store.root}")
    return launch_timeline.phases(t0, wall, command_started, rm.get(f"/ws/v1/cluster/apps/{app_id}")["app"],
                                  store.events(files))


def run_api(client: TonyClient, rm: ResourceManagerClient,
            sampler: RssSampler | None = None) -> Sample:
    stamps = scratch_dir("latency-api-")
    job = build_job_spec({"cluster_requirement": "ps:1,worker:2", "task_memory": str(MEMORY_MB),
                          "name": "bench-latency-api", "command": _command(stamps)})
    t0 = time.time()
    handle = client.submit(job)
    if sampler is not None:
        sampler.start()
    handle.wait(poll=0.2)
    wall = time.time() - t0
    if sampler is not None:
        sampler.stop()
    return _gang_start(stamps, t0), _finished(rm, handle.app_id, t0), _overhead(rm, handle.app_id, wall), wall


def run_floor(client: TonyClient, rm: ResourceManagerClient) -> Sample:
    stamps = scratch_dir("latency-floor-")
    services = {}
    for name, count in TYPES.items():
        script = (f"export DTF_TASK_JOB_NAME={name} DTF_TASK_INDEX=${{SKEIN_CONTAINER_ID##*_}}\n"
                  + STAMP.format(d=stamps))
        services[name] = skein.Service(resources=skein.Resources(memory=MEMORY_MB, vcores=1), script=script,
                                       instances=count, max_restarts=0)
    spec = skein.ApplicationSpec(name="bench-latency-floor", services=services, queue="default")
    t0 = time.time()
    app_id = client.submit_spec(spec)
    done = _finished(rm, app_id, t0)
    return _gang_start(stamps, t0), done, math.nan, math.nan  # no client waits on it


def run_tony(jar: Path, rm: ResourceManagerClient) -> Sample:
    """The same job with TonY's own client (bench/peers/tony): the same stamp, the same serving ps
    (TonY does not wait for its ps: `tony.application.untracked.jobtypes` is ps by default)."""
    stamps = scratch_dir("latency-tony-")
    conf = tony_run.write_conf(scratch_file(Path(stamps).with_suffix(".xml")), TYPES, MEMORY_MB)
    command = "export DTF_TASK_JOB_NAME=$JOB_NAME DTF_TASK_INDEX=$TASK_INDEX; " + _command(stamps)
    t0 = time.time()
    run = tony_run.submit(jar, command, conf)
    if run.returncode != 0:
        raise RuntimeError(f"TonY {run.app_id} exited {run.returncode}: {run.log.strip().splitlines()[-2:]}")
    return (_gang_start(stamps, t0), _finished(rm, run.app_id, t0), _overhead(rm, run.app_id, run.wall_s),
            run.wall_s)


def run_tfyarn(tfyarn: tfyarn_runner.TfYarn, rm: ResourceManagerClient) -> Sample:
    """The same job through tf-yarn's run_on_yarn (bench/peers/tfyarn): chief, worker and ps each stamp
    their start between tf-yarn's init and stop barriers."""
    stamps = scratch_dir("latency-tfyarn-")
    os.chmod(stamps, 0o777)
    t0 = time.time()
    app_id, wall = tfyarn_runner.submit(tfyarn, {"BENCH_STAMPS": stamps}, MEMORY_MB)
    return _gang_start(stamps, t0), _finished(rm, app_id, t0), _overhead(rm, app_id, wall), wall


class RssSampler:
    """Peak RSS (KiB) of our AM and of one executor while a job runs."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.peak = {"AM": 0, "executor": 0}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            executors = []
            for proc in self.cluster.container_processes():
                if "tony_airflow.core.am" in proc.cmdline:
                    self.peak["AM"] = max(self.peak["AM"], rss_kib(proc.pid))
                elif "tony_airflow.core.executor" in proc.cmdline:
                    executors.append(rss_kib(proc.pid))
            if executors:
                self.peak["executor"] = max(self.peak["executor"], max(executors))
            time.sleep(0.2)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def run_all(runs: int = 5) -> list[Report]:
    """The latency report, and the phase timeline of the same ytf-submit runs."""
    cluster = local_cluster()
    timelines: list[dict[str, float]] = []
    results: dict[str, list[Sample]] = {"ytf-submit": [], "Python API": [], "skein floor": []}
    tony_jar, tony_why = _tony_jar()
    if tony_jar is not None:
        results[TONY] = []
    tfyarn, tfyarn_why = tfyarn_runner.available()
    if tfyarn is not None:
        results[TF_YARN] = []
    failures: dict[str, list[str]] = {}
    sampler = RssSampler(cluster)
    with TonyClient() as client:
        rm = client.rm
        for n in range(runs):
            results["ytf-submit"].append(run_cli(rm, timelines))
            if tony_jar is not None:
                _peer_run(results, failures, TONY, lambda: run_tony(tony_jar, rm))
            if tfyarn is not None:
                _peer_run(results, failures, TF_YARN, lambda: run_tfyarn(tfyarn, rm))
            results["Python API"].append(run_api(client, rm, sampler if n == 0 else None))
            results["skein floor"].append(run_floor(client, rm))
            print(f"run {n + 1}: " + ", ".join(f"{k} {v[-1][0]:.2f}/{v[-1][1]:.2f}/{v[-1][3]:.2f} s"
                                               for k, v in results.items() if v), file=sys.stderr)
    results = {k: v for k, v in results.items() if v}  # a peer whose every run failed has only its note
    medians = {k: tuple(statistics.median(r[i] for r in v) for i in range(4)) for k, v in results.items()}
    rows = table_rows(medians)
    if tony_jar is None:
        rows.append([TONY, "n/a", "n/a", "n/a", "n/a", "n/a", "TONY_SRC not set"])
    if tfyarn is None:
        rows.append([TF_YARN, "n/a", "n/a", "n/a", "n/a", "n/a", "not available (see the notes)"])
    latency = Report(
        name="launch_latency", title="Launch latency: a trivial ps:1,worker:2 job against the YARN floor",
        command=f".venv/bin/python -m bench.launch_latency --runs {runs}",
        columns=COLUMNS,
        rows=rows,
        notes=[f"{MEMORY_MB} MiB per container, median of {runs} interleaved runs, {os.cpu_count()} cores",
               f"peak RSS: our AM {sampler.peak['AM'] / 1024:.0f} MiB, one executor "
               f"{sampler.peak['executor'] / 1024:.0f} MiB",
               "ours starts skein's Java AM with -XX:TieredStopAtLevel=1 -XX:+UseSerialGC (part of the "
               "product, core/client.py); the floor is a bare skein application with skein's defaults",
               tony_why, tfyarn_why,
               *(f"{name}: {len(errors)} of {runs} runs failed (medians over the others); last: {errors[-1]}"
                 for name, errors in failures.items()),
               "tf-yarn's client polls every 10 s; it runs with 1 s here (bench/peers/tfyarn/submit.py), as ours "
               "(ytf-submit: 1 s, 0.2 s at the end) and TonY's (1 s) do; its tasks import TensorFlow before the "
               "barrier, as tf-yarn's own tasks do"],
        aims=[f"gang start within {AIM_OVER_FLOOR_S:g} s of the floor",
              f"ytf-submit's wall time at most the application's RM lifetime + {AIM_CLIENT_OVERHEAD_S} s",
              f"ytf-submit's wall time at most {AIM_WALL_VS_TONY} x TonY's"],
        verdicts=[_verdict(medians), _overhead_verdict(medians["ytf-submit"][2]), _tony_verdict(results)],
        data={"results": results, "rss_mib": {k: v / 1024 for k, v in sampler.peak.items()}},
        plot=_plot)
    tony_wall = statistics.median(r[3] for r in results[TONY]) if TONY in results else None
    return [latency, timeline_report(timelines, runs, tony_wall)] if timelines else [latency]


def timeline_report(timelines: list[dict[str, float]], runs: int, tony_wall: float | None) -> Report:
    """Median seconds per phase of ytf-submit's runs, the largest first named, against TonY's whole wall."""
    medians = {name: statistics.median(t[name] for t in timelines) for name, _ in launch_timeline.PHASES}
    total = sum(medians.values())
    rows = [[name, f"{medians[name]:.2f}", f"{min(t[name] for t in timelines):.2f}",
             f"{max(t[name] for t in timelines):.2f}", f"{100 * medians[name] / total:.0f}%", what]
            for name, what in launch_timeline.PHASES]
    rows.append(["sum of medians", f"{total:.2f}", "", "", "100%", "ytf-submit's wall time, start to exit"])
    largest = sorted(medians, key=medians.__getitem__, reverse=True)[:3]
    notes = [f"the ytf-submit runs of the launch latency benchmark ({runs}), one clock (this machine's)",
             "largest phases: " + ", ".join(f"{name} {medians[name]:.2f} s" for name in largest)]
    if tony_wall is not None:
        notes.append(f"TonY's median wall time in the same runs: {tony_wall:.2f} s; half of it is "
                     f"{AIM_WALL_VS_TONY * tony_wall:.2f} s")
    return Report(name="launch_timeline", title="Launch timeline: where ytf-submit's seconds go, phase by phase",
                  command=f".venv/bin/python -m bench.launch_latency --runs {runs}",
                  columns=["phase", "median s", "min s", "max s", "share", "what it holds"], rows=rows,
                  notes=notes, data={"medians": medians, "tony_wall": tony_wall}, plot=_plot_timeline, panels=1)


def _plot_timeline(report: Report, axes: list) -> None:
    """One bar, cut into the phases (medians), beside TonY's whole wall time and the aim."""
    from matplotlib import colormaps

    ax = axes[0]
    left = 0.0
    colours = colormaps["tab20"]
    for n, (name, seconds) in enumerate(report.data["medians"].items()):
        ax.barh(["ytf-submit"], [seconds], left=left, label=name, color=colours(n))
        left += seconds
    if report.data["tony_wall"] is not None:
        ax.barh(["TonY"], [report.data["tony_wall"]], color="grey", label="TonY (whole)")
        ax.axvline(AIM_WALL_VS_TONY * report.data["tony_wall"], color="black", linestyle="--",
                   label=f"aim: {AIM_WALL_VS_TONY} x TonY")
    ax.set(xlabel="seconds from the client's start", title="phase timeline (medians)")
    ax.legend(fontsize="x-small", ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.25))


def table_rows(medians: dict[str, tuple[float, float, float, float]]) -> list[list[str]]:
    """One row per variant (medians of gang start, SUCCEEDED, client overhead, client wall), then
    ytf-submit's ratio to each peer that ran, for every figure the peer has."""
    floor_gang, floor_done = medians["skein floor"][:2]
    rows = [[name, f"{gang:.2f}", f"{done:.2f}", _seconds(wall), f"{gang - floor_gang:+.2f}",
             f"{done / floor_done:.2f}", _seconds(over)]
            for name, (gang, done, over, wall) in medians.items()]
    ours = medians["ytf-submit"]
    for peer in (TONY, TF_YARN):
        if peer in medians:
            theirs = medians[peer]
            rows.append([f"ytf-submit / {peer.split()[0]}", *(f"{ours[i] / theirs[i]:.2f}" for i in (0, 1, 3)),
                         "", "", f"{ours[2] / theirs[2]:.2f}"])
    return rows


def _seconds(value: float) -> str:
    """A client's figure; the floor has no client (NaN)."""
    return "n/a" if math.isnan(value) else f"{value:.2f}"


def _peer_run(results: dict[str, list[Sample]], failures: dict[str, list[str]], name: str,
              run: Callable[[], Sample]) -> None:
    """A peer's run; its failure is counted and named in the report, not the end of the benchmark."""
    try:
        results[name].append(run())
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        failures.setdefault(name, []).append(" ".join(str(exc).split())[:300])
        print(f"{name} failed: {exc}", file=sys.stderr)


def _tony_verdict(results: dict[str, list[Sample]]) -> str:
    """The command's wall time, from start to exit, medians over the interleaved runs."""
    if TONY not in results:
        return "no TonY run: no ratio"
    walls = {name: statistics.median(r[3] for r in results[name]) for name in ("ytf-submit", TONY)}
    ratio = walls["ytf-submit"] / walls[TONY]
    return (f"ytf-submit wall {walls['ytf-submit']:.2f} s, TonY {walls[TONY]:.2f} s: ratio {ratio:.2f}, "
            + ("aim met" if ratio <= AIM_WALL_VS_TONY else "aim missed"))


def _tony_jar() -> tuple[Path | None, str]:
    """TonY built from TONY_SRC (bench/peers/tony), or why not."""
    try:
        return tony_adapt.build(), "TonY built from TONY_SRC with bench/peers/tony/pom.xml"
    except tony_adapt.TonyBuildError as exc:
        return None, f"TonY: {exc}"


def _overhead_verdict(overhead: float) -> str:
    met = overhead <= AIM_CLIENT_OVERHEAD_S
    return f"ytf-submit wall - RM lifetime {overhead:.2f} s: " + ("aim met" if met else "aim missed")


def _verdict(medians: dict[str, tuple[float, ...]]) -> str:
    floor = medians["skein floor"][0]
    over = {name: m[0] - floor for name, m in medians.items() if name not in ("skein floor", TONY, TF_YARN)}
    met = all(v <= AIM_OVER_FLOOR_S for v in over.values())
    return (", ".join(f"{name} {v:+.2f} s" for name, v in over.items()) + " over the floor: "
            + ("aim met" if met else "aim missed"))


def _plot(report: Report, axes: list) -> None:
    results = report.data["results"]
    names = list(results)
    for ax, which, label in ((axes[0], 0, "submit -> gang start (s)"), (axes[1], 1, "submit -> SUCCEEDED (s)")):
        ax.boxplot([[r[which] for r in results[n]] for n in names])
        ax.set_xticks(range(1, len(names) + 1), names)
        ax.set(ylabel=label, title=label.split(" (")[0])
        ax.grid(alpha=0.3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for report in run_all(args.runs):
        print(report.table())


if __name__ == "__main__":
    main()
