"""OpenLineage and Airflow assets for a training job: what it read, what it wrote, which YARN run it was.

The OpenLineage provider is optional (`pip install 'tony-airflow[openlineage]'`):
it is imported only when Airflow asks for facets or when the parent run's
identity is handed to the containers, and without it nothing here is needed.
Datasets follow OpenLineage's naming for HDFS: namespace `hdfs://<namenode>:<port>`,
name the absolute path.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

PARENT_ID_ENV = "OPENLINEAGE_PARENT_ID"            # "<namespace>/<job name>/<run id>" of the Airflow task
ROOT_PARENT_ID_ENV = "OPENLINEAGE_ROOT_PARENT_ID"  # the same for the DAG run
METRICS_FILE = "metrics.json"                      # what the training wrote (the examples do), carried by the asset
MAX_METRICS_BYTES = 64 * 1024


def dataset_name(path: str, default_fs: str | None) -> tuple[str, str]:
    """(namespace, name) of a job's input or output path: `hdfs:///x` takes the namenode of fs.defaultFS."""
    parts = urlsplit(path)
    if parts.scheme in ("", "file") and not path.startswith("hdfs"):
        if parts.scheme == "" and default_fs and default_fs.startswith("hdfs://"):
            fs = urlsplit(default_fs)  # a bare path on a job that stages HDFS paths is an HDFS path
            return f"hdfs://{fs.netloc}", posixpath.normpath("/" + path.lstrip("/"))
        return "file", posixpath.normpath(parts.path or path)
    netloc = parts.netloc or (urlsplit(default_fs).netloc if default_fs else "")
    return f"{parts.scheme}://{netloc}", posixpath.normpath(parts.path or "/")


def parent_run_env(ti: Any) -> dict[str, str]:
    """The Airflow task's OpenLineage identity for the containers (empty without the OpenLineage provider)."""
    try:
        from airflow.providers.openlineage.plugins.macros import lineage_parent_id, lineage_root_parent_id
    except ImportError:
        return {}
    try:
        return {PARENT_ID_ENV: lineage_parent_id(ti), ROOT_PARENT_ID_ENV: lineage_root_parent_id(ti)}
    except Exception:  # an incomplete task instance (tests, odd contexts): lineage is never fatal
        return {}


def operator_lineage(inputs: list[tuple[str, str]], outputs: list[tuple[str, str]],
                     application_id: str | None) -> Any:
    """OperatorLineage with the datasets and the YARN application as an external query run facet."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import Dataset
    from openlineage.client.facet_v2 import external_query_run

    run_facets: dict[str, Any] = {}
    if application_id:
        run_facets["externalQuery"] = external_query_run.ExternalQueryRunFacet(
            externalQueryId=application_id, source="yarn")
    return OperatorLineage(inputs=[Dataset(namespace=ns, name=name) for ns, name in inputs],
                           outputs=[Dataset(namespace=ns, name=name) for ns, name in outputs],
                           run_facets=run_facets)


def read_metrics(fs: Any, output_dir: str) -> dict[str, Any]:
    """The training's metrics.json in the output path, if it wrote one (a JSON object, at most 64 KiB)."""
    path = posixpath.join(output_dir, METRICS_FILE)
    try:
        if not fs.exists(path) or fs.size(path) > MAX_METRICS_BYTES:
            return {}
        data = json.loads(fs.cat_file(path))
    except Exception:
        return {}
    return dict(data) if isinstance(data, Mapping) else {}
