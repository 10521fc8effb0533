"""`tony cluster up` refuses bad input with one line and exit code 2, starting nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path


def _tony(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tony_airflow.cli", *args],
                          capture_output=True, text=True, env=env, timeout=300)


def _one_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("Resolving")]
    assert len(lines) == 1, text
    return lines[0]


def test_busy_port_is_refused(tmp_path: Path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        busy = sock.getsockname()[1]
        # the busy port is the NameNode's RPC port (the first of the range)
        proc = _tony("cluster", "up", "--state-dir", str(tmp_path / "c"), "--port-base", str(busy))
    assert proc.returncode == 2, proc.stderr
    line = _one_line(proc.stderr)
    assert f"port {busy} (fs.defaultFS) is already in use" in line
    assert not list((tmp_path / "c" / "run").glob("*.pid"))


def test_no_java_is_refused(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # a PATH with no java on it
    proc = _tony("cluster", "up", "--state-dir", str(tmp_path / "c"), env=env)
    assert proc.returncode == 2, proc.stderr
    assert "java: not found" in _one_line(proc.stderr)
    assert not (tmp_path / "c").exists()


def test_java_home_without_java_is_refused(tmp_path: Path):
    env = dict(os.environ, JAVA_HOME=str(tmp_path))
    proc = _tony("cluster", "up", "--state-dir", str(tmp_path / "c"), env=env)
    assert proc.returncode == 2
    assert "JAVA_HOME" in _one_line(proc.stderr)


def test_bad_port_base_is_refused(tmp_path: Path):
    for bad in ("80", "notanumber", "70000"):
        proc = _tony("cluster", "up", "--state-dir", str(tmp_path / "c"), "--port-base", bad)
        assert proc.returncode == 2, (bad, proc.stderr)
        assert "--port-base" in _one_line(proc.stderr)


def test_ha_with_a_nameservice_that_is_not_a_host_name_is_refused(tmp_path: Path):
    proc = _tony("cluster", "up", "--ha", "--nameservice", "My.Cluster", "--state-dir", str(tmp_path / "c"))
    assert proc.returncode == 2, proc.stderr
    assert "--nameservice: 'My.Cluster' is not a host name label" in _one_line(proc.stderr)
    assert not (tmp_path / "c" / "run").exists()


def test_ha_with_no_hosts_is_refused(tmp_path: Path):
    proc = _tony("cluster", "up", "--ha", "--nodes", "0", "--state-dir", str(tmp_path / "c"))
    assert proc.returncode == 2, proc.stderr
    assert "--nodes: 0 hosts; allowed: 1 to" in _one_line(proc.stderr)
    assert not (tmp_path / "c" / "run").exists()
