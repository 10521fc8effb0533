"""A deferred task that a user marks failed or succeeded kills its application even when no triggerer
runs its trigger yet (Airflow calls a trigger's on_kill only on a running one)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.unit.fake_rm import FakeApp, FakeResourceManager
from tony_airflow.providers.yarn.listeners import deferred_kill
from tony_airflow.providers.yarn.triggers.yarn import YarnApplicationTrigger

APP = "application_1700000000000_0001"


@pytest.fixture
def fake_rm():
    rm = FakeResourceManager(apps={APP: FakeApp([("RUNNING", "UNDEFINED")])}).start()
    yield rm
    rm.stop()


def _stored(rm: FakeResourceManager) -> dict[int, tuple[str, dict]]:
    return {7: YarnApplicationTrigger(APP, [rm.url], user="alice").serialize()}


def test_a_task_marked_failed_while_deferred_kills_the_application_its_trigger_names(fake_rm, monkeypatch):
    triggers = _stored(fake_rm)
    monkeypatch.setattr(deferred_kill, "_stored_trigger", triggers.get)
    deferred_kill.on_task_instance_failed(previous_state=None, task_instance=SimpleNamespace(trigger_id=7, task_id="train"),
                                          error="marked by a user")
    assert fake_rm.apps[APP].killed_by == "alice"


def test_the_tasks_own_failure_a_task_without_trigger_and_other_triggers_kill_nothing(fake_rm):
    triggers = {**_stored(fake_rm), 8: ("airflow.triggers.temporal.DateTimeTrigger", {})}
    deferred = SimpleNamespace(trigger_id=7, task_id="train")
    assert deferred_kill.kill_deferred_application(SimpleNamespace(task_id="train"), triggers.get) is None
    assert deferred_kill.kill_deferred_application(SimpleNamespace(trigger_id=8), triggers.get) is None
    assert deferred_kill.kill_deferred_application(SimpleNamespace(trigger_id=9), triggers.get) is None  # cleaned up
    deferred_kill.on_task_instance_failed(previous_state="running", task_instance=deferred, error="boom")
    assert fake_rm.apps[APP].killed_by is None  # a run's own failure: the operator's on_kill decides
    assert deferred_kill.kill_deferred_application(deferred, triggers.get) == APP
    assert fake_rm.apps[APP].killed_by == "alice"


def test_an_unreachable_rm_is_logged_not_raised_into_airflows_api_call(caplog):
    triggers = {7: YarnApplicationTrigger(APP, ["http://127.0.0.1:9"], user="alice").serialize()}
    assert deferred_kill.kill_deferred_application(SimpleNamespace(trigger_id=7, task_id="train"), triggers.get) is None
    assert "could not kill application_1700000000000_0001 of the deferred task train" in caplog.text


def test_the_plugin_carries_the_listener():
    from tony_airflow.providers.yarn.plugins import YarnPlugin

    assert deferred_kill in YarnPlugin.listeners
