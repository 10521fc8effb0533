"""History: the shared root, a log closed on SIGTERM (issue #15, items 14, 19)."""

from __future__ import annotations

from types import SimpleNamespace


# ---------------------------------------------------- 19: history root permissions
def test_the_history_root_is_made_1777_in_octal():
    from tony_airflow.core.history.store import HistoryStore

    calls = []

    class FakeWebHDFS:
        def exists(self, path):
            return False

        def makedirs(self, path, exist_ok=False):
            calls.append(("makedirs", path))

        def _call(self, op, method="get", path=None, **kwargs):
            calls.append((op, path, kwargs))
            return SimpleNamespace(status_code=200)

        def pipe_file(self, path, data):
            pass

    HistoryStore(FakeWebHDFS(), "/tmp/tony-history").start_job("application_1_1", "{}")
    assert ("SETPERMISSION", "/tmp/tony-history", {"permission": "1777"}) in calls


# ---------------------------------------------------- 14: history after a lost node
def test_a_log_closed_on_sigterm_takes_yarns_final_status_and_no_task_stays_running():
    from tony_airflow.core.history import events as ev
    from tony_airflow.core.history.model import JobHistory

    t = 1000.0
    events = [
        {"event": ev.JOB_SUBMITTED, "time": t, "name": "j", "max_attempts": 1},
        {"event": ev.ATTEMPT_STARTED, "time": t + 1, "attempt": 1, "tasks": ["ps:0", "worker:0"]},
        {"event": ev.TASK_STARTED, "time": t + 2, "attempt": 1, "task": "ps:0"},
        {"event": ev.TASK_STARTED, "time": t + 2, "attempt": 1, "task": "worker:0"},
        {"event": ev.JOB_FINISHED, "time": t + 9, "status": "KILLED", "diagnostics": "SIGTERM",
         "stopped_by": "SIGTERM"},
    ]
    job = JobHistory.from_events("application_1_1", events, complete=True)
    assert job.needs_yarn
    job.reconcile("FAILED", "FAILED", "AM container lost with its node")
    assert job.status == "FAILED" and "YARN's final status is FAILED" in job.incomplete_reason
    assert {r.status for r in job.attempts[0].tasks.values()} == {"LOST"}
    # an open log (the AM SIGKILLed) is reconciled as before
    open_job = JobHistory.from_events("application_1_2", events[:-1], complete=False)
    open_job.reconcile("FINISHED", "FAILED")
    assert open_job.status == "FAILED" and "without closing" in open_job.incomplete_reason


# ---------------------------------------------------- issue #53 item 7: after `tony kill`
def test_a_job_killed_before_its_am_closed_the_log_reads_killed_not_incomplete():
    """`tony kill`: YARN SIGKILLs the AM 250 ms after its SIGTERM, often before it closes the event log. The
    history said `KILLED (log incomplete)` and "attempt 1: did not end"; a kill is the end the user asked for."""
    from tony_airflow.core.history import events as ev
    from tony_airflow.core.history.model import JobHistory
    from tony_airflow.core.history.text import job_report, jobs_table

    t = 1000.0
    events = [
        {"event": ev.JOB_SUBMITTED, "time": t, "name": "j", "max_attempts": 1},
        {"event": ev.ATTEMPT_STARTED, "time": t + 1, "attempt": 1, "tasks": ["worker:0"]},
        {"event": ev.TASK_STARTED, "time": t + 2, "attempt": 1, "task": "worker:0"},
    ]
    job = JobHistory.from_events("application_1_3", events, complete=False)
    job.reconcile("KILLED", "KILLED", "Application killed by user.")
    assert "KILLED" in jobs_table([job]) and "log incomplete" not in jobs_table([job])
    report = job_report(job)
    assert "attempt 1: killed" in report and "did not end" not in report, report
    assert "killed before its AM closed the event log" in job.incomplete_reason
