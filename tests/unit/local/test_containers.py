"""The local engines' helpers (issue #31): dockerd's configuration and the image's inputs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tony_airflow.local.containers import daemon, image


def test_dockerd_gets_no_bridge_and_no_firewall_rules_and_keeps_the_admins_keys(tmp_path, monkeypatch):
    conf = tmp_path / "daemon.json"
    conf.write_text(json.dumps({"data-root": "/srv/docker", "bridge": "docker0"}))
    monkeypatch.setattr(daemon, "DAEMON_JSON", conf)
    daemon._configure_daemon()
    assert json.loads(conf.read_text()) == {"data-root": "/srv/docker", "bridge": "none", "iptables": False,
                                            "ip6tables": False}


def test_a_missing_engine_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(daemon.shutil, "which", lambda name: None)
    with pytest.raises(daemon.ClusterError, match="^podman is not installed; install Debian's podman"):
        daemon.ensure_running("podman", tmp_path / "log")


def test_a_docker_cli_without_dockerd_says_what_to_install(monkeypatch, tmp_path):
    """#44 item 5: `tony cluster up --docker` with the docker client but no daemon printed
    `error: builtins: FileNotFoundError: … 'dockerd'`."""
    monkeypatch.setattr(daemon.shutil, "which", lambda name: None if name == "dockerd" else f"/usr/bin/{name}")
    monkeypatch.setattr(daemon, "answers", lambda engine: False)
    with pytest.raises(daemon.ClusterError, match=r"^dockerd is not installed; install Debian's docker.io "
                                                  r"\(make containers does\)$"):
        daemon.ensure_running("docker", tmp_path / "log", log=lambda *_: None)


@pytest.mark.parametrize("before", ['{"data-root": "/srv/docker"}\n', None])
def test_up_docker_puts_back_the_admins_daemon_json_on_down(tmp_path, monkeypatch, before):
    conf = tmp_path / "etc" / "daemon.json"
    if before is not None:
        conf.parent.mkdir()
        conf.write_text(before)
    monkeypatch.setattr(daemon, "DAEMON_JSON", conf)
    backup = tmp_path / "state" / "docker-daemon.json.orig"
    daemon._configure_daemon(backup)
    daemon._configure_daemon(backup)  # a second `up` keeps the first backup: the admin's, not ours
    assert json.loads(conf.read_text())["bridge"] == "none"
    daemon.restore_daemon_json(backup)
    assert (conf.read_text() if conf.exists() else None) == before and not backup.exists()


def test_the_image_pins_this_installations_versions_and_its_digest_follows_them():
    pins = image.python_requirements()
    assert [p.split("==")[0] for p in pins] == list(image.PYTHON_PACKAGES) and all("==" in p for p in pins)
    assert image.inputs_digest(pins) == image.inputs_digest(list(pins))
    assert image.inputs_digest(pins) != image.inputs_digest([*pins[:-1], "scikit-learn==0.0"])


def test_an_image_up_to_date_is_not_built_again(monkeypatch):
    digest = image.inputs_digest(image.python_requirements())
    monkeypatch.setattr(image.shutil, "which", lambda name: "/usr/bin/docker")
    monkeypatch.setattr(image, "built_digest", lambda engine, name=image.IMAGE: digest)
    monkeypatch.setattr(image, "_root_filesystem", lambda *a: pytest.fail("built again"))
    said: list[str] = []
    assert image.build("docker", log=said.append) == image.IMAGE
    assert said == [f"{image.IMAGE} is up to date in docker (inputs {digest})"]


def _process_named(name: str, tmp_path):
    """A live process whose name (/proc/<pid>/comm) is `name`: sleep, copied under that name."""
    exe = tmp_path / name
    shutil.copy(shutil.which("sleep"), exe)
    proc = subprocess.Popen([str(exe), "60"])
    comm = Path(f"/proc/{proc.pid}/comm")
    for _ in range(500):  # until the fork has exec'd the copy
        if comm.read_text().strip() == name:
            return proc
        time.sleep(0.01)
    raise AssertionError(f"{exe} did not start")


def test_a_pid_file_left_by_a_killed_dockerd_is_removed_when_its_pid_is_now_another_process(tmp_path, monkeypatch):
    """A dockerd killed without its shutdown leaves containerd.pid; once the pid is reused by another process,
    dockerd takes it for its containerd, waits for its socket and exits ("timeout waiting for containerd to
    start"): CI met it. A pid file naming a process that is gone, or not the program it names, is stale."""

    reused = _process_named("java", tmp_path)
    ours = _process_named("containerd", tmp_path)
    try:
        files = {name: tmp_path / f"{name}.pid" for name in ("reused", "gone", "live", "garbage")}
        files["reused"].write_text(str(reused.pid))
        files["gone"].write_text("4194303")
        files["live"].write_text(str(ours.pid))
        files["garbage"].write_text("not a pid\n")
        monkeypatch.setattr(daemon, "PID_FILES", {f: "containerd" for f in files.values()})
        removed = daemon.remove_stale_pid_files()
        assert sorted(removed) == sorted([files["reused"], files["gone"], files["garbage"]])
        assert files["live"].exists() and not files["reused"].exists()
        assert os.waitpid(reused.pid, os.WNOHANG) == (0, 0), "a stale pid file's process is left alone"
    finally:
        for p in (reused, ours):
            p.kill()
            p.wait()


def test_a_dockerd_that_exits_says_why_in_its_one_line(tmp_path, monkeypatch):
    """The last line of dockerd's log is the reason; the log's path follows it."""
    fake = tmp_path / "dockerd"
    fake.write_text("#!/bin/sh\necho 'level=info msg=\"Starting up\"'\n"
                    "echo 'failed to start containerd: timeout waiting for containerd to start'\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr(daemon, "answers", lambda engine: False)
    monkeypatch.setattr(daemon, "_configure_daemon", lambda backup=None: None)
    monkeypatch.setattr(daemon, "PID_FILES", {})
    monkeypatch.setattr(daemon.shutil, "which", lambda name: str(fake))
    log = tmp_path / "dockerd.log"
    with pytest.raises(daemon.ClusterError) as raised:
        daemon.ensure_running("docker", log, log=lambda *_: None)
    assert str(raised.value) == ("dockerd exited with code 1: failed to start containerd: timeout waiting for "
                                 f"containerd to start (log {log})")


def test_stopping_a_daemon_that_ignores_sigterm_kills_it():
    """SIGTERM first, SIGKILL after the grace: nothing of the daemon is left running."""
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(15, signal.SIG_IGN); "
                                 "print('ready', flush=True); time.sleep(60)"], stdout=subprocess.PIPE)
    assert stubborn.stdout.readline() == b"ready\n"
    daemon.stop_daemon(stubborn.pid, grace=0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(stubborn.pid, 0)
