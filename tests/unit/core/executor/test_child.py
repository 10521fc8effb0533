"""The user's command as the executor's child: its exit code, and nothing of it outliving the executor."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tony_airflow.core.executor.child import UserProcess

# The command's main process ignores SIGTERM, as TensorFlow's MultiWorkerMirroredStrategy workers do (its
# preemption notifier turns SIGTERM into a flag), and writes its pid.
IGNORES_SIGTERM = ("import os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                   "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)")
# An executor that starts the command and is then killed from outside.
EXECUTOR = ("import sys, time; from tony_airflow.core.executor.child import UserProcess; "
            "UserProcess(sys.argv[1], {'PATH': '/usr/bin:/bin'}); time.sleep(600)")


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _wait_for_pid(path: Path, proc: subprocess.Popen) -> int:
    for _ in range(200):
        if path.exists() and path.read_text():
            return int(path.read_text())
        assert proc.poll() is None, proc.returncode
        time.sleep(0.05)
    raise AssertionError("the command never started")


@pytest.mark.parametrize("wrapped", [False, True], ids=["direct", "behind-a-wrapper"])
def test_a_command_that_ignores_sigterm_dies_with_its_executor_whatever_kills_it(tmp_path, wrapped):
    """YARN SIGKILLs a container 250 ms after its SIGTERM, the OOM killer at once: an executor can die
    before it has killed its command's process group. Nothing of the command may run on, even when
    its process is not the executor's child (`python3 train.py; echo done`, a wrapper script)."""
    pid_file = tmp_path / "pid"
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(IGNORES_SIGTERM)} {shlex.quote(str(pid_file))}"
    if wrapped:
        command += "; true"  # bash forks: the command is the executor's grandchild
    executor = subprocess.Popen([sys.executable, "-c", EXECUTOR, command])
    pid = 0
    try:
        pid = _wait_for_pid(pid_file, executor)
        executor.send_signal(signal.SIGKILL)
        executor.wait()
        for _ in range(100):  # counted polls: the group goes at once, 10 s is only the bound
            if _gone(pid):
                break
            time.sleep(0.1)
        assert _gone(pid), "the command outlived its executor"
    finally:
        executor.kill()
        if pid and not _gone(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_command_that_ignores_sigterm_is_killed_after_the_grace():
    proc = UserProcess(f"{shlex.quote(sys.executable)} -c {shlex.quote(IGNORES_SIGTERM)} /dev/null; true",
                       {"PATH": "/usr/bin:/bin"})
    time.sleep(0.5)
    proc.stop(grace=0.5)
    assert proc.wait() in (128 + signal.SIGTERM, 128 + signal.SIGKILL)
    assert not proc.alive()


@pytest.mark.parametrize(("command", "code"), [("exit 3", 3), ("true", 0), ("kill -KILL $$", 128 + 9),
                                               ("kill -TERM $$", 128 + 15)])
def test_the_exit_code_is_the_commands_and_a_signal_is_128_plus_its_number(command, code):
    assert UserProcess(command, {"PATH": "/usr/bin:/bin"}).wait() == code


def test_the_command_inherits_no_descriptor_but_its_streams():
    seen: list[bytes] = []
    proc = UserProcess(f"{shlex.quote(sys.executable)} -c \"import os; print(sorted(os.listdir('/proc/self/fd')))\"",
                       {"PATH": "/usr/bin:/bin"}, stdout_sink=open(os.devnull, "wb"),
                       on_output=lambda stream, chunk: seen.append(chunk) if stream == "stdout" else None)
    assert proc.wait() == 0  # the pumps have copied everything
    assert b"".join(seen).strip() == b"['0', '1', '2', '3']"  # 3: listdir's own
