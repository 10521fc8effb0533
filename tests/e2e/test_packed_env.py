"""A packed Python environment (venv-pack), localized as a YARN archive, runs the task command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.helpers import PAYLOADS, aggregated_logs, ytf_submit


def test_interpreter_comes_from_the_archive(local_cluster, rm, tmp_path):
    env_dir = tmp_path / "packed"
    base = Path(sys.base_prefix) / "bin" / "python3"  # the node's base Python, as venv-pack expects
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(env_dir)], check=True)
    site = next(env_dir.glob("lib/python3*/site-packages"))
    (site / "tony_packed_marker.py").write_text("WHERE = __file__\n")
    archive = tmp_path / "packed.tar.gz"
    subprocess.run([str(Path(sys.executable).parent / "venv-pack"), "-p", str(env_dir), "-o", str(archive), "-q"],
                   check=True)
    proc, app_id = ytf_submit("-r", "worker:2", "-m", "384", "--python_venv", str(archive),
                              "-s", str(PAYLOADS / "packed_env.py"), "python ${DTF_TASK_SCRIPT}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    logs = aggregated_logs(rm, app_id)
    assert logs.count("/venv; marker from ") == 2


def test_source_directory_is_the_working_directory(local_cluster, rm, tmp_path):
    src = tmp_path / "project"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pkg" / "main.py").write_text("import os\nprint('hello from the source dir:', os.path.isfile('pkg/main.py'))\n")
    proc, app_id = ytf_submit("-r", "worker:1", "-m", "384", "--src_dir", str(src), "python3 -m pkg.main")
    assert proc.returncode == 0, proc.stderr
    assert "hello from the source dir: True" in aggregated_logs(rm, app_id)
