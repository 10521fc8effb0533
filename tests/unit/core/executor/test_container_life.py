"""The executor ends with its container's process (core/executor/container_life.py): real processes,
launched as skein launches a container's command (`bash -c "bash .skein.sh >log 2>&1"`, a shell that
forks), and the shell ended by SIGTERM as YARN's kill ends it."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tony_airflow.core.executor.container_life import end_with_the_container

EXECUTOR = ("import os, sys, time; from tony_airflow.core.executor.container_life import end_with_the_container; "
            "tied = end_with_the_container(os.environ); open(sys.argv[1], 'w').write(f'{os.getpid()} {tied}'); "
            "time.sleep(60)")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purpose (its parent, the shell, is gone too: init reaps it)
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ", 1)[1][0] != "Z"


def _container(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen, int, str]:
    """The container's shell, and the executor it forked (pid, whether it was tied)."""
    script = tmp_path / ".skein.sh"
    script.write_text(f"exec {shlex.quote(sys.executable)} -c {shlex.quote(EXECUTOR)} {tmp_path / 'pid'}\n")
    shell = subprocess.Popen(["bash", "-c", f"bash {script} >{tmp_path / 'log'} 2>&1"], env=env,
                             start_new_session=True)
    for _ in range(200):
        if (tmp_path / "pid").exists() and (tmp_path / "pid").read_text():
            pid, tied = (tmp_path / "pid").read_text().split()
            return shell, int(pid), tied
        time.sleep(0.05)
    raise AssertionError("the executor did not start")


def test_an_executor_in_a_container_ends_when_yarns_sigterm_ends_the_containers_shell(tmp_path):
    env = {**os.environ, "CONTAINER_ID": "container_1_0001_01_000002"}
    shell, pid, tied = _container(tmp_path, env)
    assert tied == "True"
    shell.send_signal(signal.SIGTERM)  # YARN: `kill -TERM -<pgid>` reaches the shell first, and it dies
    assert shell.wait(timeout=10) == -signal.SIGTERM
    polls = 0
    while _alive(pid) and polls < 100:
        polls += 1
        time.sleep(0.02)
    assert not _alive(pid), "the executor outlived its container's process"


def test_outside_a_container_nothing_is_tied(tmp_path):
    """Client mode and tests run the executor where no container's clean-up follows its parent's end."""
    env = {k: v for k, v in os.environ.items() if k != "CONTAINER_ID"}
    shell, pid, tied = _container(tmp_path, env)
    try:
        assert tied == "False"
        shell.send_signal(signal.SIGTERM)
        shell.wait(timeout=10)
        time.sleep(0.3)
        assert _alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)
    assert end_with_the_container({}) is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_parent_already_gone_ends_the_executor_at_once(tmp_path):
    """The shell died between the executor's start and its request: nothing would ever signal it."""
    code = ("from tony_airflow.core.executor import container_life as c; "
            "ppids = iter([4242, 1]); c.os.getppid = lambda: next(ppids); "  # before the request, then after
            "c.end_with_the_container({'CONTAINER_ID': 'x'}); print('survived')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 128 + signal.SIGKILL and "survived" not in proc.stdout
