"""`make demo`: the example pipeline DAG, end to end, on the local YARN + HDFS.

Airflow runs the DAG with its own `dag.test()` (no scheduler to start): prepare
data into HDFS, train on YARN with two workers and TensorBoard, evaluate the
model in the Airflow worker, report. The `yarn_default` connection is pointed
at the local cluster, as a user would point it at theirs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DAG_FILE = Path(__file__).resolve().parents[2] / "dags_examples" / "tony_pipeline.py"


def point_yarn_default_at_the_local_cluster() -> None:
    """`yarn_default` names the local cluster, as a user's would name theirs (unless already set)."""
    from tony_airflow.cli.dag_test import local_yarn_connection
    from tony_airflow.local.cluster import LocalCluster

    cluster = LocalCluster.default()
    os.environ.update(cluster.env())  # PATH and JAVA_HOME for skein's driver, as `tony cluster env` gives
    os.environ.setdefault("AIRFLOW_CONN_YARN_DEFAULT", local_yarn_connection(cluster))


def main() -> int:
    from tony_airflow.cli import dag_test

    point_yarn_default_at_the_local_cluster()
    summary = dag_test.run(DAG_FILE)
    report = summary["xcoms"].get("report", {}).get("return_value") or {}
    print(f"\n{summary['dag_id']}: {summary['state']}  (tasks: "
          + ", ".join(f"{t} {s}" for t, s in summary["tasks"].items()) + ")")
    for key in ("application_id", "final_status", "tracking_url", "tensorboard_url", "accuracy"):
        print(f"  {key:<16} {report.get(key, '-')}")
    return 0 if summary["state"] == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
