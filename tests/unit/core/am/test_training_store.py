"""Issue #52: the AM's view of how far the training is (the `training` dict, `/training.json`, the TRAINING
events), and the one line every front end shows of it."""

from __future__ import annotations

import asyncio

import pytest

from tests.unit.core.support import SECRET, make_job, serve, signed
from tony_airflow.core import protocol
from tony_airflow.core.am import server, training
from tony_airflow.core.am.registry import Registry
from tony_airflow.core.am.training import MAX_POINTS, TrainingStore
from tony_airflow.core.presentation import training_line


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _store() -> tuple[TrainingStore, Clock, list]:
    clock, events = Clock(), []
    store = TrainingStore(lambda name, **fields: events.append((name, fields)), clock=clock)
    store.new_attempt(1)
    return store, clock, events


def test_percent_from_steps_eta_from_the_rate_since_the_first_report():
    store, clock, _ = _store()
    assert store.receive("worker:0", 1, {"step": 100, "total_steps": 1000, "metrics": {"loss": 1.0}}) is None
    assert store.training["percent"] == 10.0 and store.training["eta_s"] is None
    clock.now += 10  # 100 steps in 10 s: 800 left
    store.receive("worker:0", 1, {"step": 200, "total_steps": 1000, "epoch": 1, "total_epochs": 5,
                                  "metrics": {"loss": 0.5}})
    t = store.training
    assert (t["task"], t["percent"], t["eta_s"], t["metrics"], t["source"]) == ("worker:0", 20.0, 80.0,
                                                                                 {"loss": 0.5}, "report")
    assert t["updated"] == 1010.0 and t["epoch"] == 1


def test_percent_from_epochs_when_no_total_steps():
    store, _, _ = _store()
    store.receive("worker:0", 1, {"epoch": 3, "total_epochs": 10})
    assert store.training["percent"] == 30.0
    store.receive("worker:0", 1, {"step": 5})
    assert store.training["percent"] is None


def test_the_chief_drives_then_worker_0_then_the_first_reporter():
    store, _, _ = _store()
    store.receive("worker:3", 1, {"step": 1, "metrics": {"loss": 9.0}})
    store.receive("worker:2", 1, {"step": 50})
    assert store.training["task"] == "worker:3"
    store.receive("worker:0", 1, {"step": 2, "metrics": {"loss": 3.0}})
    assert store.training["task"] == "worker:0"
    assert store.series == {"loss": [[2, 3.0]]}  # the new driver's own curves
    store.receive("chief:0", 1, {"step": 3})
    store.receive("worker:0", 1, {"step": 4})
    assert store.training["task"] == "chief:0" and store.training["step"] == 3


def test_series_keep_at_most_500_points_with_the_first_and_last():
    store, _, _ = _store()
    for step in range(2000):
        store.receive("chief:0", 1, {"step": step, "metrics": {"loss": 1.0 / (step + 1)}})
    points = store.series["loss"]
    assert len(points) <= MAX_POINTS
    assert points[0] == [0, 1.0] and points[-1][0] == 1999
    assert [p[0] for p in points] == sorted(p[0] for p in points)


def test_metric_names_that_change_every_report_keep_a_bounded_number_of_curves():
    """A review: a program whose metric names change (`loss_epoch_{n}`) added a curve per report without bound."""
    store, clock, _ = _store()
    for step in range(2000):
        clock.now += 1
        store.receive("chief:0", 1, {"step": step, "metrics": {f"loss_epoch_{step}": 1.0, "loss": 0.5}})
    assert len(store.series) <= training.MAX_SERIES and "loss" in store.series
    assert store.training is not None and "loss_epoch_1999" in store.training["metrics"]


def test_bad_reports_are_counted_not_taken():
    store, _, _ = _store()
    assert store.receive("worker:0", 1, [1, 2])
    assert store.receive("worker:0", 1, {"step": -1})
    assert store.receive("worker:0", 1, {"step": "x"})
    assert store.receive("worker:0", 1, {"metrics": [1]})
    assert store.refused["bad_report"] == 4 and store.training is None
    assert store.receive("worker:0", 2, {"step": 1})  # another attempt's
    store.count_refused({"bad_token": 2, "flood": 5, "nonsense": 3, "too_large": -1, "bad_json": True})
    assert (store.refused["bad_token"], store.refused["flood"], store.refused["too_large"],
            store.refused["bad_json"]) == (2, 5, 0, 0)


def test_metrics_that_are_not_numbers_are_left_out():
    store, _, _ = _store()
    store.receive("worker:0", 1, {"metrics": {"loss": "nan", "acc": float("inf"), "x" * 65: 1, "ok": 2, "b": True}})
    assert store.training["metrics"] == {"ok": 2.0}


def test_training_events_at_most_every_10_s_and_the_last_one_flushed():
    store, clock, events = _store()
    for _ in range(30):
        store.receive("worker:0", 1, {"step": int(clock.now), "total_steps": 5000})
        clock.now += 1
    assert [e[0] for e in events] == ["TRAINING"] * 3
    assert events[0][1]["attempt"] == 1 and events[0][1]["task"] == "worker:0"
    store.flush_event()
    assert len(events) == 4 and events[-1][1]["step"] == 1029
    store.flush_event()
    assert len(events) == 4  # nothing new


def test_a_new_attempt_starts_over():
    store, _, _ = _store()
    store.receive("worker:0", 1, {"step": 3, "metrics": {"loss": 1.0}})
    store.new_attempt(2)
    assert store.page() == {"training": None, "series": {}}


@pytest.mark.parametrize("report,line", [
    (None, ""),
    ({"epoch": 3, "total_epochs": 10, "percent": 30.6, "eta_s": 118.0, "metrics": {"loss": 0.2143, "accuracy": 0.9}},
     "epoch 3/10 · 31% · ~2 min left · loss 0.214"),
    ({"step": 120, "total_steps": None, "percent": None, "eta_s": None, "metrics": {}}, "step 120"),
    ({"step": 12, "total_steps": 40, "percent": 30.0, "eta_s": 12.4, "metrics": {"acc": 0.5}},
     "step 12/40 · 30% · ~12 s left · acc 0.5"),
    ({"epoch": 1, "percent": 100.0, "eta_s": 0.0, "metrics": {"loss": 12345.6}}, "epoch 1 · 100% · loss 12346"),
    ({"percent": 5.0, "eta_s": 3 * 3600 + 600, "metrics": {}}, "5% · ~3 h 10 min left"),
])
def test_training_line(report, line):
    assert training_line(report) == line


def test_the_am_serves_training_on_its_pages_and_counts_refusals():
    async def scenario():
        reg = Registry(make_job("chief:1,worker:1"), "app_1")
        reg.new_attempt(1)
        client = await serve(server.build_app(reg, SECRET))
        try:
            async def send(payload):
                body, headers = signed("POST", protocol.TRAINING, payload)
                return await client.post(protocol.TRAINING, data=body, headers=headers)

            ident = {"type": "chief", "index": 0, "attempt": 1}
            assert (await send({**ident, "report": {"step": 5, "total_steps": 10, "metrics": {"loss": 0.3}},
                                "refused": {"flood": 7}})).status == 200
            assert (await send({**ident, "attempt": 9, "report": {"step": 1}})).status == 409
            assert (await send({**ident, "report": {"step": "x"}})).status == 409
            assert (await send({"type": "chief"})).status == 400
            status = await (await client.get(protocol.STATUS_JSON)).json()
            progress = await (await client.get(protocol.PROGRESS_JSON)).json()
            page = await (await client.get(protocol.TRAINING_JSON)).json()
        finally:
            await client.close()
        assert status["training"]["percent"] == 50.0 and status["training"]["task"] == "chief:0"
        assert status["training_refused"] == {**{k: 0 for k in training.REFUSAL_KINDS}, "flood": 7, "bad_report": 1}
        assert progress["training"] == status["training"]
        assert protocol.progress_page(progress)[0].training == status["training"]
        assert page["series"] == {"loss": [[5, 0.3]]}

    asyncio.run(scenario())
