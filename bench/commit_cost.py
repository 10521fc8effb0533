"""Benchmark: what the output's commit protocol (core/executor/output_commit.py) costs a round.

On the local cluster's HDFS (WebHDFS, as a chief's executor uses it): a directory as a Keras job leaves it
(a 48 MiB model, a checkpoint of data + index + pointer, a metrics file) published by one round; then an
idle round (nothing changed); then a round after one more save. Counted: WebHDFS requests per published
file and per idle round (the fence's LISTSTATUS before every rename is the protocol's own cost), wall
time of each round, and the local snapshot of the 48 MiB model (every taken version is copied before its
upload). RUNS rounds each, medians.

    tony cluster up; .venv/bin/python -m bench.commit_cost [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.report import Report
from tony_airflow.core.executor.output_commit import Mirror
from tony_airflow.yarn.hdfs import WebHdfsFiles, webhdfs

MODEL_MB = 48
AIM_IDLE_REQUESTS = 2      # an idle round: the fence's listing, nothing else
AIM_SNAPSHOT_SHARE = 0.25  # the local copies take at most this share of a round's time
COLUMNS = ["round", "files published", "WebHDFS requests", "requests per file", "wall s"]


class CountingFiles(WebHdfsFiles):
    """WebHdfsFiles that counts the requests the mirror sends (each method is one request or one pair)."""

    def __init__(self, fs) -> None:
        super().__init__(fs)
        self.requests = 0

    def __getattribute__(self, name: str):
        attr = super().__getattribute__(name)
        if name in ("list", "names", "read", "download", "create", "create_new", "append", "rename_over",
                    "delete", "mkdirs"):
            self.requests += 1
        return attr


def _save(local: Path, step: int) -> None:
    """A Keras-style save: the model rewritten, a checkpoint (data, index, then the pointer by rename)."""
    model = local / "model.keras"
    with model.open("wb") as fh:
        fh.write(step.to_bytes(8, "big") + os.urandom(MODEL_MB << 20))
    ckpt = local / "ckpt"
    ckpt.mkdir(parents=True, exist_ok=True)
    (ckpt / f"ckpt-{step}.data-00000-of-00001").write_bytes(os.urandom(256 << 10))
    (ckpt / f"ckpt-{step}.index").write_bytes(os.urandom(4 << 10))
    tmp = ckpt / ".checkpoint.tmp"
    tmp.write_text(f'model_checkpoint_path: "ckpt-{step}"\n')
    os.replace(tmp, ckpt / "checkpoint")
    (local / "metrics.json").write_text(f'{{"step": {step}}}')
    old = time.time() - 5  # quiet: the round takes them now, in the order they were written
    written = [model, ckpt / f"ckpt-{step}.data-00000-of-00001", ckpt / f"ckpt-{step}.index", ckpt / "checkpoint",
               local / "metrics.json"]
    for n, path in enumerate(written):
        os.utime(path, (old + n * 0.01, old + n * 0.01))


def _round(mirror: Mirror, files: CountingFiles) -> tuple[int, int, float]:
    before = files.requests
    start = time.perf_counter()
    published = mirror.push(cutoff=time.time())
    return published, files.requests - before, time.perf_counter() - start


def _snapshot_s(path: Path) -> float:
    with tempfile.TemporaryDirectory() as tmp, path.open("rb") as src, open(Path(tmp) / "copy", "wb") as dst:
        start = time.perf_counter()
        while chunk := src.read(1 << 20):
            dst.write(chunk)
        return time.perf_counter() - start


def run(runs: int = 5) -> Report:
    fs = webhdfs()
    rows: dict[str, list[tuple[int, int, float]]] = {"first round (all new)": [], "idle round": [],
                                                      "after one more save": []}
    snapshots = []
    for _ in range(runs):
        remote = f"/tmp/bench/commit-cost-{uuid.uuid4().hex[:8]}"
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / "tony-output"
            local.mkdir()
            files = CountingFiles(fs)
            mirror = Mirror(f"hdfs://{remote}", local, files=files, writer="bench", attempt=("application_0_0", 1))
            mirror.claim()
            _save(local, 1)
            rows["first round (all new)"].append(_round(mirror, files))
            rows["idle round"].append(_round(mirror, files))
            _save(local, 2)
            snapshots.append(_snapshot_s(local / "model.keras"))
            rows["after one more save"].append(_round(mirror, files))
        fs.rm(remote, recursive=True)
    table = []
    medians = {}
    for name, samples in rows.items():
        published = int(statistics.median(s[0] for s in samples))
        requests = statistics.median(s[1] for s in samples)
        wall = statistics.median(s[2] for s in samples)
        medians[name] = (published, requests, wall)
        per_file = f"{requests / published:.1f}" if published else "-"
        table.append([name, str(published), f"{requests:.0f}", per_file, f"{wall:.2f}"])
    snapshot = statistics.median(snapshots)
    share = snapshot / medians["after one more save"][2]
    idle = medians["idle round"][1]
    return Report(
        name="commit_cost", title="The output's commit protocol: requests and time of a round",
        command=f".venv/bin/python -m bench.commit_cost --runs {runs}", columns=COLUMNS, rows=table,
        notes=[f"the local cluster's HDFS over WebHDFS; a {MODEL_MB} MiB model, a checkpoint (data, index, "
               "pointer) and a metrics file; medians of the runs; a published file costs its upload (create, "
               "the data), the fence's listing and the rename; the local snapshot of the model took "
               f"{snapshot:.3f} s"],
        aims=[f"an idle round sends at most {AIM_IDLE_REQUESTS} requests",
              f"the local snapshots take at most {AIM_SNAPSHOT_SHARE:.0%} of a round after a save"],
        verdicts=[f"idle round: {idle:.0f} requests: {'met' if idle <= AIM_IDLE_REQUESTS else 'MISSED'}",
                  f"snapshot share: {share:.0%}: {'met' if share <= AIM_SNAPSHOT_SHARE else 'MISSED'}"],
        plot=None)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.commit_cost")
    parser.add_argument("--runs", type=int, default=5)
    print(run(parser.parse_args(argv).runs).table())


if __name__ == "__main__":
    main(sys.argv[1:])
