"""OpenLineage facets, the parent run's identity for the job, and the model asset's event (unit level)."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import pytest
from airflow.sdk import Asset

from tests.unit.airflow_context import task_context
from tests.unit.providers.test_yarn_provider import _operator, fake_rm  # noqa: F401  (fixture)
from tony_airflow.providers.yarn import lineage
from tony_airflow.providers.yarn.lineage import dataset_name, read_metrics


@pytest.mark.parametrize("path, default_fs, expected", [
    ("hdfs://nn:8020/data/in", None, ("hdfs://nn:8020", "/data/in")),
    ("hdfs:///data/in/", "hdfs://nn:9000", ("hdfs://nn:9000", "/data/in")),
    ("/models/run1", "hdfs://nn:9000", ("hdfs://nn:9000", "/models/run1")),
    ("file:///tmp/x", "hdfs://nn:9000", ("file", "/tmp/x")),
    ("/tmp/local", None, ("file", "/tmp/local")),
])
def test_datasets_are_named_the_openlineage_way(path, default_fs, expected):
    assert dataset_name(path, default_fs) == expected


def test_the_operator_reports_its_datasets_and_the_yarn_application(fake_rm, monkeypatch):  # noqa: F811
    pytest.importorskip("airflow.providers.openlineage")
    op, _ = _operator(fake_rm, monkeypatch, input_path="hdfs:///data/in", output_path="hdfs:///models/m1")
    monkeypatch.setattr(type(op), "_default_fs", lambda self: "hdfs://nn:9000")
    op.execute(task_context())
    facets = op.get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in facets.inputs] == [("hdfs://nn:9000", "/data/in")]
    assert [(d.namespace, d.name) for d in facets.outputs] == [("hdfs://nn:9000", "/models/m1")]
    query = facets.run_facets["externalQuery"]
    assert (query.externalQueryId, query.source) == ("application_1700000000000_0001", "yarn")


def test_the_parent_run_reaches_the_job_as_environment_variables(fake_rm, monkeypatch):  # noqa: F811
    monkeypatch.setattr(lineage, "parent_run_env", lambda ti, given: {lineage.PARENT_ID_ENV: "ns/dag.train/0192-run"})
    monkeypatch.setattr("tony_airflow.providers.yarn.operators.tensorflow.parent_run_env", lineage.parent_run_env)
    op, client = _operator(fake_rm, monkeypatch, env={"MINE": "1"})
    op.execute(task_context())
    assert client.submitted[0].env == {"OPENLINEAGE_PARENT_ID": "ns/dag.train/0192-run", "MINE": "1"}


def test_parent_run_env_is_empty_when_it_cannot_be_known():
    assert lineage.parent_run_env(SimpleNamespace()) == {}  # an incomplete task instance: never fatal


def test_a_model_asset_event_says_which_run_made_it_and_how_it_did(fake_rm, monkeypatch):  # noqa: F811
    model = Asset(name="model", uri="hdfs:///models/m")
    op, _ = _operator(fake_rm, monkeypatch, output_path="hdfs:///models/m1", input_path="hdfs:///data/in",
                      outlets=[model])
    monkeypatch.setattr("tony_airflow.providers.yarn.operators.tensorflow.read_metrics",
                        lambda fs, path: {"accuracy": 0.93, "path": path})
    monkeypatch.setattr(type(op.hook), "hdfs", lambda self: object())
    ctx = task_context()
    ctx["outlet_events"] = defaultdict(lambda: SimpleNamespace(extra={}))
    op.execute(ctx)
    assert ctx["outlet_events"][model].extra == {
        "application_id": "application_1700000000000_0001", "final_status": "SUCCEEDED",
        "output_path": "hdfs:///models/m1", "input_path": "hdfs:///data/in",
        "metrics": {"accuracy": 0.93, "path": "/models/m1"}}


def test_metrics_are_read_only_when_small_json_objects(tmp_path):
    from fsspec.implementations.local import LocalFileSystem

    fs = LocalFileSystem()
    assert read_metrics(fs, str(tmp_path)) == {}
    (tmp_path / "metrics.json").write_text('{"accuracy": 0.9}')
    assert read_metrics(fs, str(tmp_path)) == {"accuracy": 0.9}
    (tmp_path / "metrics.json").write_text("[1, 2]")
    assert read_metrics(fs, str(tmp_path)) == {}
