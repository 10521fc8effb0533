"""Which processes are a NodeManager's containers: a host's own directories, never a sibling's."""

from __future__ import annotations

import os
import subprocess
import sys

from tony_airflow.local.cluster.processes import container_processes


def test_a_container_belongs_to_its_own_nodemanager_dir_not_to_one_whose_name_prefixes_it(tmp_path):
    """`nm-local` and `nm-local-h1`: one local cluster's single-node and per-host directories."""
    base, host = tmp_path / "nm-local", tmp_path / "nm-local-h1"
    base.mkdir()
    host.mkdir()
    env = {**os.environ, "CONTAINER_ID": "container_1_0001_01_000002", "LOCAL_DIRS": f"{host},{tmp_path}/other"}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env, cwd=tmp_path)
    try:
        assert [p.pid for p in container_processes(host)] == [proc.pid]
        assert proc.pid not in [p.pid for p in container_processes(base)]
    finally:
        proc.kill()
        proc.wait()
