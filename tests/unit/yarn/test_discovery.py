"""Which cluster a process uses, and what its child processes (skein's driver, `yarn logs`) need for it."""

from __future__ import annotations

import os
from pathlib import Path

from tony_airflow.yarn.discovery import discover


def _local_state(tmp_path: Path) -> Path:
    """The layout `tony cluster up` leaves: conf/ with the site files, bin/ with the `yarn` launcher."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "yarn-site.xml").write_text("<configuration/>")
    (tmp_path / "conf" / "core-site.xml").write_text("<configuration/>")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "yarn").write_text("#!/bin/sh\n")
    return tmp_path


def test_a_named_local_cluster_conf_dir_brings_its_launchers_and_java(tmp_path, monkeypatch):
    """An Airflow connection naming a local cluster's conf dir (hadoop_conf_dir), in a process whose
    PATH has no `yarn` (a real scheduler's worker): skein's driver must still find it."""
    state = _local_state(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    env = discover(state / "conf").environment
    assert env["HADOOP_CONF_DIR"] == str(state / "conf")
    assert str(state / "bin") in env["PATH"].split(os.pathsep) and env.get("JAVA_HOME")


def test_any_other_conf_dir_is_taken_as_it_is(tmp_path):
    (tmp_path / "yarn-site.xml").write_text("<configuration/>")
    assert discover(tmp_path).environment == {"HADOOP_CONF_DIR": str(tmp_path)}
