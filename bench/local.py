"""The cluster the benchmarks measure on: the default local YARN + HDFS, unless HADOOP_CONF_DIR names one."""

from __future__ import annotations

import os
import sys

from tony_airflow.local.cluster import LocalCluster


def local_cluster() -> LocalCluster:
    """Start (or reuse) the default local cluster and point this process's clients at it,
    unless HADOOP_CONF_DIR already names a cluster."""
    cluster = LocalCluster.default()
    if "HADOOP_CONF_DIR" not in os.environ:
        cluster.up(log=lambda *a: print(*a, file=sys.stderr))
        os.environ.update(cluster.env())
    return cluster
