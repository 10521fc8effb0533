"""`tony cluster up` after a crash (the CI run of 2026-11-27): a daemon SIGKILLed a moment before was still
exiting — no command line left, its port still open — and `up` refused the port as another program's."""

from __future__ import annotations

import subprocess
import sys
import time

from tony_airflow.local.cluster.processes import pid_alive, wait_exited


def test_waits_until_a_process_that_is_ending_has_ended(tmp_path):
    """A process with no command line (as one that is exiting has none) is waited for, up to the bound;
    pid 2 (kthreadd) stands for it: alive, no command line, never ending."""
    pid_file = tmp_path / "zookeeper.pid"
    pid_file.write_text("2")
    started = time.monotonic()
    wait_exited(pid_file, wait_s=0.3)
    assert 0.3 <= time.monotonic() - started < 5


def test_returns_at_once_for_a_program_that_reused_the_pid_an_ended_one_and_no_file(tmp_path):
    pid_file = tmp_path / "zookeeper.pid"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        pid_file.write_text(str(other.pid))
        started = time.monotonic()
        wait_exited(pid_file, wait_s=5.0)  # a live program with a command line: not ours to wait for
        assert time.monotonic() - started < 1
    finally:
        other.kill()
        other.wait()
    assert not pid_alive(other.pid)
    started = time.monotonic()
    wait_exited(pid_file, wait_s=5.0)
    wait_exited(tmp_path / "none.pid", wait_s=5.0)
    assert time.monotonic() - started < 1
