"""TensorBoard, reached from the application's YARN tracking URL in a real headless browser."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.browser import ARTIFACTS, DEEP_TEXT, chromium, screenshot
from tony_airflow.yarn.hdfs import webhdfs

pytest.importorskip("tensorflow")


def test_tensorboard_from_the_tracking_url(local_cluster, rm, tmp_path):
    out = "/tmp/e2e/tensorboard"
    cmd = [str(Path(sys.executable).parent / "ytf-submit"), "-r", "worker:1", "-t", "-o", f"hdfs://{out}",
           "-n", "tensorboard-e2e", "python3 -m tony_airflow.examples.digits_keras --epochs 60 --sleep-per-epoch 1"]
    # 60 epochs: the job must outlive the test's look at each page (the test kills it); on a loaded machine
    # 30 had ended before the TensorBoard part (an epoch took ~10 s)
    submit = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    browser = None
    try:
        first = submit.stdout.readline()
        app_id = first.split()[-1]
        assert app_id.startswith("application_"), first
        printed = [submit.stdout.readline(), submit.stdout.readline()]
        assert printed[1].startswith("TensorBoard: http") and "/pages/tensorboard/" in printed[1], printed
        fs = webhdfs()
        deadline = time.monotonic() + 240
        while not any("tfevents" in f for f in (fs.find(out) if fs.exists(out) else [])):
            assert time.monotonic() < deadline, "no TensorBoard events reached HDFS"
            time.sleep(1)
        tracking = rm.application(app_id).tracking_url  # as the ResourceManager reports it
        assert "/proxy/" + app_id in tracking
        tags_url = tracking.rstrip("/") + "/pages/tensorboard/data/plugin/scalars/tags"
        while "epoch_loss" not in httpx.get(tags_url, timeout=30).text:  # TensorBoard has read a loss
            assert time.monotonic() < deadline, "TensorBoard never reported the loss tag"
            time.sleep(2)

        browser = chromium(tmp_path)
        browser.get(tracking + "pages/tony/")  # the AM's own job page, through the tracking URL
        deadline = time.monotonic() + 60
        while "worker:0" not in browser.execute_script(DEEP_TEXT):
            assert time.monotonic() < deadline, "the AM's page never named worker:0"
            time.sleep(1)
            browser.refresh()
        # #52: the program's reports on the page, while it runs: bar, percent, time left, loss, its curve
        plotted = wait_for_training(browser, "the AM's page", time_left=True)
        assert plotted >= 2, plotted
        training_json = httpx.get(tracking.rstrip("/") + "/pages/tony/training.json", timeout=30).json()
        assert training_json["training"]["task"] == "worker:0" and len(training_json["series"]["loss"]) >= 2
        screenshot(browser, "am-job-page")
        browser.get(tracking)
        browser.find_element("partial link text", "Service Pages").click()  # skein's dropdown
        time.sleep(0.5)
        browser.find_element("link text", "TensorBoard").click()
        browser.switch_to.window(browser.window_handles[-1])
        deadline = time.monotonic() + 60
        while "/pages/tensorboard/" not in browser.current_url:
            assert time.monotonic() < deadline, browser.current_url
            time.sleep(0.5)
        # The Scalars dashboard reads with GET; the RM proxy refuses the POSTs of Time Series.
        browser.get(browser.current_url.split("#")[0] + "#scalars")
        deadline = time.monotonic() + 120
        reload_at = time.monotonic() + 15
        text = ""
        while "epoch_loss" not in text:
            if time.monotonic() > deadline:
                ARTIFACTS.mkdir(exist_ok=True)
                browser.save_screenshot(str(ARTIFACTS / "tensorboard-failed.png"))
                raise AssertionError(f"no loss scalar in TensorBoard; saw: {text[-300:]}")
            time.sleep(2)
            text = browser.execute_script(DEEP_TEXT)
            if "epoch_loss" not in text and time.monotonic() > reload_at:
                browser.refresh()
                reload_at = time.monotonic() + 15
        assert "/pages/tensorboard/" in browser.current_url
        # the loss curve's data came through the tracking URL (not a spinner)
        deadline = time.monotonic() + 60
        statuses: list = []
        while not statuses or 200 not in statuses:
            assert time.monotonic() < deadline, f"scalar data requests failed: {statuses}"
            time.sleep(1)
            statuses = browser.execute_script(
                "return performance.getEntriesByType('resource')"
                ".filter(e => e.name.includes('/data/plugin/scalars/scalars')).map(e => e.responseStatus)")
        assert set(statuses) == {200}, statuses
        time.sleep(3)
        screenshot(browser, "tensorboard")
        # HParams posts JSON: through the tracking URL it must arrive as JSON (issue #15, item 11)
        browser.get(browser.current_url.split("#")[0] + "#hparams")
        deadline = time.monotonic() + 90
        text = ""
        while "learning_rate" not in text:
            if time.monotonic() > deadline:
                browser.save_screenshot(str(ARTIFACTS / "tensorboard-hparams-failed.png"))
                raise AssertionError(f"no hparams in TensorBoard; saw: {text[-300:]}")
            time.sleep(2)
            text = browser.execute_script(DEEP_TEXT)
        statuses = browser.execute_script(
            "return performance.getEntriesByType('resource')"
            ".filter(e => e.name.includes('/data/plugin/hparams/')).map(e => e.responseStatus)")
        assert statuses and set(statuses) == {200}, statuses
        browser.save_screenshot(str(ARTIFACTS / "tensorboard-hparams.png"))
    finally:
        if browser is not None:
            browser.quit()
        # stop the job: TensorBoard must go with it
        if submit.poll() is None:
            subprocess.run([str(Path(sys.executable).parent / "tony"), "kill", app_id], timeout=60)
            submit.wait(timeout=120)
    assert rm.application(app_id).state in ("KILLED", "FINISHED")
    history_page_plots_the_training(app_id, tmp_path)


def wait_for_training(browser, page: str, time_left: bool) -> int:
    """Wait (reloading the page, as it reloads itself) until its Training section shows a percent, a loss
    and a curve of the loss; the loss curve's number of points."""
    from selenium.webdriver.common.by import By

    deadline = time.monotonic() + 120
    while True:
        bars = browser.find_elements(By.ID, "training-bar")
        plots = browser.find_elements(By.CSS_SELECTOR, 'svg.metric-plot[data-metric="loss"]')
        line = browser.find_element(By.ID, "training-line").text if bars else ""
        points = int(plots[0].get_attribute("data-points")) if plots else 0
        if bars and bars[0].get_attribute("value") and "%" in line and "loss" in line and points >= 2 and (
                not time_left or "left" in line):
            break
        assert time.monotonic() < deadline, f"{page} never showed the training's progress: {line!r}, {points}"
        time.sleep(2)
        browser.refresh()
    assert 0 < float(bars[0].get_attribute("value")) <= 100
    assert browser.find_element(By.CSS_SELECTOR, '#training-metrics tr[data-metric="loss"]')
    assert not browser.find_elements(By.TAG_NAME, "script")  # server-drawn: nothing to fetch or run
    return points


def history_page_plots_the_training(app_id: str, tmp_path: Path) -> None:
    """The history's job page of the same (killed) job draws the curves from its TRAINING events."""
    server = subprocess.Popen([str(Path(sys.executable).parent / "tony"), "history", "serve", "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    browser = None
    try:
        line = server.stdout.readline()
        assert line.startswith("History server: http"), line + server.stderr.read()
        (tmp_path / "history").mkdir()
        browser = chromium(tmp_path / "history")
        browser.get(line.split()[-1].rstrip("/") + f"/jobs/{app_id}")
        assert wait_for_training(browser, "the history's page", time_left=False) >= 2
        assert "left" not in browser.find_element("id", "training-line").text  # it ended: no time left
        assert screenshot(browser, "history-job-training").stat().st_size > 10_000
    finally:
        if browser is not None:
            browser.quit()
        server.terminate()
        server.wait(timeout=30)
