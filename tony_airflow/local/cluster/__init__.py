"""The single-node YARN + HDFS used by the demo and the tests."""

from tony_airflow.local.cluster.cluster import LocalCluster

__all__ = ["LocalCluster"]
