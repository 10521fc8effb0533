"""Job history without YARN: the store on a local filesystem, the event log, the model, pages and CLI refusals."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tony_airflow.cli import tony as cli
from tony_airflow.core.am.registry import Registry
from tony_airflow.core.executor.usage import tree_rss_kib
from tony_airflow.core.history import events as ev
from tony_airflow.core.history import text
from tony_airflow.core.history.events import EventLog
from tony_airflow.core.history.model import JobHistory
from tony_airflow.core.history.render import Links, render_job, render_jobs
from tony_airflow.core.history.store import HistoryStore
from tony_airflow.core.history.web import build_app
from tony_airflow.core.spec import build_job_spec

APP = "application_1700000000000_0007"


@pytest.fixture
def store(tmp_path) -> HistoryStore:
    return HistoryStore.open(f"file://{tmp_path}/history")


def two_attempts(log: EventLog) -> None:
    """What the AM emits for a job whose worker:1 fails in attempt 1 and worker:0 in attempt 2."""
    job = build_job_spec({"cluster_requirement": "ps:1,worker:2", "command": "x", "max_attempts": 2})
    reg = Registry(job, APP, listener=log.emit)
    log.emit(ev.JOB_SUBMITTED, app_id=APP, name="unit", user="ada", queue="default", max_attempts=2)
    log.emit(ev.AM_STARTED, host="h")
    for attempt, (bad, code) in ((1, (1, 3)), (2, (0, 4))):
        reg.new_attempt(attempt)
        log.emit(ev.ATTEMPT_STARTED, attempt=attempt, tasks=[t.id for t in reg.tasks.values()])
        for n, key in enumerate(reg.tasks):
            reg.container_allocated(key, f"container_{attempt}_{n}", "nm:8042")
            assert reg.register(key[0], key[1], attempt, "h", 1000 + n) is None
        reg.heartbeat("worker", bad, attempt, {"peak_rss_kib": 2048})
        reg.finished("worker", bad, attempt, code, "Traceback\nValueError: bad row", {"peak_rss_kib": 4096})
        reg.request_stop()
        for key in reg.tasks:
            reg.finished(key[0], key[1], attempt, 143)
        log.emit(ev.ATTEMPT_ENDED, attempt=attempt, ok=False, reason="x", first_failure=f"worker:{bad}",
                 first_failure_exit=code)
    log.emit(ev.JOB_FINISHED, status="FAILED", diagnostics="worker:1 exited with code 3")


def test_event_log_written_renamed_and_read_back(store):
    log = EventLog(APP, store)
    log.start('{"name": "unit"}')
    two_attempts(log)
    log.flush()
    files = store.find(APP)
    assert files is not None and not files.complete  # in progress while the job runs
    log.close()
    files = store.find(APP)
    assert files.complete and store.spec(APP) == {"name": "unit"}
    job = JobHistory.from_events(APP, store.events(files))
    assert [(a.first_failure, a.first_failure_exit) for a in job.attempts] == [("worker:1", 3), ("worker:0", 4)]
    assert job.status == "FAILED" and job.user == "ada" and len(job.attempts) == 2
    run = job.attempts[0].tasks["worker:1"]
    assert (run.status, run.exit_code, run.peak_rss_kib, run.container_id) == ("FAILED", 3, 4096, "container_1_2")
    assert job.attempts[0].tasks["ps:0"].status == "STOPPED"
    report = text.job_report(job)
    assert "attempt 1: failed; first failure: worker:1 exit code 3 on h" in report
    assert "attempt 2: failed; first failure: worker:0 exit code 4 on h" in report


def test_torn_last_line_and_unreachable_store(store, tmp_path):
    log = EventLog(APP, store)
    log.start("{}")
    log.emit(ev.JOB_SUBMITTED, name="torn")
    log.flush()
    with open(store.path(APP, "events.jsonl.inprogress"), "a") as fh:
        fh.write('{"time": 1, "event": "TASK_ST')  # the AM was killed mid-write
    assert [e["event"] for e in store.events(store.find(APP))] == ["JOB_SUBMITTED"]

    class Broken(HistoryStore):
        def append(self, app_id, lines):
            raise OSError("NameNode unreachable")

    broken = EventLog(APP, Broken(store.fs, store.root))
    broken.start("{}")
    broken.emit(ev.JOB_SUBMITTED)
    broken.flush()  # logged, not raised: history never fails a job
    broken.close()
    assert len(broken.events) == 1


def test_open_log_reconciled_with_yarn():
    events = [{"time": 10.0, "event": ev.JOB_SUBMITTED, "name": "n"},
              {"time": 11.0, "event": ev.ATTEMPT_STARTED, "attempt": 1, "tasks": ["worker:0"]},
              {"time": 12.0, "event": ev.TASK_STARTED, "attempt": 1, "task": "worker:0"}]
    job = JobHistory.from_events(APP, events, complete=False)
    assert job.running and "still open" in job.incomplete_reason
    job.reconcile("FINISHED", "FAILED", "Application driver failed with exit code 137")
    assert job.status == "FAILED" and "without closing" in job.incomplete_reason and job.duration_s() == 2.0
    assert "137" in job.diagnostics


def test_pages_share_one_job_template(store):
    log = EventLog(APP, store)
    two_attempts(log)
    job = JobHistory.from_events(APP, log.events, {"tasks": {"worker": {}}})
    page = render_job(job, Links(log=lambda run: f"/logs/{run.task}"))
    assert page.count('<table class="tasks"') == 2
    assert '<tr class="task first-failure" data-task="worker:1">' in page
    assert 'href="/logs/worker:1"' in page and "4 MiB" in page
    live = render_job(job, Links(), live=True)
    assert 'http-equiv="refresh"' in live and 'http-equiv="refresh"' not in page
    assert f'data-app-id="{APP}"' in render_jobs([job], Links())
    assert "<script" not in render_job(JobHistory.from_events(APP, [
        {"time": 1, "event": ev.JOB_SUBMITTED, "name": "<script>alert(1)</script>"}]), Links())


def test_purge_by_age(store):
    now = time.time()
    for app, ended, finish in (("application_1_0001", now - 40 * 86400, True),
                               ("application_1_0002", now - 86400, True),
                               ("application_1_0003", now, False)):
        store.start_job(app, "{}")
        store.append(app, [json.dumps({"time": ended, "event": ev.JOB_FINISHED, "status": "SUCCEEDED"})])
        if finish:
            store.finish_job(app)
    assert [f.app_id for f in store.jobs()] == ["application_1_0003", "application_1_0002", "application_1_0001"]
    assert store.purge(30 * 86400, now=now) == ["application_1_0001"]
    assert store.purge(3600, now=now) == ["application_1_0002"]  # the open one was written just now
    assert [f.app_id for f in store.jobs()] == ["application_1_0003"]


def test_history_server_pages(store):
    log = EventLog(APP, store)
    log.start("{}")
    two_attempts(log)
    log.close()

    async def scenario():
        async with TestClient(TestServer(build_app(store))) as client:
            listing = await client.get("/")
            assert listing.status == 200 and APP in await listing.text()
            page = await client.get(f"/jobs/{APP}")
            assert page.status == 200 and 'data-task="worker:0"' in await page.text()
            assert (await client.get("/jobs/application_1_9")).status == 404
            assert (await client.get("/jobs/nonsense")).status == 400
            raw = await (await client.get(f"/jobs/{APP}/events.jsonl")).text()
            assert raw.count("\n") == len(log.events)
            assert (await (await client.get("/api/jobs")).json())[0]["attempts"] == 2
    asyncio.run(scenario())


def test_usage_sampler_counts_the_process_tree():
    child = subprocess.Popen([sys.executable, "-c", "b = bytearray(48 * 2**20); import time; time.sleep(30)"])
    try:
        deadline = time.monotonic() + 20
        while tree_rss_kib(os.getpid()) < tree_rss_kib(child.pid) + 40 * 1024:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        child.kill()
        child.wait()
    assert tree_rss_kib(child.pid) == 0


@pytest.mark.parametrize("argv,expected", [
    (["history", "show", "app_7"], "application_id: 'app_7' is malformed"),
    (["history", "purge", "--max-age", "3x"], "max-age: '3x' is not an age"),
    (["history", "purge", "--max-age", "0"], "max-age: '0' is not an age"),
    (["history", "--history-dir", "rel/dir", "list"], "history-dir: 'rel/dir' is not an absolute path"),
    (["history", "serve", "--port", "70000"], "port: 70000 is out of range"),
    (["logs", APP, "--task", "worker"], "task: 'worker' is malformed"),
    (["logs", APP, "--attempt", "2"], "attempt: needs --task"),
    (["history", "frobnicate"], "invalid choice: 'frobnicate'"),
])
def test_cli_refuses(argv, expected, capsys):
    assert cli.run(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err


def test_the_page_and_the_report_say_until_when_yarn_renews_the_jobs_hdfs_token(store):
    """Issue #44 item 2: a job without new tokens loses HDFS at its token's max lifetime; both say when."""
    log = EventLog(APP, store)
    log.emit(ev.JOB_SUBMITTED, app_id=APP, name="unit", user="ada", queue="default", max_attempts=1)
    log.emit(ev.AM_STARTED, host="h")
    log.emit(ev.TOKENS, kind="HDFS_DELEGATION_TOKEN", issued=1795452974.002, renewable_until=1796057774.002,
             renewer="yarn")
    job = JobHistory.from_events(APP, log.events)
    line = ("HDFS_DELEGATION_TOKEN: renewed by YARN until 2026-11-30 16:56:14 UTC (its maximum lifetime); a job "
            "still running then loses HDFS (its output mirror, its history)")
    assert job.tokens == [line]
    assert line in text.job_report(job).splitlines()
    assert f'<div class="tokens">{line}</div>' in render_job(job, Links())


def test_with_a_keytab_the_report_says_new_tokens_come_and_counts_them_in_one_line(store):
    log = EventLog(APP, store)
    log.emit(ev.JOB_SUBMITTED, app_id=APP, name="unit", user="ada", queue="default", max_attempts=1)
    log.emit(ev.TOKENS, kind="HDFS_DELEGATION_TOKEN", issued=0.0, renewable_until=180.0, renewer="yarn", keytab=True)
    for at in (10.0, 55.0, 100.0):
        log.events.append({"time": at, "event": ev.TOKEN_OBTAINED, "kind": "HDFS_DELEGATION_TOKEN",
                           "issued": at, "expires": at + 60, "max_date": at + 180})
    job = JobHistory.from_events(APP, log.events)
    assert job.tokens == [
        "HDFS_DELEGATION_TOKEN: renewed by YARN until 1970-01-01 00:03:00 UTC (its maximum lifetime); new ones "
        "come from the job's keytab before then",
        "3 new HDFS_DELEGATION_TOKEN(s) from the keytab, the last at 1970-01-01 00:01:40 UTC, good until "
        "1970-01-01 00:02:40 UTC unless renewed"]
