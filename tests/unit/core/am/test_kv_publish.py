"""What the executors need from skein's key-value store (the training attempt, the AM's address) is
published or the AM fails saying so: never swallowed (#44 item 6). Swallowed, a new AM's executors read
no attempt, registered as attempt 1 and were refused."""

from __future__ import annotations

import pytest

from tests.unit.core.support import SECRET, make_job
from tony_airflow.core.am import master as master_module
from tony_airflow.core.am.master import ApplicationMaster
from tony_airflow.core.protocol import INITIAL_ATTEMPT_KEY


class FlakyKV(dict):
    def __init__(self, fails: int) -> None:
        super().__init__()
        self.fails = fails

    def __setitem__(self, key, value) -> None:
        if self.fails:
            self.fails -= 1
            raise ConnectionError("skein: the application master is not answering")
        super().__setitem__(key, value)


class App:
    def __init__(self, fails: int) -> None:
        self.kv = FlakyKV(fails)


def _am(fails: int) -> ApplicationMaster:
    return ApplicationMaster(make_job(), SECRET, App(fails), "application_1_0001", "h")


def test_a_key_the_executors_need_is_published_through_passing_failures(monkeypatch):
    monkeypatch.setattr(master_module, "KV_PUBLISH_WAIT_S", 5.0)
    monkeypatch.setattr("tony_airflow.yarn.failover.FAILOVER_SLEEP_BASE_S", 0.01)
    am = _am(fails=2)
    am._publish_required(INITIAL_ATTEMPT_KEY, "2")
    assert am.app.kv[INITIAL_ATTEMPT_KEY] == b"2"


def test_a_key_the_executors_need_that_cannot_be_published_fails_the_am_in_one_line(monkeypatch):
    monkeypatch.setattr(master_module, "KV_PUBLISH_WAIT_S", 0.05)
    monkeypatch.setattr("tony_airflow.yarn.failover.FAILOVER_SLEEP_BASE_S", 0.01)
    am = _am(fails=10 ** 6)
    with pytest.raises(RuntimeError, match=f"could not publish {INITIAL_ATTEMPT_KEY}.*not answering"):
        am._publish_required(INITIAL_ATTEMPT_KEY, "2")
