"""The single-node YARN + HDFS used by the demo and the tests."""

from tony_airflow.yarn.local.cluster import LocalCluster

__all__ = ["LocalCluster"]
