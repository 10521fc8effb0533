"""The job page's Training section (the AM's live page and the history's page share it), on made-up
`training` dicts of the status JSON's contract and made-up TRAINING events."""

from __future__ import annotations

import asyncio
import json
import math
import xml.etree.ElementTree as ET

from aiohttp.test_utils import TestClient, TestServer

from tests.unit.core.support import SECRET, make_job
from tony_airflow.core.am.master import ApplicationMaster
from tony_airflow.core.history import events as ev
from tony_airflow.core.history.model import JobHistory
from tony_airflow.core.history.render import MAX_PLOTS, Links, render_job, training_view
from tony_airflow.core.history.store import HistoryStore
from tony_airflow.core.history.web import build_app

APP = "application_1700000000000_0052"
TRAINING = {"task": "worker:0", "step": 120, "total_steps": 400, "epoch": 3, "total_epochs": 10,
            "percent": 30.0, "eta_s": 118.0, "metrics": {"loss": 0.214, "accuracy": 0.91},
            "updated": 1795900000.0, "source": "report"}


def running_job(*extra: dict) -> JobHistory:
    events = [{"time": 10.0, "event": ev.JOB_SUBMITTED, "name": "digits", "max_attempts": 2},
              {"time": 11.0, "event": ev.ATTEMPT_STARTED, "attempt": 1, "tasks": ["worker:0"]},
              *extra]
    return JobHistory.from_events(APP, events)


def report(at: float, step: int | None, loss: float, **more) -> dict:
    return {"time": at, "event": ev.TRAINING, **TRAINING, "step": step, "metrics": {"loss": loss}, **more}


def test_the_live_page_shows_the_bar_percent_time_left_metrics_and_a_plot_per_metric():
    series = {"loss": [[s, 1.0 / s] for s in range(1, 121)], "accuracy": [[s, s / 130] for s in range(1, 121)]}
    page = render_job(running_job(), Links(), live=True, training=TRAINING, series=series)
    assert '<progress id="training-bar" max="100" value="30.0">' in page
    assert '<b id="training-line">epoch 3/10 · 30% · ~2 min left · loss 0.214</b>' in page  # as ytf-submit says it
    assert "· step 120/400" in page and "reported by worker:0" in page
    assert '<tr data-metric="loss"><td>loss</td><td class="num">0.214</td></tr>' in page
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" class="metric-plot"') == 2
    assert 'data-metric="accuracy" data-points="120"' in page
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")


def test_no_report_yet_no_training_section():
    page = render_job(running_job(), Links(), live=True)
    assert 'id="training"' not in page and "<h2>Training</h2>" not in page


def test_unknown_percent_is_an_indeterminate_bar_and_odd_fields_are_not_shown():
    view = training_view({"task": "chief:0", "metrics": {"loss": math.nan}, "percent": None, "eta_s": math.inf,
                          "updated": "yesterday", "source": "tensorboard"}, {}, running=True)
    assert view is not None
    assert view["percent"] is None and view["updated"] is None and view["line"] == "loss nan"
    assert view["metrics"] == [("loss", "nan")]
    page = render_job(running_job(), Links(), live=True, training={"task": "chief:0", "percent": None,
                                                                   "metrics": {}, "source": "tensorboard"}, series={})
    assert '<progress id="training-bar"></progress>' in page and '<b id="training-line"></b>' in page
    assert "(from its TensorBoard events)" in page


def test_percent_is_kept_within_0_and_100_and_a_bad_metrics_field_is_ignored():
    view = training_view({**TRAINING, "percent": 250, "metrics": "loss=1"}, None, running=True)
    assert view is not None and view["percent"] == 100.0 and view["metrics"] == []
    view = training_view({**TRAINING, "percent": -3, "eta_s": -5}, None, running=True)
    assert view is not None and view["percent"] == 0.0 and "· ~1 s left ·" in view["line"]


def test_a_finished_job_shows_no_time_left():
    view = training_view(TRAINING, None, running=False)
    assert view is not None and view["line"] == "epoch 3/10 · 30% · loss 0.214" and view["percent"] == 30.0


def test_many_metrics_plot_the_first_ones_and_say_how_many_more():
    series = {f"m{i}": [[1, 1.0], [2, 2.0]] for i in range(MAX_PLOTS + 5)}
    page = render_job(running_job(), Links(training_json="training.json"), live=True,
                      training={**TRAINING, "metrics": {k: 2.0 for k in series}}, series=series)
    assert page.count('class="metric-plot"') == MAX_PLOTS
    assert '5 more metric(s) not plotted: <a href="training.json">all of them (JSON)</a>' in page
    assert '<a href="training.json">training (JSON)</a>' in page  # relative: it works behind YARN's proxy


def test_metric_names_with_markup_are_escaped_on_the_page():
    name = "<img src=x onerror=alert(1)>"
    page = render_job(running_job(), Links(), live=True, training={**TRAINING, "metrics": {name: 1.0}},
                      series={name: [[1, 1.0], [2, 0.5]]})
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_the_history_curves_come_from_the_training_events():
    job = running_job(report(20.0, 10, 0.9), report(30.0, 20, 0.5, percent=5.0),
                      report(40.0, 30, math.nan), report(50.0, 40, 0.3, percent=10.0, eta_s=600.0),
                      {"time": 60.0, "event": ev.JOB_FINISHED, "status": "SUCCEEDED"})
    assert job.training is not None and job.training["percent"] == 10.0 and job.training["step"] == 40
    assert job.training_series == {"loss": [(10, 0.9), (20, 0.5), (30, job.training_series["loss"][2][1]), (40, 0.3)]}
    page = render_job(job, Links())
    assert 'data-metric="loss" data-points="3"' in page and "1 not drawn: not finite" in page
    assert '<b id="training-line">epoch 3/10 · 10% · loss 0.3</b>' in page  # finished: no time left


def test_a_retried_attempt_starts_the_curves_anew_and_steps_fall_back_to_epochs():
    job = running_job(report(20.0, 10, 0.9), report(30.0, 20, 0.5),
                      {"time": 35.0, "event": ev.ATTEMPT_STARTED, "attempt": 2, "tasks": ["worker:0"]},
                      report(40.0, None, 0.8, epoch=1), report(50.0, None, 0.6, epoch=2))
    assert job.training_attempt == 2 and job.training_series == {"loss": [(1, 0.8), (2, 0.6)]}
    job = running_job(report(20.0, None, 0.9, epoch=None), report(30.0, None, 0.7, epoch=None))
    assert job.training_series == {"loss": [(0, 0.9), (1, 0.7)]}  # neither step nor epoch: the order


def test_every_plot_on_the_page_is_well_formed_svg():
    job = running_job(*(report(20.0 + s, s, 1.0 / s) for s in range(1, 600)))
    page = render_job(job, Links())
    start = page.index('<svg xmlns="http://www.w3.org/2000/svg"')
    root = ET.fromstring(page[start:page.index("</svg>", start) + len("</svg>")])
    assert root.get("data-points") == "599"


def test_the_history_server_plots_a_jobs_training_events(tmp_path):
    store = HistoryStore.open(f"file://{tmp_path}/history")
    store.start_job(APP, '{"tasks": {"worker": {}}}')
    events = [{"time": 10.0, "event": ev.JOB_SUBMITTED, "name": "digits"},
              {"time": 11.0, "event": ev.ATTEMPT_STARTED, "attempt": 1, "tasks": ["worker:0"]},
              report(20.0, 10, 0.9), report(30.0, 20, 0.5),
              {"time": 60.0, "event": ev.JOB_FINISHED, "status": "SUCCEEDED"}]
    store.append(APP, [json.dumps(e) for e in events])
    store.finish_job(APP)

    async def scenario() -> tuple[int, str]:
        async with TestClient(TestServer(build_app(store))) as client:
            response = await client.get(f"/jobs/{APP}")
            return response.status, await response.text()

    status, page = asyncio.run(scenario())
    assert status == 200
    assert 'data-metric="loss" data-points="2"' in page and '<progress id="training-bar" max="100" value="30.0">' in page


def test_the_ams_live_page_plots_the_stores_points_and_links_training_json_relatively():
    am = ApplicationMaster(make_job(), SECRET, None, APP, "h")
    am.registry.training.new_attempt(1)
    assert 'id="training"' not in am.live_page()  # nothing reported yet
    for step in range(1, 31):
        assert am.registry.training.receive("worker:0", 1, {"step": step, "total_steps": 60,
                                                            "metrics": {"loss": 1.0 / step, "accuracy": step / 60}}) is None
    page = am.live_page()
    assert '<progress id="training-bar" max="100" value="50.0">' in page and "50%" in page
    assert 'data-metric="loss" data-points="30"' in page and 'data-metric="accuracy" data-points="30"' in page
    assert '<a href="training.json">training (JSON)</a>' in page


def test_history_show_says_the_last_training_line():
    from tony_airflow.core.history.text import job_report

    finished = running_job(report(20.0, 10, 0.9), report(50.0, 40, 0.3, percent=10.0, eta_s=600.0),
                           {"time": 60.0, "event": ev.JOB_FINISHED, "status": "KILLED"})
    assert "training: epoch 3/10 · 10% · loss 0.3 (reported by worker:0)" in job_report(finished).splitlines()
    running = running_job(report(50.0, 40, 0.3, percent=10.0, eta_s=600.0))
    assert "training: epoch 3/10 · 10% · ~10 min left · loss 0.3 (reported by worker:0)" in job_report(running)
    assert "training:" not in job_report(running_job())
