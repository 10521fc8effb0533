"""`pip install tony-airflow` without extras: no Airflow, and the command line and Azkaban's entry point
still run jobs on the local cluster (issue #30 item 16). The package is built from the repository's
tracked files into a fresh virtual environment, as a user's pip would; the tasks and the AM run with
that environment's Python too."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.helpers import PAYLOADS, wait_terminal

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bin/ of a fresh venv holding only `tony-airflow` and its own dependencies."""
    root = tmp_path_factory.mktemp("bare-install")
    source = root / "src"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
    pip = subprocess.run([str(root / "venv/bin/python"), "-m", "pip", "install", "-q", str(source)],
                         capture_output=True, text=True, timeout=900)
    assert pip.returncode == 0, pip.stderr[-3000:]
    return root / "venv" / "bin"


def _run(bin_dir: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run([str(bin_dir / args[0]), *args[1:]], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PATH": path, **(env or {})})


def test_the_bare_package_has_no_airflow_and_runs_jobs_from_the_command_line_and_azkaban(
        bare, local_cluster, rm, tmp_path):
    python = str(bare / "python")
    absent = _run(bare, "python", "-c", "import importlib.util as u; print(u.find_spec('airflow') is None)")
    assert absent.stdout.strip() == "True", absent.stderr
    freeze = _run(bare, "python", "-m", "pip", "freeze").stdout.lower()
    assert "apache-airflow" not in freeze and "tony-airflow" in freeze

    submitted = _run(bare, "ytf-submit", "-r", "worker:1", "-m", "384", "-n", "bare-cli", "--python", python,
                     "--env", "SLEEP_S=1", "-s", str(PAYLOADS / "sleep.py"), "python3 ${DTF_TASK_SCRIPT}")
    assert submitted.returncode == 0, submitted.stderr[-2000:]
    assert re.search(r"application_\d+_\d+ SUCCEEDED\n", submitted.stdout), submitted.stdout

    props = tmp_path / "train.job"
    props.write_text(f"type=tensorflow\ncluster_requirement=worker:1\ntask_memory=384\npython={python}\n"
                     f"task_command=python3 {PAYLOADS / 'sleep.py'}\nworker_env.SLEEP_S=1\n")
    azkaban = _run(bare, "tony-azkaban", env={"JOB_PROP_FILE": str(props)})
    assert azkaban.returncode == 0, azkaban.stdout[-2000:] + azkaban.stderr[-2000:]
    for line in (azkaban.stdout + submitted.stdout).splitlines():
        if line.startswith("Submitted application "):
            assert wait_terminal(rm, line.split()[2], timeout=60).final_status == "SUCCEEDED"
