"""Real preemption (`tony cluster up --preemption`): a job YARN preempts does not spend its attempts (#29).

The cluster has two queues, `default` and `high`, each guaranteed half of its 16 GiB and free to use
all of it while the other is idle. A job in `default` takes 12.5 GiB; a job in `high` then asks for
6.5 GiB, and YARN's ProportionalCapacityPreemptionPolicy takes it back from the first job.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.helpers import PAYLOADS, record
from tony_airflow.yarn.hdfs import webhdfs

BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True)
def preemption_env(preemption_cluster, monkeypatch: pytest.MonkeyPatch):
    """Every command and WebHDFS call of these tests talks to the preempting cluster."""
    for key, value in preemption_cluster.env().items():
        monkeypatch.setenv(key, value)


def _submit(*args: str) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "ytf-submit"), "--quiet", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _events(app_id: str) -> list[dict]:
    text = webhdfs().cat(f"/tmp/tony-history/{app_id}/events.jsonl").decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_a_preempted_job_resumes_without_spending_its_attempts(preemption_cluster, preemption_rm):
    out = "/tmp/e2e/preempted"
    fs = webhdfs()
    low = _submit("-r", "worker:3", "-m", "4096", "-q", "default", "--max-attempts", "1", "-n", "low-queue-job",
                  "-o", f"hdfs://{out}", "--env", "STEPS=30", "-s", str(PAYLOADS / "steps.py"),
                  "python3 ${DTF_TASK_SCRIPT}")
    high = None
    try:
        low_id = low.stdout.readline().split()[-1]
        assert low_id.startswith("application_"), low_id
        deadline = time.monotonic() + 180
        while not (fs.exists(f"{out}/progress.json") and json.loads(fs.cat(f"{out}/progress.json"))["step"] >= 3):
            assert low.poll() is None and time.monotonic() < deadline, low.communicate()
            time.sleep(0.5)
        high = _submit("-r", "worker:1", "-m", "6144", "-q", "high", "-n", "high-queue-job", "--env", "SLEEP_S=15",
                       "-s", str(PAYLOADS / "sleep.py"), "python3 ${DTF_TASK_SCRIPT}")
        high_out, high_err = high.communicate(timeout=300)
        low_out, low_err = low.communicate(timeout=400)
    finally:
        for proc in (low, high):
            if proc is not None and proc.poll() is None:
                proc.kill()
    assert high.returncode == 0, high_err[-2000:]
    assert low.returncode == 0, low_err[-2000:]
    diagnostics = preemption_rm.application(low_id).diagnostics
    assert "preempted by YARN" in diagnostics and "(not counted: preemption)" in diagnostics, diagnostics
    assert diagnostics.startswith("tony-airflow: SUCCEEDED on attempt 2/2"), diagnostics
    metrics = json.loads(fs.cat(f"{out}/metrics.json"))
    assert metrics["attempt"] == 2 and metrics["resumed_from"] >= 3, metrics  # from its own checkpoint
    events = _events(low_id)
    preempted = [e for e in events if e["event"] == "PREEMPTED"]
    assert preempted and all(e["attempt"] == 1 for e in preempted), preempted
    ended = next(e for e in events if e["event"] == "ATTEMPT_ENDED" and e["attempt"] == 1)
    assert (ended["cause"], ended["counted"]) == ("preemption", False), ended
    text = subprocess.run([str(BIN / "tony"), "history", "show", low_id], capture_output=True, text=True).stdout
    assert "preempted by YARN: worker:" in text and "(not counted: preemption)" in text, text[:2000]
    gone = next(e for e in events if e["event"] == "TASK_FINISHED" and e["attempt"] == 1
                and e["task"] == preempted[0]["task"])
    running = max(e["time"] for e in events if e["event"] == "TASK_STARTED" and e["attempt"] == 2)
    record("preemption: container preempted -> attempt 2 running (it waits for the high queue's job)",
           running - gone["time"])
