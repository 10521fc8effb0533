"""The examples' digits data (tony_airflow/examples/digits_data.py): scikit-learn's, read without importing it
(its import was a second of each process's start after an elastic group re-formed, issue 54)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest


def test_the_digits_are_scikit_learns_without_its_import():
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_digits

    from tony_airflow.examples.digits_data import digits

    x, y = digits()
    want_x, want_y = load_digits(return_X_y=True)
    assert np.array_equal(x, want_x) and np.array_equal(y, want_y) and x.dtype == want_x.dtype
    loaded = subprocess.run([sys.executable, "-c", "import sys; from tony_airflow.examples.digits_data import load;"
                             "x, y = load('train'); print(x.shape, 'sklearn' in sys.modules)"],
                            capture_output=True, text=True, timeout=120)
    assert loaded.stdout.split() == ["(1437,", "64)", "False"], loaded.stderr[-2000:]
