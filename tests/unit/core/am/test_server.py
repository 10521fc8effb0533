"""The AM's registry server: bad bodies, refused requests (issue #15, items 10, 22)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.unit.core.support import SECRET, make_job, serve, signed
from tony_airflow.core import protocol
from tony_airflow.core.am import server
from tony_airflow.core.am.registry import Registry


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
        reg = Registry(make_job("worker:1"), "app_1")
        reg.new_attempt(1)
        client = await serve(server.build_app(reg, SECRET))
        try:
            body, headers = signed("POST", path, payload)
            resp = await client.post(path, data=body, headers=headers)
            assert resp.status == 400, await resp.text()
            assert "error" in await resp.json()
        finally:
            await client.close()

    asyncio.run(scenario())


def test_refused_requests_are_counted_and_logged_as_a_rate_limited_summary(caplog):
    async def scenario():
        reg = Registry(make_job("worker:1"), "app_1")
        reg.new_attempt(1)
        app = server.build_app(reg, SECRET)
        client = await serve(app)
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


def test_progress_is_served_unsigned_with_the_registrys_address():
    """What `JobHandle.progress` reads through the tracking URL (it replaced skein's key-value store, #20)."""
    async def scenario():
        reg = Registry(make_job("ps:1,worker:2"), "app_1")
        reg.new_attempt(1)
        client = await serve(server.build_app(reg, SECRET, address=lambda: "10.0.0.5:4321"))
        try:
            body, headers = signed("POST", protocol.REGISTER, {"type": "worker", "index": 0, "attempt": 1,
                                                               "host": "h", "port": 2222})
            assert (await client.post(protocol.REGISTER, data=body, headers=headers)).status == 200
            answer = await (await client.get(protocol.PROGRESS_JSON)).json()
        finally:
            await client.close()
        progress = protocol.Progress.from_dict(answer["progress"])
        assert answer["address"] == "10.0.0.5:4321"
        assert progress == protocol.Progress(attempt=1, max_attempts=1, total=3, allocated=1, registered=1)

    asyncio.run(scenario())


def test_the_cluster_spec_is_serialized_once_for_all_the_tasks_waiting_for_it(monkeypatch):
    """Issue #30 item 11: every answer ran dataclasses.asdict over the whole spec, once per waiting
    executor: O(n²) in the gang's size (5000 executors: 26.6 s, the AM over its 512 MiB container)."""
    import dataclasses

    n = 60
    copies = []
    real_asdict = dataclasses.asdict

    def counting_asdict(obj, *args, **kwargs):
        if isinstance(obj, protocol.ClusterSpecAnswer) and obj.spec is not None:
            copies.append(obj)
        return real_asdict(obj, *args, **kwargs)

    monkeypatch.setattr(server, "asdict", counting_asdict)

    async def scenario():
        reg = Registry(make_job(f"worker:{n}"), "app_1")
        reg.new_attempt(1)
        client = await serve(server.build_app(reg, SECRET))
        try:
            for i in range(n):
                body, headers = signed("POST", protocol.REGISTER, {"type": "worker", "index": i, "attempt": 1,
                                                                   "host": "h", "port": 2000 + i})
                assert (await client.post(protocol.REGISTER, data=body, headers=headers)).status == 200
            answers = []
            for i in range(n):
                path = f"{protocol.CLUSTER_SPEC}?attempt=1&type=worker&index={i}&wait=1"
                _, headers = signed("GET", path, b"")
                answers.append(await (await client.get(path, headers=headers)).json())
        finally:
            await client.close()
        return answers

    answers = asyncio.run(scenario())
    assert all(a["state"] == "ready" and len(a["spec"]["hosts"]["worker"]) == n for a in answers)
    assert answers[0]["spec"]["hosts"]["worker"][7] == "h:2007"
    assert copies == [], f"the spec was copied {len(copies)} times for {n} waiters"


# ---------------------------------------------- issue #41 item 4: one request to the gang's start
def test_a_registration_that_waits_answers_with_the_cluster_spec_once_the_gang_formed():
    """`POST /v1/register?wait=S`: each executor's one request both registers and, once the last of the
    gang registered, brings the cluster spec (the same bytes for every waiter); without `wait`, the old
    answer."""
    n = 5

    async def scenario():
        reg = Registry(make_job(f"worker:{n}"), "app_1")
        reg.new_attempt(1)
        client = await serve(server.build_app(reg, SECRET))
        try:
            async def register(i: int, wait: float | None):
                path = protocol.REGISTER + (f"?wait={wait:g}" if wait is not None else "")
                body, headers = signed("POST", path, {"type": "worker", "index": i, "attempt": 1,
                                                      "host": "h", "port": 2000 + i, "container_id": f"c{i}"})
                resp = await client.post(path, data=body, headers=headers)
                assert resp.status == 200, await resp.text()
                return await resp.json()

            plain = await register(0, None)
            waiting = [asyncio.create_task(register(i, 5)) for i in range(1, n)]
            return plain, await asyncio.gather(*waiting)
        finally:
            await client.close()

    plain, answers = asyncio.run(scenario())
    assert plain == {"ok": True, "gpus": []}
    for answer in answers:
        assert answer["ok"] is True and answer["gpus"] == [] and answer["state"] == "ready"
        assert answer["spec"]["hosts"]["worker"] == [f"h:{2000 + i}" for i in range(n)]


def test_a_registration_that_waits_says_wait_when_the_gang_is_not_whole_and_stop_to_a_released_container():
    async def scenario():
        reg = Registry(make_job("worker:2"), "app_1")
        reg.new_attempt(1)
        client = await serve(server.build_app(reg, SECRET))
        try:
            path = protocol.REGISTER + "?wait=0.2"
            body, headers = signed("POST", path, {"type": "worker", "index": 0, "attempt": 1, "host": "h",
                                                  "port": 2000, "container_id": "c0"})
            first = await (await client.post(path, data=body, headers=headers)).json()
            reg.release([("worker", 0)], {"c0"})
            spec_path = f"{protocol.CLUSTER_SPEC}?attempt=1&type=worker&index=0&wait=0.2&container=c0"
            _, headers = signed("GET", spec_path, b"")
            released = await (await client.get(spec_path, headers=headers)).json()
            bad = protocol.REGISTER + "?wait=soon"
            body, headers = signed("POST", bad, {"type": "worker", "index": 1, "attempt": 1, "host": "h", "port": 1})
            refused = await client.post(bad, data=body, headers=headers)
            return first, released, refused.status
        finally:
            await client.close()

    first, released, refused = asyncio.run(scenario())
    assert first == {"ok": True, "gpus": [], "state": "wait", "spec": None}
    assert released == {"state": "stop", "spec": None}
    assert refused == 400


def test_an_executor_reaches_its_command_with_one_request_when_its_gang_forms_during_its_registration(tmp_path):
    """The executor's own client against the real server: register (waiting) and run, no cluster-spec poll."""
    from tony_airflow.core.executor.task import Executor, RegistryClient
    from tony_airflow.core.runtimes import TaskIdentity

    job = make_job("worker:1")
    job.command = "true"
    calls: list[str] = []

    class CountingClient(RegistryClient):
        def call(self, method, path, payload=None, retries=5, timeout=None):
            calls.append(path.split("?")[0])
            return super().call(method, path, payload, retries, timeout)

    async def scenario():
        reg = Registry(job, "app_1")
        reg.new_attempt(1)
        client = await serve(server.build_app(reg, SECRET))
        try:
            me = TaskIdentity(type="worker", index=0, attempt=1, app_id="app_1")
            executor = Executor(job, me, CountingClient(f"127.0.0.1:{client.port}", SECRET), "127.0.0.1",
                                local=True)
            return await asyncio.to_thread(executor.run)
        finally:
            await client.close()

    assert asyncio.run(scenario()) == 0
    assert protocol.CLUSTER_SPEC not in calls
    assert calls[0] == protocol.REGISTER


# ---------------------------------------------------- #54 item 1: the end of a job is not a heartbeat late
def test_a_heartbeat_held_by_the_am_is_answered_stop_as_soon_as_the_am_asks_tasks_to_stop():
    """The executor asks with `wait`: the AM holds a 'run' answer up to that long and answers 'stop' the moment
    it asks the tasks to stop (the ps of a finished job used to hear it up to a heartbeat interval later)."""
    async def scenario():
        reg = Registry(make_job("worker:1"), "app_1")
        reg.new_attempt(1)
        assert reg.register("worker", 0, 1, "127.0.0.1", 4000, container_id="container_1_0001_01_000002") is None
        client = await serve(server.build_app(reg, SECRET))
        try:
            async def beat(wait: float) -> str:
                body, headers = signed("POST", protocol.HEARTBEAT, {"type": "worker", "index": 0, "attempt": 1,
                                                                     "wait": wait})
                resp = await client.post(protocol.HEARTBEAT, data=body, headers=headers)
                return (await resp.json())["action"]

            assert await beat(0) == "run"  # no wait asked: answered at once, as before
            held = asyncio.create_task(beat(600))
            await asyncio.sleep(0.3)
            assert not held.done()  # held: nothing to say yet
            reg.request_stop()
            assert await asyncio.wait_for(held, 60) == "stop"  # long before the 600 s asked
        finally:
            await client.close()

    asyncio.run(scenario())


def test_a_held_heartbeat_waits_at_most_the_am_s_own_bound():
    assert server.MAX_HEARTBEAT_WAIT_S <= 10.0


def test_a_heartbeat_whose_wait_is_not_a_number_gets_400():
    async def scenario():
        reg = Registry(make_job("worker:1"), "app_1")
        reg.new_attempt(1)
        client = await serve(server.build_app(reg, SECRET))
        try:
            body, headers = signed("POST", protocol.HEARTBEAT, {"type": "worker", "index": 0, "attempt": 1,
                                                                 "wait": "soon"})
            resp = await client.post(protocol.HEARTBEAT, data=body, headers=headers)
            assert resp.status == 400 and "wait" in (await resp.json())["error"]
        finally:
            await client.close()

    asyncio.run(scenario())


def test_a_heartbeat_of_a_task_that_has_reported_its_end_is_not_held(monkeypatch):
    """Its executor is exiting: holding it would only make the AM's server wait for it at the end."""
    monkeypatch.setattr(server, "MAX_HEARTBEAT_WAIT_S", 600.0)  # held, it would outlast the 30 s below

    async def scenario():
        reg = Registry(make_job("worker:2"), "app_1")
        reg.new_attempt(1)
        for i in range(2):
            assert reg.register("worker", i, 1, "127.0.0.1", 4000 + i, container_id=f"container_1_0001_01_00000{i + 2}") is None
        reg.finished("worker", 0, 1, 0)
        client = await serve(server.build_app(reg, SECRET))
        try:
            body, headers = signed("POST", protocol.HEARTBEAT, {"type": "worker", "index": 0, "attempt": 1,
                                                                 "wait": 600})
            resp = await asyncio.wait_for(client.post(protocol.HEARTBEAT, data=body, headers=headers), 30)
            assert (await resp.json())["action"] == "run"
        finally:
            await client.close()

    asyncio.run(scenario())
