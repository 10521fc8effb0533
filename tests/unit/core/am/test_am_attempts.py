"""A new YARN application attempt goes on with the job a lost AM left (issue #29 item 2)."""

from __future__ import annotations

import json

from tests.unit.core.support import SECRET, make_job
from tony_airflow.core.am.master import ApplicationMaster, am_attempt_of
from tony_airflow.core.history import events as ev
from tony_airflow.core.history.events import EventLog
from tony_airflow.core.history.model import JobHistory
from tony_airflow.core.history.store import IN_PROGRESS, HistoryStore
from tony_airflow.core.history.text import job_report

APP = "application_1700000000000_0003"


def test_the_am_attempt_is_read_from_the_am_containers_id():
    assert am_attempt_of("container_1700000000000_0003_02_000001") == 2
    assert am_attempt_of("container_e17_1700000000000_0003_03_000001") == 3
    assert am_attempt_of("") == 1 and am_attempt_of("nonsense") == 1


def _lost_am_log(store: HistoryStore, torn: bool = False) -> None:
    """What AM attempt 1 wrote before its host died in training attempt 2 (attempt 1 failed, counted)."""
    events = [
        {"time": 1.0, "event": ev.JOB_SUBMITTED, "app_id": APP, "name": "j", "max_attempts": 2},
        {"time": 2.0, "event": ev.AM_STARTED, "host": "198.18.0.3", "container_id": "c1", "am_attempt": 1},
        {"time": 3.0, "event": ev.ATTEMPT_STARTED, "attempt": 1, "tasks": ["worker:0", "worker:1"]},
        {"time": 9.0, "event": ev.ATTEMPT_ENDED, "attempt": 1, "ok": False, "reason": "worker:1 exited with code 1",
         "cause": "", "counted": True},
        {"time": 10.0, "event": ev.ATTEMPT_STARTED, "attempt": 2, "tasks": ["worker:0", "worker:1"]},
        {"time": 11.0, "event": ev.TASK_FINISHED, "attempt": 2, "task": "worker:1", "status": "SUCCEEDED",
         "exit_code": 0},
    ]
    store.start_job(APP, "{}")
    store.append(APP, [json.dumps(e) for e in events])
    if torn:
        with open(store.path(APP, IN_PROGRESS), "a") as out:
            out.write('{"time": 12.0, "event": "TASK_STA')


def _new_am(tmp_path, **job_fields) -> tuple[ApplicationMaster, HistoryStore]:
    store = HistoryStore.open(f"file://{tmp_path / 'history'}")
    job = make_job("worker:2", **job_fields)
    return ApplicationMaster(job, SECRET, None, APP, "198.18.0.4", EventLog(APP, store), am_attempt=2), store


def test_a_new_am_goes_on_with_the_next_attempt_and_the_lost_one_does_not_count(tmp_path):
    am, store = _new_am(tmp_path, max_attempts=2)
    _lost_am_log(store, torn=True)
    previous = am.history.resume(am.job.to_json())
    am._take_over(previous, "container_1700000000000_0003_02_000001")
    assert am.first_attempt == 3 and am.free_used == 1 and not am.exhausted
    assert am.failures == ["attempt 1/2: worker:1 exited with code 1",
                           "attempt 2/3: the AM was lost (AM attempt 1, on host 198.18.0.3) (not counted: AM lost)"]
    assert am.started == 2.0  # the application's age counts from the first AM
    am.history.flush()
    text = (tmp_path / "history" / APP / IN_PROGRESS).read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{") and line.endswith("}")]
    assert len(lines) == 6 + 4  # the torn line stays alone, skipped; the new AM's events follow it
    job = JobHistory.from_events(APP, lines, complete=False)
    assert job.am_attempts == 2 and job.am_lost == ["AM attempt 1 lost on host 198.18.0.3"]
    second = job.attempts[1]
    assert (second.ok, second.cause, second.counted) == (False, "AM lost", False)
    assert second.tasks["worker:0"].status == "STOPPED" and second.tasks["worker:1"].status == "SUCCEEDED"
    assert "AM attempt 1 lost on host 198.18.0.3" in job_report(job)


def test_a_lost_am_with_no_attempts_left_ends_the_job_failed(tmp_path):
    am, store = _new_am(tmp_path, max_attempts=2, max_free_retries=0)
    _lost_am_log(store)
    am._take_over(am.history.resume(am.job.to_json()), "c2")
    assert am.exhausted and am.first_attempt == 3
    assert am.failures[-1] == "attempt 2/2: the AM was lost (AM attempt 1, on host 198.18.0.3)"


def test_a_closed_log_is_opened_again_and_no_log_starts_a_new_one(tmp_path):
    am, store = _new_am(tmp_path)
    _lost_am_log(store)
    store.finish_job(APP)  # the lost AM had closed its log (it died before telling YARN how the job ended)
    assert len(am.history.resume("{}")) == 6
    assert (tmp_path / "history" / APP / IN_PROGRESS).exists()
    other, _ = _new_am(tmp_path / "elsewhere")
    assert other.history.resume("{}") == [] and (tmp_path / "elsewhere" / "history" / APP / IN_PROGRESS).exists()


def test_the_am_records_until_when_yarn_renews_the_jobs_hdfs_token(tmp_path, monkeypatch):
    """Issue #44 item 2: from the container's token file, the HDFS token's max lifetime into the history."""
    from tests.unit.yarn.test_tokens import REAL
    from tony_airflow.yarn.tokens import HDFS_DELEGATION_KIND, from_url_string, write_token_file

    tokens = tmp_path / "container_tokens"
    write_token_file(tokens, [from_url_string(REAL, kind=HDFS_DELEGATION_KIND, service="ha-hdfs:tony")])
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", str(tokens))
    am, _ = _new_am(tmp_path)
    am._record_token_lifetime()
    recorded = [e for e in am.history.events if e["event"] == ev.TOKENS]
    assert [(e["kind"], e["renewable_until"], e["renewer"]) for e in recorded] == [
        (HDFS_DELEGATION_KIND, 1796057774.002, "yarn")]
    monkeypatch.delenv("HADOOP_TOKEN_FILE_LOCATION")  # a cluster without Kerberos: nothing to say
    am._record_token_lifetime()
    assert len([e for e in am.history.events if e["event"] == ev.TOKENS]) == 1


def test_an_am_stopped_by_sigterm_whose_application_still_runs_is_followed_not_ended(tmp_path):
    """Issue 51, item 1: the lost AM's node went away (SIGTERM, JOB_FINISHED KILLED, log closed); YARN started
    AM attempt 2, and the RM says the application runs: the job goes on; the history reads RUNNING again."""
    am, store = _new_am(tmp_path, max_attempts=2)
    _lost_am_log(store)
    store.append(APP, [json.dumps(e) for e in [
        {"time": 12.0, "event": ev.TASK_FINISHED, "attempt": 2, "task": "worker:0", "status": "STOPPED",
         "exit_code": None, "reason": "the AM was stopped (SIGTERM) before this task reported"},
        {"time": 12.1, "event": ev.JOB_FINISHED, "status": "KILLED", "stopped_by": "SIGTERM",
         "diagnostics": "tony-airflow: the AM was stopped (SIGTERM): the application was killed"}]])
    previous = am.history.resume(am.job.to_json())
    am._take_over(previous, "container_1700000000000_0003_02_000001", killed=False)
    assert am.ended is None and not am.end_recorded and am.first_attempt == 3 and not am.exhausted
    job = JobHistory.from_events(APP, list(am.history.events), {}, complete=False)
    assert job.running and not job.stopped_by and "stopped by SIGTERM" in job.am_lost[-1]

    killed, _ = _new_am(tmp_path)  # the RM says a user killed it: KILLED, as the lost AM recorded
    killed._take_over(previous, "container_1700000000000_0003_02_000001", killed=True)
    assert killed.ended is not None and killed.ended[0] == "KILLED" and killed.end_recorded


def test_the_rm_tells_a_kill_from_a_lost_node():
    from types import SimpleNamespace

    from tony_airflow.core.am.yarn_view import YarnView
    from tony_airflow.yarn.rest import ApplicationReport

    def view(report) -> YarnView:
        def application(app_id):
            if isinstance(report, Exception):
                raise report
            return report
        return YarnView(SimpleNamespace(application=application), APP)

    lost = "AM Container for appattempt_1700000000000_0003_000001 exited with exitCode: -100 (a *lost* node)"
    assert view(ApplicationReport(APP, "RUNNING", "UNDEFINED", lost)).killed() is False
    assert view(ApplicationReport(APP, "RUNNING", "UNDEFINED", "Application killed by user.")).killed() is True
    assert view(ApplicationReport(APP, "KILLED", "KILLED")).killed() is True
    assert view(ConnectionError("no RM")).killed() is None
