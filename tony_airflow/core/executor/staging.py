"""HDFS input for programs that only see a local filesystem.

TensorFlow 2.21 has no HDFS filesystem, so the executor stages: an `hdfs://` input is copied to a local
directory before the command starts, and the command sees the local path in DTF_INPUT_PATH (the URI in
DTF_INPUT_URI). The output goes the other way, by the commit protocol of `output_commit.py`.
"""

from __future__ import annotations

import logging
from pathlib import Path

from tony_airflow.core.executor.output_commit import Mirror, is_hdfs

log = logging.getLogger("tony.executor.staging")


def stage_input(uri: str, local: Path) -> str:
    """Copy an HDFS input locally; other inputs are passed through as they are."""
    if not is_hdfs(uri):
        return uri
    mirror = Mirror(uri, local)
    copied = mirror.pull(while_written=False)
    log.info("staged %d input file(s) from %s into %s", copied, uri, mirror.local)
    return str(mirror.local)
