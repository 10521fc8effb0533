"""Triggers share one ResourceManager poll; the chief's output reaches the task log (fake RM, unit level)."""

from __future__ import annotations

import asyncio

import pytest

from tests.unit.airflow_context import task_context
from tests.unit.fake_rm import FakeApp, FakeResourceManager
from tests.unit.providers.test_yarn_provider import RUNNING, _operator, fake_rm  # noqa: F401  (fixture)
from tony_airflow.providers.yarn.triggers.yarn import MAX_CONSECUTIVE_ERRORS, YarnApplicationTrigger

LOGS_OUTPUT = """LogType:tony-output-worker-0-a1.txt
LogLength:14
LogContents:
epoch 1
done.
End of LogType:tony-output-worker-0-a1.txt
"""


def _ids(n: int) -> list[str]:
    return [f"application_1700000000000_{i:04d}" for i in range(1, n + 1)]


async def _through_airflows_shared_streams(triggers: list[YarnApplicationTrigger]) -> list[dict]:
    """What Airflow's triggerer does with triggers that declare a shared stream key: one poll per key,
    each trigger's own filter over it."""
    from airflow.triggers.shared_stream import SharedStreamManager

    manager = SharedStreamManager()

    async def one(i: int, t: YarnApplicationTrigger) -> dict:
        key = t.shared_stream_key()
        try:
            async for event in t.filter_shared_stream(manager.subscribe(trigger_id=i, trigger=t, key=key)):
                return event.payload
        finally:
            await manager.unsubscribe(i, key)
        raise AssertionError("no event")

    try:
        return list(await asyncio.gather(*(one(i, t) for i, t in enumerate(triggers))))
    finally:
        await manager.stop_all()


@pytest.mark.parametrize("n", [1, 10, 50, 200])
def test_n_triggers_on_one_rm_cost_two_requests_per_round(fake_rm: FakeResourceManager, n):  # noqa: F811
    rounds = 4
    for app_id in _ids(n):
        fake_rm.apps[app_id] = FakeApp([("RUNNING", "UNDEFINED")] * rounds + [("FINISHED", "SUCCEEDED")],
                                       tags="tony-airflow")
    triggers = [YarnApplicationTrigger(a, [fake_rm.url], poll_interval=0.05) for a in _ids(n)]
    events = asyncio.run(_through_airflows_shared_streams(triggers))
    assert [e["status"] for e in events] == ["success"] * n
    lists = [p for m, p in fake_rm.requests if p.startswith("/ws/v1/cluster/apps?")]
    singles = [p for m, p in fake_rm.requests if p.startswith("/ws/v1/cluster/apps/application_")]
    assert len(lists) <= 2 * (rounds + 2) and not singles  # one poll for all N, not a request per trigger
    assert all("applicationTags=tony-airflow" in p for p in lists)  # this project's applications only


def test_an_application_of_another_tool_is_asked_for_by_its_own_trigger(fake_rm: FakeResourceManager):  # noqa: F811
    fake_rm.apps[_ids(1)[0]] = FakeApp([("RUNNING", "UNDEFINED"), ("FINISHED", "SUCCEEDED")], tags="spark")
    events = asyncio.run(_through_airflows_shared_streams([YarnApplicationTrigger(_ids(1)[0], [fake_rm.url],
                                                                                  poll_interval=0.05)]))
    assert events[0]["status"] == "success"
    assert any(p.startswith(f"/ws/v1/cluster/apps/{_ids(1)[0]}") for _, p in fake_rm.requests)


def test_triggers_share_a_poll_only_with_the_same_rm_credentials_and_interval(fake_rm: FakeResourceManager):  # noqa: F811
    a = YarnApplicationTrigger(_ids(1)[0], [fake_rm.url], user="alice")
    assert a.shared_stream_key() == YarnApplicationTrigger(_ids(2)[1], [fake_rm.url], user="alice").shared_stream_key()
    assert a.shared_stream_key() != YarnApplicationTrigger(_ids(1)[0], [fake_rm.url], user="bob").shared_stream_key()
    slow = YarnApplicationTrigger(_ids(1)[0], [fake_rm.url], user="alice", poll_interval=60)
    assert a.shared_stream_key() != slow.shared_stream_key()  # a 60 s trigger never lives on 5 s rounds


def test_each_trigger_spends_its_own_error_budget(fake_rm: FakeResourceManager):  # noqa: F811
    fake_rm.apps[_ids(1)[0]] = FakeApp([("RUNNING", "UNDEFINED")], tags="tony-airflow")
    fake_rm.fail_with = 503
    events = asyncio.run(_through_airflows_shared_streams([YarnApplicationTrigger(_ids(1)[0], [fake_rm.url],
                                                                                  poll_interval=0.05)]))
    assert events[0]["status"] == "error" and "cannot watch" in events[0]["message"]
    lists = [p for m, p in fake_rm.requests if p.startswith("/ws/v1/cluster/apps?")]
    assert len(lists) <= MAX_CONSECUTIVE_ERRORS + 1  # one failed request per round, three rounds


def _logged(capsys) -> str:
    """What Airflow's logging wrote (structlog, to the console)."""
    out = capsys.readouterr()
    return out.out + out.err


def test_a_trigger_streams_the_chiefs_lines_into_the_task_log(fake_rm: FakeResourceManager, capsys):  # noqa: F811
    app_id = _ids(1)[0]
    fake_rm.apps[app_id] = FakeApp([("RUNNING", "UNDEFINED")] * 3 + [("FINISHED", "SUCCEEDED")])
    fake_rm.outputs[app_id] = "epoch 1\nepo"
    trigger = YarnApplicationTrigger(app_id, [fake_rm.url], poll_interval=0.05, stream_logs=True)

    async def collect() -> list[dict]:
        return [e.payload async for e in trigger.run()]

    events = asyncio.run(collect())
    assert "[worker:0] epoch 1" in _logged(capsys)
    follow = events[0]["follow"]
    assert follow["task"] == "worker:0" and follow["offset"] == 11 and follow["partial"] == "epo"
    assert follow["container_id"] == "container_1"


def test_a_deferred_task_logs_the_ams_progress_and_an_elastic_replacement(fake_rm: FakeResourceManager,  # noqa: F811
                                                                          capsys):
    """What the worker-mode operator logs (the gang's phase, an elastic job's lost and replaced worker) reaches
    the log of a deferred task too: the trigger reads the AM's progress page, one request per round."""
    app_id = _ids(1)[0]
    rounds = 6
    fake_rm.apps[app_id] = FakeApp([("RUNNING", "UNDEFINED")] * rounds + [("FINISHED", "SUCCEEDED")])
    base = {"attempt": 1, "max_attempts": 1, "total": 3, "allocated": 3, "registered": 3, "running": 3,
            "spec_published": True}
    lost = "worker:1 lost on h2 (container container_3, exit code 137)"
    fake_rm.progress[app_id] = [
        {**base, "allocated": 1, "registered": 0, "running": 0, "spec_published": False},
        base, base,
        {**base, "notice": f"{lost}: replacing it"},
        {**base, "notice": f"{lost}; replaced on h3 (container container_5) after 8.6s"},
    ]
    trigger = YarnApplicationTrigger(app_id, [fake_rm.url], poll_interval=0.05)

    async def collect() -> list[dict]:
        return [e.payload async for e in trigger.run()]

    assert asyncio.run(collect())[0]["status"] == "success"
    logged = _logged(capsys)
    assert f"{app_id} RUNNING · attempt 1/1 · allocated 1/3" in logged
    assert logged.count(f"{app_id} RUNNING · attempt 1/1 · running [") == 1  # once per change, not per round
    assert f"running · {lost}: replacing it" in logged
    assert f"running · {lost}; replaced on h3 (container container_5) after 8.6s" in logged
    pages = [p for _, p in fake_rm.requests if p.endswith("/progress.json")]
    assert 0 < len(pages) <= rounds + 1


def test_a_trigger_without_the_ams_page_still_ends(fake_rm: FakeResourceManager, capsys):  # noqa: F811
    """Another tool's application, or an AM not serving yet: no progress line, the same event."""
    app_id = _ids(1)[0]
    fake_rm.apps[app_id] = FakeApp([("RUNNING", "UNDEFINED")] * 2 + [("FINISHED", "SUCCEEDED")])
    trigger = YarnApplicationTrigger(app_id, [fake_rm.url], poll_interval=0.05)

    async def collect() -> list[dict]:
        return [e.payload async for e in trigger.run()]

    assert asyncio.run(collect())[0]["status"] == "success"
    assert "· attempt" not in _logged(capsys)


def test_the_operator_ends_with_the_lines_the_trigger_did_not_see(fake_rm, monkeypatch, capsys):  # noqa: F811
    read = []

    def log_lines(app_id, container_id=None, pattern=None, **kw):
        read.append((app_id, container_id, pattern))
        return iter(LOGS_OUTPUT.splitlines(keepends=True))
    monkeypatch.setattr("tony_airflow.yarn.logs.log_lines", log_lines)
    op, _ = _operator(fake_rm, monkeypatch, deferrable=True, stream_logs=True)
    follow = {"task": "worker:0", "attempt": 1, "offset": 8, "container_id": "container_1", "partial": ""}
    event = {"status": "success", "application_id": "application_1700000000000_0001", "final_status": "SUCCEEDED",
             "follow": follow}
    op.execute_complete(task_context(), event)
    logged = _logged(capsys)
    assert "[worker:0] done." in logged and "[worker:0] epoch 1" not in logged
    assert read == [("application_1700000000000_0001", None, r"tony-output-worker-0-a\d+\.txt")]


def test_the_operator_shows_every_line_of_a_job_that_ended_before_its_trigger_saw_any(
        fake_rm, monkeypatch, capsys):  # noqa: F811
    """Issue #51 item 9: a 4-second job ran between two of the trigger's polls; its lines never reached the
    task log because the follower knew no attempt of any task."""
    read = []

    def log_lines(app_id, container_id=None, pattern=None, **kw):
        read.append(pattern)
        return iter(LOGS_OUTPUT.splitlines(keepends=True))
    monkeypatch.setattr("tony_airflow.yarn.logs.log_lines", log_lines)
    op, _ = _operator(fake_rm, monkeypatch, deferrable=True, stream_logs=True)
    event = {"status": "success", "application_id": "application_1700000000000_0001", "final_status": "SUCCEEDED",
             "follow": {"task": "", "attempt": 0, "offset": 0, "container_id": "", "partial": "", "finished": False}}
    op.execute_complete(task_context(), event)
    logged = _logged(capsys)
    assert "[worker:0] epoch 1" in logged and "[worker:0] done." in logged
    assert read == [r"tony-output-.*\.txt"]


def test_the_operator_streams_while_it_waits_in_a_worker(fake_rm, monkeypatch, capsys):  # noqa: F811
    monkeypatch.setattr("tony_airflow.yarn.logs.log_lines", lambda *a, **k: iter(LOGS_OUTPUT.splitlines(True)))
    op, _ = _operator(fake_rm, monkeypatch, stream_logs=True, states=RUNNING * 3 + [("FINISHED", "SUCCEEDED")])
    fake_rm.outputs["application_1700000000000_0001"] = "epoch 1\n"
    op.execute(task_context())
    logged = _logged(capsys)
    assert logged.count("[worker:0] epoch 1") == 1 and "[worker:0] done." in logged  # streamed once, rest at the end


# --------------------------------------------------- reconnect before defer (retries, clear, triggerer moves)
@pytest.mark.parametrize("prior, submits", [([("RUNNING", "UNDEFINED")], 0), ([("FINISHED", "FAILED")], 1)])
def test_a_deferrable_retry_decides_reconnect_or_submit_before_it_defers(fake_rm, monkeypatch, prior,  # noqa: F811
                                                                         submits):
    from airflow.sdk.exceptions import TaskDeferred

    from tests.unit.airflow_context import DictStore
    from tests.unit.providers.test_yarn_provider import APP
    from tony_airflow.providers.yarn.operators.tensorflow import TensorFlowOnYarnOperator

    fake_rm.apps[APP] = FakeApp(prior)
    op, client = _operator(fake_rm, monkeypatch, deferrable=True)
    store = DictStore(**{TensorFlowOnYarnOperator.external_id_key: APP})
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(task_context(store))
    assert len(client.submitted) == submits  # never a second job for a running one
    watched = deferred.value.trigger.application_id
    assert watched == (APP if submits == 0 else "application_1700000000000_0001")
    assert store.get(TensorFlowOnYarnOperator.external_id_key) == watched  # stored before deferring


def test_a_trigger_removed_from_its_triggerer_leaves_the_application_alone(fake_rm):  # noqa: F811
    """cleanup() runs when the trigger moves to another triggerer (or the triggerer stops): no kill;
    on_kill() runs when a user clears or marks the deferred task: kill."""
    app_id = _ids(1)[0]
    fake_rm.apps[app_id] = FakeApp([("RUNNING", "UNDEFINED")])
    trigger = YarnApplicationTrigger(app_id, [fake_rm.url])
    asyncio.run(trigger.cleanup())
    assert fake_rm.count("PUT") == 0
    asyncio.run(trigger.on_kill())
    assert fake_rm.count("PUT") == 1 and fake_rm.apps[app_id].killed_by is not None


def test_an_end_seen_right_after_deferring_is_held_until_the_deferral_has_settled(fake_rm):  # noqa: F811
    """Airflow 3.3's scheduler fails a deferred task whose trigger fires before it has processed the
    executor's report of the deferring process (apache/airflow#67287, #72716: "state mismatch", the try
    up for retry with no history of it). A job that failed at once did that in a fresh-clone run: its
    first try's log was gone from the API. So an end is told only from `not_before` on, a time the
    operator and the sensor set at deferral; the event is the same."""
    import time

    from tony_airflow.providers.yarn.connection import YarnSettings
    from tony_airflow.providers.yarn.triggers.yarn import DEFER_SETTLE_S

    app_id = _ids(1)[0]
    fake_rm.apps[app_id] = FakeApp([("FINISHED", "FAILED")])
    made = time.time()
    trigger = YarnApplicationTrigger.for_settings(YarnSettings(rm_addresses=[fake_rm.url]), app_id, 0.05)
    assert trigger.serialize()[1]["not_before"] >= made + DEFER_SETTLE_S  # it travels to the triggerer
    trigger.not_before = time.time() + 0.5

    async def first() -> tuple[float, dict]:
        async for event in trigger.run():
            return time.time(), event.payload
        raise AssertionError("no event")

    told, payload = asyncio.run(first())
    assert told >= trigger.not_before and payload["status"] == "failed"
    unbounded = YarnApplicationTrigger(app_id, [fake_rm.url], poll_interval=0.05)  # a trigger of an older release
    assert unbounded.not_before is None and asyncio.run(anext(unbounded.run())).payload["status"] == "failed"


def test_an_error_seen_right_after_deferring_is_held_until_the_deferral_has_settled(fake_rm):  # noqa: F811
    """The same race for the error event (the RM failing three rounds in a row within the first seconds)."""
    import time

    app_id = _ids(1)[0]
    fake_rm.fail_with = 500
    trigger = YarnApplicationTrigger(app_id, [fake_rm.url], poll_interval=0.05, not_before=time.time() + 0.5)

    async def first() -> tuple[float, dict]:
        async for event in trigger.run():
            return time.time(), event.payload
        raise AssertionError("no event")

    told, payload = asyncio.run(first())
    assert told >= trigger.not_before and payload["status"] == "error"
