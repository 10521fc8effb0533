"""Unit tests run with no HDFS."""

import pytest

from tony_airflow.yarn import hdfs


@pytest.fixture(autouse=True)
def no_namenode_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the code reads from HDFS when a job ends (its usage, its lineage) meets a refused connection
    at once here, not after WebHDFS's connect retries and their back-off (3 s in each test)."""
    monkeypatch.setattr(hdfs, "WEBHDFS_CONNECT_RETRIES", 0)
