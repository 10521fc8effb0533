"""A real Oozie server for the local cluster (`tony oozie server up|down|status`)."""

from tony_airflow.local.cluster.oozie.server import OozieServer

__all__ = ["OozieServer"]
