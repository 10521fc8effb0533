"""The Azkaban jobtype, run by Azkaban's own JobTypeManager and ProcessJob (azkaban-common 3.58.0 from
Maven Central) against the real local YARN: the example flows, a cancelled job, a bad .job file.

Azkaban's web and executor servers are not published on Maven Central, so the flow is driven by
`azkaban_jobtype/driver` (RunFlow.java): it loads `plugins/jobtypes/` exactly as an executor does and
runs each job with the class the plugin names.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.helpers import PAYLOADS, java_command, maven_driver, wait_terminal
from tony_airflow.yarn.hdfs import webhdfs

ROOT = Path(__file__).resolve().parents[2]
JOBTYPE = ROOT / "azkaban_jobtype"
DRIVER = JOBTYPE / "driver"


@pytest.fixture(scope="module")
def driver_classpath() -> list[str]:
    return maven_driver(DRIVER)


@pytest.fixture
def executor(tmp_path: Path) -> Path:
    """An executor's plugins/jobtypes with our plugin copied in, as the admin README says."""
    plugins = tmp_path / "plugins" / "jobtypes"
    shutil.copytree(JOBTYPE / "tensorflow", plugins / "tensorflow")
    # the executor-wide settings of the built-in types: run as the executor's user
    (plugins / "commonprivate.properties").write_text("execute.as.user=false\n")
    (tmp_path / "work").mkdir()
    return tmp_path


def run_flow(classpath: list[str], executor: Path, flow: Path, exec_id: int, *jobs: str,
             cancel_after: float | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    cmd, env = java_command(classpath, "tony.azkaban.RunFlow", str(executor / "plugins" / "jobtypes"),
                            str(flow), str(executor / "work"), str(exec_id), *jobs)
    if cancel_after is not None:
        env["CANCEL_AFTER_S"] = str(cancel_after)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def _outputs(out: str, job: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(f"JOB {job} SUCCEEDED"))


@pytest.mark.parametrize("flow, jobs", [
    (JOBTYPE / "examples" / "flow10", ("prepare", "train", "report")),
    (JOBTYPE / "examples" / "flow20" / "tony_example.flow", ()),
], ids=["flow-1.0", "flow-2.0"])
def test_example_flow_trains_on_yarn_and_hands_its_outputs_downstream(local_cluster, rm, driver_classpath,
                                                                     executor, flow, jobs):
    exec_id = 100 + len(jobs)
    proc = run_flow(driver_classpath, executor, flow, exec_id, *jobs)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert "JOB train azkaban.jobExecutor.ProcessJob" in out  # the plugin's class, loaded by JobTypeManager
    app_id = out.split("Submitted application ", 1)[1].split()[0]
    report = rm.application(app_id)
    assert report.final_status == "SUCCEEDED"
    flow_id, project = ("report", flow.name) if jobs else ("tony_example", flow.parent.name)
    assert {f"azkaban_exec_id:{exec_id}", "azkaban_job_id:train", f"azkaban_flow_id:{flow_id}",
            f"azkaban_project:{project}"} <= set(report.tags)
    train_outputs = _outputs(out, "train")
    for key in ("application_id: " + app_id, "final_status: SUCCEEDED", "tracking_url: http",
                "tensorboard_url: http"):
        assert key in train_outputs
    # the report job got the train job's output properties through Azkaban's ${...} resolution
    assert f"application_id: {app_id}" in out.split("JOB report")[1]
    assert webhdfs().exists(f"/tmp/azkaban-example/{exec_id}/model/model.keras")


def test_cancelled_job_kills_its_application(local_cluster, rm, driver_classpath, executor, tmp_path):
    flow = tmp_path / "flow"
    flow.mkdir()
    (flow / "long.job").write_text(
        "type=tensorflow\ncluster_requirement=ps:1,worker:1\ntask_memory=512\n"
        f"script={PAYLOADS / 'sleep.py'}\ntask_command=python3 $DTF_TASK_SCRIPT\n")  # ${...} is Azkaban's own substitution
    started = time.monotonic()
    proc = run_flow(driver_classpath, executor, flow, 300, "long", cancel_after=15)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "CANCEL long" in proc.stdout
    app_id = proc.stdout.split("Submitted application ", 1)[1].split()[0]
    assert "SIGTERM: killing " + app_id in proc.stdout  # ProcessJob's soft kill reached us
    assert wait_terminal(rm, app_id, timeout=30).state == "KILLED"
    assert time.monotonic() - started < 15 + 30 + 20  # gone before ProcessJob's 30 s hard kill


@pytest.mark.parametrize("body, line", [
    ("tony.worker.instances=2\ntony.worker.memroy=4g\n", "tony.worker.memroy: unknown task field 'memroy'"),
    ("tony.worker.instances=2\ntask_comand=python3 x.py\n", "task_comand: unknown key; did you mean 'task_command'?"),
    ("tony.worker.instances=two\ntask_command=x\n", "tasks.worker.instances"),
])
def test_bad_job_file_fails_the_job_and_submits_nothing(local_cluster, rm, driver_classpath, executor, tmp_path,
                                                         body, line):
    flow = tmp_path / "flow"
    flow.mkdir()
    (flow / "bad.job").write_text("type=tensorflow\n" + body)
    before = {a.id for a in rm.applications()}
    proc = run_flow(driver_classpath, executor, flow, 400, "bad")
    assert proc.returncode == 1 and "JOB bad FAILED" in proc.stdout
    errors = [ln for ln in proc.stdout.splitlines() if "error: " in ln]
    assert len(errors) == 1 and line in errors[0], proc.stdout[-2000:]
    assert "Submitted application" not in proc.stdout
    assert {a.id for a in rm.applications()} == before
