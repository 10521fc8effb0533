"""The output's commit protocol on the real cluster (issue #40): checkpoints of two attempts never mix, an
evaluator's later attempt publishes, an ended job is never run again by a new AM, and a model rewritten in
place every second reaches HDFS while the job runs."""

from __future__ import annotations

import hashlib
import json
import time

from tests.e2e.helpers import PAYLOADS, fresh_hdfs_dir, job_events, record, ytf_submit
from tony_airflow.yarn.hdfs import is_part, webhdfs


def test_a_checkpoint_cut_before_its_pointer_then_saved_again_never_mixes_and_attempt_3_succeeds(local_cluster, rm):
    """Attempt 1 writes ckpt-N's data and index and fails before its pointer; attempt 2 restores ckpt-(N-1),
    saves its own ckpt-N (data quiet, then index and pointer) and fails 0.9 s later; attempt 3 restores a
    checkpoint of one save and the job SUCCEEDS. The evaluator's attempt-2 metrics reach HDFS: attempt 3's
    evaluator finds them there."""
    out = "/tmp/e2e/commit-mixed"
    fresh_hdfs_dir(out)
    proc, app_id = ytf_submit(
        "-r", "chief:1,evaluator:1", "-m", "256", "--max-attempts", "3", "-o", f"hdfs://{out}",
        "--env", "STEPS=8", "--env", "STEP_S=0.4", "--env", "CUT_ATTEMPT=1", "--env", "STOP_ATTEMPT=2",
        "-s", str(PAYLOADS / "pointer_trainer.py"), "python3 ${DTF_TASK_SCRIPT}", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    diagnostics = rm.application(app_id).diagnostics
    assert "SUCCEEDED on attempt 3/3" in diagnostics, diagnostics
    fs = webhdfs()
    metrics = json.loads(fs.cat(f"{out}/metrics.json"))
    assert metrics["attempt"] == 3 and metrics["resumed_from"] is not None, metrics
    pointer = fs.cat(f"{out}/ckpt/checkpoint").decode()
    named = pointer.split('"')[1]
    data, index = fs.cat(f"{out}/ckpt/{named}.data"), fs.cat(f"{out}/ckpt/{named}.index")
    assert data.split(b"|")[0] == index.split(b"|")[0] == f"a3-{named.split('-')[1]}".encode(), (data[:12], index)
    assert index.split(b"|")[1] == hashlib.sha256(data).hexdigest().encode()
    assert json.loads(fs.cat(f"{out}/eval/metrics.json")) == {"attempt": 3, "found": 2}
    assert not [p for p in fs.find(out) if is_part(p)]


def test_an_am_lost_after_the_job_ended_does_not_train_again(local_cluster, rm):
    """The AM's container is lost after it closed the job's history and before it told YARN: the second
    AM attempt reads that the job SUCCEEDED and unregisters so, with no second training."""
    out = "/tmp/e2e/commit-ended"
    fresh_hdfs_dir(out)
    proc, app_id = ytf_submit(
        "-r", "chief:1", "-m", "256", "--am-attempts", "2", "-o", f"hdfs://{out}",
        "--env", "STEPS=3", "--env", "STEP_S=0.2", "--env", "TONY_FAULT=am-lost-after-history",
        "-s", str(PAYLOADS / "pointer_trainer.py"), "python3 ${DTF_TASK_SCRIPT}", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = rm.application(app_id)
    assert report.state == "FINISHED" and report.final_status == "SUCCEEDED", report
    events = job_events(app_id)
    assert [e["am_attempt"] for e in events if e["event"] == "AM_STARTED"] == [1, 2], events
    assert [e["attempt"] for e in events if e["event"] == "ATTEMPT_STARTED"] == [1], events
    assert [e["status"] for e in events if e["event"] == "JOB_FINISHED"] == ["SUCCEEDED"]
    assert json.loads(webhdfs().cat(f"{out}/metrics.json"))["attempt"] == 1


def test_a_model_rewritten_in_place_every_second_reaches_hdfs_while_the_job_runs(local_cluster, rm):
    """48 MiB rewritten in place about every second; attempt 1 fails right after a rewrite (no quiet
    version for its final push): attempt 2 resumes from a version the rounds published while it ran."""
    out = "/tmp/e2e/commit-rewrite-each-second"
    fresh_hdfs_dir(out)
    started = time.monotonic()
    proc, app_id = ytf_submit(
        "-r", "chief:1", "-m", "512", "--max-attempts", "2", "-o", f"hdfs://{out}", "--env", "RUN_S=21",
        "-s", str(PAYLOADS / "rewrite_each_second.py"), "python3 ${DTF_TASK_SCRIPT}", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "SUCCEEDED on attempt 2/2" in rm.application(app_id).diagnostics
    attempt, resumed = webhdfs().cat(f"{out}/resumed.txt").decode().split()
    assert attempt == "2" and int(resumed) >= 5, resumed  # 21 s of ~1.3 s rewrites: a recent one, not step 0
    record("commit: 48 MiB rewritten each second -> step attempt 2 resumed from", float(resumed))
    record("commit: the 48 MiB rewrite job, submit to end", time.monotonic() - started)
