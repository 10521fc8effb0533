"""The AM stopped by SIGTERM (YARN killing it, or its NodeManager going away) at any moment of its run."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

from tests.unit.core.support import SECRET, make_job
from tony_airflow.core.am.master import ApplicationMaster
from tony_airflow.core.history.events import EventLog


class SlowHistory(EventLog):
    """An event log on a slow HDFS: opening and closing take a while (the first job of a fresh cluster)."""

    def start(self, spec_json: str) -> None:
        time.sleep(0.3)
        super().start(spec_json)

    def close(self) -> None:
        time.sleep(0.5)
        super().close()


def _master(monkeypatch) -> ApplicationMaster:
    master = ApplicationMaster(make_job(), SECRET, app=None, app_id="application_1_0001", host="h",
                               history=SlowHistory("application_1_0001"))

    async def attempts_done() -> tuple[str, str]:  # a job quicker than its history directory
        await asyncio.sleep(0.05)
        return "SUCCEEDED", "done"

    monkeypatch.setattr(master, "_run_attempts", attempts_done)
    return master


def test_a_job_that_ends_before_its_history_is_open_succeeds(monkeypatch):
    """Seen on the secure cluster: `AM error: CancelledError()` for a one-second job (FAILED)."""
    assert asyncio.run(_master(monkeypatch).run()) == ("SUCCEEDED", "done")


def _run_with_sigterm_at(master: ApplicationMaster, delay: float) -> tuple[str, str]:
    timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        return asyncio.run(master.run())
    finally:
        timer.cancel()


def test_sigterm_once_the_job_is_over_does_not_turn_it_into_an_am_error(monkeypatch):
    # the attempts are over, the history is being written: YARN (or a dying NodeManager) stops the AM now
    assert _run_with_sigterm_at(_master(monkeypatch), 0.6) == ("SUCCEEDED", "done")


def test_the_killed_containers_are_looked_at_again_soon_then_every_tick():
    """#54: the end of every short job waited a whole TICK_S before its first look at the killed containers."""
    from itertools import islice

    from tony_airflow.core.am.master import TICK_S, gone_check_pauses

    pauses = list(islice(gone_check_pauses(), 6))
    assert pauses[0] == 0.05 and pauses[-1] == TICK_S and pauses == sorted(pauses)
    assert sum(1 for p in islice(gone_check_pauses(), 40) if p < TICK_S) <= 3  # bounded extra looks
