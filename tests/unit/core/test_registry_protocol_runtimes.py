"""The registry, the signing and the task environment, without YARN."""

from __future__ import annotations

import asyncio
import json

from tony_airflow.core import protocol
from tony_airflow.core.am.registry import Registry
from tony_airflow.core.runtimes import TaskIdentity, task_env
from tony_airflow.core.spec import build_job_spec


def _job(req="chief:1,worker:2,ps:1,evaluator:1", **kw):
    return build_job_spec({"cluster_requirement": req, "command": "x", **kw})


def test_signature_roundtrip_and_refusals():
    v = protocol.Verifier("s3cret")
    h = protocol.sign("s3cret", "POST", "/v1/register", b"{}")
    assert v.check("POST", "/v1/register", h, b"{}") is None
    assert v.check("POST", "/v1/register", h, b"{}") == "replayed request"
    h2 = protocol.sign("s3cret", "POST", "/v1/register", b"{}")
    assert v.check("POST", "/v1/register", h2, b'{"x":1}') == "bad signature"
    assert v.check("POST", "/v1/heartbeat", protocol.sign("s3cret", "POST", "/v1/register", b""), b"") == "bad signature"
    assert v.check("POST", "/v1/register", {}, b"") == "unsigned request"
    stale = dict(protocol.sign("s3cret", "POST", "/p", b""), **{protocol.H_TIMESTAMP: "5"})
    assert v.check("POST", "/p", stale, b"") == "stale request"


def test_gang_barrier_publishes_only_when_all_registered():
    async def scenario():
        job = _job("ps:1,worker:2")
        reg = Registry(job, "app_1")
        reg.new_attempt(1)
        waiter = asyncio.create_task(reg.wait_spec(1, timeout=5))
        assert reg.register("worker", 1, 1, "h2", 2002) is None
        assert reg.register("ps", 0, 1, "h0", 2000) is None
        await asyncio.sleep(0.05)
        assert not waiter.done()
        assert reg.register("worker", 0, 1, "h1", 2001) is None
        state, spec = await waiter
        assert state == "ready"
        assert spec["hosts"] == {"ps": ["h0:2000"], "worker": ["h1:2001", "h2:2002"]}
        assert reg.register("worker", 0, 2, "h1", 2001) == "attempt 2 is over; the current attempt is 1"
        assert reg.register("worker", 9, 1, "h", 1) == "no task worker:9 in this job"
        reg.finished("worker", 0, 1, 0)
        reg.request_stop()
        assert reg.heartbeat("ps", 0, 1) == "stop"
        reg.new_attempt(2)
        assert (await reg.wait_spec(1, 1))[0] == "stop"
        assert reg.status()["previous_attempts"][0]["attempt"] == 1
    asyncio.run(scenario())


def test_task_environment_tensorflow():
    job = _job(tensorboard=True, output="/out", input="/in")
    hosts = {"chief": ["c:1"], "worker": ["w:1", "w:2"], "ps": ["p:1"], "evaluator": ["e:1"],
             "tensorboard": ["t:1"]}
    env = task_env(job, hosts, TaskIdentity("worker", 1, 2, "app_9"))
    tf = json.loads(env["TF_CONFIG"])
    assert tf == {"cluster": {"chief": ["c:1"], "worker": ["w:1", "w:2"], "ps": ["p:1"]},
                  "task": {"type": "worker", "index": 1}}
    assert env["DTF_WORKER_HOSTS"] == "w:1,w:2" and env["DTF_TENSORBOARD_HOSTS"] == "t:1"
    assert env["IS_CHIEF"] == "false" and env["TASK_NUM"] == "5" and env["TONY_ATTEMPT"] == "2"
    assert "tensorboard" not in json.loads(env["CLUSTER_SPEC"])
    chief = task_env(job, hosts, TaskIdentity("chief", 0, 1, "app_9"))
    assert chief["IS_CHIEF"] == "true"
    ev = json.loads(task_env(job, hosts, TaskIdentity("evaluator", 0, 1, "a"))["TF_CONFIG"])
    assert ev["task"] == {"type": "evaluator", "index": 0} and "evaluator" not in ev["cluster"]
    tb = task_env(job, hosts, TaskIdentity("tensorboard", 0, 1, "a"))
    assert "TF_CONFIG" not in tb and tb["TB_PORT"] == "1"


def test_task_environment_pytorch():
    job = _job("worker:3", framework="pytorch")
    hosts = {"worker": ["a:10", "b:11", "c:12"]}
    env = task_env(job, hosts, TaskIdentity("worker", 2, 1, "a"))
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["RANK"], env["WORLD_SIZE"]) == ("a", "10", "2", "3")
    # TonY's names (its PyTorchRuntime), so a program written for TonY runs unchanged (issue #42 item 1)
    assert (env["INIT_METHOD"], env["WORLD"]) == ("tcp://a:10", "3")
    master = task_env(_job("master:1,worker:2", framework="pytorch"), {"master": ["m:9"], "worker": ["a:10", "b:11"]},
                      TaskIdentity("worker", 1, 1, "a"))
    assert (master["INIT_METHOD"], master["RANK"], master["WORLD"]) == ("tcp://m:9", "2", "3")


def test_a_request_signed_ahead_of_the_clock_cannot_be_replayed_before_it_goes_stale(monkeypatch):
    """Issue #30 item 10: a nonce was forgotten 300 s after receipt, while a timestamp up to 300 s in the
    future is accepted: a request dated 200 s ahead could be replayed between 300 s and 500 s later."""
    clock = [1_000_000.0]
    monkeypatch.setattr(protocol.time, "time", lambda: clock[0])
    v = protocol.Verifier("s3cret")
    clock[0] += 200  # the sender's clock runs 200 s ahead
    ahead = protocol.sign("s3cret", "POST", "/v1/heartbeat", b"{}")
    clock[0] -= 200
    assert v.check("POST", "/v1/heartbeat", ahead, b"{}") is None
    for later in (299, 301, 450, 499):
        clock[0] = 1_000_000.0 + later
        assert v.check("POST", "/v1/heartbeat", ahead, b"{}") == "replayed request", later
    clock[0] = 1_000_000.0 + 501
    assert v.check("POST", "/v1/heartbeat", ahead, b"{}") == "stale request"


def test_the_replay_cache_is_bounded_by_count_and_a_forgotten_nonce_still_cannot_be_replayed(monkeypatch):
    """Issue #30 item 12: at 1000 tasks the nonces of 300 s were ~113 KB per task."""
    clock = [1_000_000.0]
    monkeypatch.setattr(protocol.time, "time", lambda: clock[0])
    v = protocol.Verifier("s3cret", max_nonces=3)
    sent = []
    for _ in range(5):
        clock[0] += 1
        sent.append(protocol.sign("s3cret", "POST", "/v1/heartbeat", b"{}"))
        assert v.check("POST", "/v1/heartbeat", sent[-1], b"{}") is None
    assert len(v._seen) == 3 and len(v._expiry) == 3
    for forgotten in sent[:2]:  # their nonces are gone; their dates are at or before the floor
        assert v.check("POST", "/v1/heartbeat", forgotten, b"{}").startswith("stale request (older than")
    assert v.check("POST", "/v1/heartbeat", sent[2], b"{}") == "replayed request"
    clock[0] += 1
    assert v.check("POST", "/v1/heartbeat", protocol.sign("s3cret", "POST", "/v1/heartbeat", b"{}"), b"{}") is None


def test_the_output_the_am_holds_is_bounded_for_all_tasks_together():
    from tony_airflow.core.am.outputs import Outputs, keep_per_task
    from tony_airflow.core.output import AM_KEEP_CHARS, AM_MIN_KEEP_CHARS, AM_TOTAL_KEEP_CHARS

    assert keep_per_task(3) == AM_KEEP_CHARS
    assert keep_per_task(1000) * 1000 <= AM_TOTAL_KEEP_CHARS and keep_per_task(10**6) == AM_MIN_KEEP_CHARS
    outs = Outputs(f"worker:{i}" for i in range(1000))
    outs.receive(protocol.Output("worker", 7, 1, 0, "x" * AM_KEEP_CHARS), current_attempt=1)
    answer = outs.answer("worker:7", 1, 0, finished=False, limit=AM_KEEP_CHARS)
    assert answer["offset"] == AM_KEEP_CHARS - keep_per_task(1000) and len(answer["text"]) == keep_per_task(1000)
