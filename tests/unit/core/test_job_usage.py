"""What a job cost: YARN's resource-seconds parsed, the record, the line, the operator's XCom."""

from __future__ import annotations

import json

from tests.unit.airflow_context import task_context
from tests.unit.providers.test_yarn_provider import _operator, fake_rm  # noqa: F401  (fixture)
from tony_airflow.core.job_usage import job_usage, usage_line
from tony_airflow.yarn.rest import ApplicationReport, _keep_repeated_keys


def test_resource_seconds_are_read_from_the_map_or_the_old_fields():
    app = {"id": "application_1_0001", "elapsedTime": 64000, "resourceSecondsMap": {"entry": [
        {"key": "memory-mb", "value": "512000"}, {"key": "vcores", "value": "250"},
        {"key": "yarn.io/gpu", "value": "60"}]}}
    report = ApplicationReport.from_json(app)
    usage = job_usage(report, {"worker:0": 204800, "ps:0": 102400})
    assert usage == {"application_id": "application_1_0001", "memory_mb_seconds": 512000, "vcore_seconds": 250,
                     "gpu_seconds": 60, "elapsed_s": 64.0, "peak_memory_mib": {"ps:0": 100.0, "worker:0": 200.0}}
    assert usage_line(usage).startswith("usage: 142.2 MB-h memory (512000 MB-s), 250 vcore-s, 60 GPU-s over 64.0 s")
    assert "worker:0 200 MiB" in usage_line(usage)
    one = ApplicationReport.from_json({"id": "a", "resourceSecondsMap": {"entry": {"key": "vcores", "value": "3"}}})
    assert dict(one.resource_seconds) == {"memory-mb": 0, "vcores": 3}
    old = ApplicationReport.from_json({"id": "a", "memorySeconds": 10, "vcoreSeconds": 2})
    assert dict(old.resource_seconds) == {"memory-mb": 10, "vcores": 2}


def test_the_rms_repeated_entry_keys_are_all_kept():
    raw = ('{"app": {"id": "a", "memorySeconds": 5, "resourceSecondsMap": {"entry": {"key": "memory-mb", '
           '"value": "7"}, "entry": {"key": "yarn.io/gpu", "value": "2"}}}}')
    body = json.loads(raw, object_pairs_hook=_keep_repeated_keys)
    assert dict(ApplicationReport.from_json(body["app"]).resource_seconds) == {"memory-mb": 7, "vcores": 0,
                                                                              "yarn.io/gpu": 2}


def test_the_operator_pushes_usage_when_the_job_ends(fake_rm, monkeypatch):  # noqa: F811
    op, _ = _operator(fake_rm, monkeypatch)
    ctx = task_context()
    op.execute(ctx)
    usage = ctx["ti"].xcoms["usage"]
    assert usage["application_id"] == "application_1700000000000_0001"
    assert usage["memory_mb_seconds"] > 0 and usage["vcore_seconds"] > 0 and usage["gpu_seconds"] == 0
