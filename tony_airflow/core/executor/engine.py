"""A task's command in its image, run by the node's container engine (`docker_runtime: engine`).

The executor stays on the node (it registers, heartbeats, stages and mirrors the
output, reports the exit code); only the user's command runs in the image, with
`docker run` or `podman run` as the executor's child. What the container gets
(seed 001): the task environment, the YARN container's working directory at the
same path, Hadoop's and Java's directories read-only, the node's network, the
YARN container's memory, CPUs and user.

Nothing outlives the executor, whatever kills it. YARN sends SIGKILL 250 ms
after SIGTERM, too soon for `docker stop`; so the container holds a lease on
its executor: its stdin, kept open by the engine's client (in the command's
process group, which dies with the executor: core/executor/guard.py). When
the client goes, the engine closes the container's stdin (docker and podman
both, `run -i`), and the container's first process (WATCHDOG, a POSIX shell)
kills everything in it.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tony_airflow.core.executor.torchrun_plugin import PLUGIN_DIR

LABEL = "org.tony-airflow"  # every container the project starts: LABEL=1, LABEL.application=..., LABEL.workdir=...
PREFLIGHT_TIMEOUT_S = 60.0
PULL_TIMEOUT_S = 1800.0
OOM_MARK = "tony-engine: oom_kill"
DOCKER_PIDFILE = "/var/run/docker.pid"  # dockerd's default --pidfile
# The container's first process. $1 is the user's command. Its stdin is the lease: at EOF (the engine's
# client, and so the executor, is gone) everything in the container is killed. SIGTERM (docker stop, or
# the client's signal proxy when the executor stops the task) goes to every process but the lease's.
WATCHDOG = r"""exec 3<&0 </dev/null
( trap '' TERM INT HUP; while read -r _ <&3; do :; done; kill -KILL -1 2>/dev/null ) &
if command -v bash >/dev/null 2>&1; then bash -c "$1" & else sh -c "$1" & fi
child=$!
trap 'kill -TERM -1 2>/dev/null' TERM INT HUP
while :; do wait "$child"; code=$?; kill -0 "$child" 2>/dev/null || break; done
for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
  if [ -r "$f" ]; then while read -r k v; do
    if [ "$k" = oom_kill ] && [ "$v" -gt 0 ]; then echo "tony-engine: oom_kill" >&2; fi
  done < "$f"; fi
done
exit "$code"
"""
# Variables of the node's environment the command sees in its container besides the task's own.
NODE_NAMES = ("CONTAINER_ID", "NM_HOST", "NM_PORT", "NM_HTTP_PORT", "HADOOP_HOME", "HADOOP_CONF_DIR",
              "HADOOP_COMMON_HOME", "HADOOP_HDFS_HOME", "HADOOP_YARN_HOME", "HADOOP_MAPRED_HOME", "JAVA_HOME",
              "HADOOP_TOKEN_FILE_LOCATION", "HADOOP_USER_NAME", "USER", "LOGNAME", "LOCAL_DIRS", "LOG_DIRS",
              "PYTHONUNBUFFERED", "TMPDIR", "APPLICATION_WEB_PROXY_BASE")
NODE_PREFIXES = ("DTF_", "TONY_")
NOT_PASSED = ("PATH", "HOME", "PYTHONHOME", "LD_LIBRARY_PATH", "LD_PRELOAD")  # the image's own, unless the job sets them
READ_ONLY_DIRS = ("HADOOP_HOME", "HADOOP_CONF_DIR", "JAVA_HOME")
_ENGINE_ERROR = re.compile(r"^(?:docker: )?Error(?: response from daemon)?: ?(.*)$")


class EngineError(RuntimeError):
    """The engine could not run the task's container: one line naming the host and the cause."""


@dataclass
class ContainerPlan:
    """Everything `docker run` / `podman run` is told; `argv()` is the whole command line."""

    engine: str
    image: str
    name: str
    workdir: str
    command: str
    env_names: list[str]
    mounts: list[str]  # SRC:DST:ro|rw
    memory_mb: int
    vcores: int
    user: str
    labels: dict[str, str]
    gpus: list[int] = field(default_factory=list)
    home: str = ""
    ulimits: dict[str, int] = field(default_factory=dict)
    runtime: str = ""  # podman's OCI runtime, when the node needs one named (runc on hybrid cgroups)

    def argv(self) -> list[str]:
        args = [self.engine, "run", "--rm", "-i", "--name", self.name, "--network", "host",
                "--memory", f"{self.memory_mb}m", "--memory-swap", f"{self.memory_mb}m", "--cpus", str(self.vcores),
                "--user", self.user, "--workdir", self.workdir, "--entrypoint", "/bin/sh"]
        if self.runtime:
            args += ["--runtime", self.runtime]
        if self.engine == "docker":
            args += ["--log-driver", "none"]  # the output goes to the executor, not into the daemon's files
        for limit, count in sorted(self.ulimits.items()):
            args += ["--ulimit", f"{limit}={count}:{count}"]
        for key, value in sorted(self.labels.items()):
            args += ["--label", f"{key}={value}"]
        for mount in self.mounts:
            args += ["--volume", mount]
        if self.home:
            args += ["--env", f"HOME={self.home}"]
        for name in self.env_names:  # values come from the client's environment: never on a command line
            args += ["--env", name]
        args += gpu_args(self.engine, self.gpus)
        return args + [self.image, "-c", WATCHDOG, "tony-task", self.command]


def gpu_args(engine: str, gpus: Sequence[int]) -> list[str]:
    """The task's GPUs, as the AM assigned them: docker's `--gpus "device=0,1"`, podman's CDI devices."""
    if not gpus:
        return []
    if engine == "docker":
        return ["--gpus", '"device=' + ",".join(str(g) for g in gpus) + '"']
    return [arg for g in gpus for arg in ("--device", f"nvidia.com/gpu={g}")]


def env_names(env: Mapping[str, str], node_env: Mapping[str, str], job_env: Mapping[str, str]) -> list[str]:
    """What the command sees in its container: what the executor set for it (DTF_*, TF_CONFIG,
    CLUSTER_SPEC, CUDA_VISIBLE_DEVICES, ...), the job's `env`, and the node's Hadoop/YARN variables;
    not the node's PATH or library paths (the image has its own), unless the job sets them."""
    names = {k for k, v in env.items() if node_env.get(k) != v}
    names |= {k for k in node_env if k in NODE_NAMES or k.startswith(NODE_PREFIXES)}
    names = {k for k in names if k in env and k not in NOT_PASSED}
    return sorted(names | {k for k in job_env if k in env})


def mounts(workdir: Path, env: Mapping[str, str], local_paths: Sequence[tuple[str, str]],
           extra: Sequence[str]) -> list[str]:
    """The working directory read-write at its own path; what YARN localized into it (symlinks to the
    NodeManager's caches) and the package an elastic job's torchrun loads its rendezvous from (a symlink in
    `.tony-torchrun`, core/executor/torchrun_plugin.py), Hadoop's and Java's directories read-only; local
    input (ro) and output (rw); the job's own mounts last."""
    found: dict[str, str] = {str(workdir): f"{workdir}:{workdir}:rw"}
    linked = [e for d in (workdir, workdir / PLUGIN_DIR) if d.is_dir() for e in sorted(d.iterdir())]
    for entry in linked:
        if entry.is_symlink():
            target = entry.resolve()
            if target.exists() and not target.is_relative_to(workdir):
                found.setdefault(str(target), f"{target}:{target}:ro")
    for name in READ_ONLY_DIRS:
        path = env.get(name, "")
        if path.startswith("/") and Path(path).is_dir():
            real = str(Path(path).resolve())
            found.setdefault(path, f"{path}:{path}:ro")
            if real != path:  # a symlinked JAVA_HOME or HADOOP_CONF_DIR: its target too
                found.setdefault(real, f"{real}:{real}:ro")
    for path, mode in local_paths:
        if path.startswith("/") and "://" not in path and Path(path).exists():
            found.setdefault(path, f"{path}:{path}:{mode}")
    return list(found.values()) + [m for m in extra if m.split(":")[1] not in found]


def node_ulimits() -> dict[str, int]:
    """The YARN container's own limits, given to its container (podman needs them explicit here).
    nproc at most the kernel's pid_max: runc refuses more ("error setting rlimit type 6")."""
    out = {}
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        soft, _hard = resource.getrlimit(which)
        if soft != resource.RLIM_INFINITY:
            out[name] = soft
    try:
        pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        pid_max = 0
    if pid_max and out.get("nproc", pid_max + 1) > pid_max:  # unlimited too: podman's own default fails here
        out["nproc"] = pid_max
    return out


def podman_runtime() -> str:
    """runc when the node has it: podman's default crun refuses cgroups in hybrid mode (v1 with v2 beside)."""
    return "runc" if shutil.which("runc") else ""


def other_network_namespace(pidfile: str = DOCKER_PIDFILE) -> bool:
    """Does this process live in another network namespace than the Docker daemon (dockerd's pid file, else
    the node's first process)? Then docker's `--network host`, the daemon's namespace, is not this host's."""
    mine = os.readlink("/proc/self/ns/net")
    try:
        daemon_pid = int(Path(pidfile).read_text().strip())
    except (OSError, ValueError):
        daemon_pid = 1
    for pid in dict.fromkeys((daemon_pid, 1)):
        try:
            return os.readlink(f"/proc/{pid}/ns/net") != mine
        except OSError:  # gone, or not ours to read (PID 1 from another namespace on some kernels)
            continue
    return False


def _engine_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        m = _ENGINE_ERROR.match(line)
        if m:
            return m.group(1) or line
    return lines[-1] if lines else "(no output)"


def preflight(engine: str, image: str, host: str, task: str) -> None:
    """Before the command runs: the engine is there, its daemon answers, the image is on the node (pulled
    if the engine can); else EngineError with one line."""
    where = f"{task}: "
    if shutil.which(engine) is None:
        raise EngineError(f"{where}{engine} is not installed on {host} (docker_engine: {engine}; allowed: docker, "
                          "podman)")
    if engine == "docker" and other_network_namespace():
        raise EngineError(f"{where}docker on {host} runs containers in its daemon's network namespace, not this "
                          "host's; on hosts in network namespaces use docker_engine: podman")
    found = _run([engine, "image", "inspect", "--format", "{{.Id}}", image], PREFLIGHT_TIMEOUT_S)
    if found.returncode == 0:
        return
    reason = _engine_line(found.stderr)
    lowered = found.stderr.lower()
    if "cannot connect" in lowered or "is the docker daemon running" in lowered:
        raise EngineError(f"{where}the {engine} daemon is not running on {host}: {reason}")
    if "permission denied" in lowered:
        raise EngineError(f"{where}permission denied on {host}: user {os.getuid()} may not use {engine}: {reason}")
    pulled = _run([engine, "pull", image], PULL_TIMEOUT_S)
    if pulled.returncode != 0:
        raise EngineError(f"{where}image {image!r} not found on {host} ({engine}): {_engine_line(pulled.stderr)}")


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 1, "", f"Error: {argv[1]} {argv[2]} did not answer in {timeout:.0f}s")


def memory_killed(stderr_tail: str) -> bool:
    """Whether the kernel killed a process of the container for its memory limit: the container's cgroup
    counted an `oom_kill`, which WATCHDOG reads as the container's last act and marks in its stderr. That
    count is what the engine's own `State.OOMKilled` (docker inspect, podman inspect) is made from; the
    engine's inspect cannot be asked after the run, since `--rm` removes the container as it ends. Exit 137
    alone does not tell it from a SIGKILL from elsewhere (a lost worker, which an elastic job replaces)."""
    return OOM_MARK in stderr_tail


def plan_type(task: str) -> str:
    """"worker:0" -> "worker"."""
    return task.rpartition(":")[0] or task


def explain_exit(code: int, stderr_tail: str, plan: ContainerPlan, host: str, task: str) -> str:
    """One line when the engine (not the command) ended the task: a container it could not start, an image
    without a shell, the memory limit; '' when the exit code is the command's own."""
    if memory_killed(stderr_tail):
        return (f"{task}: the command went over its container's memory limit ({plan.memory_mb} MiB) on {host} "
                f"and the kernel killed it (exit code {code}); allowed: more memory, -m {plan_type(task)}:<MiB> "
                "(task_memory)")
    if code not in (125, 126, 127) or not any(_ENGINE_ERROR.match(line.strip()) for line in stderr_tail.splitlines()):
        return ""
    reason = _engine_line(stderr_tail)
    if "/bin/sh" in reason and ("no such file" in reason or "not found" in reason):
        return (f"{task}: image {plan.image!r} has no /bin/sh on {host} ({plan.engine}): the task's command runs "
                "under a shell in its image")
    return f"{task}: {plan.engine} could not start the container on {host}: {reason}"


def remove(engine: str, name: str, timeout: float = 20.0) -> None:
    """`ENGINE rm -f NAME`: after a stop, whose SIGKILL at the grace's end takes the guard with the group
    (core/executor/guard.py removes a never-started container only while it lives). Nothing to remove (the
    usual case: `--rm` did it) is no error."""
    try:
        _run([engine, "rm", "-f", name], timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        pass


def container_pid(engine: str, name: str) -> int:
    """The first process of a running container, as the host sees it (0: not running, or not to be read):
    the output's mirror walks its processes for files held open for writing, which are not below the
    engine's client."""
    done = _run([engine, "inspect", "--format", "{{.State.Pid}}", name], timeout=10)
    try:
        return int(done.stdout.strip()) if done.returncode == 0 else 0
    except ValueError:
        return 0
