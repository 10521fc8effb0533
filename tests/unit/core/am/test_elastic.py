"""Elastic PyTorch jobs (issue #42 item 3): what the AM replaces, the registry taking a replacement into a
running attempt, the policy deciding without it, torchrun's c10d settings, and bad input."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.unit.core.test_spec_hardening import _refuse
from tony_airflow.core import protocol
from tony_airflow.core.am import elastic, policy
from tony_airflow.core.am.registry import Registry
from tony_airflow.core.protocol import TaskStatus
from tony_airflow.core.runtimes import TaskIdentity, first_sorting_address, task_env
from tony_airflow.core.spec import build_job_spec


def _job(**opts):
    return build_job_spec({"cluster_requirement": "master:1,worker:2", "command": "torchrun t.py",
                           "framework": "pytorch", "elastic": "1:2", **opts})


def _running_registry(job) -> Registry:
    reg = Registry(job, "application_1_0001")
    reg.new_attempt(1)
    for n, (t, i) in enumerate(job.task_ids()):
        assert reg.register(t, i, 1, "127.0.0.1", 4000 + n, container_id=f"container_1_0001_01_00000{n + 2}") is None
    assert reg.spec_published
    return reg


def test_torchrun_gets_the_ams_rendezvous_by_default_and_joins_under_its_own_address():
    """Issue 51: the rendezvous is the AM's (`--rdzv-backend tony`): no container hosts it."""
    hosts = {"master": ["198.18.0.3:9"], "worker": ["198.18.0.2:10", "198.18.0.4:11"]}
    for me in (TaskIdentity("master", 0, 2, "application_1_0001"), TaskIdentity("worker", 1, 2, "application_1_0001")):
        env = task_env(_job(), hosts, me)
        assert {k: env[k] for k in ("PET_NNODES", "PET_RDZV_BACKEND", "PET_RDZV_ID", "PET_MAX_RESTARTS")} == {
            "PET_NNODES": "2:3", "PET_RDZV_BACKEND": "tony",
            "PET_RDZV_ID": "application_1_0001-2", "PET_MAX_RESTARTS": str(_job().max_free_retries)}
        assert env["PET_LOCAL_ADDR"] == hosts[me.type][me.index].split(":")[0]
        assert "PET_RDZV_CONF" not in env and "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in env
        assert "PET_NODE_RANK" not in env and "PET_MASTER_ADDR" not in env


def test_with_c10d_asked_torchrun_gets_a_c10d_rendezvous_at_the_master_which_joins_under_an_address_that_ranks_it_first():
    hosts = {"master": ["198.18.0.3:9"], "worker": ["198.18.0.2:10", "198.18.0.4:11"]}
    c10d = _job(env={protocol.ELASTIC_RENDEZVOUS_ENV: "c10d"})
    master = task_env(c10d, hosts, TaskIdentity("master", 0, 2, "application_1_0001"))
    worker = task_env(c10d, hosts, TaskIdentity("worker", 0, 2, "application_1_0001"))
    assert {k: master[k] for k in ("PET_NNODES", "PET_RDZV_BACKEND", "PET_RDZV_ENDPOINT", "PET_RDZV_CONF",
                                   "PET_LOCAL_ADDR", "PET_RDZV_ID", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE")} == {
        "PET_NNODES": "2:3", "PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "198.18.0.3:9",
        "PET_RDZV_CONF": "is_host=1", "PET_LOCAL_ADDR": "0xc6120003", "PET_RDZV_ID": "application_1_0001-2",
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    assert (worker["PET_RDZV_CONF"], worker["PET_LOCAL_ADDR"]) == ("is_host=0", "198.18.0.2")
    assert "PET_NODE_RANK" not in worker and "PET_MASTER_ADDR" not in worker
    # c10d ranks nodes by address: the master's sorts before any dotted address or host name
    assert sorted(["198.18.0.2", "0xc6120003", "node7.example.com", "10.0.0.1"])[0] == "0xc6120003"
    assert first_sorting_address("127.0.0.1") == "0x7f000001"


def test_a_lost_worker_rank_0s_too_is_replaced_within_the_free_retries_with_the_ams_rendezvous():
    """Issue 51: worker 0's container hosts no rendezvous any more: its loss is a lost worker like another's."""
    job = build_job_spec({"cluster_requirement": "worker:2", "command": "torchrun t.py", "framework": "pytorch",
                          "elastic": "2:2"})
    reg = _running_registry(job)
    reg.container_gone(("worker", 0), "Container killed. Exit code: 137")
    assert elastic.replaceable(job, reg.tasks[("worker", 0)], 0)
    c10d = build_job_spec({"cluster_requirement": "worker:2", "command": "torchrun t.py", "framework": "pytorch",
                           "elastic": "2:2", "env": {protocol.ELASTIC_RENDEZVOUS_ENV: "c10d"}})
    reg = _running_registry(c10d)
    reg.container_gone(("worker", 0), "Container killed. Exit code: 137")
    assert not elastic.replaceable(c10d, reg.tasks[("worker", 0)], 0)  # c10d's host: the attempt restarts


def test_only_a_lost_worker_other_than_rank_0_is_replaced_within_the_free_retries():
    job = _job()
    reg = _running_registry(job)
    reg.container_gone(("worker", 1), "Container killed. Exit code: 137")
    lost = reg.tasks[("worker", 1)]
    assert elastic.replaceable(job, lost, 0) and not elastic.replaceable(job, lost, job.max_free_retries)
    reg.finished("worker", 0, 1, 1, "RuntimeError: the program's own")  # its own failure: not replaced
    assert not elastic.replaceable(job, reg.tasks[("worker", 0)], 0)
    reg.container_gone(("master", 0), "Exit code: 137")  # the rendezvous' host: the attempt restarts
    assert not elastic.replaceable(job, reg.tasks[("master", 0)], 0)
    oom = _running_registry(job)
    oom.container_message(("worker", 1), "Container is running beyond physical memory limits. Exit code: 137")
    oom.container_gone(("worker", 1), "Exit code: 137")
    assert not elastic.replaceable(job, oom.tasks[("worker", 1)], 0)
    plain = build_job_spec({"cluster_requirement": "master:1,worker:2", "command": "x", "framework": "pytorch"})
    reg = _running_registry(plain)
    reg.container_gone(("worker", 1), "Exit code: 137")
    assert not elastic.replaceable(plain, reg.tasks[("worker", 1)], 0)


def test_a_replacement_registers_into_the_running_attempt_under_its_own_address_and_starts_at_once():
    job = _job()
    reg = _running_registry(job)
    reg.container_gone(("worker", 1), "Exit code: 137")
    old = reg.replace(("worker", 1))
    assert old.status == TaskStatus.FAILED and reg.tasks[("worker", 1)].registered_at is None
    # the lost container's late messages are ignored
    assert reg.heartbeat("worker", 1, 1, container_id=old.yarn_container_id) == "stop"
    assert reg.register("worker", 1, 1, "198.18.0.9", 5005, container_id="container_1_0001_01_000009") is None
    new = reg.tasks[("worker", 1)]
    assert new.status == TaskStatus.RUNNING and new.started_at is not None
    state, spec = asyncio.run(reg.wait_spec(1, 0.1, ("worker", 1), "container_1_0001_01_000009"))
    assert state == "ready" and spec["hosts"]["worker"][1] == "198.18.0.9:5005"
    assert json.loads(reg.ready_answer)["spec"]["hosts"]["worker"][1] == "198.18.0.9:5005"
    assert reg.tasks[("worker", 0)].status == TaskStatus.RUNNING  # the others kept theirs


def test_the_others_decide_without_a_pending_replacement_and_too_few_workers_for_too_long_fail():
    job = _job(elastic="2:2", timeouts={"allocation": 60})
    reg = _running_registry(job)
    reg.container_gone(("worker", 1), "Exit code: 137")
    reg.replace(("worker", 1))
    tasks, now = reg.tasks.values(), 1000.0
    assert policy.decide(job, tasks, 0.0, 0.0, now, replacing={"worker:1": now - 10}) is None
    failed = policy.decide(job, tasks, 0.0, 0.0, now, replacing={"worker:1": now - 61})
    assert failed is not None and failed.reason.startswith("elastic: 1 of at least 2 workers ran for 61s")
    for t, i in (("master", 0), ("worker", 0)):
        reg.finished(t, i, 1, 0)
    assert policy.decide(job, reg.tasks.values(), 0.0, 0.0, now, replacing={"worker:1": now - 10}).ok


def test_the_history_says_what_was_lost_and_where_it_was_replaced():
    from tony_airflow.core.history import events as ev
    from tony_airflow.core.history.model import JobHistory

    tracker = elastic.Replacements()
    lost = elastic.lost_line("worker:1", "h2", "container_2", 137)
    tracker.asked("worker:1", lost, 100.0)
    line = tracker.started("worker:1", "h3", "container_9", 112.5)
    assert line == "worker:1 lost on h2 (container container_2, exit code 137); replaced on h3 " \
                   "(container container_9) after 12.5s"
    job = JobHistory.from_events("a", [{"time": 1, "event": ev.ATTEMPT_STARTED, "attempt": 1, "tasks": []},
                                       {"time": 2, "event": ev.WORKER_LOST, "attempt": 1, "line": lost},
                                       {"time": 3, "event": ev.WORKER_REPLACED, "attempt": 1, "line": line}])
    assert job.attempts[0].replaced == [line]


@pytest.mark.parametrize("argv, expected", [
    (["-r", "worker:2", "--framework", "pytorch", "--elastic", "3:2"],
     "elastic: 3:2 — MIN must be at least 1 and at most MAX; allowed: MIN:MAX with 1 <= MIN <= MAX workers"),
    (["-r", "worker:2", "--elastic", "1:2"],
     "elastic: 1:2 — elastic jobs are torchrun's; allowed: with --framework pytorch"),
    (["-r", "worker:3", "--framework", "pytorch", "--elastic", "1:2"],
     "elastic: 1:2 — MAX is the number of workers asked for, and the job asks 3; allowed: MIN:3"),
    (["-r", "worker:2", "--framework", "pytorch", "--elastic", "2"],
     "elastic: '2' is malformed; allowed: MIN:MAX workers, such as 2:4"),
    (["-r", "worker:2", "--framework", "pytorch", "--elastic", "a:2"], "elastic (MIN): 'a' is not a whole number"),
    (["-r", "worker:2", "--framework", "pytorch", "--elastic", "1:2", "--env", "TONY_ELASTIC_RENDEZVOUS=etcd"],
     "env: TONY_ELASTIC_RENDEZVOUS=etcd — no such rendezvous; allowed: tony (the AM's, the default) or c10d"),
])
def test_a_bad_elastic_range_is_refused_in_one_line_and_nothing_is_submitted(argv, expected, capsys, monkeypatch):
    line = _refuse([*argv, "torchrun t.py"], capsys, monkeypatch)
    assert line.startswith(f"error: {expected}"), line


def test_the_progress_line_says_the_latest_lost_and_replaced_worker():
    from tony_airflow.core.presentation import progress_text
    from tony_airflow.core.protocol import Progress
    from tony_airflow.yarn.rest import ApplicationReport

    report = ApplicationReport.from_json({"id": "application_1_0001", "state": "RUNNING", "finalStatus": "UNDEFINED"})
    progress = Progress(attempt=1, max_attempts=1, total=3, allocated=3, registered=3, running=3,
                        spec_published=True, notice="worker:1 lost on h2 (container c2, exit code 137): replacing it")
    assert progress_text("application_1_0001", report, progress) == (
        "application_1_0001 RUNNING · attempt 1/1 · running · worker:1 lost on h2 (container c2, exit code 137): "
        "replacing it")


def test_a_worker_its_container_engine_killed_for_memory_is_not_replaced_and_the_failure_says_so():
    """#51 item 12: an image's container over its memory limit is killed by the engine's cgroup, not by YARN:
    exit 137 without YARN's memory line, counted as a lost worker and replaced (and the replacement met the
    same limit). The executor reports what the engine's own state says (engine.memory_killed) and the AM
    treats it as YARN's memory kill: not replaced, named in the failure line."""
    job = _job(docker_image="tf:1")
    reg = _running_registry(job)
    line = "worker:1: the command went over its container's memory limit (2048 MiB) on h1 and the kernel killed it"
    reg.finished("worker", 1, 1, 137, line, memory_killed=True)
    task = reg.tasks[("worker", 1)]
    assert task.memory_killed and not elastic.replaceable(job, task, 0)
    assert "went over its container's memory limit" in policy.failure_line(task)
    signal = _running_registry(job)  # the same exit code from a kill, not the memory limit: lost, replaced
    signal.finished("worker", 1, 1, 137, "Killed")
    assert elastic.replaceable(job, signal.tasks[("worker", 1)], 0)


def test_the_executors_word_on_a_memory_kill_reaches_the_registry_through_the_message():
    """The first e2e run of the fix above: the AM refused the FINISHED message (a JSON boolean was taken for a
    mistyped int), the report never arrived and the worker was lost and replaced as before."""
    msg = protocol.parse_message(protocol.Finished, json.dumps(
        {"type": "worker", "index": 1, "attempt": 1, "exit_code": 137, "memory_killed": True}).encode())
    assert msg.memory_killed is True
    with pytest.raises(protocol.BadMessage, match="'exit_code' has the wrong type"):
        protocol.parse_message(protocol.Finished, json.dumps(
            {"type": "worker", "index": 1, "attempt": 1, "exit_code": True}).encode())
    with pytest.raises(protocol.BadMessage, match="'memory_killed' has the wrong type"):
        protocol.parse_message(protocol.Finished, json.dumps(
            {"type": "worker", "index": 1, "attempt": 1, "exit_code": 137, "memory_killed": 1}).encode())
