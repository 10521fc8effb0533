"""Making sure a container engine answers on this machine (`tony cluster up --docker`, the test fixtures).

podman has no daemon. Docker's is started when it is not running, with a configuration that makes
no bridge and no firewall rules: the project only ever uses host networking, and an engine's default
bridge would put private-range addresses on this machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tony_airflow.core.executor.engine import LABEL
from tony_airflow.errors import ClusterError

DAEMON_JSON = Path("/etc/docker/daemon.json")
NO_NETWORKING = {"bridge": "none", "iptables": False, "ip6tables": False}
PACKAGES = {"docker": "docker.io", "podman": "podman"}
START_TIMEOUT_S = 60.0
# what dockerd reads at start to find a daemon or a containerd already running, and the program each names
PID_FILES = {Path("/var/run/docker.pid"): "dockerd", Path("/var/run/docker/containerd/containerd.pid"): "containerd"}


def answers(engine: str) -> bool:
    if shutil.which(engine) is None:
        return False
    return subprocess.run([engine, "info"], capture_output=True, timeout=60, stdin=subprocess.DEVNULL).returncode == 0


def ensure_running(engine: str, log_file: Path, log: Callable[[str], None] = print,
                   backup: Path | None = None) -> int | None:
    """The engine answers when this returns; the pid of a dockerd this started (None: it already ran, or
    podman). ClusterError in one line when it cannot. `backup`: where the admin's daemon.json is kept
    until `restore_daemon_json` puts it back."""
    if shutil.which(engine) is None:
        raise ClusterError(f"{engine} is not installed; install Debian's {PACKAGES.get(engine, engine)} "
                           "(make test does)")
    if engine != "docker" or answers(engine):
        return None
    if shutil.which("dockerd") is None:  # the client alone (docker-cli): no daemon to start
        raise ClusterError("dockerd is not installed; install Debian's docker.io (make containers does)")
    _configure_daemon(backup)
    for stale in remove_stale_pid_files():
        log(f"removed {stale}: left by a dockerd that did not shut down")
    log(f"starting dockerd (no bridge, no firewall rules; log {log_file})")
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as out:
        proc = subprocess.Popen(["dockerd"], stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ClusterError(f"dockerd exited with code {proc.returncode}: {_last_line(log_file)} (log {log_file})")
        if answers(engine):
            return proc.pid
        time.sleep(0.5)
    raise ClusterError(f"dockerd did not answer in {START_TIMEOUT_S:.0f}s; see {log_file}")


def remove_stale_pid_files() -> list[Path]:
    """The pid files of PID_FILES whose process is gone or is another program now. dockerd only asks whether
    the pid is alive: after a SIGKILL the files stay, and once their pid is reused dockerd waits for that
    process as its containerd and gives up ("timeout waiting for containerd to start")."""
    removed = []
    for path, program in PID_FILES.items():
        try:
            text = path.read_text().strip()
        except FileNotFoundError:
            continue
        if text.isdigit() and _program_of(int(text)) == program:
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _program_of(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def _last_line(log_file: Path) -> str:
    try:
        lines = [line.strip() for line in log_file.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1] if lines else "nothing in its log"


def _configure_daemon(backup: Path | None = None) -> None:
    """Host networking only: our keys set in daemon.json, whatever else an admin put there kept. `backup`:
    the admin's file as it was (or that there was none) is kept there first, once, for `down` to put back."""
    text = DAEMON_JSON.read_text() if DAEMON_JSON.exists() else None
    current = json.loads(text) if text else {}
    if all(current.get(k) == v for k, v in NO_NETWORKING.items()):
        return
    if backup is not None and not backup.exists():
        backup.parent.mkdir(parents=True, exist_ok=True)
        backup.write_text(json.dumps({"existed": text is not None, "text": text or ""}))
    DAEMON_JSON.parent.mkdir(parents=True, exist_ok=True)
    DAEMON_JSON.write_text(json.dumps({**current, **NO_NETWORKING}, indent=2) + "\n")


def restore_daemon_json(backup: Path) -> None:
    """Put back the daemon.json `_configure_daemon` changed (remove it if the admin had none)."""
    if not backup.exists():
        return
    saved = json.loads(backup.read_text())
    if saved["existed"]:
        DAEMON_JSON.write_text(saved["text"])
    else:
        DAEMON_JSON.unlink(missing_ok=True)
    backup.unlink()


def project_containers(selector: str = LABEL, under: Sequence[Path] = (),
                       engines: Sequence[str] = ("docker", "podman")) -> list[tuple[str, str]]:
    """(engine, id) of the project's containers, running or not, that match the label `selector`
    (`LABEL.application=<id>`, say) and, given `under`, whose task ran below one of those directories."""
    found = []
    roots = [str(d).rstrip("/") + "/" for d in under]
    for engine in engines:
        if shutil.which(engine) is None or (engine == "docker" and not answers(engine)):
            continue
        label = f'.Label "{LABEL}.workdir"' if engine == "docker" else f'index .Labels "{LABEL}.workdir"'
        listed = subprocess.run([engine, "ps", "-a", "--filter", f"label={selector}", "--format",
                                 f"{{{{.ID}}}} {{{{{label}}}}}"],
                                capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        for line in listed.stdout.splitlines():
            fields = line.split()
            if fields and (not roots or (len(fields) == 2 and fields[1].startswith(tuple(roots)))):
                found.append((engine, fields[0]))
    return found


def remove_containers_under(dirs: Sequence[Path]) -> list[str]:
    """Stop and remove every project container whose task ran in one of `dirs` (a cluster's NodeManager
    directories): what `tony cluster down` leaves of the project's containers, nothing, and nobody else's."""
    found = project_containers(under=dirs)
    for engine in {e for e, _ in found}:
        ids = [i for e, i in found if e == engine]
        subprocess.run([engine, "rm", "-f", *ids], capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    return [i for _, i in found]


def stop_daemon(pid: int | None, grace: float = 30.0) -> None:
    """The dockerd `ensure_running` started (and only that one): SIGTERM, SIGKILL after `grace` seconds (its
    pid files are then left behind; the next `ensure_running` removes them)."""
    if not pid:
        return
    for signal_number in (15, 9):
        try:
            os.kill(pid, signal_number)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if _ended(pid):
                return
            time.sleep(0.2)


def _ended(pid: int) -> bool:
    """Gone, or a zombie (a dockerd this process started stays one until its parent reaps it)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
    except ChildProcessError:
        pass
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True
