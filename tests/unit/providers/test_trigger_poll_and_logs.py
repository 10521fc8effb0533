"""Triggers share one ResourceManager poll; the chief's output reaches the task log (fake RM, unit level)."""

from __future__ import annotations

import asyncio

import pytest

from tests.unit.airflow_context import task_context
from tests.unit.fake_rm import FakeApp, FakeResourceManager
from tests.unit.providers.test_yarn_provider import RUNNING, _operator, fake_rm  # noqa: F401  (fixture)
from tony_airflow.providers.yarn.triggers.poller import poller_of
from tony_airflow.providers.yarn.triggers.yarn import YarnApplicationTrigger

LOGS_OUTPUT = """LogType:tony-output-worker-0-a1.txt
LogLength:14
LogContents:
epoch 1
done.
End of LogType:tony-output-worker-0-a1.txt
"""


def _ids(n: int) -> list[str]:
    return [f"application_1700000000000_{i:04d}" for i in range(1, n + 1)]


@pytest.mark.parametrize("n", [1, 10, 50, 200])
def test_n_triggers_on_one_rm_cost_one_request_per_round(fake_rm: FakeResourceManager, n):  # noqa: F811
    rounds = 4
    for app_id in _ids(n):
        fake_rm.apps[app_id] = FakeApp([("RUNNING", "UNDEFINED")] * rounds + [("FINISHED", "SUCCEEDED")])
    triggers = [YarnApplicationTrigger(a, [fake_rm.url], poll_interval=0.05) for a in _ids(n)]

    async def run_all() -> tuple[list[dict], int]:
        async def one(t: YarnApplicationTrigger) -> dict:
            async for event in t.run():
                return event.payload
            raise AssertionError("no event")
        tasks = [asyncio.create_task(one(t)) for t in triggers]
        await asyncio.sleep(0.01)
        poller = poller_of(triggers[0].poller_key())
        events = await asyncio.gather(*tasks)
        return events, poller.rounds

    events, polls = asyncio.run(run_all())
    assert [e["status"] for e in events] == ["success"] * n
    lists = sum(1 for m, p in fake_rm.requests if p.startswith("/ws/v1/cluster/apps?"))
    singles = sum(1 for m, p in fake_rm.requests if p.startswith("/ws/v1/cluster/apps/application_"))
    assert lists == polls <= rounds + 2          # one list per round for all N, not one request per trigger
    assert singles == n                          # and one look at each application when it has ended


def test_triggers_of_different_rms_do_not_share(fake_rm: FakeResourceManager):  # noqa: F811
    a = YarnApplicationTrigger(_ids(1)[0], [fake_rm.url], user="alice")
    b = YarnApplicationTrigger(_ids(1)[0], [fake_rm.url], user="bob")
    assert a.poller_key() != b.poller_key()


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


def test_the_operator_ends_with_the_lines_the_trigger_did_not_see(fake_rm, monkeypatch, capsys):  # noqa: F811
    read = []

    def read_logs(app_id, container_id=None, pattern=None, **kw):
        read.append((app_id, container_id, pattern))
        return 0, LOGS_OUTPUT
    monkeypatch.setattr("tony_airflow.yarn.logs.read_logs", read_logs)
    op, _ = _operator(fake_rm, monkeypatch, deferrable=True, stream_logs=True)
    follow = {"task": "worker:0", "attempt": 1, "offset": 8, "container_id": "container_1", "partial": ""}
    event = {"status": "success", "application_id": "application_1700000000000_0001", "final_status": "SUCCEEDED",
             "follow": follow}
    op.execute_complete(task_context(), event)
    logged = _logged(capsys)
    assert "[worker:0] done." in logged and "[worker:0] epoch 1" not in logged
    assert read == [("application_1700000000000_0001", "container_1", r"tony-output-worker-0-a1\.txt")]


def test_the_operator_streams_while_it_waits_in_a_worker(fake_rm, monkeypatch, capsys):  # noqa: F811
    monkeypatch.setattr("tony_airflow.yarn.logs.read_logs", lambda *a, **k: (0, LOGS_OUTPUT))
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
