"""Issue #52 item 3 in Airflow and Azkaban: the deferred task's log shows how far the training is; the
operator's XCom, the OpenLineage facet, the asset event and Azkaban's output properties carry the final
numbers with the application id."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from types import SimpleNamespace

from tests.unit.airflow_context import task_context
from tests.unit.fake_rm import FakeApp, FakeResourceManager
from tests.unit.providers.test_yarn_provider import RUNNING, _operator, fake_rm  # noqa: F401  (fixture)
from tony_airflow.core.history.model import JobHistory
from tony_airflow.core.presentation import TRAINING_LINE_EVERY_S
from tony_airflow.core.protocol import Progress
from tony_airflow.providers.yarn.training import ProgressLines
from tony_airflow.providers.yarn.triggers.yarn import YarnApplicationTrigger
from tony_airflow.yarn.rest import ApplicationReport

APP = "application_1700000000000_0001"
BASE = {"attempt": 1, "max_attempts": 1, "total": 2, "allocated": 2, "registered": 2, "running": 2,
        "spec_published": True}


def _training(step: int, loss: float) -> dict:
    return {"task": "worker:0", "step": step, "total_steps": 400, "epoch": None, "total_epochs": None,
            "percent": step / 4, "eta_s": 118.0, "metrics": {"loss": loss}, "updated": 1.0, "source": "report"}


def _report(state: str = "RUNNING") -> ApplicationReport:
    return ApplicationReport.from_json({"id": APP, "state": state, "finalStatus": "UNDEFINED",
                                        "trackingUrl": f"http://rm/proxy/{APP}/"})


def test_a_phase_change_is_logged_at_once_the_training_s_numbers_alone_at_most_every_few_seconds():
    lines = ProgressLines()
    running = Progress(**BASE)
    first = lines.line(APP, _report(), running, now=0.0)
    assert first is not None and "·" in first
    assert lines.line(APP, _report(), Progress(**BASE, training=_training(120, 0.5)), now=0.1) is None  # too soon
    later = lines.line(APP, _report(), Progress(**BASE, training=_training(130, 0.4)), now=TRAINING_LINE_EVERY_S)
    assert later is not None and "step 130/400 · 32%" in later and "loss 0.4" in later
    notice = Progress(**{**BASE, "notice": "worker:1 lost"}, training=_training(131, 0.4))
    assert "worker:1 lost" in (lines.line(APP, _report(), notice, now=TRAINING_LINE_EVERY_S + 0.1) or "")
    assert lines.training is not None and lines.training["step"] == 131  # the newest numbers seen, logged or not


def test_the_deferred_task_logs_the_training_and_its_event_carries_the_last_numbers(fake_rm: FakeResourceManager,  # noqa: F811
                                                                                      capsys):
    fake_rm.apps[APP] = FakeApp([("RUNNING", "UNDEFINED")] * 5 + [("FINISHED", "SUCCEEDED")])
    fake_rm.progress[APP] = [{**BASE, "training": _training(100, 0.9)}, {**BASE, "training": _training(400, 0.2)}]
    trigger = YarnApplicationTrigger(APP, [fake_rm.url], poll_interval=0.05)

    async def collect() -> list[dict]:
        return [e.payload async for e in trigger.run()]

    events = asyncio.run(collect())
    logged = capsys.readouterr()
    text = logged.out + logged.err
    assert "25% · ~2 min left · loss 0.9" in text  # training_line's words, in the task log
    assert events[0]["training"]["step"] == 400 and events[0]["training"]["metrics"] == {"loss": 0.2}


def _history(*events: dict) -> JobHistory:
    return JobHistory.from_events(APP, [{"event": "JOB_STARTED", "time": 0.0}, *events])


def test_the_operator_pushes_the_final_numbers_from_the_history_with_the_application_id(fake_rm, monkeypatch):  # noqa: F811
    from airflow.sdk import Asset

    model = Asset(name="model", uri="hdfs:///models/m")
    op, _ = _operator(fake_rm, monkeypatch, outlets=[model])
    final = {"event": "TRAINING", "time": 5.0, "attempt": 1, **_training(400, 0.214), "percent": 100.0, "eta_s": 0.0}
    monkeypatch.setattr(type(op), "_history", lambda self, app_id: _history({"event": "TRAINING", "time": 1.0,
                                                                            **_training(10, 0.9)}, final))
    ctx = task_context()
    ctx["outlet_events"] = defaultdict(lambda: SimpleNamespace(extra={}))
    op.execute(ctx)
    pushed = ctx["ti"].xcoms["training"]
    assert pushed["application_id"] == APP and pushed["metrics"] == {"loss": 0.214} and pushed["step"] == 400
    assert ctx["outlet_events"][model].extra["training"] == pushed
    facets = op.get_openlineage_facets_on_complete(None)
    facet = facets.run_facets["tonyTraining"]
    assert (facet.applicationId, facet.metrics, facet.totalSteps) == (APP, {"loss": 0.214}, 400)
    from openlineage.client.serde import Serde

    assert json.loads(Serde.to_json(facet))["metrics"] == {"loss": 0.214}


def test_a_resumed_operator_takes_the_trigger_s_last_numbers_when_the_history_cannot_be_read(fake_rm, monkeypatch,  # noqa: F811
                                                                                          capsys):
    op, _ = _operator(fake_rm, monkeypatch, stream_logs=False)
    monkeypatch.setattr(type(op), "_history", lambda self, app_id: None)
    ctx = task_context()
    event = {"status": "success", "application_id": APP, "final_status": "SUCCEEDED", "diagnostics": "",
             "training": _training(380, 0.3)}
    fake_rm.apps[APP] = FakeApp([("FINISHED", "SUCCEEDED")])
    op.execute_complete(ctx, event)
    assert ctx["ti"].xcoms["training"]["step"] == 380
    logged = capsys.readouterr()
    assert f"{APP} training: step 380/400 · 95%" in logged.out + logged.err


def test_a_program_that_never_reported_leaves_no_training_xcom(fake_rm, monkeypatch):  # noqa: F811
    op, _ = _operator(fake_rm, monkeypatch)
    monkeypatch.setattr(type(op), "_history", lambda self, app_id: _history())
    ctx = task_context()
    op.execute(ctx)
    assert "training" not in ctx["ti"].xcoms
    assert "tonyTraining" not in (op.get_openlineage_facets_on_complete(None).run_facets or {})


def test_azkaban_s_output_properties_carry_the_final_numbers(tmp_path, monkeypatch):
    from tony_airflow.core.runner import Outcome
    from tony_airflow.engines import azkaban

    out = tmp_path / "out.json"
    outcome = Outcome(APP, "SUCCEEDED", tracking_url="http://rm/proxy/a/")
    azkaban.write_output_props(str(out), outcome, {**_training(400, 0.214), "percent": 100.0})
    props = json.loads(out.read_text())
    assert props["application_id"] == APP and props["final_status"] == "SUCCEEDED"
    assert (props["training_step"], props["training_percent"], props["metric_loss"]) == ("400", "100.0", "0.214")
    azkaban.write_output_props(str(out), outcome, None)  # never reported: the four values only
    assert set(json.loads(out.read_text())) == {"application_id", "tracking_url", "tensorboard_url", "final_status"}
    monkeypatch.setattr("tony_airflow.core.history.store.HistoryStore.open",
                        lambda uri=None: (_ for _ in ()).throw(OSError("HDFS away")))
    assert azkaban.final_training_of(APP, None) is None
