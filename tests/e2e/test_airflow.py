"""The Airflow provider end to end: DAGs run by Airflow's dag.test() against the real local YARN + HDFS."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.helpers import PAYLOADS, dag_command, dag_summary, run_dag, wait_terminal

ROOT = Path(__file__).resolve().parents[2]
TEST_DAGS = Path(__file__).resolve().parent / "airflow_dags" / "e2e_dags.py"


def _apps_of(rm, dag_id: str, states=None):
    return rm.applications(states=states, tags=[f"airflow_dag_id:{dag_id}"])


def test_pipeline_dag_trains_on_yarn_and_evaluates_the_model(local_cluster, rm, airflow_env):
    summary, log = run_dag(airflow_env, ROOT / "dags_examples" / "tony_pipeline.py", "tony_pipeline")
    assert summary["state"] == "success", log[-4000:]
    train = summary["xcoms"]["train"]
    app_id = train["application_id"]
    assert app_id.startswith("application_") and train["return_value"] == app_id
    assert train["final_status"] == "SUCCEEDED" and rm.application(app_id).final_status == "SUCCEEDED"
    assert train["tracking_url"].endswith(f"/proxy/{app_id}/")
    assert train["tensorboard_url"] == train["tracking_url"] + "pages/tensorboard/"
    assert train["_link_TensorBoardLink"] == train["tensorboard_url"]
    assert train["_link_YarnApplicationLink"] == train["tracking_url"]
    assert summary["xcoms"]["evaluate"]["return_value"]["accuracy"] > 0.8
    # the training's own output in the task log, as it came (the chief here is worker 0)
    assert re.search(r"\[worker:0\] epoch \d+ loss [\d.]+ accuracy", log), log[-4000:]
    usage = train["usage"]  # what the job cost, from YARN's resource-seconds and the history
    assert usage["application_id"] == app_id and usage["memory_mb_seconds"] > 0 and usage["vcore_seconds"] > 0
    assert usage["peak_memory_mib"]["worker:0"] > 0 and "usage: " in log
    report = summary["xcoms"]["report"]["return_value"]
    assert report["application_id"] == app_id and report["tensorboard_url"] == train["tensorboard_url"]
    tags = set(rm.application(app_id).tags)
    assert {"airflow", "airflow_dag_id:tony_pipeline", "airflow_task_id:train"} <= tags


def test_sensor_dag_waits_for_an_application_submitted_without_waiting(local_cluster, rm, airflow_env):
    summary, log = run_dag(airflow_env, ROOT / "dags_examples" / "tony_sensor.py", "tony_sensor")
    assert summary["state"] == "success", log[-4000:]
    app_id = summary["xcoms"]["submit"]["return_value"]
    assert summary["xcoms"]["wait"]["return_value"] == app_id
    assert "final_status" not in summary["xcoms"]["submit"]  # it returned at submission
    assert rm.application(app_id).final_status == "SUCCEEDED"
    assert "UP_FOR_RESCHEDULE" in log.upper()  # the sensor gave its slot back between pokes


def test_failed_training_fails_the_task_with_the_yarn_diagnostics(local_cluster, rm, airflow_env):
    summary, log = run_dag(airflow_env, TEST_DAGS, "tony_failing")
    assert summary["state"] == "failed" and summary["tasks"]["train"] == "failed"
    app_id = summary["xcoms"]["train"]["application_id"]
    report = rm.application(app_id)
    assert report.final_status == "FAILED" and "loss is NaN" in report.diagnostics
    assert summary["xcoms"]["train"]["final_status"] == "FAILED"
    assert f"{app_id} FAILED: " in log and "ValueError: loss is NaN" in log


def test_killing_the_running_task_kills_the_application(local_cluster, rm, airflow_env):
    proc = subprocess.Popen(dag_command(TEST_DAGS, "tony_killable"), env=airflow_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        while not _apps_of(rm, "tony_killable", ["RUNNING"]):
            assert time.monotonic() < deadline and proc.poll() is None, "the training never ran"
            time.sleep(0.5)
        app_id = _apps_of(rm, "tony_killable", ["RUNNING"])[0].id
        # the links are in Airflow's database while the job runs, not only at the end of the task
        db = sqlite3.connect(Path(airflow_env["AIRFLOW_HOME"]) / "airflow.db")
        links = dict(db.execute("SELECT key, value FROM xcom WHERE dag_id='tony_killable'").fetchall())
        db.close()
        assert app_id in json.loads(links["_link_YarnApplicationLink"])
        assert json.loads(links["_link_TensorBoardLink"]).endswith("/pages/tensorboard/")
        proc.send_signal(signal.SIGTERM)  # what Airflow's supervisor does to a task that is killed
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    report = wait_terminal(rm, app_id, timeout=60)
    assert report.state == "KILLED", out[-3000:]
    assert f"Killing application {app_id}" in out
    assert dag_summary(out)["tasks"]["train"] == "failed"


def test_deferrable_operator_and_sensor_wait_in_the_trigger(local_cluster, rm, airflow_env):
    summary, log = run_dag(airflow_env, TEST_DAGS, "tony_deferrable")
    assert summary["state"] == "success", log[-4000:]
    assert log.count("running trigger in line") == 2  # the operator and the sensor both deferred
    for task in ("train", "submit"):
        assert rm.application(summary["xcoms"][task]["application_id"]).final_status == "SUCCEEDED"
    assert summary["xcoms"]["train"]["final_status"] == "SUCCEEDED"
    # the task's own lines, each once: most written by the trigger while deferred, the rest at the end
    ticks = re.findall(r"\[worker:0\] worker slept (\d+) s", log)
    assert ticks == [str(i) for i in range(1, 9)], log[-4000:]
    assert any("worker slept" in line and "YarnApplicationTrigger" in line for line in log.splitlines())
    assert summary["xcoms"]["train"]["usage"]["vcore_seconds"] > 0
    assert summary["xcoms"]["wait"]["return_value"] == summary["xcoms"]["submit"]["application_id"]


def test_a_deferred_task_shows_every_line_of_a_job_that_prints_and_exits_at_once(local_cluster, rm, airflow_env):
    """Issue #51 item 9: a 4-second job's lines never reached the task log (a 12-second job's did)."""
    summary, log = run_dag(airflow_env, TEST_DAGS, "tony_short_output")
    assert summary["state"] == "success", log[-4000:]
    assert log.count("running trigger in line") == 1
    assert re.findall(r"\[worker:0\] (short line \d)", log) == [f"short line {i}" for i in range(3)], log[-4000:]


def test_a_retry_reconnects_to_the_running_application(local_cluster, rm):
    """Try 1 submits and its worker dies; try 2 finds the id in the task state store and waits for it."""
    from tests.unit.airflow_context import DictStore, task_context
    from tony_airflow.providers.yarn.operators.tensorflow import TensorFlowOnYarnOperator

    args = {"task_id": "train", "cluster_requirement": "worker:1", "task_memory": "512", "poll_interval": 1,
            "script": str(PAYLOADS / "sleep.py"), "command": "python3 ${DTF_TASK_SCRIPT}", "env": {"SLEEP_S": "8"}}
    store, run_id = DictStore(), f"reconnect_{time.time_ns()}"
    first = TensorFlowOnYarnOperator(wait_for_completion=False, **args)
    app_id = first.execute(task_context(store, run_id))  # try 1 ends here, as if its worker crashed
    retry_ctx = task_context(store, run_id)
    assert TensorFlowOnYarnOperator(**args).execute(retry_ctx) == app_id
    assert retry_ctx["ti"].xcoms["final_status"] == "SUCCEEDED"
    assert [a.id for a in rm.applications(tags=[f"airflow_run_id:{run_id}"])] == [app_id]


def test_the_connections_test_button_names_the_resourcemanager_and_its_hadoop(local_cluster, airflow_env):
    """#44 item 10: `YarnHook.test_connection`, as Airflow's connection form calls it, on the real cluster
    through the `yarn_default` connection `tony dag-test` writes; a dead address in one line."""
    script = ("from tony_airflow.providers.yarn.hooks.yarn import YarnHook; import json; "
              "print(json.dumps([YarnHook().test_connection(), YarnHook('yarn_dead').test_connection()]))")
    env = {**airflow_env, "AIRFLOW_CONN_YARN_DEAD": json.dumps({"conn_type": "yarn", "host": "127.0.0.1",
                                                                 "port": 9, "login": "alice"})}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    (ok, line), (dead_ok, dead_line) = json.loads(out.stdout.strip().splitlines()[-1])
    assert ok and re.fullmatch(r"ResourceManager https?://[\d.:]+ \(Hadoop 3\.4\.2\), user \S+", line), line
    assert not dead_ok and dead_line.startswith(
        "no active ResourceManager answered (addresses from the Airflow connection 'yarn_dead'): "), dead_line
