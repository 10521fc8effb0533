"""The Oozie action on a real Oozie 5.2.1 server (`tony oozie server up` on the session's local cluster):
the example pipeline through Oozie's own CLI (`oozie job -run`) and, training something that fails, through
its REST API; bad arguments; `oozie job -kill` of a generated workflow whose launcher runs tony-airflow from
a shipped environment; and every generated workflow checked against the XSDs of oozie-client 5.2.1.

The launchers are Oozie's own: a YARN application per action (LauncherAM running the java action's main
class, tony.oozie.ActionMain from the application's lib/, in a container), with the NodeManager's
environment, whose command is tony-airflow's entry point.
"""

from __future__ import annotations

import getpass
import hashlib
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

import httpx
import psutil
import pytest
import xmlschema

from tests.e2e.helpers import aggregated_logs, maven_driver, record, wait_terminal
from tony_airflow.engines.oozie_jar import JAR_NAME
from tony_airflow.local.cluster import jars
from tony_airflow.local.cluster.oozie import OozieServer
from tony_airflow.local.cluster.processes import pid_alive, rss_kib
from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.hdfs import webhdfs

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "oozie" / "driver"
EXAMPLE = ROOT / "oozie" / "examples" / "tony_pipeline" / "workflow.xml"
SCHEMAS = {"0.5": ("oozie-workflow-0.5.xsd", "shell-action-0.3.xsd"),
           "1.0": ("oozie-workflow-1.0.xsd", "shell-action-1.0.xsd")}


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
@pytest.mark.parametrize("extra", [
    [], ["--launcher-env", "hdfs:///apps/tony-env.tar.gz", "--file", "hdfs:///apps/train.py"],
    ["--action-type", "shell"], ["--action-type", "shell", "--launcher-env", "hdfs:///apps/tony-env.tar.gz"],
], ids=["java", "java-packed-env", "shell", "shell-packed-env"])
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
    element = "exec" if "shell" in extra else "main-class"
    assert not schema.is_valid(full.stdout.replace(f"<{element}>", "<exe>").replace(f"</{element}>", "</exe>"))


def test_example_workflow_validates(xsd_dir):
    schema_for(xsd_dir, "1.0").validate(str(EXAMPLE))


def test_generator_bad_input_is_one_line_and_exit_2():
    proc = tony("oozie", "workflow", "-r", "worker:zero", "python3 t.py")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "error: cluster_requirement (worker): 'zero' is not a whole number; allowed: a whole number from 1 to 10000"]


# ------------------------------------------------------------------ the real Oozie 5.2.1 server
@pytest.fixture(scope="module")
def oozie_server(local_cluster):
    """`tony oozie server up` on the session's local cluster, stopped after the module: nothing of it left."""
    server = OozieServer(local_cluster)
    started = time.monotonic()
    server.up(log=lambda *_: None)
    record("oozie server up (jars cached, database made, sharelib uploaded)", time.monotonic() - started)
    pid = server.pid()
    assert pid is not None
    try:
        yield server
    finally:
        record("oozie server resident memory after its tests (MiB, not seconds)", rss_kib(pid) / 1024)
        server.down()
    assert server.pid() is None and not pid_alive(pid)


def _job_properties(cluster, app_path: str, **extra: str) -> dict[str, str]:
    conf = HadoopConf.load(cluster.conf_dir)
    return {"user.name": getpass.getuser(), "nameNode": conf.get("fs.defaultFS"),
            "resourceManager": conf.get("yarn.resourcemanager.address"),
            "oozie.wf.application.path": f"{conf.get('fs.defaultFS')}{app_path}", **extra}


@pytest.fixture(scope="module")
def action_jar(tmp_path_factory) -> bytes:
    """`tony oozie jar DIR`, as a user makes the application's lib/."""
    lib = tmp_path_factory.mktemp("app") / "lib"
    proc = tony("oozie", "jar", str(lib))
    assert proc.returncode == 0 and proc.stdout.strip() == str(lib / JAR_NAME), proc.stderr
    return (lib / JAR_NAME).read_bytes()


def _put_app(cluster, name: str, files: dict[str, str | bytes]) -> str:
    """A workflow application directory in HDFS, as `hdfs dfs -put` would make it; its path."""
    fs = webhdfs(HadoopConf.load(cluster.conf_dir))
    path = f"/user/{getpass.getuser()}/apps/{name}"
    if fs.exists(path):
        fs.rm(path, recursive=True)
    fs.makedirs(path, exist_ok=True)
    for file, content in files.items():
        fs.pipe_file(f"{path}/{file}", content.encode() if isinstance(content, str) else content)
    return path


def _rest_submit(server, properties: dict[str, str]) -> str:
    """POST /oozie/v1/jobs?action=start with the job's properties as a Hadoop configuration (Oozie's REST API)."""
    body = "<configuration>" + "".join(
        f"<property><name>{escape(k)}</name><value>{escape(v)}</value></property>" for k, v in properties.items()
    ) + "</configuration>"
    answer = httpx.post(f"{server.url}/v1/jobs", params={"action": "start"}, content=body,
                        headers={"Content-Type": "application/xml;charset=UTF-8"}, timeout=60)
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def _info(server, wf_id: str) -> dict:
    return httpx.get(f"{server.url}/v1/job/{wf_id}", params={"show": "info"}, timeout=60).json()


def _wait_workflow(server, wf_id: str, timeout: float = 420) -> dict:
    deadline = time.monotonic() + timeout
    while (info := _info(server, wf_id))["status"] in ("PREP", "RUNNING"):
        assert time.monotonic() < deadline, f"{wf_id} still {info['status']} after {timeout:.0f}s"
        time.sleep(1)
    return info


def _actions(info: dict) -> dict[str, dict]:
    return {a["name"]: a for a in info["actions"]}


def _action_data(action: dict) -> dict[str, str]:
    """The captured output, as Oozie stores it (java.util.Properties text: `\\:` for `:`)."""
    pairs = (line.partition("=") for line in (action.get("data") or "").splitlines() if line and line[0] not in "#!")
    return {key: re.sub(r"\\(.)", r"\1", value) for key, _, value in pairs}


def _cli(server, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(server.bin_dir / "oozie"), *args], capture_output=True, text=True, timeout=timeout)


def _tagged(rm, wf_id: str) -> list:
    return rm.applications(tags=[f"oozie_workflow_id:{wf_id}".lower()])


def test_the_example_pipeline_succeeds_on_the_server_through_oozies_cli(local_cluster, rm, oozie_server, action_jar):
    """prepare -> train -> decision on wf:actionData('train') -> report, submitted with `oozie job -run`."""
    example = EXAMPLE.parent
    app = _put_app(local_cluster, "tony_pipeline", {"workflow.xml": EXAMPLE.read_text(),
                                                     f"lib/{JAR_NAME}": action_jar})
    props = _job_properties(local_cluster, app)
    started = time.monotonic()
    run = _cli(oozie_server, "job", "-config", str(example / "job.properties"), f"-DnameNode={props['nameNode']}",
               f"-DresourceManager={props['resourceManager']}", "-run")
    assert run.returncode == 0 and run.stdout.startswith("job: "), run.stdout + run.stderr
    wf_id = run.stdout.split()[-1]
    info = _wait_workflow(oozie_server, wf_id)
    record("oozie: example pipeline, oozie job -run -> SUCCEEDED", time.monotonic() - started)
    actions = _actions(info)
    assert info["status"] == "SUCCEEDED", {n: (a["status"], a.get("errorMessage")) for n, a in actions.items()}
    assert [actions[n]["status"] for n in ("prepare", "train", "trained", "report")] == ["OK"] * 4
    assert actions["trained"]["externalStatus"] == "report"  # the decision read final_status: SUCCEEDED
    data = _action_data(actions["train"])
    assert set(data) == {"application_id", "tracking_url", "tensorboard_url", "final_status"}
    report = rm.application(data["application_id"])
    assert report.final_status == "SUCCEEDED" and data["final_status"] == "SUCCEEDED"
    assert data["tracking_url"].endswith(f"/proxy/{report.id}/") and data["tensorboard_url"]
    # the launcher ran in a YARN container of its own; the training is another application, tagged with
    # the workflow, the action and the tag Oozie kills an action's children by
    assert actions["train"]["externalId"] != report.id
    assert f"oozie_workflow_id:{wf_id}".lower() in report.tags
    assert any(t.startswith("oozie-") for t in report.tags), report.tags
    assert _info(oozie_server, wf_id)["appName"] == "tony-pipeline"


def _generated(name: str, *job: str) -> str:
    proc = tony("oozie", "workflow", "--workflow-name", name, *job)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _launcher_stderr(rm, action: dict) -> list[str]:
    """What the action's command wrote on stderr, from the launcher container's aggregated log (the main
    class passes it through), less the JVM's own notes."""
    logs = aggregated_logs(rm, action["externalId"], timeout=120)
    section = logs[logs.index("LogType:stderr"):]
    section = section[section.index("LogContents:") + len("LogContents:"):section.index("End of LogType:stderr")]
    return [line for line in section.strip().splitlines()
            if line and not line.startswith(("NOTE: Picked up", "WARNING: ", "SLF4J: "))]


def test_a_failing_training_fails_the_action_with_its_one_line_reason_and_the_workflow_takes_its_error_path(
        local_cluster, rm, oozie_server, action_jar):
    """The example pipeline again, through the REST API, told to train something that fails: the train
    action's error message (ActionMain's exception, which Oozie's launcher makes it) is the one-line reason,
    and the kill node it leads to says it."""
    app = _put_app(local_cluster, "tony_pipeline_fails", {"workflow.xml": EXAMPLE.read_text(),
                                                           f"lib/{JAR_NAME}": action_jar})
    properties = _job_properties(local_cluster, app, runDir="/tmp/tony-pipeline-oozie",
                                 trainCommand="python3 -c \"import sys; sys.exit('loss is NaN at step 3')\"")
    wf_id = _rest_submit(oozie_server, properties)
    info = _wait_workflow(oozie_server, wf_id)
    actions = _actions(info)
    train = actions["train"]
    assert info["status"] == "KILLED" and train["status"] == "ERROR", (info["status"], train)
    apps = _tagged(rm, wf_id)
    assert [a.final_status for a in apps] == ["FAILED"], apps
    assert "loss is NaN at step 3" in apps[0].diagnostics
    reason = train["errorMessage"]
    assert reason.startswith(f"{apps[0].id} FAILED: "), reason
    assert re.search(r"worker:[01] exited with code 1", reason), reason  # the example trains on two workers
    assert reason.endswith("stderr: loss is NaN at step 3") and "\n" not in reason, reason
    assert train["errorCode"] == "JA018"  # Oozie's code for a main class that threw
    assert _launcher_stderr(rm, train)[-1] == reason  # the launcher's log ends with the same line
    assert actions["fail"]["errorMessage"] == f"train failed: {reason}"  # the kill node's message
    assert "report" not in actions


def test_bad_arguments_fail_the_action_in_one_line_and_nothing_is_submitted(local_cluster, rm, oozie_server,
                                                                           action_jar):
    workflow = _generated("tony-bad", "-r", "worker:1", "-m", "512", "-n", "oozie-bad", "true")
    workflow = workflow.replace("<arg>worker:1</arg>", "<arg>worker:0</arg>")
    wf_id = _rest_submit(oozie_server, _job_properties(local_cluster, _put_app(local_cluster, "tony_bad", {
        "workflow.xml": workflow, f"lib/{JAR_NAME}": action_jar})))
    info = _wait_workflow(oozie_server, wf_id)
    train = _actions(info)["train"]
    assert info["status"] == "KILLED" and train["status"] == "ERROR", train
    assert _tagged(rm, wf_id) == []  # nothing submitted
    line = "error: cluster_requirement (worker): 0 is too small; allowed: a whole number from 1 to 10000"
    assert train["errorMessage"] == line
    assert _launcher_stderr(rm, train) == [line]


@pytest.fixture(scope="module")
def launcher_env(tmp_path_factory) -> bytes:
    """A venv-pack archive with tony-airflow in it, as a user ships one to launchers whose Python has none: a
    venv of the node's base Python with the tony_airflow package copied in; the packages it needs are this
    installation's, put on its path after its own (a 1 MB archive, not the ~100 MB of its dependencies)."""
    d = tmp_path_factory.mktemp("launcher-env")
    env_dir = d / "env"
    subprocess.run([str(Path(sys.base_prefix) / "bin" / "python3"), "-m", "venv", "--without-pip", str(env_dir)],
                   check=True)
    site = next(env_dir.glob("lib/python3*/site-packages"))
    shutil.copytree(ROOT / "tony_airflow", site / "tony_airflow", ignore=shutil.ignore_patterns("__pycache__", "target"))
    # not a .pth (venv-pack refuses one as an editable install): appended, so the archive's copy comes first
    node_packages = next(Path(sys.prefix).glob("lib/python3*/site-packages"))
    (site / "sitecustomize.py").write_text(f"import sys\nsys.path.append({str(node_packages)!r})\n")
    archive = d / "tony-env.tar.gz"
    subprocess.run([str(Path(sys.executable).parent / "venv-pack"), "-p", str(env_dir), "-o", str(archive), "-q"],
                   check=True)
    return archive.read_bytes()


def _launcher_processes() -> list[psutil.Process]:
    """The processes running tony-airflow's entry point (the launchers' commands), on this host."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if "tony_airflow.cli.oozie" in (proc.info["cmdline"] or [])[1:3]:
            found.append(proc)
    return found


def test_oozie_job_kill_kills_the_training_application(local_cluster, rm, oozie_server, action_jar, launcher_env):
    """`oozie job -kill` of a running workflow: Oozie kills the launcher's application (its container gets
    SIGTERM, then SIGKILL 250 ms later) and, by the tag the training carries, the training itself. The
    launcher runs tony-airflow from a shipped environment (`--launcher-env`: an <archive>)."""
    app_path = f"/user/{getpass.getuser()}/apps/tony_killed"
    workflow = _generated("tony-killed", "--launcher-env", f"{app_path}/tony-env.tar.gz", "-r", "ps:1,worker:1",
                          "-m", "512", "-n", "oozie-killed", "sleep 600")
    wf_id = _rest_submit(oozie_server, _job_properties(local_cluster, _put_app(local_cluster, "tony_killed", {
        "workflow.xml": workflow, f"lib/{JAR_NAME}": action_jar, "tony-env.tar.gz": launcher_env})))
    deadline = time.monotonic() + 240
    while not [a for a in _tagged(rm, wf_id) if a.state == "RUNNING"]:
        assert time.monotonic() < deadline, f"the training never ran: {_info(oozie_server, wf_id)['status']}"
        time.sleep(0.5)
    app_id = _tagged(rm, wf_id)[0].id
    # the entry point runs on the archive's interpreter, unpacked by YARN in the launcher's directory
    (launcher,) = _launcher_processes()
    assert launcher.cmdline()[0] == "tonyenv/bin/python"
    unpacked = (Path(launcher.cwd()) / "tonyenv").resolve()
    assert "/filecache/" in str(unpacked) and (unpacked / "bin" / "python").exists(), unpacked
    killed = time.monotonic()
    kill = _cli(oozie_server, "job", "-kill", wf_id)
    assert kill.returncode == 0, kill.stdout + kill.stderr
    assert wait_terminal(rm, app_id, timeout=120).state == "KILLED"
    record("oozie: oozie job -kill -> the training application KILLED", time.monotonic() - killed)
    assert _wait_workflow(oozie_server, wf_id)["status"] == "KILLED"
    # Oozie's own kill looks for the action's children by this tag (JavaActionExecutor.killExternalChildAppByTags,
    # LauncherHelper.getTag): the training carries it, so Oozie kills it even where the launcher's SIGTERM is lost
    digest = hashlib.md5(f"{wf_id}@train".encode()).digest()
    assert f"oozie-{int.from_bytes(digest, 'big'):x}" in rm.application(app_id).tags
    # killed, not failed: by the entry point on the launcher's SIGTERM (REST, no address) or by Oozie (RPC)
    assert "was killed by user" in rm.application(app_id).diagnostics
    assert psutil.wait_procs([launcher], timeout=60)[1] == []  # the launcher's command is gone too


@pytest.mark.parametrize("when", ["while-it-trains", "right-after-submit"])
def test_a_lost_launcher_container_is_followed_by_its_next_attempt_and_one_training_runs_to_the_end(
        local_cluster, rm, oozie_server, action_jar, when):
    """#44 item 3: the launcher's AM container is lost mid-training (every process of it killed, as its host
    going away does). YARN starts the launcher's next attempt; its entry point finds the live training by the
    workflow's and action's tags and follows it: the action ends with the training's outcome, and one
    training ran, to its end. Issue #51 item 16: also when the launcher is lost the moment the training is
    submitted (not yet RUNNING), and a look of the next attempt that fails is tried again, never taken for
    "no training" (a second one was submitted beside the live one)."""
    workflow = _generated("tony-relaunched", "-r", "worker:1", "-m", "512", "-n", f"oozie-relaunched-{when}",
                          "sleep 40")
    wf_id = _rest_submit(oozie_server, _job_properties(local_cluster, _put_app(local_cluster, "tony_relaunched", {
        "workflow.xml": workflow, f"lib/{JAR_NAME}": action_jar})))
    deadline = time.monotonic() + 240
    wanted = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING") if when == "right-after-submit" else ("RUNNING",)
    while not [a for a in _tagged(rm, wf_id) if a.state in wanted]:
        info = _info(oozie_server, wf_id)
        assert info["status"] in ("PREP", "RUNNING") and time.monotonic() < deadline, (
            f"the training never ran: {info['status']}",
            {n: (a["status"], a.get("errorMessage")) for n, a in _actions(info).items()})
        time.sleep(0.1 if when == "right-after-submit" else 0.5)
    (training,) = _tagged(rm, wf_id)
    launcher_id = _actions(_info(oozie_server, wf_id))["train"]["externalId"]
    number = launcher_id.split("_", 1)[1]
    am = [p for p in local_cluster.container_processes() if f"_{number}_01_000001" in p.container_id]
    assert am, f"no process of the launcher {launcher_id}'s AM container"
    for proc in am:  # lost with its host: no signal it could act on
        psutil.Process(proc.pid).kill()
    info = _wait_workflow(oozie_server, wf_id)
    action = _actions(info)["train"]
    logs = aggregated_logs(rm, launcher_id, timeout=120)
    said = [line for line in logs.splitlines() if re.search(
        r"earlier try|Submitt|Following|child|Killing|Found \[|application_\d+_\d+ (RUNNING|ACCEPTED|FINISHED)", line)]
    tagged = [(a.id, a.state, a.final_status, a.diagnostics[:200]) for a in _tagged(rm, wf_id)]
    assert info["status"] == "SUCCEEDED", (action["status"], action.get("errorMessage"), tagged, said)
    assert _action_data(action)["application_id"] == training.id, (tagged, said)
    # one training, run to its end; a younger one that two tries submitting at once made is killed at once by
    # its own try (core/runner.py _settle), which follows the older
    assert [a[0] for a in tagged if a[1] != "KILLED"] == [training.id], (tagged, said)
    assert rm.application(training.id).final_status == "SUCCEEDED"
    attempts = rm.get(f"/ws/v1/cluster/apps/{launcher_id}/appattempts")["appAttempts"]["appAttempt"]
    assert len(attempts) == 2, attempts  # the launcher was relaunched
    # Oozie's JavaMain looks for the action's children by their tag before each run of the main class (to kill
    # them and start over); on this server it found none, the live training included (why is Oozie's: its
    # query to the RM; the training carries the tag). Had it killed it, the new attempt would have found no
    # live training and submitted one, resuming from the output's checkpoints.
    assert logs.count("No child applications found") == 2, logs[-3000:]
