"""What a job wrote survives a failed attempt whole (issue #29): the output mirror on the real cluster."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.e2e.helpers import PAYLOADS, record, ytf_submit
from tony_airflow.yarn.hdfs import is_part, webhdfs


def test_a_model_rewritten_in_place_is_restored_whole_after_a_failed_attempt(local_cluster, rm):
    """Reproduced as a new user would: a 32 MiB model rewritten in place each step, the attempt failed
    by another task while the chief rewrites it. Attempt 2 must find the last whole model, never a torn one."""
    out = "/tmp/e2e/durability-rewrite"
    fs = webhdfs()
    if fs.exists(out):
        fs.rm(out, recursive=True)
    proc, app_id = ytf_submit("-r", "chief:1,worker:1", "-m", "512", "--tracked", "chief", "--untracked", "worker",
                              "--max-attempts", "2", "-o", f"hdfs://{out}", "-s", str(PAYLOADS / "rewrite_model.py"),
                              "python3 ${DTF_TASK_SCRIPT}", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = rm.application(app_id)
    assert "SUCCEEDED on attempt 2/2" in report.diagnostics and "worker:0 exited early with code 3" in report.diagnostics, \
        report.diagnostics
    metrics = json.loads(fs.cat(f"{out}/metrics.json"))
    assert metrics["attempt"] == 2 and metrics["restored_step"] >= 1, metrics
    data = fs.cat(f"{out}/model.bin")
    assert len(data) == 32 << 20 and hashlib.sha256(data[:-32]).digest() == data[-32:]
    assert int.from_bytes(data[:8], "big") == 1000 + metrics["restored_step"]
    left = [p for p in fs.find(out) if is_part(p)]
    assert not left, left  # nothing under a temporary name stays in the output
    events = _events(app_id)
    failed = next(e for e in events if e["event"] == "TASK_FINISHED" and e["attempt"] == 1 and e["exit_code"] == 3)
    running = max(e["time"] for e in events if e["event"] == "TASK_STARTED" and e["attempt"] == 2)
    record("durability: a task failed -> attempt 2 running (restored whole)", running - failed["time"])


def _events(app_id: str) -> list[dict]:
    text = webhdfs().cat(f"/tmp/tony-history/{app_id}/events.jsonl").decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("args, line", [
    (["--am-attempts", "0"], "error: am_attempts: 0 is too small; allowed: a whole number >= 1"),
    (["--am-attempts", "3"], "error: am_attempts: 3 is above this ResourceManager's "
                             "yarn.resourcemanager.am.max-attempts (2); allowed: 1 to 2"),
    (["--am-attempts-validity", "-5"], "error: am_attempts_validity: '-5' must be >= 0 seconds"),
    (["--max-free-retries", "-1"], "error: max_free_retries: -1 is too small; allowed: a whole number from 0 to 100"),
])
def test_bad_attempt_settings_are_refused_in_one_line_and_nothing_is_submitted(local_cluster, rm, args, line):
    before = len(rm.applications())
    proc, app_id = ytf_submit("-r", "worker:1", *args, "echo never")
    assert proc.returncode == 2 and app_id is None
    assert proc.stderr.strip().splitlines() == [line]
    assert len(rm.applications()) == before
