"""Job history on the real cluster: the AM's event log on HDFS, `tony history`, `tony logs`, the web UI."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.browser import chromium, screenshot
from tests.e2e.helpers import BIN, PAYLOADS, aggregated_logs, wait_terminal, ytf_submit
from tony_airflow.core.history.store import EVENTS, IN_PROGRESS, HistoryStore

HISTORY = "/tmp/e2e/tony-history"


def tony(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "tony"), *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def store(local_cluster) -> HistoryStore:
    return HistoryStore.open(HISTORY)


@pytest.fixture(scope="module")
def failed_job(local_cluster, rm) -> str:
    """Two attempts, each failing first at a different worker (worker:1 exits 3, then worker:0 exits 4)."""
    proc, app_id = ytf_submit("-r", "worker:2", "--max-attempts", "2", "-m", "512", "-n", "history-e2e",
                              "--history-dir", HISTORY, "--env", "DB_PASSWORD=hunter2", "--env", "PLAIN=shown",
                              f"python3 {PAYLOADS / 'fail_each_attempt.py'}")
    assert proc.returncode == 1, proc.stderr
    assert app_id and rm.application(app_id).final_status == "FAILED"
    return app_id


def test_history_show_names_the_first_failure_of_each_attempt(failed_job, store):
    files = store.find(failed_job)
    assert files is not None and files.complete and files.events_path.endswith("/" + EVENTS)
    spec = store.spec(failed_job)
    assert spec["max_attempts"] == 2 and spec["history_dir"] == HISTORY  # the effective job spec
    # issue #30 item 9: secrets in --env are never shown; the job's directory is not open to every user
    assert spec["env"] == {"DB_PASSWORD": "********", "PLAIN": "shown"}, spec["env"]
    assert store.fs.info(store.job_dir(failed_job))["permission"] == "750"

    show = tony("history", "show", failed_job, "--history-dir", HISTORY)
    assert show.returncode == 0, show.stderr
    out = show.stdout
    assert "attempt 1: failed; first failure: worker:1 exit code 3" in out
    assert "attempt 2: failed; first failure: worker:0 exit code 4" in out
    assert re.search(r"^\* worker:1\s+FAILED\s+\S+\s+container_\S+\s+3\s", out, re.M), out
    assert re.search(r"^\* worker:0\s+FAILED\s+\S+\s+container_\S+\s+4\s", out, re.M), out
    # the PEAK RSS column of the task rows (a "gang: waiting for ... (512 MiB ...)" line may come between them)
    peaks = [int(m) for m in re.findall(r"^[* ] worker:\d+\s.*\s(\d+) MiB$", out, re.M)]
    assert len(peaks) == 4 and min(peaks) >= 64, out  # each worker holds 64 MiB of ballast
    # what the job cost: YARN's resource-seconds, and the peak of each task over its attempts
    usage = next(line for line in out.splitlines() if line.startswith("usage: "))
    assert re.search(r"\(\d+ MB-s\), \d+ vcore-s, 0 GPU-s over [\d.]+ s; peak memory worker:0 \d+ MiB, "
                     r"worker:1 \d+ MiB$", usage), usage
    for event in ("JOB_SUBMITTED", "AM_STARTED", "ATTEMPT_STARTED", "TASK_ALLOCATED", "TASK_REGISTERED",
                  "TASK_STARTED", "TASK_FINISHED", "ATTEMPT_ENDED", "JOB_FINISHED"):
        assert event in out

    listing = tony("history", "--history-dir", HISTORY)
    row = next(line for line in listing.stdout.splitlines() if line.startswith(failed_job))
    assert re.search(r"history-e2e\s+\S+\s+FAILED\s+.*\s2/2$", row), row


def test_logs_of_a_task_show_its_stderr(failed_job):
    one = tony("logs", failed_job, "--task", "worker:1", "--attempt", "1", "--history-dir", HISTORY)
    assert one.returncode == 0, one.stderr
    assert "worker:1 breaks in attempt 1: simulated data error" in one.stdout
    assert "worker:1 attempt 1 starts" in one.stdout and "worker:0" not in one.stdout.replace("==>", "")
    assert "DB_PASSWORD as given: True" in one.stdout  # masked in pages and history only
    assert "LogAggregationType: AGGREGATED" in one.stdout  # read back from HDFS by Hadoop's LogsCLI
    both = tony("logs", failed_job, "--task", "worker:0", "--history-dir", HISTORY)
    assert both.stdout.count("==> worker:0 attempt") == 2
    assert "worker:0 breaks in attempt 2: simulated data error" in both.stdout
    bad = tony("logs", failed_job, "--task", "worker:7", "--history-dir", HISTORY)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
    assert "task: worker:7 is not a task of" in bad.stderr


def test_logs_of_a_job_are_its_tasks_output_labelled_in_task_order(failed_job, rm):
    """Issue #53 item 2: `tony logs APP` is what the tasks printed, `[worker:0]` before each line, in task
    order, attempt by attempt; YARN's whole dump (launch scripts, directory listings) only with --raw."""
    aggregated_logs(rm, failed_job)  # the job has ended: its files are read back from HDFS
    shown = tony("logs", failed_job)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert all(line.startswith(("==> attempt ", "[worker:0] ", "[worker:1] ")) for line in lines), lines
    expected = ["==> attempt 1 <==",
                "[worker:0] worker:0 attempt 1 starts; DB_PASSWORD as given: True",
                "[worker:1] worker:1 attempt 1 starts; DB_PASSWORD as given: True",
                "[worker:1] worker:1 breaks in attempt 1: simulated data error",
                "==> attempt 2 <==",
                "[worker:0] worker:0 attempt 2 starts; DB_PASSWORD as given: True",
                "[worker:0] worker:0 breaks in attempt 2: simulated data error",
                "[worker:1] worker:1 attempt 2 starts; DB_PASSWORD as given: True"]
    assert [line for line in lines if line in expected] == expected, shown.stdout
    raw = tony("logs", failed_job, "--raw")
    assert raw.returncode == 0 and "launch_container.sh" in raw.stdout and "LogType:" in raw.stdout
    assert len(raw.stdout.splitlines()) > 5 * len(lines)
    unknown = tony("logs", "application_1_999999")
    assert unknown.returncode == 1 and unknown.stderr.count("\n") == 1 and "no task output" in unknown.stderr


def test_history_web_ui_in_a_real_browser(failed_job, tmp_path):
    server = subprocess.Popen([str(BIN / "tony"), "history", "serve", "--port", "0", "--history-dir", HISTORY],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    browser = None
    try:
        line = server.stdout.readline()
        assert line.startswith("History server: http"), line + server.stderr.read()
        url = line.split()[-1]
        browser = chromium(tmp_path)
        browser.get(url)
        from selenium.webdriver.common.by import By

        row = browser.find_element(By.CSS_SELECTOR, f'tr.job[data-app-id="{failed_job}"]')
        assert "FAILED" in row.text and "history-e2e" in row.text
        screenshot(browser, "history-jobs")
        row.find_element(By.TAG_NAME, "a").click()
        tables = browser.find_elements(By.CSS_SELECTOR, "table.tasks")
        assert [t.get_attribute("data-attempt") for t in tables] == ["1", "2"]
        first = tables[0].find_element(By.CSS_SELECTOR, "tr.first-failure")
        assert first.get_attribute("data-task") == "worker:1"
        assert first.find_element(By.CSS_SELECTOR, ".exit-code").text == "3"
        assert len(browser.find_elements(By.CSS_SELECTOR, ".timeline .bar.running")) >= 5  # AM + 4 tasks
        assert "fail_each_attempt.py" in browser.find_element(By.ID, "spec").text
        assert screenshot(browser, "history-job").stat().st_size > 10_000
        logs = httpx.get(first.find_element(By.LINK_TEXT, "logs").get_attribute("href"), timeout=120)
        assert "simulated data error" in logs.text
    finally:
        if browser is not None:
            browser.quit()
        server.terminate()
        server.wait(timeout=30)


def _am_process(app_id: str) -> int:
    """Our Python AM: the process running tony_airflow.core.am in the application's first container."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if "tony_airflow.core.am" in cmdline and app_id in cwd:
            return int(pid)
    raise AssertionError(f"no AM process for {app_id}")


def test_a_killed_am_leaves_a_readable_partial_log(local_cluster, rm, store):
    proc = subprocess.run([str(BIN / "tony"), "submit", "--no-wait", "-r", "worker:1", "-m", "512", "--am-attempts", "1",
                           "-n", "am-killed", "--history-dir", HISTORY, f"python3 {PAYLOADS / 'sleep.py'}"],
                          capture_output=True, text=True, timeout=120)
    app_id = re.search(r"application_\d+_\d+", proc.stdout).group(0)
    deadline = time.monotonic() + 120
    files = None
    while True:  # the log is written while the job runs
        files = store.find(app_id)
        if files is not None and "TASK_STARTED" in json.dumps(store.events(files)):
            break
        assert time.monotonic() < deadline, "the AM never logged TASK_STARTED"
        time.sleep(0.5)
    assert not files.complete and files.events_path.endswith(IN_PROGRESS)

    # While it runs: the live AM page is the history UI's job page; the task's logs come from the NodeManager.
    live = httpx.get(rm.application(app_id).tracking_url.rstrip("/") + "/pages/tony/", timeout=30,
                     follow_redirects=True).text
    assert 'id="status">RUNNING' in live and 'data-task="worker:0"' in live and 'class="tasks"' in live
    running_logs = tony("logs", app_id, "--task", "worker:0", "--history-dir", HISTORY)
    assert "starting: python3" in running_logs.stdout and "LogAggregationType: LOCAL" in running_logs.stdout

    os.kill(_am_process(app_id), signal.SIGKILL)
    report = wait_terminal(rm, app_id)
    assert report.final_status == "FAILED"

    files = store.find(app_id)
    assert files is not None and not files.complete
    raw = store.fs.cat_file(files.events_path).decode()
    events = [json.loads(line) for line in raw.splitlines()]  # every line whole and readable
    kinds = [e["event"] for e in events]
    assert kinds[:3] == ["JOB_SUBMITTED", "AM_STARTED", "ATTEMPT_STARTED"] and "TASK_STARTED" in kinds
    assert "JOB_FINISHED" not in kinds
    show = tony("history", "show", app_id, "--history-dir", HISTORY)
    assert show.returncode == 0
    assert f"{app_id}  am-killed  FAILED" in show.stdout
    assert "the AM ended without closing the event log" in show.stdout and "TASK_STARTED" in show.stdout


def test_purge_deletes_only_old_finished_histories(failed_job, store):
    old = "application_1000000000000_0001"
    long_ago = time.time() - 40 * 86400
    store.start_job(old, "{}")
    store.append(old, [json.dumps({"time": long_ago, "event": "JOB_SUBMITTED", "name": "old"}),
                       json.dumps({"time": long_ago + 60, "event": "JOB_FINISHED", "status": "SUCCEEDED"})])
    store.finish_job(old)
    purge = tony("history", "purge", "--max-age", "30d", "--history-dir", HISTORY)
    assert purge.returncode == 0 and old in purge.stdout, purge.stdout + purge.stderr
    assert store.find(old) is None and store.find(failed_job) is not None
    bad = tony("history", "purge", "--max-age", "soon", "--history-dir", HISTORY)
    assert bad.returncode == 2 and "max-age: 'soon' is not an age" in bad.stderr


def test_a_new_am_writes_on_at_once_when_the_lost_ams_log_is_still_held_open_by_its_dead_writer(local_cluster,
                                                                                                store):
    """The lost AM's last append may have been cut off with its host: HDFS keeps that writer's lease on the
    log (soft limit 60 s; longer while the DataNode that served it is not declared dead), and every append of
    the new AM failed until then, so its events, and the log's close, were lost (found on the 3-host cluster:
    the AM's host and its DataNode killed, the job's history never closed). Here the dead writer is an
    `hdfs dfs -appendToFile -` killed with SIGKILL while it holds the log open."""
    app_id = "application_1700000000000_0777"
    log_path = f"{HISTORY}/{app_id}/{IN_PROGRESS}"
    store.start_job(app_id, "{}")
    store.append(app_id, [json.dumps({"time": 1.0, "event": "JOB_SUBMITTED"})])
    writer = subprocess.Popen(["hdfs", "dfs", "-appendToFile", "-", log_path], stdin=subprocess.PIPE)
    try:
        writer.stdin.write(b'{"time": 2.0, "event": "AM_STARTED"}\n{"time": 3.0, "ev')
        writer.stdin.flush()
        time.sleep(5)  # the file is open for append, the lease the writer's
    finally:
        writer.kill()
        writer.wait()
    fresh = HistoryStore.open(HISTORY)
    previous = fresh.resume_job(app_id)
    assert [e["event"] for e in previous][:1] == ["JOB_SUBMITTED"]
    fresh.append(app_id, [json.dumps({"time": 4.0, "event": "AM_LOST"})])  # at once: no lease in the way
    fresh.finish_job(app_id)
    lines = store.fs.cat_file(f"{HISTORY}/{app_id}/{EVENTS}").decode().splitlines()
    assert json.loads(lines[-1])["event"] == "AM_LOST"
    store.fs.rm(f"{HISTORY}/{app_id}", recursive=True)
