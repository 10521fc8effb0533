"""Finding the OS processes of one local cluster: its daemons and its containers.

Containers are plain processes started by the NodeManager. They carry
`CONTAINER_ID` in their environment and run below the NodeManager's local
directories, which is how a leftover one is recognised after the fact.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ContainerProcess:
    pid: int
    container_id: str
    cmdline: str


def process_environ(pid: int) -> dict[str, str]:
    """A live process's environment ({} when it is gone or not ours to read)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def container_processes(nm_local_dir: Path) -> list[ContainerProcess]:
    """Live processes started by this cluster's NodeManager for a container."""
    root = str(nm_local_dir)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        env = process_environ(pid)
        in_container = "CONTAINER_ID" in env and _below(root, env.get("LOCAL_DIRS", ""))
        if in_container or _cwd(pid).startswith(root + os.sep):
            state = _proc_state(pid)
            if state and state != "Z":
                found.append(ContainerProcess(pid, env.get("CONTAINER_ID", "?"), _cmdline(pid)))
    return found


def _below(root: str, local_dirs: str) -> bool:
    """A container's LOCAL_DIRS (comma-separated) under `root`: by whole path components, so that a
    host's `nm-local-h1` is not also the single-node `nm-local`."""
    return any(d == root or d.startswith(root + os.sep) for d in local_dirs.split(","))


def _proc_state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[0]


def pid_alive(pid: int) -> bool:
    state = _proc_state(pid)
    return bool(state) and state != "Z"


def pid_from_file(pid_file: Path, marker: bytes) -> int | None:
    """The live process a pid file names, if its command line holds `marker` (a stale file's pid may
    have been reused by another process)."""
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        return None
    try:
        if pid_alive(pid) and marker in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
    except OSError:
        pass
    return None


EXIT_WAIT_S = 10.0


def wait_exited(pid_file: Path, wait_s: float = EXIT_WAIT_S, pause_s: float = 0.05) -> None:
    """A daemon SIGKILLed a moment ago may still be exiting: its memory released already (its command line
    reads empty, so pid_from_file no longer knows it) while its sockets are still open. Wait, up to
    `wait_s`, until the process the pid file names has ended (gone, or a zombie: its files are closed).
    A live process with a command line is left alone: a pid reused by another program is not ours to wait for."""
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        return
    deadline = time.monotonic() + wait_s
    while pid_alive(pid) and not _cmdline(pid) and time.monotonic() < deadline:
        time.sleep(pause_s)


def stop_from_file(pid_file: Path, marker: bytes, grace: float) -> None:
    """Stop the process a pid file names (SIGTERM, SIGKILL after `grace` seconds); remove the file."""
    pid = pid_from_file(pid_file, marker)
    if pid is not None:
        terminate([pid], grace=grace)
    pid_file.unlink(missing_ok=True)


def terminate(pids: list[int], grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL whatever is still alive after `grace` seconds."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.2)
    for pid in pids:
        if pid_alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def rss_kib(pid: int) -> int:
    """Resident memory of one process, from /proc/PID/status (bench/ measures the AM and the executors)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0
