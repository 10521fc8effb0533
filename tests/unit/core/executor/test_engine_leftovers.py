"""A container the engine created but never started outlives everything that could end it (CI's run of 502f139,
`test_every_way_of_ending_leaves_no_container[ctrl-c-docker]`: the job was killed while `docker run`
was between create and start; the container stayed 'Created', out of reach of its lease, which only
a running container reads). The guard removes the task's container by name when the engine's client
did not end by itself: killed by a signal, or the executor gone (the lease)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tony_airflow.core.executor.child import UserProcess

FAKE_ENGINE = """#!/bin/sh
# a container engine's client: `run` creates the container and waits (as between create and start);
# `rm -f NAME` removes it
case "$1" in
  run) echo "created $3" >> "$ENGINE_LOG"; exec sleep 600 ;;
  rm) echo "removed $3" >> "$ENGINE_LOG" ;;
esac
"""


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    bin_dir, log = tmp_path / "bin", tmp_path / "engine.log"
    bin_dir.mkdir()
    (bin_dir / "fakeengine").write_text(FAKE_ENGINE)
    (bin_dir / "fakeengine").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("ENGINE_LOG", str(log))
    return bin_dir, log


def _started(log: Path) -> None:
    deadline = time.monotonic() + 30
    while not (log.exists() and "created" in log.read_text()):
        assert time.monotonic() < deadline, "the fake engine never ran"
        time.sleep(0.02)


def _removed(log: Path) -> list[str]:
    deadline = time.monotonic() + 30
    while "removed" not in log.read_text():
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    return [line for line in log.read_text().splitlines() if line.startswith("removed")]


def _client(proc: UserProcess) -> int:
    children = Path(f"/proc/{proc.proc.pid}/task/{proc.proc.pid}/children").read_text().split()
    return int(children[0])


def test_a_client_killed_before_its_container_ran_has_the_container_removed(engine):
    _, log = engine
    proc = UserProcess("", dict(os.environ), argv=["fakeengine", "run", "--name", "tony-c1"],
                       remove=("fakeengine", "tony-c1"), stdout_sink=open(os.devnull, "wb"))
    _started(log)
    os.kill(_client(proc), signal.SIGKILL)  # as the group's SIGTERM before the client set its handler
    assert proc.wait() == 137
    proc.kill_group()
    assert _removed(log) == ["removed tony-c1"]


def test_an_executor_gone_has_its_container_removed(engine):
    """The lease ends (the executor SIGKILLed by YARN 250 ms after its SIGTERM): the guard removes the
    container, then kills the group."""
    _, log = engine
    proc = UserProcess("", dict(os.environ), argv=["fakeengine", "run", "--name", "tony-c2"],
                       remove=("fakeengine", "tony-c2"), stdout_sink=open(os.devnull, "wb"))
    _started(log)
    os.close(proc._lease)  # what the executor's death does
    proc._lease = -1
    assert proc.wait() in (137, -9 + 256, 128 + 9)
    assert _removed(log) == ["removed tony-c2"]


def test_a_client_that_ends_by_itself_leaves_the_removal_to_the_engine(engine, tmp_path):
    """`run --rm` removed the container as it ended: no second removal, no process left behind it."""
    bin_dir, log = engine
    (bin_dir / "fakeengine").write_text(FAKE_ENGINE.replace("exec sleep 600", "exit 3"))
    proc = UserProcess("", dict(os.environ), argv=["fakeengine", "run", "--name", "tony-c3"],
                       remove=("fakeengine", "tony-c3"), stdout_sink=open(os.devnull, "wb"))
    assert proc.wait() == 3
    proc.kill_group()
    time.sleep(0.3)
    assert log.read_text().splitlines() == ["created tony-c3"]


def test_the_guard_reads_its_remove_option_only_before_the_command():
    from tony_airflow.core.executor import guard

    assert guard.parse(["guard.py", "5", "--remove", "docker", "tony-x", "docker", "run"]) == \
        (5, ("docker", "tony-x"), ["docker", "run"])
    assert guard.parse(["guard.py", "5", "bash", "-c", "--remove"]) == (5, None, ["bash", "-c", "--remove"])


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("the guard's lease is Linux's")


def test_a_stopped_task_removes_its_container_by_name(engine):
    """The executor's own stop SIGKILLs the group at the grace's end, the guard with it (a review): the
    executor then removes the container by name itself; nothing to remove is no error."""
    from tony_airflow.core.executor import engine as engines

    _, log = engine
    engines.remove("fakeengine", "tony-c4")
    engines.remove("no-such-engine", "tony-c4")
    assert log.read_text().splitlines() == ["removed tony-c4"]
