"""Issue #52 item 4: the Airflow task's OpenLineage parent run (and, when asked, the transport) reaches every
container's environment, in the names OpenLineage's own clients read."""

from __future__ import annotations

import json

import pytest

from tests.unit.airflow_context import task_context
from tests.unit.providers.test_yarn_provider import _operator, fake_rm  # noqa: F401  (fixture)
from tony_airflow.providers.yarn import lineage

pytest.importorskip("airflow.providers.openlineage")

NS, JOB, RUN = "airflow-ns", "dag.train", "0192-aaaa-run"
ROOT_JOB, ROOT_RUN = "dag", "0192-bbbb-root"


@pytest.fixture
def provider(monkeypatch):
    """The OpenLineage provider configured; its macros give a fixed identity for any task instance."""
    from airflow.providers.openlineage.plugins import macros

    monkeypatch.setattr(lineage, "_provider_enabled", lambda: True)
    for name, value in {"lineage_job_namespace": NS, "lineage_root_job_namespace": NS}.items():
        monkeypatch.setattr(macros, name, lambda *a, v=value: v)
    for name, value in {"lineage_job_name": JOB, "lineage_run_id": RUN, "lineage_root_job_name": ROOT_JOB,
                        "lineage_root_run_id": ROOT_RUN}.items():
        monkeypatch.setattr(macros, name, lambda ti, v=value: v)


def test_the_parent_and_root_runs_in_the_legacy_variables_and_the_context(provider):
    env = lineage.parent_run_env(object())
    assert env["OPENLINEAGE_PARENT_ID"] == f"{NS}/{JOB}/{RUN}"
    assert env["OPENLINEAGE_ROOT_PARENT_ID"] == f"{NS}/{ROOT_JOB}/{ROOT_RUN}"
    context = json.loads(env["OPENLINEAGE_CONTEXT"])["parent"]
    assert context["run"] == {"runId": RUN} and context["job"] == {"namespace": NS, "name": JOB}
    assert context["root"] == {"run": {"runId": ROOT_RUN}, "job": {"namespace": NS, "name": ROOT_JOB}}


def test_the_dbt_integration_reads_the_same_parent(provider, monkeypatch):
    """OpenLineage's own reader of these variables (the dbt integration's) finds the parent and the root."""
    utils = pytest.importorskip("openlineage.common.provider.dbt.utils")
    for key, value in lineage.parent_run_env(object()).items():
        monkeypatch.setenv(key, value)
    parent = utils.get_parent_run_metadata()
    assert (parent.job_namespace, parent.job_name, parent.run_id) == (NS, JOB, RUN)
    assert (parent.root_parent_job_name, parent.root_parent_run_id) == (ROOT_JOB, ROOT_RUN)


def test_nothing_without_a_configured_provider_or_when_the_user_names_a_parent(provider, monkeypatch):
    assert lineage.parent_run_env(object(), {"OPENLINEAGE_PARENT_ID": "mine/job/1"}) == {}
    monkeypatch.setattr(lineage, "_provider_enabled", lambda: False)
    assert lineage.parent_run_env(object()) == {}


def test_the_provider_without_a_transport_is_not_configured(monkeypatch):
    from airflow.providers.openlineage import conf

    def forget() -> None:  # the provider reads its settings once per process
        for value in vars(conf).values():
            if hasattr(value, "cache_clear"):
                value.cache_clear()

    monkeypatch.delenv("OPENLINEAGE_URL", raising=False)
    monkeypatch.delenv("AIRFLOW__OPENLINEAGE__TRANSPORT", raising=False)
    forget()
    try:
        assert lineage._provider_enabled() is False
        monkeypatch.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT", '{"type": "console"}')
        forget()
        assert lineage._provider_enabled() is True
    finally:
        monkeypatch.delenv("AIRFLOW__OPENLINEAGE__TRANSPORT", raising=False)
        forget()


def _client_transport(monkeypatch, env: dict[str, str]):
    """The transport an OpenLineage client in the container builds from these variables alone."""
    from openlineage.client import OpenLineageClient

    for key in [k for k in __import__("os").environ if k.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return OpenLineageClient().transport


def test_an_http_transport_with_its_key_reaches_the_job_s_client(monkeypatch):
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    mine = HttpTransport(HttpConfig.from_dict({"url": "http://marquez:5000", "endpoint": "api/v1/lineage",
                                               "timeout": 7, "auth": {"type": "api_key", "apiKey": "k-123"}}))
    env = lineage.transport_env(mine)
    assert set(env) <= {k for k in env if k.startswith("OPENLINEAGE__TRANSPORT__")}
    theirs = _client_transport(monkeypatch, env)
    assert (theirs.kind, theirs.url, theirs.endpoint) == ("http", "http://marquez:5000", "api/v1/lineage")
    assert theirs.config.auth.api_key == "k-123" and float(theirs.timeout) == 7


def test_a_composite_transport_hands_on_its_http_transports_only(monkeypatch):
    from openlineage.client.transport.composite import CompositeConfig, CompositeTransport

    mine = CompositeTransport(CompositeConfig.from_dict({"transports": {
        "main": {"type": "http", "url": "http://a:5000"}, "local": {"type": "console"}}}))
    env = lineage.transport_env(mine)
    assert env["OPENLINEAGE__TRANSPORT__TYPE"] == "composite"
    theirs = _client_transport(monkeypatch, env)
    assert [(t.kind, t.url) for t in theirs.transports] == [("http", "http://a:5000")]


def test_another_kind_of_transport_is_not_handed_on():
    from openlineage.client.transport.console import ConsoleConfig, ConsoleTransport

    assert lineage.transport_env(ConsoleTransport(ConsoleConfig())) == {}


def test_the_operator_injects_the_parent_by_default_and_the_transport_only_when_asked(provider, fake_rm,  # noqa: F811
                                                                                     monkeypatch):
    monkeypatch.setattr(lineage, "task_transport_env", lambda given: {"OPENLINEAGE__TRANSPORT__TYPE": "http"})
    monkeypatch.setattr("tony_airflow.providers.yarn.operators.tensorflow.task_transport_env",
                        lineage.task_transport_env)
    op, client = _operator(fake_rm, monkeypatch, env={"MINE": "1"})
    op.execute(task_context())
    env = client.submitted[0].env
    assert env["OPENLINEAGE_PARENT_ID"] == f"{NS}/{JOB}/{RUN}" and env["MINE"] == "1"
    assert not any(k.startswith("OPENLINEAGE__") for k in env)
    op, client = _operator(fake_rm, monkeypatch, openlineage_inject_transport_info=True,
                           openlineage_inject_parent_job_info=False)
    op.execute(task_context())
    env = client.submitted[0].env
    assert env == {"OPENLINEAGE__TRANSPORT__TYPE": "http"}
