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
    """Everything under tests/e2e runs on the real local cluster: `pytest -m "not e2e"` is the fast loop.

    The order: unit tests first (no cluster yet, the quickest verdict), then the end-to-end modules, and
    last those on the production-shape cluster, whose ~15 daemons then run beside no other module's tests
    (each module keeps its own order)."""
    production = set()
    for item in items:
        if E2E_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
            if "secure_cluster" in getattr(item, "fixturenames", ()):
                production.add(str(item.fspath))

    def stage(item: pytest.Item) -> int:
        path = str(item.fspath)
        return 2 if path in production else 1 if E2E_DIR in Path(path).parents else 0

    items.sort(key=stage)
