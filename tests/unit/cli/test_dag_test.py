"""`python -m tony_airflow.cli.dag_test` refuses bad input in one line with exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

DAGS = Path(__file__).resolve().parents[3] / "dags_examples"


@pytest.mark.parametrize("args, line", [
    (["no/such/dag.py"], "no/such/dag.py does not exist or is not a file"),
    ([str(DAGS / "tony_sensor.py"), "tony_nope"], "dag_id: 'tony_nope' is not in"),
    ([str(DAGS / "tony_sensor.py"), "--conf", "{bad"], "--conf: not JSON"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, line):
    proc = subprocess.run([sys.executable, "-m", "tony_airflow.cli.dag_test", *args],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "AIRFLOW_HOME": str(tmp_path / "home"),
                               "AIRFLOW__CORE__LOAD_EXAMPLES": "False"})
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and line in errors[0], proc.stderr[-2000:]
