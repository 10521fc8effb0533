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
