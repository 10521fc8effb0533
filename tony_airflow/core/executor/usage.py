"""What a task used: peak resident memory of the user's process tree, and GPU utilisation.

Sampled once a second in a thread (psutil for memory; `nvidia-smi` for GPUs
when it exists on the node) and sent to the AM with every heartbeat and with
the exit report, which puts it into the job history.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading

import psutil

log = logging.getLogger("tony.executor.usage")
SAMPLE_S = 1.0
GPU_EVERY = 5  # nvidia-smi is slow: every 5th sample


def tree_rss_kib(pid: int) -> int:
    """Resident memory of a process and all its descendants, in KiB (0 once it is gone)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total // 1024


def gpu_utilisation(devices: str | None) -> float | None:
    """The highest utilisation (%) of this task's GPUs, or None without nvidia-smi."""
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return None
    cmd = [binary, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]
    if devices:
        cmd += ["-i", devices]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True).stdout
        values = [float(v) for v in out.split() if v.strip()]
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return max(values) if values else None


class UsageSampler:
    def __init__(self, pid: int, gpu_devices: str | None = None, interval: float = SAMPLE_S):
        self.pid = pid
        self.gpu_devices = gpu_devices
        self.interval = interval
        self.peak_rss_kib = 0
        self.gpu_util_max: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="usage", daemon=True)

    def start(self) -> UsageSampler:
        self.sample(with_gpu=True)
        self._thread.start()
        return self

    def sample(self, with_gpu: bool = False) -> None:
        self.peak_rss_kib = max(self.peak_rss_kib, tree_rss_kib(self.pid))
        if with_gpu:
            util = gpu_utilisation(self.gpu_devices)
            if util is not None:
                self.gpu_util_max = max(self.gpu_util_max or 0.0, util)

    def _loop(self) -> None:
        n = 0
        while not self._stop.wait(self.interval):
            n += 1
            self.sample(with_gpu=n % GPU_EVERY == 0)

    def stop(self) -> dict[str, float | int | None]:
        self._stop.set()
        return self.report()

    def report(self) -> dict[str, float | int | None]:
        return {"peak_rss_kib": self.peak_rss_kib, "gpu_util_max": self.gpu_util_max}
