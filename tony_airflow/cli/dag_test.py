"""Run one DAG file end to end on this machine with Airflow's own `dag.test()`.

What `make demo` and the end-to-end tests use: a throwaway Airflow home
(SQLite, no example DAGs), the metadata database migrated once, the DAG run
in-process (tasks, sensors and, for deferrable tasks, the trigger inline),
and a summary of task states and XComs printed as one JSON line.

    python -m tony_airflow.cli.dag_test DAG_FILE [DAG_ID] [--conf JSON]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from tony_airflow.cli.common import OneLineParser
from tony_airflow.cli.common import run as run_cli
from tony_airflow.errors import UsageError

SUMMARY_MARK = "DAG-RUN-SUMMARY "


def prepare_airflow_home(dag_file: Path) -> Path:
    """Environment Airflow reads at import: set before the first `import airflow`."""
    from tony_airflow.local.cluster.jars import cache_root

    home = Path(os.environ.setdefault("AIRFLOW_HOME", str(cache_root() / "airflow-home")))
    home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(dag_file.parent))
    return home


def migrate_db() -> None:
    from airflow.utils.db import initdb

    initdb()


def load_dag(dag_file: Path, dag_id: str | None) -> Any:
    """Parse the file the way Airflow's DAG processor does (its DagBag)."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(dag_file))
    if bag.import_errors:
        first = str(next(iter(bag.import_errors.values()))).strip().splitlines()[-1]
        raise UsageError(f"dag_file: {dag_file} does not import: {first}")
    if dag_id is None:
        if len(bag.dags) != 1:
            raise UsageError(f"dag_id: {dag_file} defines {len(bag.dags)} DAGs ({', '.join(bag.dags)}); name one")
        return next(iter(bag.dags.values()))
    if dag_id not in bag.dags:
        raise UsageError(f"dag_id: {dag_id!r} is not in {dag_file}; allowed: {', '.join(bag.dags)}")
    return bag.dags[dag_id]


def summarize(dag_run: Any) -> dict[str, Any]:
    """Task states and every XCom of the run, from Airflow's metadata database."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances(session=session)}
        xcoms: dict[str, dict[str, Any]] = {}
        rows = session.query(XComModel).filter(XComModel.dag_id == dag_run.dag_id,
                                               XComModel.run_id == dag_run.run_id)
        for row in rows:
            value = row.value
            if isinstance(value, (str, bytes)):
                try:
                    value = json.loads(value)
                except ValueError:
                    pass
            xcoms.setdefault(row.task_id, {})[row.key] = value
    return {"dag_id": dag_run.dag_id, "run_id": dag_run.run_id, "state": str(dag_run.state),
            "tasks": tis, "xcoms": xcoms}


def run(dag_file: Path, dag_id: str | None = None, run_conf: dict[str, Any] | None = None) -> dict[str, Any]:
    if not dag_file.is_file():
        raise UsageError(f"dag_file: {dag_file} does not exist or is not a file")
    if importlib.util.find_spec("airflow") is None:
        raise UsageError("dag_file: running a DAG needs Apache Airflow; allowed once it is installed: "
                         "pip install 'tony-airflow[airflow]'")
    prepare_airflow_home(dag_file)
    migrate_db()
    dag = load_dag(dag_file, dag_id)
    dag_run = dag.test(run_conf=run_conf)
    return summarize(dag_run)


def local_yarn_connection(cluster: Any) -> str:
    """`yarn_default` for a local cluster, as Airflow reads it from AIRFLOW_CONN_YARN_DEFAULT (JSON): with
    HA no host (both ResourceManagers come from the configuration), with Kerberos its user's keytab."""
    extra: dict[str, str] = {"hadoop_conf_dir": str(cluster.conf_dir)}
    conn: dict[str, Any] = {"conn_type": "yarn", "extra": extra}
    if len(cluster.rm_urls) == 1:
        conn["host"] = cluster.rm_urls[0].split("//", 1)[1]
    if cluster.secure:
        extra.update(auth="kerberos", principal=cluster.kdc.user_principal, keytab=str(cluster.kdc.user_keytab))
    return json.dumps(conn)


def main(argv: list[str] | None = None) -> int:
    def run_and_summarize(args: argparse.Namespace) -> int:
        try:
            run_conf = json.loads(args.conf)
        except ValueError as exc:
            raise UsageError(f"--conf: not JSON: {exc}") from None
        summary = run(args.dag_file.resolve(), args.dag_id, run_conf)
        print(SUMMARY_MARK + json.dumps(summary, default=str), flush=True)
        return 0 if summary["state"] == "success" else 1

    def factory() -> OneLineParser:
        p = OneLineParser(prog="python -m tony_airflow.cli.dag_test")
        p.add_argument("dag_file", type=Path)
        p.add_argument("dag_id", nargs="?")
        p.add_argument("--conf", default="{}", help="the DAG run's conf as JSON")
        p.set_defaults(func=run_and_summarize)
        return p

    return run_cli(argv, factory)


if __name__ == "__main__":
    sys.exit(main())
