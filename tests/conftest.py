"""Session-wide: Airflow reads its home at import, so point it at a throwaway one first."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

if "AIRFLOW_HOME" not in os.environ:  # made here, so removed here when the session's process ends
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="tony-airflow-test-home-")
    atexit.register(shutil.rmtree, os.environ["AIRFLOW_HOME"], True)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")


E2E_DIR = Path(__file__).resolve().parent / "e2e"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/e2e runs on the real local cluster: `pytest -m "not e2e"` is the fast loop."""
    for item in items:
        if E2E_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
