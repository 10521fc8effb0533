"""Issue #52 item 5: a retried task's extra links lead to each try's own application (Airflow keeps XComs per
task instance and clears them as a try starts; the operator keeps one record per try)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.unit.airflow_context import DictStore, task_context

pytest.importorskip("airflow")

from airflow.sdk.exceptions import AirflowException  # noqa: E402

from tests.unit.providers.test_yarn_provider import _operator, fake_rm  # noqa: E402,F401
from tony_airflow.providers.yarn.links import yarn as links  # noqa: E402
from tony_airflow.providers.yarn.links.yarn import (  # noqa: E402
    LINKS_BY_TRY_KEY,
    TensorBoardLink,
    YarnApplicationLink,
    try_link,
)

FAILED = [("RUNNING", "UNDEFINED"), ("FINISHED", "FAILED")]
SUCCEEDED = [("RUNNING", "UNDEFINED"), ("FINISHED", "SUCCEEDED")]


def _key(try_number: int) -> Any:
    return SimpleNamespace(dag_id="dag", task_id="train", run_id="r", map_index=-1, try_number=try_number)


def _run_try(op, client, store: DictStore, try_number: int, states) -> dict[str, Any]:
    """One try as Airflow runs it: the XComs of the task instance cleared, the state store kept."""
    client.states = states
    ctx = task_context(store)
    ctx["ti"].try_number = try_number
    try:
        op.execute(ctx)
    except AirflowException as exc:
        assert "FAILED" in str(exc), exc
    return ctx["ti"].xcoms


def test_each_try_s_links_lead_to_its_own_application(fake_rm, monkeypatch):  # noqa: F811
    op, client = _operator(fake_rm, monkeypatch, tensorboard=True, output_path="hdfs:///out")
    store = DictStore()
    _run_try(op, client, store, 1, FAILED)
    xcoms = _run_try(op, client, store, 2, SUCCEEDED)  # try 2's XComs only: try 1's were cleared
    first, second = "application_1700000000000_0001", "application_1700000000000_0002"
    assert xcoms["application_id"] == second
    monkeypatch.setattr(links, "read_xcom", lambda ti_key, key: xcoms.get(key))
    url = f"{fake_rm.url}/proxy/{{}}/"
    assert YarnApplicationLink().get_link(None, ti_key=_key(1)) == url.format(first)
    assert YarnApplicationLink().get_link(None, ti_key=_key(2)) == url.format(second)
    assert TensorBoardLink().get_link(None, ti_key=_key(1)) == url.format(first) + "pages/tensorboard/"
    assert store.get(LINKS_BY_TRY_KEY).keys() == {"1", "2"}


def test_a_try_that_started_no_application_has_no_link_and_an_older_record_falls_back_to_the_plain_xcom():
    by_try = {"2": {"tracking_url": "http://rm/proxy/a/"}}
    assert try_link(by_try, 1, "tracking_url") == ""  # try 1 failed before submitting: no button
    assert try_link(by_try, 2, "tracking_url") == "http://rm/proxy/a/"
    assert try_link(None, 2, "tracking_url") is None  # a task from before the record: the plain XCom
    xcoms = {"tracking_url": "http://rm/proxy/old/"}
    import tony_airflow.providers.yarn.links.yarn as mod

    original = mod.read_xcom
    try:
        mod.read_xcom = lambda ti_key, key: xcoms.get(key)  # type: ignore[assignment]
        assert YarnApplicationLink().get_link(None, ti_key=_key(3)) == "http://rm/proxy/old/"
    finally:
        mod.read_xcom = original  # type: ignore[assignment]


def test_a_reconnecting_try_records_the_application_it_followed(fake_rm, monkeypatch):  # noqa: F811
    op, client = _operator(fake_rm, monkeypatch)
    store = DictStore()
    client.states = [("RUNNING", "UNDEFINED")] * 3 + [("FINISHED", "SUCCEEDED")]
    app = client.submit(op.build_job(task_context())).app_id
    store.set(op.external_id_key, app)  # try 1's worker died after submitting
    xcoms = _run_try(op, client, store, 2, SUCCEEDED)
    assert xcoms[LINKS_BY_TRY_KEY]["2"]["application_id"] == app and len(client.submitted) == 1


def test_the_api_server_asks_the_operator_s_own_links_with_the_try(monkeypatch):
    """Airflow's plain XCom lookup (XComOperatorLink) knows no tries: the plugin registers the link classes
    for the operator, and a deserialized operator in the API server carries them."""
    from airflow.serialization.serialized_objects import OperatorSerialization

    from tony_airflow.providers.yarn.operators.tensorflow import TensorFlowOnYarnOperator
    from tony_airflow.providers.yarn.plugins import YarnPlugin

    assert {type(link) for link in YarnPlugin.operator_extra_links} == {YarnApplicationLink, TensorBoardLink}
    assert all(TensorFlowOnYarnOperator in link.operators for link in YarnPlugin.operator_extra_links)
    from airflow import plugins_manager

    monkeypatch.setattr(plugins_manager, "get_operator_extra_links", lambda: list(YarnPlugin.operator_extra_links))
    op = TensorFlowOnYarnOperator(task_id="train", cluster_requirement="worker:1", command="true")
    encoded = OperatorSerialization.serialize_operator(op)
    restored = OperatorSerialization.deserialize_operator(encoded)
    kinds = {name: type(link) for name, link in restored.operator_extra_link_dict.items()}
    assert kinds == {"YARN application": YarnApplicationLink, "TensorBoard": TensorBoardLink}


def test_links_read_xcoms_through_the_supervisor_inside_a_task(monkeypatch):
    """In a task (Airflow recomputes the links as it ends) the SDK's XCom answers; the API server reads
    the database (the other branch, exercised by the real deployment's test)."""
    import sys

    from airflow.sdk.execution_time import task_runner, xcom

    monkeypatch.setitem(sys.modules, "airflow.sdk.execution_time.task_runner", task_runner)
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", object(), raising=False)
    values = {LINKS_BY_TRY_KEY: {"1": {"tracking_url": "http://rm/proxy/a1/"}}}
    monkeypatch.setattr(xcom.XCom, "get_value", classmethod(lambda cls, *, ti_key, key: values.get(key)))
    assert YarnApplicationLink().get_link(None, ti_key=_key(1)) == "http://rm/proxy/a1/"
