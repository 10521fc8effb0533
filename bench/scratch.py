"""Scratch directories of a benchmark run: made under the system's temp dir, removed when it ends."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path


def scratch_dir(prefix: str) -> str:
    """A new directory that is removed, with what the run's tasks wrote into it, when this process
    exits (tasks on this one host write their stamps and outputs there)."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path


def scratch_file(path: Path) -> Path:
    """`path`, removed when this process exits."""
    atexit.register(lambda: path.unlink(missing_ok=True))
    return path
