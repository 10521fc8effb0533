"""Running a job with TonY's own submitter (`com.linkedin.tony.cli.ClusterSubmitter`) on our cluster.

TonY runs as its users run it: its client JVM uploads its jar, submits its Java AM, and polls
until the end. What it needs from this cluster: the cluster's Hadoop jars and configuration on
the client's class path (its containers get the same through yarn.application.classpath), a
`tony.xml` with security off on a simple-auth cluster, history paths, and
SKIP_HADOOP_PATH=true (its executors would otherwise prepend `hadoop classpath`, which the local
cluster has no `hadoop` command for).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from tony_airflow.local.cluster.jars import jar_dir
from tony_airflow.yarn.jvm import ADD_OPENS, LIGHT_JVM_FLAGS, find_java_home

SUBMITTER = "com.linkedin.tony.cli.ClusterSubmitter"
# Evened with ours: our skein AM runs with these flags, so TonY's client, AM and executor JVMs do too
# (TonY's own defaults: C2 and the parallel collector, executors -Xmx1536m, kept)
JVM_FLAGS = " ".join(LIGHT_JVM_FLAGS)
CONTAINER_TMP = "-Djava.io.tmpdir=tmp"  # relative: the container's working directory, where YARN makes tmp
TASK_ENV = ("JOB_NAME", "TASK_INDEX")  # what TonY calls DTF_TASK_JOB_NAME / DTF_TASK_INDEX


@dataclass(frozen=True)
class TonyRun:
    app_id: str
    wall_s: float
    returncode: int
    log: str


def write_conf(path: Path, instances: dict[str, int], memory_mb: int, env: dict[str, str] | None = None) -> Path:
    """tony.xml for one job: its task types and their sizes, security and history for this cluster, and
    `env` for every container."""
    # the tasks' temporary files in the container's own tmp, as ours (TonY's AM writes its dashboard
    # template into java.io.tmpdir, TensorFlow's autograph into TMPDIR: /tmp otherwise, never removed)
    envs = {"SKIP_HADOOP_PATH": "true", "TMPDIR": "tmp", **(env or {})}
    props = {
        "tony.application.security.enabled": "false",
        "tony.history.location": "/tmp/tony-history",
        "tony.history.intermediate": "/tmp/tony-history/intermediate",
        "tony.history.finished": "/tmp/tony-history/finished",
        "tony.containers.envs": ",".join(f"{k}={v}" for k, v in envs.items()),
        "tony.am.memory": f"{memory_mb}m",
        "tony.task.am.jvm.opts": f"{JVM_FLAGS} {CONTAINER_TMP}",
        "tony.task.executor.jvm.opts": f"-Xmx1536m {JVM_FLAGS} {CONTAINER_TMP}",
        **{f"tony.{name}.instances": str(n) for name, n in instances.items()},
        **{f"tony.{name}.memory": f"{memory_mb}m" for name in instances},
    }
    root = ET.Element("configuration")
    for name, value in props.items():
        prop = ET.SubElement(root, "property")
        ET.SubElement(prop, "name").text = name
        ET.SubElement(prop, "value").text = value
    path.write_text(ET.tostring(root, encoding="unicode"))
    return path


def submit(jar: Path, command: str, conf_file: Path, timeout: float = 600) -> TonyRun:
    """Run `command` in every task with TonY's submitter and wait for it, as `ytf-submit` does."""
    java = find_java_home() / "bin" / "java"
    classpath = os.pathsep.join([str(jar), os.environ["HADOOP_CONF_DIR"], f"{jar_dir()}/*"])
    argv = [str(java), *ADD_OPENS, *LIGHT_JVM_FLAGS, "-cp", classpath, SUBMITTER, "--executes", command,
            "--conf_file", str(conf_file)]
    t0 = time.time()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    wall = time.time() - t0
    log = proc.stdout + proc.stderr
    found = re.search(r"Submitted application (application_\d+_\d+)", log)
    if found is None:
        raise RuntimeError(f"TonY submitted nothing (exit {proc.returncode}): {log.strip().splitlines()[-3:]}")
    return TonyRun(found.group(1), wall, proc.returncode, log)
