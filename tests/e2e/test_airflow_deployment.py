"""The provider in a real Airflow deployment (scheduler, dag-processor, triggerer, api-server; LocalExecutor,
SQLite) on the real local YARN + HDFS, driven through Airflow's REST API as a user's tooling would."""

from __future__ import annotations

import json
import re
import statistics
import time
from datetime import datetime
from urllib.parse import quote

from tests.e2e.browser import DEEP_TEXT, chromium, screenshot
from tests.e2e.helpers import record, wait_terminal

PIPELINE = "tony_pipeline"
EVALUATION = "tony_model_evaluation"


def test_the_example_pipeline_defers_streams_its_training_and_feeds_the_model_asset(airflow_deployment, rm,
                                                                                   tmp_path):
    af = airflow_deployment
    for dag_id in (PIPELINE, EVALUATION):
        af.unpause(dag_id)
    started = time.monotonic()
    run_id = af.trigger(PIPELINE)
    states: list[str] = []
    af.wait_task(PIPELINE, run_id, "train", {"deferred"}, seen=states)
    # while deferred: the application exists and both links answer through the REST API
    app_id = af.xcom(PIPELINE, run_id, "train", "application_id")
    links = af.links(PIPELINE, run_id, "train")
    assert links["YARN application"].endswith(f"/proxy/{app_id}/")
    assert links["TensorBoard"] == links["YARN application"] + "pages/tensorboard/"
    _task_page_shows_the_links(af, run_id, tmp_path)
    assert af.wait_task(PIPELINE, run_id, "train", {"success", "failed"}, seen=states) == "success", states
    assert af.wait_run(PIPELINE, run_id) == "success"
    record("real deployment: pipeline run (trigger to success)", time.monotonic() - started)
    assert "deferred" in states and rm.application(app_id).final_status == "SUCCEEDED"

    events = af.log_events(PIPELINE, run_id, "train")
    from_trigger = [e["event"] for e in events if "YarnApplicationTrigger" in str(e.get("logger", ""))]
    # the training program's own lines, written by the trigger while the task was deferred
    line = re.compile(r"\[worker:0\] epoch (\d+) loss [\d.]+ accuracy [\d.]+ at \S+$")
    epochs = [e for e in events if "YarnApplicationTrigger" in str(e.get("logger", "")) and line.match(e["event"])]
    assert epochs, from_trigger  # streamed while the task was deferred
    # every epoch's line once in the task log: the trigger's, then the rest the operator read from the aggregated
    # logs (lines printed in the job's last moments may come after the trigger's last poll: a fresh-clone run
    # saw 3 of 5 from the trigger)
    numbers = [int(m.group(1)) for e in events if (m := line.match(str(e.get("event", ""))))]
    assert sorted(numbers) == list(range(5)), [e.get("event") for e in events][-40:]
    # how long a line printed in the container took to reach the Airflow task log (written by the trigger)
    delays = [(datetime.fromisoformat(e["timestamp"]) - datetime.fromisoformat(e["event"].rsplit(" at ", 1)[1]))
              .total_seconds() for e in epochs]
    record("real deployment: line printed in a container to the Airflow task log, median (s)",
           statistics.median(delays))
    record("real deployment: line printed in a container to the Airflow task log, max (s)", max(delays))
    # one line per YARN state, no more: the state it deferred in from the task, the rest from the trigger
    # (which the triggerer may pick up after the application already runs)
    lines = [str(e.get("event", "")) for e in events]
    for state in ("ACCEPTED UNDEFINED", "RUNNING UNDEFINED", "FINISHED SUCCEEDED"):
        assert lines.count(f"{app_id} {state}") == 1, lines
    usage = af.xcom(PIPELINE, run_id, "train", "usage")
    assert usage["application_id"] == app_id and usage["memory_mb_seconds"] > 0
    assert af.xcom(PIPELINE, run_id, "train", "final_status") == "SUCCEEDED"
    # issue #52 item 3: digits_keras reports (the documented one line): the final numbers, with the application
    training = af.xcom(PIPELINE, run_id, "train", "training")
    assert training["application_id"] == app_id and "loss" in training["metrics"], training
    assert any(str(e.get("event", "")).startswith(f"{app_id} training: ") for e in events)
    assert any(str(e.get("event", "")).startswith(f"{app_id} usage: ") for e in events)

    # the model asset's event scheduled the evaluation DAG, which scored the model this run trained
    deadline = time.monotonic() + 180
    runs: list[dict] = []
    while time.monotonic() < deadline and not runs:
        runs = [r for r in af.get(f"/dags/{EVALUATION}/dagRuns")["dag_runs"] if r["state"] in ("success", "failed")]
        time.sleep(1)
    assert runs and runs[0]["state"] == "success", runs
    scored = af.xcom(EVALUATION, runs[0]["dag_run_id"], "evaluate", "return_value")
    assert scored["application_id"] == app_id and scored["accuracy"] > 0.8
    assert scored["training_metrics"]["workers"] == 2


def _task_page_shows_the_links(af, run_id: str, tmp_path) -> None:
    """Airflow's own UI, in a real browser: the task's Details tab offers both links (the docs' picture)."""
    browser = chromium(tmp_path)
    try:
        browser.get(f"{af.base}/dags/{PIPELINE}/runs/{quote(run_id, safe='')}/tasks/train/details")
        deadline = time.monotonic() + 60
        text = ""
        while not ("YARN application" in text and "TensorBoard" in text):
            if time.monotonic() > deadline:
                screenshot(browser, "airflow-task-links-failed")
                raise AssertionError(f"the task page shows no links; saw: {text[-500:]}")
            time.sleep(1)
            text = browser.execute_script(DEEP_TEXT)
        time.sleep(1)
        screenshot(browser, "airflow-task-links")
    finally:
        browser.quit()


def test_marking_the_deferred_training_failed_kills_its_application(airflow_deployment, rm):
    af = airflow_deployment
    af.unpause(PIPELINE)
    run_id = af.trigger(PIPELINE)
    af.wait_task(PIPELINE, run_id, "train", {"deferred"})
    app_id = af.xcom(PIPELINE, run_id, "train", "application_id")
    # at once, as a user may: often before a triggerer runs the trigger (whose on_kill Airflow would call);
    # the provider's listener in the API server kills the application then
    assert rm.application(app_id).state in ("ACCEPTED", "RUNNING")
    marked = time.monotonic()
    af.call("PATCH", af.ti_path(PIPELINE, run_id, "train"), {"new_state": "failed"})
    report = wait_terminal(rm, app_id, timeout=120)
    record("real deployment: mark failed to application KILLED", time.monotonic() - marked)
    assert (report.state, report.final_status) == ("KILLED", "KILLED")
    assert af.wait_run(PIPELINE, run_id) == "failed"
    assert af.task_state(PIPELINE, run_id, "evaluate") == "upstream_failed"


RETRIED = "tony_retried"


def test_a_retried_training_links_each_try_to_its_own_application_and_hands_the_job_its_parent_run(
        airflow_deployment, rm):
    """Issue #52 items 5, 4 and 3, one run: try 1's job fails, try 2's succeeds. Each try's extra links (as
    the UI asks for a try) lead to that try's application; each try's container got the task's OpenLineage
    run as its parent, the very run the deployment emitted; try 2's training reported its progress, which
    the deferred task's log, its XCom and its OpenLineage run show."""
    af = airflow_deployment
    af.unpause(RETRIED)
    run_id = af.trigger(RETRIED)
    states: list[str] = []
    assert af.wait_task(RETRIED, run_id, "train", {"success", "failed"}, seen=states) == "success", states
    assert af.get(af.ti_path(RETRIED, run_id, "train"))["try_number"] == 2, states  # one retry, then success

    by_try = af.xcom(RETRIED, run_id, "train", "links_by_try")
    first, second = by_try["1"]["application_id"], by_try["2"]["application_id"]
    assert first != second
    assert (rm.application(first).final_status, rm.application(second).final_status) == ("FAILED", "SUCCEEDED")
    assert f"Submitted application {first}" in [str(e.get("event", "")) for e in af.log_events(RETRIED, run_id,
                                                                                                 "train", 1)]
    for try_number, app in ((1, first), (2, second)):
        link = af.links(RETRIED, run_id, "train", try_number=try_number)["YARN application"]
        assert link.endswith(f"/proxy/{app}/"), (try_number, link)
    assert af.links(RETRIED, run_id, "train")["YARN application"].endswith(f"/proxy/{second}/")  # the latest

    # the parent run each try's container held, against the runs the deployment emitted
    emitted = af.openlineage_run_events()
    task_runs = {e["run"]["runId"] for e in emitted if e.get("job", {}).get("name") == f"{RETRIED}.train"}
    dag_runs = {e["run"]["runId"] for e in emitted if e.get("job", {}).get("name") == RETRIED}
    parents = []
    for try_number in (1, 2):
        lines = [str(e.get("event", "")) for e in af.log_events(RETRIED, run_id, "train", try_number)]
        given = [json.loads(line.split(" lineage ", 1)[1]) for line in lines if " lineage {" in line]
        assert given, lines[-30:]
        env = given[0]
        namespace, job, parent_run = env["OPENLINEAGE_PARENT_ID"].split("/")
        assert job == f"{RETRIED}.train" and parent_run in task_runs, (env, task_runs)
        root_job, root_run = env["OPENLINEAGE_ROOT_PARENT_ID"].split("/")[1:]
        assert root_job == RETRIED and root_run in dag_runs, (env, dag_runs)
        assert json.loads(env["OPENLINEAGE_CONTEXT"])["parent"]["run"]["runId"] == parent_run
        assert not any(k.startswith("OPENLINEAGE__TRANSPORT") for k in env)  # not asked for
        parents.append(parent_run)
    assert parents[0] != parents[1]  # each try is its own OpenLineage run

    # item 3: while deferred, the task log said how far the training was (the trigger's lines); at the end
    # the XCom, the log and the OpenLineage run carried the final numbers with the application id
    events = af.log_events(RETRIED, run_id, "train", 2)
    trigger_lines = [str(e.get("event", "")) for e in events if "YarnApplicationTrigger" in str(e.get("logger", ""))]
    progress = [line for line in trigger_lines if line.startswith(f"{second} RUNNING") and "% · " in line]
    assert any(re.search(r"step \d+/10 · \d+% · .*loss [\d.]+", line) for line in progress), trigger_lines[-30:]
    final = af.xcom(RETRIED, run_id, "train", "training")
    assert final["application_id"] == second and final["step"] == 10 and final["percent"] == 100.0, final
    assert final["metrics"] == {"loss": 0.1}, final
    assert f"{second} training: step 10/10 · 100% · loss 0.1" in [str(e.get("event", "")) for e in events]
    completed = [e for e in af.openlineage_run_events() if e.get("job", {}).get("name") == f"{RETRIED}.train"
                 and e.get("eventType") == "COMPLETE"]
    facets = [e["run"]["facets"]["tonyTraining"] for e in completed if "tonyTraining" in e["run"].get("facets", {})]
    assert facets and facets[-1]["applicationId"] == second and facets[-1]["metrics"] == {"loss": 0.1}, completed
