"""The lifecycle policy, table-tested without YARN (issue #15, items 16, 23, 24)."""

from __future__ import annotations

import pytest

from tests.unit.core.support import make_job
from tony_airflow.core.am import policy
from tony_airflow.core.am.registry import Registry


# ---------------------------------------------------- 23, 24: the lifecycle policy
def _reg(job, **finished):
    reg = Registry(job, "app_1")
    reg.new_attempt(1)
    for (t, i) in list(reg.tasks):
        reg.register(t, i, 1, "h", 1000 + i)
    return reg


def test_an_untracked_exit_in_the_same_moment_as_the_tracked_ones_is_not_a_failure():
    job = make_job()
    reg = _reg(job)
    t0 = 1000.0
    reg.finished("ps", 0, 1, 0)
    reg.tasks[("ps", 0)].finished_at = t0
    # the ps reported first; the workers' reports arrive a moment later
    assert policy.decide(job, reg.tasks.values(), attempt_start=t0 - 30, app_start=t0 - 30, now=t0 + 0.1) is None
    for i in (0, 1):
        reg.finished("worker", i, 1, 0)
        reg.tasks[("worker", i)].finished_at = t0 + 0.3
    outcome = policy.decide(job, reg.tasks.values(), attempt_start=t0 - 30, app_start=t0 - 30, now=t0 + 0.4)
    assert outcome is not None and outcome.ok


def test_an_untracked_task_that_really_dies_early_fails_the_attempt():
    job = make_job()
    reg = _reg(job)
    reg.finished("ps", 0, 1, 0)
    t = reg.tasks[("ps", 0)].finished_at
    later = t + policy.settle_seconds(job) + 0.1
    outcome = policy.decide(job, reg.tasks.values(), attempt_start=t - 30, app_start=t - 30, now=later)
    assert outcome is not None and not outcome.ok and "ps:0 exited early with code 0" in outcome.reason


@pytest.mark.parametrize("case", ["tracked-fails", "alloc-timeout", "reg-timeout", "hb-timeout", "app-timeout",
                                  "succeeds", "sidecar-ignored", "running"])
def test_policy_table(case):
    job = make_job("ps:1,worker:2,tensorboard:1", output="/o",
               timeouts={"allocation": 10, "registration": 20, "heartbeat": 5, "application": 100})
    reg = Registry(job, "app_1")
    reg.new_attempt(1)
    t0 = 1000.0
    now = t0 + 1
    if case != "alloc-timeout":
        for task in reg.tasks.values():
            task.allocated_at = t0
    if case not in ("alloc-timeout", "reg-timeout"):
        for (t, i) in reg.tasks:
            reg.register(t, i, 1, "h", 1)
            reg.tasks[(t, i)].last_heartbeat = t0 + 1
    expected: str | bool | None
    if case == "tracked-fails":
        reg.finished("worker", 1, 1, 3, "boom")
        expected = "worker:1 exited with code 3"
    elif case == "alloc-timeout":
        now, expected = t0 + 11, "allocation timeout"
    elif case == "reg-timeout":
        now, expected = t0 + 21, "registration timeout"
    elif case == "hb-timeout":
        now, expected = t0 + 7, "heartbeat timeout: ps:0"
    elif case == "app-timeout":
        for task in reg.tasks.values():
            task.last_heartbeat = t0 + 100
        now, expected = t0 + 101, "application timeout"
    elif case == "succeeds":
        for i in (0, 1):
            reg.finished("worker", i, 1, 0)
        expected = True
    elif case == "sidecar-ignored":
        reg.finished("tensorboard", 0, 1, 1)
        expected = None
    else:
        expected = None
    outcome = policy.decide(job, reg.tasks.values(), attempt_start=t0, app_start=t0, now=now)
    if expected is None:
        assert outcome is None
    elif expected is True:
        assert outcome is not None and outcome.ok
    else:
        assert outcome is not None and not outcome.ok and expected in outcome.reason, outcome


def test_a_killed_task_waits_briefly_for_yarns_reason():
    job = make_job("worker:1")
    reg = _reg(job)
    reg.finished("worker", 0, 1, 143)
    t = reg.tasks[("worker", 0)].finished_at
    assert policy.decide(job, reg.tasks.values(), attempt_start=t, app_start=t, now=t + 0.5) is None
    reg.container_message(("worker", 0), "Container [pid=1] is running 1.6G beyond the 'PHYSICAL' memory limit. "
                                         "Current usage: 2.0 GB of 512 MB physical memory used")
    outcome = policy.decide(job, reg.tasks.values(), attempt_start=t, app_start=t, now=t + 0.6)
    assert outcome is not None and not outcome.ok
    assert "worker:0 exited with code 143" in outcome.reason and "2.0 GB of 512 MB" in outcome.reason
    # issue #53 item 7: what to do about it, after YARN's numbers
    assert "; give worker more memory: -m worker:<MiB> (task_memory)" in outcome.reason
    # without a reason from YARN, the exit code alone after the wait
    reg2 = _reg(job)
    reg2.finished("worker", 0, 1, 137)
    t = reg2.tasks[("worker", 0)].finished_at
    late = policy.decide(job, reg2.tasks.values(), attempt_start=t, app_start=t, now=t + policy.YARN_REASON_WAIT_S + 1)
    assert late is not None and "exited with code 137" in late.reason


def test_a_task_its_container_engine_killed_for_memory_fails_the_attempt_at_once():
    """#51 item 12: the executor said why (its engine's memory limit): YARN has nothing to add."""
    job = make_job("worker:1", docker_image="tf:1")
    reg = _reg(job)
    reg.finished("worker", 0, 1, 137, "worker:0: the command went over its container's memory limit (512 MiB)",
                 memory_killed=True)
    t = reg.tasks[("worker", 0)].finished_at
    outcome = policy.decide(job, reg.tasks.values(), attempt_start=t, app_start=t, now=t + 0.1)
    assert outcome is not None and not outcome.ok and "memory limit (512 MiB)" in outcome.reason, outcome


def test_diagnostics_of_a_success_after_a_failed_attempt_say_it_succeeded():
    text = policy.diagnostics(ok=True, attempt=2, max_attempts=2,
                              failures=["attempt 1/2: worker:1 exited with code 137"])
    assert text.startswith("tony-airflow: SUCCEEDED on attempt 2/2")
    assert "attempt 1 failed: worker:1 exited with code 137" in text
    assert policy.diagnostics(ok=True, attempt=1, max_attempts=1, failures=[]).startswith("tony-airflow: SUCCEEDED")
    failed = policy.diagnostics(ok=False, attempt=2, max_attempts=2,
                                failures=["attempt 1/2: a", "attempt 2/2: b"])
    assert failed.startswith("tony-airflow: FAILED") and "attempt 1/2: a" in failed


@pytest.mark.parametrize("ok,attempt,max_attempts,app_timeout,age,expected", [
    (True, 1, 3, 0, 10, False),     # succeeded: nothing to retry
    (False, 1, 1, 0, 10, False),    # no attempts left
    (False, 1, 2, 0, 10, True),     # failover: the whole cluster again
    (False, 2, 2, 0, 10, False),    # the last attempt failed
    (False, 1, 3, 30, 31, False),   # the application timeout fired: another attempt could not finish
    (False, 1, 3, 30, 10, True),
])
def test_failover_decision(ok, attempt, max_attempts, app_timeout, age, expected):
    job = make_job("worker:1", max_attempts=max_attempts, timeouts={"application": app_timeout})
    outcome = policy.Outcome(ok, "" if ok else "worker:0 exited with code 1")
    assert policy.retry(outcome, attempt, job, app_start=1000.0, now=1000.0 + age) is expected


def test_every_framework_has_a_runtime():
    from tony_airflow.core.runtimes import RUNTIMES
    from tony_airflow.core.spec import FRAMEWORKS

    assert set(RUNTIMES) == set(FRAMEWORKS)


def test_a_silent_sidecar_does_not_fail_the_training():
    """Issue #30 item 5: a lost TensorBoard host failed the attempt through the heartbeat timeout,
    against 'sidecars never decide'."""
    job = make_job("worker:2,tensorboard:1", output="/o", timeouts={"heartbeat": 5})
    reg = _reg(job)
    t0 = 1000.0
    for task in reg.tasks.values():
        task.last_heartbeat = t0 + 20 if task.type == "worker" else t0
    assert policy.decide(job, reg.tasks.values(), attempt_start=t0 - 30, app_start=t0 - 30, now=t0 + 21) is None
    reg.tasks[("worker", 1)].last_heartbeat = t0
    outcome = policy.decide(job, reg.tasks.values(), attempt_start=t0 - 30, app_start=t0 - 30, now=t0 + 21)
    assert outcome is not None and "heartbeat timeout: worker:1" in outcome.reason


# ------------------------------------------------ issue #29 item 3: retries YARN's faults do not spend
def test_a_failure_caused_by_yarn_is_retried_without_counting_up_to_its_own_bound():
    job = make_job("worker:2", max_attempts=1, max_free_retries=2)
    own = policy.Outcome(False, "worker:1 exited with code 1")
    preempted = policy.Outcome(False, "worker:1 preempted by YARN", cause="preemption")
    lost = policy.Outcome(False, "host h lost", cause="lost host")
    assert not policy.retry(own, 1, job, 0.0, 1.0)
    assert policy.retry(preempted, 1, job, 0.0, 1.0, free_used=0)
    assert policy.retry(lost, 2, job, 0.0, 1.0, free_used=1)  # attempt 2 was the first free one
    assert not policy.retry(preempted, 3, job, 0.0, 1.0, free_used=2)  # the bound: now it counts
    assert policy.is_free(preempted, job, 1) and not policy.is_free(preempted, job, 2)
    assert not policy.is_free(own, job, 0)
    counted = make_job("worker:2", max_attempts=2, max_free_retries=0)
    assert policy.retry(preempted, 1, counted, 0.0, 1.0) and not policy.retry(preempted, 2, counted, 0.0, 1.0)


def test_preempted_tasks_are_told_by_yarns_own_words():
    job = make_job("worker:2")
    reg = _reg(job)
    reg.container_gone(("worker", 1), "container container_1_0001_01_000003 FAILED: Container preempted by scheduler")
    reg.finished("worker", 0, 1, 1, "collective: peer gone")
    assert [t.id for t in policy.preempted(reg.tasks.values())] == ["worker:1"]


def test_the_diagnostics_say_which_attempts_were_not_counted():
    failures = ["attempt 1/2: worker:1 preempted by YARN (not counted: preemption)"]
    text = policy.diagnostics(True, 2, 2, failures)
    assert text.startswith("tony-airflow: SUCCEEDED on attempt 2/2")
    assert "attempt 1 failed: worker:1 preempted by YARN (not counted: preemption)" in text


@pytest.mark.parametrize("interval, heard_ago, started, done, silent", [
    (1.0, 1.2, True, False, False),   # a heartbeat every second: within the next one's time
    (1.0, 1.6, True, False, True),    # 1.5 of them missed: maybe gone
    (2.0, 2.5, True, False, False),   # a longer interval: 1.5 x 2 s
    (2.0, 3.5, True, False, True),
    (0.5, 1.2, True, False, False),   # at least 1.5 s
    (1.0, 9.0, False, False, False),  # not running yet (registered, waiting for its gang): its own liveness rules
    (1.0, 9.0, True, True, False),    # over
])
def test_a_running_task_that_missed_heartbeats_is_silent(interval, heard_ago, started, done, silent):
    """#54: a silent task makes the AM ask YARN about its containers at once, not in STEADY_POLL_S."""
    from tony_airflow.core.am.registry import TaskState

    task = TaskState("worker", 1, 1, "tracked", started_at=50.0 if started else None, last_heartbeat=100.0 - heard_ago,
                     exit_code=0 if done else None)
    if done:
        task.status = "SUCCEEDED"  # type: ignore[assignment]
    assert bool(policy.silent([task], 100.0, interval)) is silent
