"""Issue #15, the core without YARN: registry liveness, the lifecycle policy, the AM's server,
the executor's give-up and stderr cap, the TensorBoard pass-through, history permissions,
the client's environment and reconnected handles."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import sys
import time
from types import SimpleNamespace

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tony_airflow.core import protocol
from tony_airflow.core.am import policy, server, tensorboard_proxy
from tony_airflow.core.am.registry import Registry
from tony_airflow.core.spec import build_job_spec

SECRET = "s" * 64


def _job(req="ps:1,worker:2", **kw):
    return build_job_spec({"cluster_requirement": req, "command": "x", **kw})


def _signed(method: str, path: str, payload) -> tuple[bytes, dict[str, str]]:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return body, protocol.sign(SECRET, method, path, body)


async def _client(app: web.Application) -> TestClient:
    client = TestClient(TestServer(app))
    await client.start_server()
    return client


# ---------------------------------------------------- 1: a slow gang is not a dead gang
def test_waiting_for_the_spec_counts_as_liveness():
    async def scenario():
        reg = Registry(_job(timeouts={"heartbeat": 60}), "app_1")
        reg.new_attempt(1)
        assert reg.register("ps", 0, 1, "h", 1) is None
        reg.tasks[("ps", 0)].last_heartbeat -= 120  # registered two minutes ago, still waiting for the gang
        state, _ = await reg.wait_spec(1, timeout=0.01, task=("ps", 0))
        assert state == "wait"
        assert time.time() - reg.tasks[("ps", 0)].last_heartbeat < 5
        assert reg.heartbeat("ps", 0, 1) == "run"  # executors heartbeat before the spec too

    asyncio.run(scenario())


# ---------------------------------------------------- 23, 24: the lifecycle policy
def _reg(job, **finished):
    reg = Registry(job, "app_1")
    reg.new_attempt(1)
    for (t, i) in list(reg.tasks):
        reg.register(t, i, 1, "h", 1000 + i)
    return reg


def test_an_untracked_exit_in_the_same_moment_as_the_tracked_ones_is_not_a_failure():
    job = _job()
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
    job = _job()
    reg = _reg(job)
    reg.finished("ps", 0, 1, 0)
    t = reg.tasks[("ps", 0)].finished_at
    later = t + policy.settle_seconds(job) + 0.1
    outcome = policy.decide(job, reg.tasks.values(), attempt_start=t - 30, app_start=t - 30, now=later)
    assert outcome is not None and not outcome.ok and "ps:0 exited early with code 0" in outcome.reason


@pytest.mark.parametrize("case", ["tracked-fails", "alloc-timeout", "reg-timeout", "hb-timeout", "app-timeout",
                                  "succeeds", "sidecar-ignored", "running"])
def test_policy_table(case):
    job = _job("ps:1,worker:2,tensorboard:1", output="/o",
               timeouts={"allocation": 10, "registration": 20, "heartbeat": 5, "application": 100})
    reg = Registry(job, "app_1")
    reg.new_attempt(1)
    t0 = 1000.0
    now = t0 + 1
    if case != "alloc-timeout":
        for key, task in reg.tasks.items():
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
    job = _job("worker:1")
    reg = _reg(job)
    reg.finished("worker", 0, 1, 143)
    t = reg.tasks[("worker", 0)].finished_at
    assert policy.decide(job, reg.tasks.values(), attempt_start=t, app_start=t, now=t + 0.5) is None
    reg.container_message(("worker", 0), "Container [pid=1] is running 1.6G beyond the 'PHYSICAL' memory limit. "
                                         "Current usage: 2.0 GB of 512 MB physical memory used")
    outcome = policy.decide(job, reg.tasks.values(), attempt_start=t, app_start=t, now=t + 0.6)
    assert outcome is not None and not outcome.ok
    assert "worker:0 exited with code 143" in outcome.reason and "2.0 GB of 512 MB" in outcome.reason
    # without a reason from YARN, the exit code alone after the wait
    reg2 = _reg(job)
    reg2.finished("worker", 0, 1, 137)
    t = reg2.tasks[("worker", 0)].finished_at
    late = policy.decide(job, reg2.tasks.values(), attempt_start=t, app_start=t, now=t + policy.YARN_REASON_WAIT_S + 1)
    assert late is not None and "exited with code 137" in late.reason


def test_diagnostics_of_a_success_after_a_failed_attempt_say_it_succeeded():
    text = policy.diagnostics(ok=True, attempt=2, max_attempts=2,
                              failures=["attempt 1/2: worker:1 exited with code 137"])
    assert text.startswith("tony-airflow: SUCCEEDED on attempt 2/2")
    assert "attempt 1 failed: worker:1 exited with code 137" in text
    assert policy.diagnostics(ok=True, attempt=1, max_attempts=1, failures=[]).startswith("tony-airflow: SUCCEEDED")
    failed = policy.diagnostics(ok=False, attempt=2, max_attempts=2,
                                failures=["attempt 1/2: a", "attempt 2/2: b"])
    assert failed.startswith("tony-airflow: FAILED") and "attempt 1/2: a" in failed


# ---------------------------------------------------- 10, 22: the AM's server
@pytest.mark.parametrize("path,payload", [
    (protocol.REGISTER, {"type": "worker"}),
    (protocol.REGISTER, {"type": "worker", "index": "x", "attempt": 1, "host": "h", "port": 1}),
    (protocol.HEARTBEAT, [1, 2]),
    (protocol.FINISHED, {"type": "worker", "index": 0, "attempt": 1}),
    (protocol.FINISHED, b"{not json"),
])
def test_a_signed_but_malformed_body_gets_400(path, payload):
    async def scenario():
        reg = Registry(_job("worker:1"), "app_1")
        reg.new_attempt(1)
        client = await _client(server.build_app(reg, SECRET))
        try:
            body, headers = _signed("POST", path, payload)
            resp = await client.post(path, data=body, headers=headers)
            assert resp.status == 400, await resp.text()
            assert "error" in await resp.json()
        finally:
            await client.close()

    asyncio.run(scenario())


def test_refused_requests_are_counted_and_logged_as_a_rate_limited_summary(caplog):
    async def scenario():
        reg = Registry(_job("worker:1"), "app_1")
        reg.new_attempt(1)
        app = server.build_app(reg, SECRET)
        client = await _client(app)
        try:
            for _ in range(300):
                resp = await client.post(protocol.REGISTER, data=b"{}")
                assert resp.status == 401
            status = await (await client.get(protocol.STATUS_JSON)).json()
            assert status["refused_requests"] == 300
            assert len(app[server.REFUSED].sample) <= server.REFUSED_SAMPLE
        finally:
            await client.close()

    with caplog.at_level(logging.WARNING, logger="tony.am.server"):
        asyncio.run(scenario())
    assert 1 <= len([r for r in caplog.records if "refused" in r.getMessage()]) <= 3


def test_progress_from_a_newer_am_with_more_fields_is_read():
    from tony_airflow.core.client import Progress

    p = Progress.from_json(json.dumps({"attempt": 1, "max_attempts": 1, "total": 3, "allocated": 3,
                                       "registered": 3, "running": 3, "finished": 0, "spec_published": True,
                                       "new_field_of_a_later_version": 5}))
    assert p.total == 3 and p.spec_published
    assert Progress.from_json("not json") is None


# ---------------------------------------------------- 10, 7, 14, 17: the executor
def test_the_executor_turns_a_refusal_into_a_one_line_error():
    from tony_airflow.core.executor.task import RefusedByAM, RegistryClient

    async def scenario():
        reg = Registry(_job("worker:1"), "app_1")
        reg.new_attempt(2)
        client = await _client(server.build_app(reg, SECRET))
        try:
            rc = RegistryClient(f"127.0.0.1:{client.port}", SECRET)
            with pytest.raises(RefusedByAM, match="attempt 1 is over"):
                await asyncio.to_thread(rc.call, "POST", protocol.REGISTER,
                                        {"type": "worker", "index": 0, "attempt": 1, "host": "h", "port": 1})
        finally:
            await client.close()

    asyncio.run(scenario())


def test_the_executor_stops_its_command_when_the_am_is_gone(tmp_path):
    """No AM answers: after the give-up time the command is stopped and the executor exits non-zero."""
    from tony_airflow.core.executor.task import AM_LOST_EXIT, Executor, RegistryClient
    from tony_airflow.core.runtimes import TaskIdentity

    job = _job("worker:1", timeouts={"heartbeat": 2}, heartbeat_interval=0.2)
    job.command = f"{sys.executable} -c 'import time; time.sleep(120)'"
    me = TaskIdentity(type="worker", index=0, attempt=1, app_id="app_1")

    class AMThatDiesAfterTheSpec(RegistryClient):
        def call(self, method, path, payload=None, retries=5, timeout=None):
            if path == protocol.REGISTER:
                return {"ok": True, "gpus": []}
            if path.startswith(protocol.CLUSTER_SPEC):
                return {"state": "ready", "spec": {"hosts": {"ps": [], "worker": ["h:1"]}}}
            raise ConnectionRefusedError("connection refused")

    executor = Executor(job, me, AMThatDiesAfterTheSpec("127.0.0.1:9", SECRET), "h", local=True)
    started = time.monotonic()
    code = executor.run()
    took = time.monotonic() - started
    assert code == AM_LOST_EXIT
    assert took < 15, took
    assert executor.child is not None and not executor.child.alive()


def test_the_stderr_pump_caps_a_line_without_newline(tmp_path):
    from tony_airflow.core.executor.child import TAIL_CHARS, UserProcess

    sink = io.BytesIO()
    code = "import sys; sys.stderr.write('x' * (20 * 2**20)); sys.stderr.write('END'); sys.exit(3)"
    proc = UserProcess(f"{sys.executable} -c \"{code}\"", dict(os.environ), stderr_sink=sink)
    assert proc.wait() == 3
    tail = proc.stderr_tail()
    assert len(tail) <= TAIL_CHARS and tail.endswith("END")
    assert sink.tell() == 20 * 2**20 + 3  # everything still reaches the container log
    assert proc.max_buffered <= 2**20


# ---------------------------------------------------- 11: the TensorBoard pass-through
def test_the_tensorboard_link_says_not_started_while_tensorboard_starts():
    async def scenario():
        app = web.Application()
        tensorboard_proxy.add_routes(app, lambda: "127.0.0.1:9")  # registered, not yet listening
        client = await _client(app)
        try:
            resp = await client.get(tensorboard_proxy.PREFIX)
            assert resp.status == 503
            assert "not started yet" in await resp.text()
        finally:
            await client.close()

    asyncio.run(scenario())


def test_the_tensorboard_pass_through_keeps_a_json_post_json():
    seen: dict = {}

    async def upstream(request: web.Request) -> web.Response:
        seen.update(method=request.method, ctype=request.content_type, body=await request.text())
        return web.json_response({"ok": True})

    async def scenario():
        tb = web.Application()
        tb.router.add_route("*", "/data/plugin/hparams/experiment", upstream)
        tb_client = await _client(tb)
        app = web.Application()
        tensorboard_proxy.add_routes(app, lambda: f"127.0.0.1:{tb_client.port}")
        client = await _client(app)
        try:
            body = json.dumps({"experimentName": ""})
            resp = await client.get(tensorboard_proxy.PREFIX + "data/plugin/hparams/experiment",
                                    params={tensorboard_proxy.BODY_PARAM: body,
                                            tensorboard_proxy.TYPE_PARAM: "application/json"})
            assert resp.status == 200
            assert seen == {"method": "POST", "ctype": "application/json", "body": body}
            resp = await client.get(tensorboard_proxy.PREFIX + "data/plugin/hparams/experiment",
                                    params={tensorboard_proxy.BODY_PARAM: "a=1"})
            assert seen["ctype"] == "application/x-www-form-urlencoded"
        finally:
            await client.close()
            await tb_client.close()

    asyncio.run(scenario())


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


# ---------------------------------------------------- 8, 9: the client
def test_a_client_does_not_change_the_process_environment(tmp_path, monkeypatch):
    from tony_airflow.core.client import TonyClient
    from tony_airflow.yarn.hadoop_conf import write_site

    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    conf = tmp_path / "conf"
    conf.mkdir()
    write_site(conf / "yarn-site.xml", {"yarn.resourcemanager.webapp.address": "127.0.0.1:1"})
    before = dict(os.environ)
    client = TonyClient(conf_dir=str(conf))
    assert dict(os.environ) == before
    assert client.environment["HADOOP_CONF_DIR"] == str(conf)


def test_a_reconnected_handle_reads_progress_and_refuses_local_tasks_in_one_line(monkeypatch):
    from tony_airflow.core.client import JobHandle
    from tony_airflow.errors import UsageError

    class FakeKV(dict):
        pass

    class FakeSkein:
        def connect(self, app_id, wait=False):
            return SimpleNamespace(kv=FakeKV({protocol.PROGRESS_KEY: json.dumps({"total": 2, "allocated": 1}).encode()}))

    handle = JobHandle("application_1_1", rm=None, skein_client=lambda: FakeSkein())
    progress = handle.progress()
    assert progress is not None and progress.total == 2
    with pytest.raises(UsageError, match="client mode"):
        handle.run_local_tasks()


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
