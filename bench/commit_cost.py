"""Benchmark: what the output's commit protocol (core/executor/output_commit.py) costs a round.

On the local cluster's HDFS (WebHDFS, as a chief's executor uses it): a directory as a Keras job leaves it
(a 48 MiB model, a checkpoint of data + index + pointer, a metrics file) published by one round; then an
idle round (nothing changed); then a round after one more save. Counted: WebHDFS requests per published
file and per idle round (the fence's LISTSTATUS before every rename is the protocol's own cost), wall
time of each round, and the local snapshot of the 48 MiB model (every taken version is copied before its
upload). RUNS rounds each, medians.

Then (issue #50) the time from a save's close to its presence in HDFS, as a retry sees it: a writer process
rewrites one file in place (4 MiB or 48 MiB, its step number first) every 0.4 s or every 5 s while the mirror
runs in the background as the chief's does; a save is present once HDFS holds it or a later one (the moment the
mirror's `rename_over` of that version returned, recorded by a wrapper, not polled). Median and p95 over the
saves, the event-driven mirror (`start(..., events=True, writers=...)`, where the mirror has it) beside the quiet
rule; a save no version of which reached HDFS while the writer ran counts as "not present". And the executor's
CPU time (this process's, the mirror's thread being all it runs) watching a directory of 10 000 files, idle and
with one save per second, against an in-memory HDFS (uploads cost nothing there: the watching is measured).

    tony cluster up; .venv/bin/python -m bench.commit_cost [--runs 5] [--no-latency] [--no-watch]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.local import local_cluster
from bench.report import Report
from tony_airflow.core.executor.output_commit import Mirror
from tony_airflow.yarn.hdfs import RemoteFile, WebHdfsFiles, webhdfs

MODEL_MB = 48
AIM_IDLE_REQUESTS = 2      # an idle round: the fence's listing, nothing else
AIM_SNAPSHOT_SHARE = 0.25  # the local copies take at most this share of a round's time
COLUMNS = ["round", "files published", "WebHDFS requests", "requests per file", "wall s"]
SAVE_SIZES_MB = (4, 48)
SAVE_INTERVALS_S = (0.4, 5.0)
SAVES = {0.4: 30, 5.0: 6}      # saves per run: 12 s of saves every 0.4 s, 30 s of saves every 5 s
AIM_PRESENCE_MARGIN_S = 1.0    # a save is in HDFS within its upload time + this, after its close (issue #50)
WATCH_FILES = 10_000
WATCH_S = 30.0                 # CPU time is measured over this long, idle and with one save per second
WATCH_SAVE_MB = 1
LATENCY_COLUMNS = ["save size, every", "mirror", "saves present / made", "close -> in HDFS median s", "p95 s",
                   "upload median s", "aim: p95 <= upload + 1 s"]
WATCH_COLUMNS = ["10 000 files watched", "mirror", "CPU s per minute", "CPU share of a core"]
WRITER = """
import sys, time
path, size, interval, count = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
body = bytes(size - 8)
began = time.monotonic()
for n in range(1, count + 1):
    with open(path, "wb") as fh:  # in place, as torch.save and Keras do
        fh.write(n.to_bytes(8, "big"))
        fh.write(body)
    print(n, time.monotonic(), flush=True)
    time.sleep(max(0.0, began + interval * n - time.monotonic()))
time.sleep(3.0)  # a program goes on training after its last save: that save's way to HDFS is measured too
"""


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


# ------------------------------------------------------------------ issue #50: from a save's close to HDFS
def start_mirror(mirror: Mirror, events: bool, writers: Callable[[], list[int]]) -> None:
    """Start the background work as the chief's executor does: the writer's kernel events (`events=False`:
    the quiet rule the mirror falls back to)."""
    mirror.start("push", events=events, writers=writers)


def _peek_step(data: Any) -> int | None:
    """The step number an upload's body starts with (the writer puts it first), its position kept."""
    if isinstance(data, (bytes, bytearray)):
        return int.from_bytes(data[:8], "big")
    if not hasattr(data, "seek"):
        return None
    at = data.tell()
    head = data.read(8)
    data.seek(at)
    return int.from_bytes(head, "big")


class RecordingFiles(WebHdfsFiles):
    """WebHdfsFiles that records when each version became present: the moment `rename_over` of its
    temporary file returned (HDFS shows it from then on), with the step its body began with."""

    def __init__(self, fs) -> None:
        super().__init__(fs)
        self.steps: dict[str, int | None] = {}                      # temporary name -> the step uploaded
        self.present: list[tuple[float, str, int | None]] = []       # (monotonic, destination, step)
        self.uploads: list[float] = []                               # seconds of each create (the data)

    def create(self, path: str, data) -> None:
        step = _peek_step(data)
        began = time.monotonic()
        super().create(path, data)
        self.uploads.append(time.monotonic() - began)
        self.steps[path] = step

    def rename_over(self, source: str, destination: str) -> None:
        super().rename_over(source, destination)
        self.present.append((time.monotonic(), destination, self.steps.pop(source, None)))


def presence_delays(closed: dict[int, float], present: list[tuple[float, int | None]],
                    until: float) -> list[float | None]:
    """For each save (step -> its close), seconds until HDFS held it or a later save (what a retry would
    resume from), counting only what became present before `until` (the writer's end); None: never."""
    delays: list[float | None] = []
    for step, at in sorted(closed.items()):
        later = [t for t, s in present if s is not None and s >= step and t <= until]
        delays.append(max(0.0, min(later) - at) if later else None)
    return delays


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def save_to_hdfs(size_mb: int, interval: float, events: bool) -> dict[str, Any]:
    """One run: a writer process saves `size_mb` in place every `interval` s, SAVES[interval] times, while a
    mirror publishes in the background; each save's close -> presence delay, and each upload's time."""
    fs = webhdfs()
    remote = f"/tmp/bench/commit-latency-{uuid.uuid4().hex[:8]}"
    pids: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / "tony-output"
        local.mkdir()
        files = RecordingFiles(fs)
        mirror = Mirror(f"hdfs://{remote}", local, files=files, writer="bench", attempt=("application_0_0", 1))
        mirror.claim()
        start_mirror(mirror, events, pids.copy)
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(local / "model.bin"), str(size_mb << 20),
                                   str(interval), str(SAVES[interval])], stdout=subprocess.PIPE, text=True)
        pids.append(writer.pid)
        out, _ = writer.communicate()
        ended = time.monotonic()
        mirror.finish(math.inf)
    fs.rm(remote, recursive=True)
    closed = {int(n): float(t) for n, t in (line.split() for line in out.splitlines() if line.strip())}
    model = [(t, step) for t, dest, step in files.present if dest.endswith("/model.bin")]
    return {"delays": presence_delays(closed, model, ended), "uploads": files.uploads}


def latency(runs: int = 1) -> Report:
    """Close -> presence in HDFS for each save size and interval, events beside the quiet rule."""
    modes = [("events", True), ("quiet rule", False)]
    rows, data, verdicts = [], {}, []
    for size in SAVE_SIZES_MB:
        for interval in SAVE_INTERVALS_S:
            for name, events in modes:
                delays: list[float | None] = []
                uploads: list[float] = []
                for _ in range(runs):
                    got = save_to_hdfs(size, interval, events)
                    delays += got["delays"]
                    uploads += got["uploads"]
                present = [d for d in delays if d is not None]
                upload = statistics.median(uploads) if uploads else float("nan")
                median = statistics.median(present) if present else None
                p95 = _p95(present) if len(present) == len(delays) else None  # a save never present: no p95
                met = p95 is not None and p95 <= upload + AIM_PRESENCE_MARGIN_S
                key = f"{size} MiB every {interval:g} s, {name}"
                data[key] = {"delays": delays, "uploads": uploads}
                rows.append([f"{size} MiB, {interval:g} s", name, f"{len(present)} / {len(delays)}",
                             f"{median:.2f}" if median is not None else "never",
                             f"{p95:.2f}" if p95 is not None else "-", f"{upload:.2f}",
                             "met" if met else "MISSED"])
                verdicts.append(f"{key}: {'met' if met else 'MISSED'}")
                print(f"{key}: {rows[-1][2:]}", file=sys.stderr, flush=True)
    return Report(
        name="commit_latency", title="The output's commit protocol: from a save's close to HDFS",
        command=f".venv/bin/python -m bench.commit_cost --runs {runs}", columns=LATENCY_COLUMNS, rows=rows,
        notes=["a writer process rewrites one file in place (its step first) every 0.4 s (30 saves) or 5 s (6 "
               "saves); the mirror runs its background rounds as a chief's executor does, against the local "
               "cluster's HDFS; a save is present once HDFS holds it or a later save (when the mirror's "
               "rename_over of that version returned); 'never': no version of it or after it reached HDFS while "
               "the writer ran; p95 only when every save became present",
               "mirror: 'events' = kernel file events (start(..., events=True)); 'quiet rule' = a file is whole "
               "once unchanged for QUIET_S (1 s), the fallback where events are not to be had"],
        aims=[f"p95 from a save's close to HDFS <= its upload time + {AIM_PRESENCE_MARGIN_S:.0f} s, at every "
              "size and interval (issue #50)"],
        verdicts=verdicts, data=data)


class MemoryFiles:
    """OutputFiles in memory (no request costs anything): the watching is what is measured."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.clock = 0

    def names(self, directory: str) -> list[str]:
        prefix = directory.rstrip("/") + "/"
        return sorted({prefix + p[len(prefix):].split("/")[0] for p in self.files if p.startswith(prefix)})

    def list(self, root: str) -> dict[str, RemoteFile]:
        return {p: RemoteFile(len(b), 0) for p, b in self.files.items() if p.startswith(root + "/")}

    def entries(self, directory: str) -> dict[str, RemoteFile]:
        prefix = directory.rstrip("/") + "/"
        return {p: RemoteFile(len(b), 0) for p, b in self.files.items()
                if p.startswith(prefix) and "/" not in p[len(prefix):]}

    def read(self, path: str, start: int = 0) -> bytes:
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path][start:]

    def download(self, path: str, local: str) -> None:
        Path(local).write_bytes(self.read(path))

    def create(self, path: str, data) -> None:
        self.files[path] = data if isinstance(data, bytes) else data.read()

    def create_new(self, path: str, data: bytes) -> None:
        if path in self.files:
            raise FileExistsError(path)
        self.files[path] = data

    def append(self, path: str, data: bytes) -> None:
        self.files[path] = self.files.get(path, b"") + data

    def rename_over(self, source: str, destination: str) -> None:
        self.files[destination] = self.files.pop(source)

    def delete(self, path: str, recursive: bool = False) -> None:
        for p in [p for p in self.files if p == path or p.startswith(path.rstrip("/") + "/")]:
            self.files.pop(p)

    def mkdirs(self, path: str) -> None:
        pass


def _cpu_while(seconds: float, saving: bool, local: Path, pids: list[int]) -> float:
    """This process's CPU seconds over `seconds` of the mirror watching; `saving`: a writer process saves
    WATCH_SAVE_MB in place once a second meanwhile (its pid in `pids`, the mirror's writers)."""
    writer = None
    if saving:
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(local / "save.bin"), str(WATCH_SAVE_MB << 20),
                                   "1.0", str(int(seconds))], stdout=subprocess.DEVNULL)
        pids.append(writer.pid)
    began = time.process_time()
    time.sleep(seconds)
    used = time.process_time() - began
    if writer is not None:
        writer.wait()
    return used


def watch_cost() -> Report:
    """The mirror's CPU time watching WATCH_FILES files (all published first), idle and with a save a second."""
    modes = [("events", True), ("quiet rule", False)]
    rows, data = [], {}
    for name, events in modes:
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / "tony-output"
            for n in range(WATCH_FILES):
                shard = local / f"d{n // 100:03d}"
                shard.mkdir(parents=True, exist_ok=True)
                (shard / f"f{n % 100:02d}").write_bytes(b"x")
            mirror = Mirror("hdfs:///bench/watch", local, files=MemoryFiles(), writer="bench",
                            attempt=("application_0_0", 1))
            mirror.claim()
            old = time.time() - 5
            for path in local.rglob("f*"):
                os.utime(path, (old, old))
            mirror.push_all(cutoff=time.time())  # all 10 000 published: what follows is watching
            pids: list[int] = []
            start_mirror(mirror, events, pids.copy)
            time.sleep(2.0)  # the event source's watches are set
            for what, saving in (("idle", False), ("one save per second", True)):
                used = _cpu_while(WATCH_S, saving, local, pids)
                data[f"{name}, {what}"] = used
                rows.append([what, name, f"{used * 60 / WATCH_S:.2f}", f"{used / WATCH_S:.1%}"])
                print(f"watch {name}, {what}: {used:.2f} CPU s in {WATCH_S:.0f} s", file=sys.stderr, flush=True)
            mirror.finish(math.inf)
    return Report(
        name="commit_watch", title="The output's commit protocol: the executor's CPU watching 10 000 files",
        command=".venv/bin/python -m bench.commit_cost", columns=WATCH_COLUMNS, rows=rows,
        notes=[f"{WATCH_FILES} one-byte files in 100 directories, all published first; this process's CPU time "
               f"over {WATCH_S:.0f} s of the mirror's background rounds, idle and while a writer process saves "
               f"{WATCH_SAVE_MB} MiB in place once a second; HDFS is in memory here, so uploads cost nothing: the "
               "watching (walks, stats, events, snapshots) is what is measured"],
        data=data)


def run_all(runs: int = 5, with_latency: bool = True, with_watch: bool = True) -> list[Report]:
    """Every table of this benchmark: a round's requests, a save's way to HDFS, the watching's CPU."""
    reports = [run(runs)]
    if with_latency:
        reports.append(latency())
    if with_watch:
        reports.append(watch_cost())
    return reports


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.commit_cost")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-latency", action="store_true", help="leave out a save's close -> HDFS")
    parser.add_argument("--no-watch", action="store_true", help="leave out the CPU watching 10 000 files")
    args = parser.parse_args(argv)
    local_cluster()  # the default local cluster (started or reused), unless HADOOP_CONF_DIR names one
    for report in run_all(args.runs, not args.no_latency, not args.no_watch):
        print(report.table(), flush=True)
        print(flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
