"""The Oozie action: generated workflows checked against Oozie 5.2.1's own XSDs, and the train action run
by Oozie's own ShellMain (the launcher's main class, from the sharelib on Maven Central) against the real
local YARN, its captured output parsed by the Oozie server's own PropertiesUtils.

No Oozie server runs here (Oozie is in the Apache Attic and ships no embeddable server on Maven Central):
`oozie/driver` (RunShellAction.java) writes the action configuration ShellActionExecutor would write,
then hands over to ShellMain, exactly as the launcher does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import xmlschema

from tests.e2e.helpers import PAYLOADS, java_command, maven_driver, wait_terminal
from tony_airflow.yarn.local import jars

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "oozie" / "driver"
EXAMPLE = ROOT / "oozie" / "examples" / "tony_pipeline" / "workflow.xml"
SCHEMAS = {"0.5": ("oozie-workflow-0.5.xsd", "shell-action-0.3.xsd"),
           "1.0": ("oozie-workflow-1.0.xsd", "shell-action-1.0.xsd")}
NM_SIGKILL_DELAY_S = 0.25  # yarn.nodemanager.sleep-delay-before-sigkill.ms: SIGTERM, then SIGKILL


@pytest.fixture(scope="module")
def oozie_jars() -> list[str]:
    return maven_driver(DRIVER, f"-Dhadoop.version={jars.hadoop_version()}")  # the local cluster's Hadoop


@pytest.fixture(scope="module")
def xsd_dir(oozie_jars, tmp_path_factory) -> Path:
    """The XSDs exactly as oozie-client 5.2.1 ships them."""
    out = tmp_path_factory.mktemp("oozie-xsd")
    client = next(j for j in oozie_jars if "oozie-client-5.2.1" in j)
    with zipfile.ZipFile(client) as jar:
        for name in jar.namelist():
            if name.endswith(".xsd"):
                jar.extract(name, out)
    return out


def schema_for(xsd_dir: Path, version: str) -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema([str(xsd_dir / name) for name in SCHEMAS[version]])


def tony(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "tony"), *args], capture_output=True, text=True)


JOB = ["-r", "ps:1,worker:2", "-m", "512", "-s", "train.py", "--env", "SLEEP_S=1", "python3 $DTF_TASK_SCRIPT"]


@pytest.mark.parametrize("version", ["0.5", "1.0"])
@pytest.mark.parametrize("extra", [[], ["--launcher-env", "hdfs:///apps/tony-env.tar.gz", "--file", "hdfs:///apps/train.py"]],
                         ids=["node-python", "packed-env"])
def test_generated_workflows_validate_against_oozies_xsds(xsd_dir, version, extra, tmp_path):
    schema = schema_for(xsd_dir, version)
    full = tony("oozie", "workflow", "--schema", version, *extra, *JOB)
    assert full.returncode == 0, full.stderr
    schema.validate(full.stdout)
    assert f'xmlns="uri:oozie:workflow:{version}"' in full.stdout
    action = tony("oozie", "workflow", "--action-only", "--schema", version, "--ok", "next", "--error", "fail",
                  *extra, *JOB)
    assert action.returncode == 0 and action.stdout.lstrip().startswith("<action ")
    pasted = (f'<workflow-app xmlns="uri:oozie:workflow:{version}" name="existing"><start to="train"/>'
              f'{action.stdout}<kill name="fail"><message>m</message></kill><end name="next"/></workflow-app>')
    schema.validate(pasted)  # pasted into an existing workflow, it is still valid
    assert not schema.is_valid(full.stdout.replace("<exec>", "<exe>").replace("</exec>", "</exe>"))


def test_example_workflow_validates(xsd_dir):
    schema_for(xsd_dir, "1.0").validate(str(EXAMPLE))


def test_generator_bad_input_is_one_line_and_exit_2():
    proc = tony("oozie", "workflow", "-r", "worker:zero", "python3 t.py")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "error: cluster_requirement (worker): 'zero' is not a whole number; allowed: a whole number from 1 to 10000"]


def run_action(oozie_jars: list[str], workflow: Path, work: Path, wf_id: str, **popen) -> subprocess.Popen:
    cmd, env = java_command([*oozie_jars, str(jars.jar_dir() / "*")], "tony.oozie.RunShellAction", str(workflow), "train",
                            str(work), wf_id)
    return subprocess.Popen(cmd, env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            **popen)


def _workflow(tmp_path: Path, payload: str, *job: str) -> tuple[Path, Path]:
    work = tmp_path / "launcher"
    work.mkdir()
    (work / "train.py").write_text((PAYLOADS / payload).read_text())  # what <file> would localize
    proc = tony("oozie", "workflow", *job, "-s", "train.py", "python3 $DTF_TASK_SCRIPT")
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "workflow.xml").write_text(proc.stdout)
    return tmp_path / "workflow.xml", work


def _action_data(out: str) -> dict[str, str]:
    return dict(line[len("ACTIONDATA "):].split("=", 1) for line in out.splitlines() if line.startswith("ACTIONDATA "))


def test_train_action_runs_through_shellmain_and_yields_the_four_keys(local_cluster, rm, oozie_jars, tmp_path):
    workflow, work = _workflow(tmp_path, "sleep.py", "-r", "worker:2", "-m", "512", "--env", "SLEEP_S=1")
    wf_id = f"0000001-{time.time_ns() % 10**15:015d}-oozie-oozi-W"
    proc = run_action(oozie_jars, workflow, work, wf_id)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "ACTION train OK" in out, out[-4000:]
    data = _action_data(out)
    assert set(data) == {"application_id", "tracking_url", "tensorboard_url", "final_status"}
    assert data["final_status"] == "SUCCEEDED"
    report = rm.application(data["application_id"])
    assert report.final_status == "SUCCEEDED" and data["tracking_url"].endswith(f"/proxy/{report.id}/")
    assert {f"oozie_workflow_id:{wf_id}".lower(), f"oozie_action_id:{wf_id}@train".lower()} <= set(report.tags)


def test_failing_training_fails_the_action(local_cluster, rm, oozie_jars, tmp_path):
    workflow, work = _workflow(tmp_path, "exit_code.py", "-r", "ps:1,worker:2", "-m", "512")
    proc = run_action(oozie_jars, workflow, work, "0000002-000000000000000-oozie-oozi-W")
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1 and "ACTION train ERROR" in out, out[-3000:]
    data = _action_data(out)
    assert data["final_status"] == "FAILED"
    assert "loss is NaN" in rm.application(data["application_id"]).diagnostics


def test_killed_action_leaves_no_application(local_cluster, rm, oozie_jars, tmp_path):
    workflow, work = _workflow(tmp_path, "sleep.py", "-r", "ps:1,worker:1", "-m", "512")
    wf_id = f"0000003-{time.time_ns() % 10**15:015d}-oozie-oozi-W"
    proc = run_action(oozie_jars, workflow, work, wf_id, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not rm.applications(states=["RUNNING"], tags=[f"oozie_workflow_id:{wf_id}".lower()]):
            assert time.monotonic() < deadline and proc.poll() is None, "the training never ran"
            time.sleep(0.5)
        app_id = rm.applications(tags=[f"oozie_workflow_id:{wf_id}".lower()])[0].id
        # what a NodeManager does to the launcher container when Oozie kills the action
        os.killpg(proc.pid, signal.SIGTERM)
        time.sleep(NM_SIGKILL_DELAY_S)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert wait_terminal(rm, app_id, timeout=30).state == "KILLED"
