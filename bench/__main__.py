"""`make bench`: every benchmark on the local cluster, then docs/BENCHMARKS.md and its plots.

    .venv/bin/python -m bench [--out docs] [--runs 5] [--skip NAME ...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from bench import (
    airflow_deferrable,
    commit_cost,
    container_cost,
    guard_cost,
    launch_latency,
    progress_cost,
    registry_scale,
    torch_elastic,
    torch_overhead,
    training_overhead,
)
from bench.report import Report

ROOT = Path(__file__).resolve().parents[1]
def machine() -> list[str]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem_kib = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                       if line.startswith("MemTotal")))
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[:1]
    from tony_airflow.local.cluster.jars import hadoop_version

    return [f"{os.cpu_count()} cores ({cpu}), {mem_kib / 2**20:.0f} GiB memory, {platform.system()} "
            f"{platform.release()}",
            f"Python {sys.version.split()[0]}, {java[0] if java else 'java ?'}, Hadoop {hadoop_version()} "
            "(local single-node YARN + HDFS, `tony cluster up`)"]


def plot(report: Report, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, report.panels, figsize=(5.5 * report.panels, 4))
    report.plot(report, list(axes) if report.panels > 1 else [axes])
    fig.suptitle(report.title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(reports: list[Report], out: Path, argv: list[str], skipped: list[str] | None = None) -> Path:
    images = out / "bench"
    images.mkdir(parents=True, exist_ok=True)
    parts = ["# Benchmarks", "",
             f"Written by `make bench` (`{' '.join(['.venv/bin/python -m bench', *argv])}`) on "
             f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC.", "",
             *[f"- {line}" for line in machine()], "",
             "Figures are medians on a shared, noisy machine; they are reported, never asserted in tests. "
             "Every figure and verdict below comes from this run; what changed them over time is in "
             "PERFORMANCE_HISTORY.md (hand-written).", ""]
    if skipped:  # a run of some benchmarks only: the report says which were not run, never shows older figures
        parts += [f"Not run this time (`--skip`): {', '.join(skipped)}. Their figures are in the previous "
                  "reports (git history of this file) and PERFORMANCE_HISTORY.md.", ""]
    for report in reports:
        image = None
        if report.plot is not None:
            plot(report, images / f"{report.name}.png")
            image = f"bench/{report.name}.png"
        parts.append(report.markdown(image))
    path = out / "BENCHMARKS.md"
    path.write_text("\n".join(parts))
    return path


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--out", default=str(ROOT / "docs"))
    parser.add_argument("--runs", type=int, default=5, help="launch latency runs (default 5)")
    parser.add_argument("--skip", nargs="*", default=[],
                        choices=["launch_latency", "registry_scale", "training_overhead", "airflow_deferrable",
                                 "container_cost", "guard_cost", "commit_cost", "torch_overhead", "torch_elastic",
                                 "progress_cost"])
    args = parser.parse_args(argv)
    steps: list[tuple[str, Callable[[], list[Report]]]] = [
        ("launch_latency", lambda: launch_latency.run_all(args.runs)),  # and its phase timeline
        ("registry_scale", lambda: [registry_scale.run()]),
        ("training_overhead", lambda: training_overhead.run()),  # throughput, and the CPU of the same runs
        ("airflow_deferrable", lambda: [airflow_deferrable.run(airflow_deferrable.SIZES, 30.0)]),
        ("container_cost", lambda: [container_cost.run()]),
        ("guard_cost", lambda: [guard_cost.run()]),
        ("commit_cost", lambda: commit_cost.run_all()),
        ("torch_overhead", lambda: [torch_overhead.run()]),
        ("torch_elastic", lambda: [torch_elastic.run()]),
        ("progress_cost", lambda: [progress_cost.run(args.runs)])]
    reports = []
    for name, step in steps:
        if name in args.skip:
            continue
        for report in step():
            print(report.table(), flush=True)
            print(flush=True)
            reports.append(report)
    print(f"wrote {write(reports, Path(args.out), argv, [name for name, _ in steps if name in args.skip])}")


if __name__ == "__main__":
    main(sys.argv[1:])
