"""The registry: a task waiting for its gang is alive (issue #15, item 1)."""

from __future__ import annotations

import asyncio
import time

from tests.unit.core.support import make_job
from tony_airflow.core.am.registry import Registry


# ---------------------------------------------------- 1: a slow gang is not a dead gang
def test_waiting_for_the_spec_counts_as_liveness():
    async def scenario():
        reg = Registry(make_job(timeouts={"heartbeat": 60}), "app_1")
        reg.new_attempt(1)
        assert reg.register("ps", 0, 1, "h", 1) is None
        reg.tasks[("ps", 0)].last_heartbeat -= 120  # registered two minutes ago, still waiting for the gang
        state, _ = await reg.wait_spec(1, timeout=0.01, task=("ps", 0))
        assert state == "wait"
        assert time.time() - reg.tasks[("ps", 0)].last_heartbeat < 5
        assert reg.heartbeat("ps", 0, 1) == "run"  # executors heartbeat before the spec too

    asyncio.run(scenario())
