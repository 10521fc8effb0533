"""Issue #54 item 1: skein's AM starts with a class-data-sharing archive made on its node by the first AM of its
user, replaced only whole, remade when a class-path jar changes; java's exit code is the container's."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tony_airflow.yarn import am_launch

FAKE_JAVA = """#!/bin/bash
# records its arguments; makes the archive it is asked to make at exit (as the JVM does); exits with $FAKE_RC
echo "$@" >> "$FAKE_LOG"
for a in "$@"; do
  case "$a" in -XX:ArchiveClassesAtExit=*) [ -n "$FAKE_EMPTY" ] && : > "${a#*=}" || echo archive > "${a#*=}";; esac
done
exit "${FAKE_RC:-0}"
"""


@pytest.fixture
def node(tmp_path: Path) -> dict:
    user_dir = tmp_path / "nm-local" / "usercache" / "alice"
    jars = tmp_path / "hadoop" / "share"
    jars.mkdir(parents=True)
    (jars / "hadoop-common.jar").write_bytes(b"x" * 10)
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(FAKE_JAVA)
    java.chmod(0o755)
    (java.parent.parent / "release").write_text('IMPLEMENTOR="Debian"\nJAVA_VERSION="17.0.15"\n')
    return {"user_dir": user_dir, "jars": jars, "java": java, "log": tmp_path / "java.log", "n": 0}


def _start(node: dict, rc: int = 0, **env: str) -> subprocess.CompletedProcess:
    """One AM container: its own directory under the user's appcache, the script, the skein jar beside."""
    node["n"] += 1
    container = node["user_dir"] / "appcache" / "application_1_0001" / f"container_1_0001_01_{node['n']:06d}"
    container.mkdir(parents=True)
    (container / am_launch.SCRIPT_NAME).write_text(am_launch.SCRIPT)
    jar = container / ".skein.jar"
    jar.write_bytes(b"skein")
    os.utime(jar, (1_700_000_000, 1_700_000_000))  # one jar, localized for each AM with the same size and time
    # (written at each start, its time crossed a second between two starts under load: another key, no archive)
    full_env = {"PATH": os.environ["PATH"], "CLASSPATH": f"./*:{node['jars']}/*:/etc/hadoop",
                "FAKE_LOG": str(node["log"]), "FAKE_RC": str(rc), **env}
    return subprocess.run(["bash", am_launch.SCRIPT_NAME, str(node["java"]), "-Xmx128M", "skein.ApplicationMaster",
                           "hdfs:///app"], cwd=container, env=full_env, capture_output=True, text=True)


def _args(node: dict) -> str:
    return node["log"].read_text().splitlines()[-1]


def _archives(node: dict) -> list[Path]:
    return sorted((node["user_dir"] / am_launch.ARCHIVE_DIR).glob("*.jsa"))


def test_the_first_am_makes_the_archive_and_the_next_maps_it(node):
    assert _start(node).returncode == 0
    assert "-XX:ArchiveClassesAtExit=" in _args(node) and _args(node).endswith("-Xmx128M skein.ApplicationMaster hdfs:///app")
    [archive] = _archives(node)
    assert archive.read_text() == "archive\n" and oct(archive.stat().st_mode & 0o777) == "0o600"
    assert oct(archive.parent.stat().st_mode & 0o777) == "0o700"
    assert _start(node).returncode == 0
    assert f"-XX:SharedArchiveFile={archive}" in _args(node)
    assert _archives(node) == [archive]


def test_java_s_exit_code_is_the_container_s_and_a_failed_am_installs_no_archive(node):
    assert _start(node, rc=3).returncode == 3
    assert _archives(node) == []
    assert not list(node["user_dir"].rglob(".skein-am.jsa"))  # nothing left in the container's directory


def test_an_empty_archive_is_never_installed(node):
    assert _start(node, FAKE_EMPTY="1").returncode == 0
    assert _archives(node) == []


def test_a_changed_jar_on_the_class_path_makes_a_new_archive_and_the_old_one_goes(node):
    _start(node)
    [old] = _archives(node)
    jar = node["jars"] / "hadoop-common.jar"
    jar.write_bytes(b"y" * 11)  # an upgraded Hadoop: another size (and mtime)
    _start(node)
    assert "-XX:ArchiveClassesAtExit=" in _args(node)
    assert len(_archives(node)) == 2  # the other one was made today: another client's jars may still map it
    new = next(a for a in _archives(node) if a != old)
    two_days_ago = time.time() - 2 * 86400
    os.utime(old, (two_days_ago, two_days_ago))
    jar.write_bytes(b"z" * 12)
    _start(node)  # a third archive is made; the one not remade for a day goes
    assert old not in _archives(node) and new in _archives(node)
    _start(node)
    assert "-XX:SharedArchiveFile=" in _args(node)


def test_the_skein_jar_named_by_the_wildcard_is_part_of_the_key(node):
    """`./*` holds the localized `.skein.jar` (a dot file, which Java's wildcard includes): a new skein makes a
    new archive."""
    _start(node)
    [old] = _archives(node)
    node["n"] += 0
    container = node["user_dir"] / "appcache" / "application_1_0001" / "c-new"
    container.mkdir(parents=True)
    (container / am_launch.SCRIPT_NAME).write_text(am_launch.SCRIPT)
    (container / ".skein.jar").write_bytes(b"skein-0.9")
    subprocess.run(["bash", am_launch.SCRIPT_NAME, str(node["java"]), "X"], cwd=container, check=True,
                   env={"PATH": os.environ["PATH"], "CLASSPATH": f"./*:{node['jars']}/*",
                        "FAKE_LOG": str(node["log"])})
    assert "-XX:ArchiveClassesAtExit=" in _args(node)
    assert _archives(node) != [old]


@pytest.mark.parametrize("where", ["off", "not-a-nodemanager-container"])
def test_no_archive_when_turned_off_or_outside_a_nodemanager_s_layout(node, tmp_path, where):
    if where == "off":
        assert _start(node, TONY_AM_CDS="0").returncode == 0
    else:
        plain = tmp_path / "plain"
        plain.mkdir()
        (plain / am_launch.SCRIPT_NAME).write_text(am_launch.SCRIPT)
        subprocess.run(["bash", am_launch.SCRIPT_NAME, str(node["java"]), "X"], cwd=plain, check=True,
                       env={"PATH": os.environ["PATH"], "FAKE_LOG": str(node["log"])})
    assert "-XX:" not in _args(node)
    assert _archives(node) == []


def test_the_container_command_starts_the_script_with_java_and_its_log():
    assert am_launch.command("{{JAVA_HOME}}/bin/java", "-Xmx128M Main uri", "<LOG_DIR>/am.log") == (
        "bash .tony-am.sh {{JAVA_HOME}}/bin/java -Xmx128M Main uri ><LOG_DIR>/am.log 2>&1")


@pytest.mark.parametrize("version", ["1.8.0_392", "11.0.21", "12"])
def test_a_jvm_older_than_13_starts_without_the_archive_options_it_would_refuse(node, version):
    """Review finding: JDK 8 and 11 (Hadoop 3.4's usual JVMs) do not know -XX:ArchiveClassesAtExit and refuse to
    start with it: every first AM of a user on a node would fail."""
    (node["java"].parent.parent / "release").write_text(f'JAVA_VERSION="{version}"\n')
    assert _start(node).returncode == 0
    assert "-XX:" not in _args(node)
    assert _archives(node) == []


def test_a_jdk_without_a_release_file_starts_without_the_archive(node):
    (node["java"].parent.parent / "release").unlink()
    assert _start(node, rc=5).returncode == 5
    assert "-XX:" not in _args(node)


def test_mapping_the_archive_passes_java_s_exit_code_through(node):
    _start(node)
    assert _start(node, rc=7).returncode == 7 and "-XX:SharedArchiveFile=" in _args(node)
