"""The AM's take-over, model-checked: a job's run is played event by event as the AM writes its history
(with the flush up to a second behind, and each attempt's durable mark written before the attempt), the
AM is lost at every step, and a new AM takes over from what was durable then.

Invariants:
- a new AM never runs an ended job again: JOB_FINISHED, or a last attempt that SUCCEEDED, in what it
  reads makes it unregister with that outcome;
- it never reuses an attempt number the lost AM began (the history's, the marks', attempt 1);
- it never starts an attempt past the allowed number ("attempt 3 of 2");
- a history that cannot be read is never replaced: the resume retries, then fails in one line;
- an AM stopped by SIGTERM at any step (its NodeManager going away: it records the tasks it leaves STOPPED
  and JOB_FINISHED KILLED, `stopped_by` SIGTERM, and closes its log) is not an ended job when the RM says
  the application still runs (YARN started this new attempt): the new AM goes on as after any lost AM;
  when the RM says a user killed it, the new AM ends it KILLED without unregistering (exit 143);
- the listing of the attempts' marks is read as the log is: a listing that fails (a NameNode failing over)
  is tried again, never taken for "no marks".
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.core.support import SECRET, make_job
from tony_airflow.core.am.master import ApplicationMaster
from tony_airflow.core.history import events as ev
from tony_airflow.core.history.events import EventLog, HistoryUnreadable
from tony_airflow.core.history.store import IN_PROGRESS, HistoryStore

APP = "application_1700000000000_0009"
OUTCOMES = st.sampled_from(["ok", "failed", "preempted"])


def _run(outcomes: list[str], max_attempts: int, free: int) -> list[tuple[str, dict]]:
    """The steps of a whole run: ("event", record) as the AM emits them, ("mark", {"attempt": n}) for
    the durable mark written before attempt n (n > 1)."""
    steps: list[tuple[str, dict]] = [
        ("event", {"event": ev.JOB_SUBMITTED, "app_id": APP, "max_attempts": max_attempts}),
        ("event", {"event": ev.AM_STARTED, "host": "h1", "container_id": "c1", "am_attempt": 1}),
    ]
    free_used, attempt, status = 0, 1, "FAILED"
    for outcome in outcomes:
        if attempt > 1:
            steps.append(("mark", {"attempt": attempt}))
        steps.append(("event", {"event": ev.ATTEMPT_STARTED, "attempt": attempt, "tasks": ["worker:0"]}))
        steps.append(("event", {"event": ev.TASK_FINISHED, "attempt": attempt, "task": "worker:0",
                                "status": "SUCCEEDED" if outcome == "ok" else "FAILED"}))
        counted = not (outcome == "preempted" and free_used < free)
        free_used += 0 if counted else 1
        steps.append(("event", {"event": ev.ATTEMPT_ENDED, "attempt": attempt, "ok": outcome == "ok",
                                "reason": outcome, "cause": "" if counted else "preempted", "counted": counted}))
        if outcome == "ok":
            status = "SUCCEEDED"
            break
        if attempt >= max_attempts + free_used:
            break
        attempt += 1
    steps.append(("event", {"event": ev.JOB_FINISHED, "status": status, "diagnostics": f"the job {status}"}))
    return steps


def _abandoned(events: list[dict]) -> list[dict]:
    """What Registry.abandon records when SIGTERM stops the AM: the current attempt's unfinished tasks STOPPED."""
    started = [e for e in events if e["event"] == ev.ATTEMPT_STARTED]
    if not started:
        return []
    number = started[-1]["attempt"]
    finished = {e["task"] for e in events if e["event"] == ev.TASK_FINISHED and e["attempt"] == number}
    return [{"event": ev.TASK_FINISHED, "attempt": number, "task": task, "status": "STOPPED",
             "reason": "the AM was stopped (SIGTERM) before this task reported"}
            for task in started[-1]["tasks"] if task not in finished]


class FlakyListing(HistoryStore):
    """A NameNode failing over while the new AM lists the attempts' marks: the first `fails` listings fail."""

    def __init__(self, fs, root, fails: int) -> None:
        super().__init__(fs, root)
        self.fails = fails

    def marked_attempts(self, app_id):
        if self.fails:
            self.fails -= 1
            raise ConnectionError("webhdfs: no active NameNode")
        return super().marked_attempts(app_id)


@pytest.fixture(autouse=True)
def _quick_failover(monkeypatch):
    monkeypatch.setattr("tony_airflow.yarn.failover.FAILOVER_SLEEP_BASE_S", 0.001)


@settings(max_examples=int(os.environ.get("TONY_TAKEOVER_EXAMPLES", "300")), deadline=None)
@given(outcomes=st.lists(OUTCOMES, min_size=1, max_size=5), max_attempts=st.integers(1, 3),
       free=st.integers(0, 2), listing_fails=st.integers(0, 2), data=st.data())
def test_a_new_am_taking_over_at_any_step_never_reruns_an_ended_job_nor_reuses_an_attempt(
        tmp_path_factory, outcomes, max_attempts, free, listing_fails, data):
    steps = _run(outcomes, max_attempts, free)
    lost_at = data.draw(st.integers(1, len(steps)), label="the AM is lost after this many steps")
    done = steps[:lost_at]
    events = [record for kind, record in done if kind == "event"]
    closed = done == steps  # the log was closed (flushed whole), then the AM was lost before unregistering
    sigterm = not closed and data.draw(st.booleans(), label="the AM was stopped by SIGTERM and closed its log")
    user_killed = sigterm and data.draw(st.booleans(), label="the RM says a user killed the application")
    if sigterm:  # ApplicationMaster.run: Registry.abandon, then JOB_FINISHED KILLED, then the log is closed
        events = events + _abandoned(events) + [
            {"event": ev.JOB_FINISHED, "status": "KILLED", "stopped_by": "SIGTERM",
             "diagnostics": "tony-airflow: the AM was stopped (SIGTERM): the application was killed"}]
        closed = True
    flushed = len(events) if closed else data.draw(st.integers(max(0, len(events) - 2), len(events)),
                                                   label="events flushed")
    marks = [record["attempt"] for kind, record in done if kind == "mark"]

    tmp = tmp_path_factory.mktemp("history")
    store = HistoryStore.open(f"file://{tmp}")
    store.start_job(APP, "{}")
    store.append(APP, [json.dumps({"time": float(n), **e}) for n, e in enumerate(events[:flushed])])
    for n in marks:
        store.mark_attempt(APP, n)
    store = FlakyListing(store.fs, store.root, listing_fails)
    job = make_job("worker:1", max_attempts=max_attempts, max_free_retries=free)
    am = ApplicationMaster(job, SECRET, None, APP, "h2", EventLog(APP, store), am_attempt=2)
    previous = am.history.resume("{}")
    assert len(previous) == flushed  # nothing read was lost
    am._take_over(previous, "container_1700000000000_0009_02_000001", am.history.marked_attempts(),
                  killed=user_killed if sigterm else None)

    seen = events[:flushed]
    finished = [e for e in seen if e["event"] == ev.JOB_FINISHED and not (sigterm and not user_killed)]
    succeeded = [e for e in seen if e["event"] == ev.ATTEMPT_ENDED and e["ok"]]
    if finished:
        assert am.ended == (finished[-1]["status"], finished[-1]["diagnostics"]) and am.end_recorded
    elif succeeded:
        assert am.ended is not None and am.ended[0] == "SUCCEEDED"
    else:
        assert am.ended is None
        begun = [e["attempt"] for e in events if e["event"] == ev.ATTEMPT_STARTED] + marks + [1]
        assert am.first_attempt > max(begun), (am.first_attempt, begun)
        allowed = job.max_attempts + am.free_used
        assert am.exhausted or am.first_attempt <= allowed, (am.first_attempt, allowed, am.failures)


class FlakyStore(HistoryStore):
    """A NameNode failing over: the first `fails` reads of the log fail."""

    def __init__(self, fs, root, fails: int) -> None:
        super().__init__(fs, root)
        self.fails = fails

    def resume_job(self, app_id):
        if self.fails:
            self.fails -= 1
            raise ConnectionError("webhdfs: no active NameNode")
        return super().resume_job(app_id)


def _flaky(tmp_path, fails: int) -> FlakyStore:
    plain = HistoryStore.open(f"file://{tmp_path}")
    plain.start_job(APP, "{}")
    plain.append(APP, [json.dumps({"time": float(n), "event": ev.AM_STARTED, "am_attempt": 1}) for n in range(5)])
    return FlakyStore(plain.fs, plain.root, fails)


def test_a_read_error_while_resuming_is_retried_and_never_truncates_the_history(tmp_path, monkeypatch):
    monkeypatch.setattr("tony_airflow.yarn.failover.FAILOVER_SLEEP_BASE_S", 0.01)
    store = _flaky(tmp_path, fails=2)
    assert len(EventLog(APP, store).resume("{}", wait_s=5)) == 5
    store = _flaky(tmp_path / "down", fails=10 ** 6)
    with pytest.raises(HistoryUnreadable, match="could not be read"):
        EventLog(APP, store).resume("{}", wait_s=0.05)
    lines = (tmp_path / "down" / APP / IN_PROGRESS).read_text().splitlines()
    assert len(lines) == 5  # still there, whole


def test_marks_that_cannot_be_listed_fail_the_take_over_in_one_line_never_read_as_none(tmp_path):
    plain = HistoryStore.open(f"file://{tmp_path}")
    plain.start_job(APP, "{}")
    plain.mark_attempt(APP, 2)
    assert EventLog(APP, FlakyListing(plain.fs, plain.root, fails=2)).marked_attempts(wait_s=5) == [2]
    with pytest.raises(HistoryUnreadable, match="attempts' marks could not be listed"):
        EventLog(APP, FlakyListing(plain.fs, plain.root, fails=10 ** 6)).marked_attempts(wait_s=0.05)
