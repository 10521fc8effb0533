"""OpenLineage and Airflow assets for a training job: what it read, what it wrote, which YARN run it was.

The OpenLineage provider is optional (`pip install 'tony-airflow[openlineage]'`):
it is imported only when Airflow asks for facets or when the parent run's
identity is handed to the containers, and without it nothing here is needed.
Datasets follow OpenLineage's naming for HDFS: namespace `hdfs://<namenode>:<port>`,
name the absolute path.
"""

from __future__ import annotations

import functools
import json
import logging
import posixpath
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

PARENT_ID_ENV = "OPENLINEAGE_PARENT_ID"            # "<namespace>/<job name>/<run id>" of the Airflow task
ROOT_PARENT_ID_ENV = "OPENLINEAGE_ROOT_PARENT_ID"  # the same for the DAG run
CONTEXT_ENV = "OPENLINEAGE_CONTEXT"                # both as JSON: {"parent": {"run", "job", "root": {...}}}
TRANSPORT_ENV_PREFIX = "OPENLINEAGE__TRANSPORT"    # the client's own configuration from the environment
METRICS_FILE = "metrics.json"                      # what the training wrote (the examples do), carried by the asset
MAX_METRICS_BYTES = 64 * 1024

log = logging.getLogger(__name__)


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


def _provider_enabled() -> bool:
    """Airflow's OpenLineage provider installed and configured (a transport set, not disabled)."""
    try:
        from airflow.providers.openlineage.conf import is_disabled
    except ImportError:
        return False
    try:
        return not is_disabled()
    except Exception:  # an unreadable configuration: lineage is never fatal
        return False


def parent_run_env(ti: Any, given: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Airflow task's OpenLineage identity for the containers, as OpenLineage's integrations read it:
    `OPENLINEAGE_PARENT_ID` and `OPENLINEAGE_ROOT_PARENT_ID` (`<namespace>/<job>/<run id>`) and the newer
    `OPENLINEAGE_CONTEXT` (JSON). Empty without a configured provider, or when the user's own `env` already
    names a parent (theirs wins, as the Spark-launching providers leave `spark.openlineage.parent*` alone)."""
    if not _provider_enabled() or any(k in (given or {}) for k in (PARENT_ID_ENV, ROOT_PARENT_ID_ENV, CONTEXT_ENV)):
        return {}
    try:
        from airflow.providers.openlineage.plugins import macros

        namespace, job, run = macros.lineage_job_namespace(), macros.lineage_job_name(ti), macros.lineage_run_id(ti)
        root_namespace = macros.lineage_root_job_namespace(ti)
        root_job, root_run = macros.lineage_root_job_name(ti), macros.lineage_root_run_id(ti)
    except Exception:  # an incomplete task instance (tests, odd contexts): lineage is never fatal
        return {}
    context = {"parent": {"run": {"runId": run}, "job": {"namespace": namespace, "name": job},
                          "root": {"run": {"runId": root_run}, "job": {"namespace": root_namespace, "name": root_job}}}}
    return {PARENT_ID_ENV: f"{namespace}/{job}/{run}", ROOT_PARENT_ID_ENV: f"{root_namespace}/{root_job}/{root_run}",
            CONTEXT_ENV: json.dumps(context, separators=(",", ":"))}


def _http_transport_settings(transport: Any) -> dict[str, str]:
    """One HTTP transport as the client's configuration keys (what the Spark properties carry too)."""
    settings = {"TYPE": "http", "URL": str(transport.url), "ENDPOINT": str(transport.endpoint or "")}
    timeout = getattr(transport, "timeout", None)
    if timeout:
        settings["TIMEOUT"] = str(timeout)
    compression = getattr(transport, "compression", None)
    if compression:
        settings["COMPRESSION"] = str(compression)
    auth = getattr(transport.config, "auth", None)
    if getattr(auth, "api_key", None):  # a static key only: a token endpoint's short-lived token would expire
        settings["AUTH"] = json.dumps({"type": "api_key", "apiKey": str(auth.api_key)})  # type: ignore[union-attr]
    return {k: v for k, v in settings.items() if v}


def transport_env(transport: Any) -> dict[str, str]:
    """The Airflow task's OpenLineage transport as `OPENLINEAGE__TRANSPORT__*` variables, which the
    OpenLineage client in the job reads: HTTP, or the HTTP transports of a composite one (the kinds the
    Spark-launching providers hand on; another kind is said so and skipped)."""
    kind = getattr(transport, "kind", None)
    if kind == "http":
        return {f"{TRANSPORT_ENV_PREFIX}__{k}": v for k, v in _http_transport_settings(transport).items()}
    if kind == "composite":
        env: dict[str, str] = {}
        for nested in getattr(transport, "transports", []):
            if getattr(nested, "kind", None) == "http":
                name = str(getattr(nested, "name", "") or f"http{len(env)}").upper()
                env.update({f"{TRANSPORT_ENV_PREFIX}__TRANSPORTS__{name}__{k}": v
                            for k, v in _http_transport_settings(nested).items()})
        if env:
            env[f"{TRANSPORT_ENV_PREFIX}__TYPE"] = "composite"
            env[f"{TRANSPORT_ENV_PREFIX}__CONTINUE_ON_FAILURE"] = str(
                getattr(transport.config, "continue_on_failure", True)).lower()
        return env
    log.info("OpenLineage transport %r is not handed to the job (only http, or composite of http)", kind)
    return {}


def task_transport_env(given: Mapping[str, str] | None = None) -> dict[str, str]:
    """The configured provider's transport for the containers (empty without one, or when the user's
    `env` already sets a transport)."""
    if not _provider_enabled() or any(k.startswith(TRANSPORT_ENV_PREFIX) or k == "OPENLINEAGE_URL"
                                      for k in (given or {})):
        return {}
    try:
        from airflow.providers.openlineage.plugins.listener import get_openlineage_listener

        transport = get_openlineage_listener().adapter.get_or_create_openlineage_client().transport
        return transport_env(transport)
    except Exception as exc:
        log.warning("no OpenLineage transport for the job: %s", exc)
        return {}


TRAINING_FACET = "tonyTraining"  # the run facet with the training's final numbers
TRAINING_FACET_SCHEMA = "tony-airflow://facets/TonyTrainingRunFacet.json"


@functools.cache
def training_facet_class() -> type:
    """A custom OpenLineage run facet (built on first use: the OpenLineage client is optional)."""
    import attr
    from openlineage.client.facet_v2 import RunFacet

    @attr.define
    class TonyTrainingRunFacet(RunFacet):
        """How far the training of the YARN application got, and its final metrics."""

        applicationId: str  # noqa: N815 (OpenLineage's facets name fields in camelCase)
        metrics: dict[str, Any] = attr.field(factory=dict)
        step: int | None = None
        totalSteps: int | None = None  # noqa: N815
        epoch: int | None = None
        totalEpochs: int | None = None  # noqa: N815
        percent: float | None = None
        source: str | None = None

        @staticmethod
        def _get_schema() -> str:
            return TRAINING_FACET_SCHEMA

    return TonyTrainingRunFacet


def training_facet(final: Mapping[str, Any]) -> Any:
    """The facet of the operator's final training numbers (XCom `training`)."""
    return training_facet_class()(
        applicationId=str(final.get("application_id") or ""), metrics=dict(final.get("metrics") or {}),
        step=final.get("step"), totalSteps=final.get("total_steps"), epoch=final.get("epoch"),
        totalEpochs=final.get("total_epochs"), percent=final.get("percent"), source=final.get("source"))


def operator_lineage(inputs: list[tuple[str, str]], outputs: list[tuple[str, str]],
                     application_id: str | None, training: Mapping[str, Any] | None = None) -> Any:
    """OperatorLineage with the datasets, the YARN application as an external query run facet and, when the
    program reported, its final numbers as the `tonyTraining` run facet."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import Dataset
    from openlineage.client.facet_v2 import external_query_run

    run_facets: dict[str, Any] = {}
    if application_id:
        run_facets["externalQuery"] = external_query_run.ExternalQueryRunFacet(
            externalQueryId=application_id, source="yarn")
    if training:
        run_facets[TRAINING_FACET] = training_facet(training)
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
