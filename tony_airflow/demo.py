"""`make demo`: the example pipeline DAG, end to end, on the local YARN + HDFS.

Airflow runs the DAG with its own `dag.test()` (no scheduler to start): prepare
data into HDFS, train on YARN with two workers and TensorBoard, evaluate the
model in the Airflow worker, report. The `yarn_default` connection is pointed
at the local cluster, as a user would point it at theirs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

DAG_FILE = Path(__file__).resolve().parents[1] / "dags_examples" / "tony_pipeline.py"


def yarn_connection_uri() -> str:
    """`yarn_default` as an Airflow connection in JSON: the RM address and the Hadoop configuration."""
    from tony_airflow.yarn.local import LocalCluster

    cluster = LocalCluster.default()
    os.environ.update(cluster.env())  # PATH and JAVA_HOME for skein's driver, as `tony cluster env` gives
    return json.dumps({"conn_type": "yarn", "host": cluster.rm_url.split("//", 1)[1],
                       "extra": {"hadoop_conf_dir": str(cluster.conf_dir), "queue": "default"}})


def main() -> int:
    from tony_airflow.providers.yarn import local_run

    os.environ.setdefault("AIRFLOW_CONN_YARN_DEFAULT", yarn_connection_uri())
    summary = local_run.run(DAG_FILE)
    report = summary["xcoms"].get("report", {}).get("return_value") or {}
    print(f"\n{summary['dag_id']}: {summary['state']}  (tasks: "
          + ", ".join(f"{t} {s}" for t, s in summary["tasks"].items()) + ")")
    for key in ("application_id", "final_status", "tracking_url", "tensorboard_url", "accuracy"):
        print(f"  {key:<16} {report.get(key, '-')}")
    return 0 if summary["state"] == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
