"""Where the CPU goes while a job runs: CPU seconds per kind of process, sampled from /proc.

Why: on a small machine every CPU second a launcher's own processes (client, AM,
executors, the YARN and HDFS daemons they keep busy) spend while the workers train
is a second the workers do not get. The training benchmark wraps each run in a
`CpuShare` and reports, per launcher, how much of the machine went to what.

A process's CPU time is read from /proc/<pid>/stat every SAMPLE_S seconds; one that
existed before the window counts from its first sample, one born inside it from
its start; what a process spends after its last sample (at most SAMPLE_S) is missed.
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from pathlib import Path

SAMPLE_S = 0.5
TICKS = os.sysconf("SC_CLK_TCK")

# (a substring of the command line, the kind it names), first match wins
KINDS: tuple[tuple[str, str], ...] = (
    ("digits_keras", "training"),
    ("train_task", "training"),
    ("tony_airflow.core.executor", "executor"),
    ("tony_airflow.core.am", "AM"),
    ("ytf-submit", "client"),
    ("com.linkedin.tony.TaskExecutor", "executor"),
    ("com.linkedin.tony.ApplicationMaster", "AM"),
    ("com.linkedin.tony", "client"),
    ("tf_yarn", "executor"),
    ("skein", "skein AM"),
    ("ResourceManager", "ResourceManager"),
    ("NodeManager", "NodeManager"),
    ("NameNode", "NameNode"),
    ("DataNode", "DataNode"),
    ("JobHistoryServer", "history server"),
    ("container-executor", "NodeManager"),
    ("launch_container", "NodeManager"),
)


def kind_of(cmdline: str) -> str:
    """The kind of a process from its command line; "other" when none matches."""
    for needle, kind in KINDS:
        if needle in cmdline:
            return kind
    return "other"


def _stat(pid: str) -> tuple[str, int] | None:
    """(the process's name, its CPU ticks so far: user + system), None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    close = stat.rindex(")")
    fields = stat[close + 2:].split()
    return stat[stat.index("(") + 1:close], int(fields[11]) + int(fields[12])


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


GROUPS: dict[str, tuple[str, ...]] = {
    "training": ("training",),
    "launcher": ("client", "AM", "skein AM", "executor"),
    "YARN and HDFS": ("ResourceManager", "NodeManager", "NameNode", "DataNode", "history server"),
    "other": ("other",),
}


class CpuShare:
    """A sampling window: `with CpuShare() as share: ...`; then the CPU seconds per kind, for the
    whole window or for a stretch of it (`between`), e.g. the epochs a training program timed."""

    def __init__(self, every: float = SAMPLE_S):
        self.every = every
        self.wall = 0.0
        self._first: dict[str, int] = {}
        self._last: dict[str, int] = {}
        self._kind: dict[str, str] = {}
        self._name: dict[str, str] = {}
        self._series: list[tuple[float, dict[str, float]]] = []  # (Unix time, CPU seconds per kind so far)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpu-share", daemon=True)
        self._me = str(os.getpid())

    def __enter__(self) -> CpuShare:
        self._sample(initial=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample(initial=False)
        self.wall = self._series[-1][0] - self._series[0][0]

    @property
    def seconds(self) -> dict[str, float]:
        """CPU seconds per kind over the whole window."""
        return dict(self._series[-1][1]) if self._series else {}

    def between(self, begin: float, end: float) -> tuple[dict[str, float], float]:
        """CPU seconds per kind from the last sample at or before `begin` to the first at or after `end`
        (Unix times), and the seconds between those two samples."""
        before = [s for s in self._series if s[0] <= begin] or self._series[:1]
        after = [s for s in self._series if s[0] >= end] or self._series[-1:]
        (t0, a), (t1, b) = before[-1], after[0]
        return {kind: b.get(kind, 0.0) - a.get(kind, 0.0) for kind in b}, t1 - t0

    def cores(self, kind: str) -> float:
        """The average number of cores a kind used over the window."""
        return self.seconds.get(kind, 0.0) / self.wall if self.wall else 0.0

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self._sample(initial=False)

    def _sample(self, initial: bool) -> None:
        now = time.time()
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or pid == self._me:
                continue
            stat = _stat(pid)
            if stat is None:
                continue
            name, ticks = stat
            if self._name.get(pid) != name:  # new, or it exec'd (a launch script becomes the executor)
                self._name[pid] = name
                self._kind[pid] = kind_of(_cmdline(pid))
            if initial:
                self._first[pid] = ticks
            elif ticks < self._last.get(pid, 0):  # the pid was reused by a new process
                self._first.pop(pid, None)
            self._last[pid] = ticks
        totals: dict[str, float] = defaultdict(float)
        for pid, last in self._last.items():
            totals[self._kind[pid]] += (last - self._first.get(pid, 0)) / TICKS
        self._series.append((now, dict(totals)))


def grouped(seconds: dict[str, float], over: float) -> dict[str, float]:
    """Cores per group (GROUPS) from CPU seconds per kind over `over` seconds."""
    return {group: sum(seconds.get(k, 0.0) for k in kinds) / over if over else 0.0
            for group, kinds in GROUPS.items()}
