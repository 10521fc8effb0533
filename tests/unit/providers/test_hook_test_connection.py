"""The connection's "Test" button (#44 item 10): which ResourceManager answers, its Hadoop version and as
whom; or the one-line reason."""

from __future__ import annotations

import socket

import pytest

from tests.unit.fake_rm import FakeResourceManager
from tony_airflow.providers.yarn.connection import YarnSettings
from tony_airflow.providers.yarn.hooks.yarn import YarnHook


def _hook(addresses: list[str], **settings) -> YarnHook:
    hook = YarnHook()
    hook._settings = YarnSettings(rm_addresses=addresses, **settings)
    return hook


@pytest.fixture
def fake_rm():
    rm = FakeResourceManager().start()
    yield rm
    rm.stop()


def test_a_connection_that_answers_names_the_rm_its_version_and_the_user(fake_rm):
    assert _hook([fake_rm.url], user="alice").test_connection() == (
        True, f"ResourceManager {fake_rm.url} (Hadoop 3.4.2), user alice")


def test_a_standby_only_pair_is_said_at_once(fake_rm):
    fake_rm.standby_requests = 2
    ok, line = _hook([fake_rm.url, fake_rm.url], user="alice").test_connection()
    assert not ok and "standby" in line and "\n" not in line, line


def test_no_rm_answering_is_one_line():
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    ok, line = _hook([f"http://127.0.0.1:{port}"], user="alice").test_connection()
    said = "no active ResourceManager answered (addresses from the Airflow connection 'yarn_default'): "
    assert not ok and line.startswith(said) and "\n" not in line, line
