"""The production shape end to end: `tony cluster up --secure --ha --nodes 3` (a real MIT KDC, Hadoop in
secure mode with per-host principals, two NameNodes of hdfs://tony/, two ResourceManagers, three hosts)
and every front end on it: ytf-submit with a keytab, tasks on delegation tokens, `tony logs|history|kill`,
the history server, Airflow through a kerberos `yarn_default` (deferrable operator and sensor), Azkaban and
Oozie with a token file only; and, last, a job that goes on while the active RM and NameNode are killed.

One such cluster for the session (tests/e2e/conftest.py). Unless a test says otherwise, its
processes have no Kerberos ticket at all (an empty ticket cache): what they do, they do with the
keytab or the tokens they were given.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.helpers import (
    BIN,
    PAYLOADS,
    dag_command,
    java_command,
    maven_driver,
    record,
    run_dag,
    wait_terminal,
    watch_with_a_deferred_sensor,
)
from tony_airflow.examples.pipeline_steps import prepare
from tony_airflow.local.cluster import LocalCluster
from tony_airflow.local.cluster.kdc import USER_PASSWORD
from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.hdfs import hdfs_path, webhdfs
from tony_airflow.yarn.kerberos import KerberosLogin
from tony_airflow.yarn.tokens import read_token_file

pytest.importorskip("gssapi")

ROOT = Path(__file__).resolve().parents[2]


def secure_env(cluster: LocalCluster, tmp: Path, **extra: str) -> dict[str, str]:
    """The secure cluster's environment (`tony cluster env`) with an empty ticket cache."""
    env = {**os.environ, **cluster.env(), "KRB5CCNAME": f"FILE:{tmp / 'no-ticket'}"}
    env.pop("HADOOP_TOKEN_FILE_LOCATION", None)
    env.update(extra)
    return env


def keytab_args(cluster: LocalCluster) -> list[str]:
    return ["--principal", cluster.kdc.user_principal, "--keytab", str(cluster.kdc.user_keytab)]


def run(cmd: list[str], env: dict[str, str], timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, **kw)


def app_id_of(out: str) -> str:
    match = re.search(r"Submitted application (application_\d+_\d+)", out)
    assert match, out[-3000:]
    return match.group(1)


def user_fs(cluster: LocalCluster):
    login = KerberosLogin(cluster.kdc.user_principal, str(cluster.kdc.user_keytab))
    return webhdfs(HadoopConf.load(cluster.conf_dir), login=login)


def ticket_env_for(cluster: LocalCluster, tmp: Path) -> dict[str, str]:
    """A shell after `kinit -kt` (a ticket cache of its own), for the commands that read one."""
    env = secure_env(cluster, tmp, KRB5CCNAME=f"FILE:{tmp / 'ccache'}")
    subprocess.run(["kinit", "-kt", str(cluster.kdc.user_keytab), cluster.kdc.user_principal], env=env, check=True)
    return env


@pytest.fixture(scope="module")
def ticket_env(secure_cluster: LocalCluster, tmp_path_factory) -> dict[str, str]:
    return ticket_env_for(secure_cluster, tmp_path_factory.mktemp("ticket"))


# ------------------------------------------------------------------ refused without credentials
def test_without_credentials_nothing_is_submitted_and_plain_requests_get_401(secure_cluster, secure_rm, tmp_path):
    before = len(secure_rm.applications())
    proc = run([str(BIN / "ytf-submit"), "-r", "worker:1", "true"], secure_env(secure_cluster, tmp_path), 120)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "kinit" in lines[0] and "--keytab" in lines[0], proc.stderr
    assert len(secure_rm.applications()) == before
    for url in (f"{secure_cluster.rm_url}/ws/v1/cluster/apps",
                f"{secure_cluster.nn_url}/webhdfs/v1/?op=LISTSTATUS",
                f"{secure_cluster.nn_url}/webhdfs/v1/?op=LISTSTATUS&user.name=root"):
        assert httpx.get(url, timeout=30).status_code == 401, url


def test_a_wrong_keytab_is_refused_in_one_line(secure_cluster, tmp_path):
    proc = run([str(BIN / "ytf-submit"), "--principal", "nobody@TONY.TEST", "--keytab",
                str(secure_cluster.kdc.user_keytab), "-r", "worker:1", "true"], secure_env(secure_cluster, tmp_path), 120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("error: --keytab: no ticket for nobody@TONY.TEST"), proc.stderr


# ------------------------------------------------------------------ a real job with a keytab
TASK_MB = "2560"  # on three hosts of 4096 MiB: one task per host (tests/e2e/test_secure_hosts.py)


@pytest.fixture(scope="module")
def trained(secure_cluster: LocalCluster, secure_rm, tmp_path_factory) -> dict:
    """ps:1,worker:2 with hdfs:// input and output and TensorBoard, submitted with a keytab; one task per
    host. While it runs, the AM's page and TensorBoard are read through the tracking URL with SPNEGO, and
    the AM is asked directly."""
    from tony_airflow.examples.digits_data import write_npz

    tmp = tmp_path_factory.mktemp("secure-job")
    fs = user_fs(secure_cluster)
    fs.makedirs("/tmp/secure/input", exist_ok=True)
    for path in write_npz(str(tmp / "npz")):
        fs.put_file(path, f"/tmp/secure/input/{Path(path).name}")
    started = time.monotonic()
    submit = subprocess.Popen(
        [str(BIN / "ytf-submit"), *keytab_args(secure_cluster), "-r", "ps:1,worker:2", "-m", f"ps:{TASK_MB}",
         "-m", f"worker:{TASK_MB}", "-m", "tensorboard:1024", "-i", "hdfs:///tmp/secure/input",
         "-o", "hdfs:///tmp/secure/model", "-t", "-n", "secure-train", "-s", str(PAYLOADS / "own_host.py"),
         "python3 ${DTF_TASK_SCRIPT} python3 -m tony_airflow.examples.digits_keras --epochs 6 --sleep-per-epoch 1"],
        env=secure_env(secure_cluster, tmp), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: dict = {}
    try:
        first = submit.stdout.readline()
        app_id = app_id_of(first)
        seen.update(through_the_tracking_url(secure_rm, app_id, submit))
    finally:
        try:
            out, err = submit.communicate(timeout=600)
        finally:
            if submit.poll() is None:
                submit.kill()
    record("secure ps:1,worker:2 job (one task per host, TensorBoard)", time.monotonic() - started)
    assert submit.returncode == 0, out[-2000:] + err[-3000:]
    return {"app_id": app_id, "out": first + out, "err": err, **seen}


def through_the_tracking_url(rm, app_id: str, submit: subprocess.Popen) -> dict:
    """What the tracking URL and the AM's own address answer while the job runs (status codes, texts)."""
    auth = rm.auth
    deadline = time.monotonic() + 240
    tracking = ""
    while "/proxy/" not in tracking:
        assert submit.poll() is None and time.monotonic() < deadline, "no tracking URL while the job ran"
        tracking = (rm.application(app_id).tracking_url or "").rstrip("/")
        time.sleep(0.5)
    page = httpx.get(f"{tracking}/pages/tony/", auth=auth, timeout=30, follow_redirects=True)
    while page.status_code == 404:  # skein's AM registers before our AM adds its page
        assert submit.poll() is None and time.monotonic() < deadline, "the AM's page never appeared"
        time.sleep(0.5)
        page = httpx.get(f"{tracking}/pages/tony/", auth=auth, timeout=30, follow_redirects=True)
    progress = httpx.get(f"{tracking}/pages/tony/progress.json", auth=auth, timeout=30).json()
    direct = {path: httpx.get(f"http://{progress['address']}{path}", timeout=30)
              for path in ("/", "/status.json", "/events.jsonl", "/output.json", "/progress.json")}
    tags = f"{tracking}/pages/tensorboard/data/plugin/scalars/tags"
    board = httpx.get(tags, auth=auth, timeout=30)
    while board.status_code != 200 and submit.poll() is None and time.monotonic() < deadline:
        time.sleep(1)
        board = httpx.get(tags, auth=auth, timeout=30)
    unauthenticated = httpx.get(f"{tracking}/pages/tony/", timeout=30).status_code
    return {"page": (page.status_code, page.text), "board": board.status_code, "plain": unauthenticated,
            "direct": {path: (r.status_code, r.text) for path, r in direct.items()}}


def test_keytab_job_reads_and_writes_hdfs_as_the_principal(secure_cluster, secure_rm, trained):
    report = secure_rm.application(trained["app_id"])
    assert report.final_status == "SUCCEEDED" and report.user == secure_cluster.kdc.user
    fs = user_fs(secure_cluster)
    metrics = json.loads(fs.cat("/tmp/secure/model/metrics.json"))
    assert metrics["workers"] == 2 and metrics["test_accuracy"] > 0.5
    owners = {info["owner"] for info in fs.ls("/tmp/secure/model", detail=True)}
    assert owners == {secure_cluster.kdc.user}  # the principal's short name, not the daemons' `hdfs`
    assert any("tfevents" in f for f in fs.find("/tmp/secure/model/tensorboard"))


def test_the_am_page_and_tensorboard_are_reached_through_the_tracking_url_only(secure_cluster, trained):
    """Through the ResourceManager's proxy with SPNEGO (401 without); the AM itself, asked directly from
    another host, refuses (issue #30 item 9: the proxy applies the application's view ACLs)."""
    status, text = trained["page"]
    assert status == 200 and "worker:1" in text, text[:500]
    assert trained["board"] == 200
    assert trained["plain"] == 401
    if secure_cluster.network is None:
        return  # the AM's host is this one: its pages are the local web UI's to read
    for path, (status, text) in trained["direct"].items():
        assert status == 403 and "tracking URL" in text, (path, text[:300])


def test_logs_history_and_history_server_work_with_a_ticket(secure_cluster, trained, ticket_env):
    app_id = trained["app_id"]
    logs = run([str(BIN / "tony"), "logs", app_id], ticket_env, 180)
    assert logs.returncode == 0 and "epoch 5 loss" in logs.stdout, logs.stdout[-2000:] + logs.stderr[-2000:]
    seen = {}  # what own_host.py printed in each task's log, from whichever host it ran on
    for line in logs.stdout.splitlines():  # each line as `tony logs` shows it: "[worker:0] own-host OK …"
        if "own-host OK " in line:
            _, _, task, host, peers, _master = line[line.index("own-host OK "):].split()
            seen[task] = (host, peers)
    assert sorted(seen) == ["ps:0", "worker:0", "worker:1"], logs.stdout[-3000:]
    peers = {p for _, p in seen.values()}
    assert len(peers) == 1  # every task sees the same cluster, each at its own host
    hosts = {host for host, _ in seen.values()}
    assert {a.rsplit(":", 1)[0] for a in peers.pop().split(",")} == hosts
    if secure_cluster.network:  # one task per host: `tony logs` read all three hosts' logs
        assert hosts == {h.address for h in secure_cluster.network.hosts}
    show = run([str(BIN / "tony"), "history", "show", app_id], ticket_env, 120)
    assert show.returncode == 0 and "worker" in show.stdout and "SUCCEEDED" in show.stdout, show.stderr
    # until when YARN renews the job's HDFS token (Hadoop's default max lifetime: 7 days), issue #44 item 2
    now = datetime.datetime.now(datetime.UTC)
    days = {(now + datetime.timedelta(days=7, hours=-h)).strftime("%Y-%m-%d") for h in (0, 1)}  # issued < 1 h ago
    assert any(f"HDFS_DELEGATION_TOKEN: renewed by YARN until {d}" in show.stdout for d in days), show.stdout[:2000]
    server = subprocess.Popen([str(BIN / "tony"), "history", "serve", "--port", "0"], env=ticket_env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        assert line.startswith("History server: http"), line + server.stderr.read()
        base = line.split()[-1].rstrip("/")
        page = httpx.get(f"{base}/", timeout=60)
        assert page.status_code == 200 and app_id in page.text
        job = httpx.get(f"{base}/jobs/{app_id}", timeout=60)
        assert job.status_code == 200 and "worker" in job.text and '<div class="tokens">' in job.text
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_task_environment_holds_no_credential_and_nothing_secret_reaches_the_logs(secure_cluster, secure_rm, tmp_path):
    """The task prints its environment; it copies its token file and the job secret aside for this check."""
    aside = tmp_path / "aside"
    aside.mkdir(mode=0o777)
    cmd = (f"env | sort; cp $HADOOP_TOKEN_FILE_LOCATION {aside}/tokens; "
           f"cp .tony-secret {aside}/secret 2>/dev/null || cp ../.tony-secret {aside}/secret")
    proc = run([str(BIN / "ytf-submit"), *keytab_args(secure_cluster), "-r", "worker:1", "-m", "512", "-n",
                "secure-env", cmd], secure_env(secure_cluster, tmp_path), 300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    app_id = app_id_of(proc.stdout)
    ticket = ticket_env_for(secure_cluster, tmp_path)
    logs = run([str(BIN / "tony"), "logs", "--raw", app_id], ticket, 180).stdout  # the AM's and the task's
    task_log = run([str(BIN / "tony"), "logs", "--task", "worker:0", "--all-files", app_id], ticket, 180).stdout
    assert "HADOOP_TOKEN_FILE_LOCATION=" in task_log and "DTF_TASK_JOB_NAME=worker" in task_log, task_log[-3000:]
    assert "keytab" not in task_log.lower()  # the task never sees one (the AM alone gets it: token_renewal.py)
    keytab = secure_cluster.kdc.user_keytab
    for forbidden in (str(keytab), USER_PASSWORD, base64.b64encode(keytab.read_bytes()).decode(), keytab.read_bytes().hex()):
        assert forbidden not in logs, forbidden
    # the AM's new HDFS tokens: a URL that carries one is logged redacted
    assert set(re.findall(r"(?:token|delegation)=([^&\s\"']+)", logs)) <= {"<redacted>"}, logs[-3000:]
    secret = (aside / "secret").read_text().strip()
    tokens = read_token_file(aside / "tokens")
    assert {t.kind for t in tokens} >= {"HDFS_DELEGATION_TOKEN"}
    for value in (secret, *(t.url_string() for t in tokens)):
        assert value and value not in logs and value not in proc.stdout + proc.stderr
    assert secure_rm.application(app_id).final_status == "SUCCEEDED"


def test_tony_kill_with_a_ticket_kills_the_job(secure_cluster, secure_rm, ticket_env):
    proc = run([str(BIN / "ytf-submit"), "--detach", "-r", "worker:1", "-m", "512", "-n", "secure-kill",
                "sleep 300"], ticket_env, 180)
    assert proc.returncode == 0, proc.stderr
    app_id = app_id_of(proc.stdout)
    kill = run([str(BIN / "tony"), "kill", app_id], ticket_env, 120)
    assert kill.returncode == 0, kill.stderr
    assert wait_terminal(secure_rm, app_id, timeout=60).state == "KILLED"


# ------------------------------------------------------------------ Airflow through a kerberos connection
@pytest.fixture(scope="module")
def airflow_env(secure_cluster: LocalCluster, tmp_path_factory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("airflow-secure")
    # no host: both ResourceManagers come from the configuration, as on an HA cluster
    conn = {"conn_type": "yarn",
            "extra": {"hadoop_conf_dir": str(secure_cluster.conf_dir), "auth": "kerberos",
                      "principal": secure_cluster.kdc.user_principal, "keytab": str(secure_cluster.kdc.user_keytab)}}
    return secure_env(secure_cluster, home, AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False",
                      AIRFLOW_CONN_YARN_DEFAULT=json.dumps(conn))


def test_airflow_pipeline_runs_through_a_kerberos_connection(secure_cluster, secure_rm, airflow_env):
    summary, log = run_dag(airflow_env, ROOT / "dags_examples" / "tony_pipeline.py", "tony_pipeline", 900)
    assert summary["state"] == "success", log[-4000:]
    app_id = summary["xcoms"]["train"]["application_id"]
    assert secure_rm.application(app_id).final_status == "SUCCEEDED"
    assert summary["xcoms"]["evaluate"]["return_value"]["accuracy"] > 0.5


def test_airflow_deferrable_operator_and_sensor_on_the_secure_cluster(secure_cluster, secure_rm, airflow_env):
    dags = Path(__file__).resolve().parent / "airflow_dags" / "e2e_dags.py"
    summary, log = run_dag(airflow_env, dags, "tony_deferrable", 900)
    assert summary["state"] == "success", log[-4000:]
    assert log.count("running trigger in line") == 2
    assert secure_rm.application(summary["xcoms"]["train"]["application_id"]).final_status == "SUCCEEDED"


def test_killing_the_airflow_task_kills_the_application_on_the_secure_cluster(secure_cluster, secure_rm,
                                                                               airflow_env):
    dags = Path(__file__).resolve().parent / "airflow_dags" / "e2e_dags.py"
    proc = subprocess.Popen(dag_command(dags, "tony_killable"), env=airflow_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        running: list = []
        while not running:
            assert time.monotonic() < deadline and proc.poll() is None, "the training never ran"
            time.sleep(0.5)
            running = secure_rm.applications(states=["RUNNING"], tags=["airflow_dag_id:tony_killable"])
        proc.send_signal(signal.SIGTERM)  # what Airflow's supervisor does to a task that is killed
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert wait_terminal(secure_rm, running[0].id, timeout=60).state == "KILLED", out[-3000:]


# ------------------------------------------------------------------ Azkaban and Oozie: a token file only
@pytest.fixture(scope="module")
def token_file(secure_cluster: LocalCluster, tmp_path_factory) -> Path:
    """What the scheduler's security manager hands its job: HDFS and RM delegation tokens."""
    tmp = tmp_path_factory.mktemp("tokens")
    path = tmp / "job.tokens"
    proc = run([str(BIN / "tony"), "tokens", "--out", str(path), *keytab_args(secure_cluster)],
               secure_env(secure_cluster, tmp), 120)
    assert proc.returncode == 0, proc.stderr
    return path


def as_scheduler_job(env: dict[str, str], cluster: LocalCluster, tmp: Path, token_file: Path) -> dict[str, str]:
    """The environment a scheduler's job gets on this cluster: its tokens, no ticket, no keytab."""
    cluster_keys = ("KRB5", "HADOOP", "PATH", "SKEIN")
    env = {**env, **{k: v for k, v in secure_env(cluster, tmp).items() if k.startswith(cluster_keys)}}
    env["HADOOP_TOKEN_FILE_LOCATION"] = str(token_file)
    env.pop("HADOOP_USER_NAME", None)
    return env


def test_azkaban_flow_runs_with_a_token_file_only(secure_cluster, secure_rm, token_file, tmp_path):
    import shutil

    jobtype = ROOT / "azkaban_jobtype"
    plugins = tmp_path / "plugins" / "jobtypes"
    shutil.copytree(jobtype / "tensorflow", plugins / "tensorflow")
    (plugins / "commonprivate.properties").write_text("execute.as.user=false\n")
    (tmp_path / "work").mkdir()
    flow = tmp_path / "flow"
    flow.mkdir()
    (flow / "train.job").write_text("type=tensorflow\ncluster_requirement=worker:1\ntask_memory=512\n"
                                    "task_command=python3 -c \"print('trained with tokens')\"\n")
    cmd, env = java_command(maven_driver(jobtype / "driver"), "tony.azkaban.RunFlow", str(plugins), str(flow),
                            str(tmp_path / "work"), "301", "train")
    env = as_scheduler_job(env, secure_cluster, tmp_path, token_file)
    proc = run(cmd, env, 600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    app_id = app_id_of(proc.stdout)
    assert secure_rm.application(app_id).final_status == "SUCCEEDED"


def test_azkaban_job_without_tokens_or_ticket_says_so(secure_cluster, secure_rm, tmp_path):
    props = tmp_path / "train.props"
    props.write_text("cluster_requirement=worker:1\ntask_command=true\n")
    before = len(secure_rm.applications())
    proc = run([str(BIN / "tony-azkaban")], secure_env(secure_cluster, tmp_path, JOB_PROP_FILE=str(props)), 120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Kerberos ticket and no Hadoop delegation tokens" in lines[0], proc.stderr
    assert len(secure_rm.applications()) == before


def test_oozie_action_runs_with_a_token_file_only(secure_cluster, secure_rm, token_file, tmp_path):
    from tony_airflow.local.cluster import jars

    work = tmp_path / "launcher"
    work.mkdir()
    (work / "train.py").write_text((PAYLOADS / "sleep.py").read_text())
    # the shell action, run by Oozie's own ShellMain (there is no Oozie server on this cluster)
    gen = run([str(BIN / "tony"), "oozie", "workflow", "--action-type", "shell", "-r", "worker:1", "-m", "512",
               "--env", "SLEEP_S=1", "-s", "train.py", "python3 $DTF_TASK_SCRIPT"], secure_env(secure_cluster, tmp_path), 60)
    assert gen.returncode == 0, gen.stderr
    (tmp_path / "workflow.xml").write_text(gen.stdout)
    oozie_jars = maven_driver(ROOT / "oozie" / "driver", f"-Dhadoop.version={jars.hadoop_version()}")
    wf_id = f"0000002-{time.time_ns() % 10**15:015d}-oozie-oozi-W"
    cmd, env = java_command([*oozie_jars, str(jars.jar_dir() / "*")], "tony.oozie.RunShellAction",
                            str(tmp_path / "workflow.xml"), "train", str(work), wf_id)
    env = as_scheduler_job(env, secure_cluster, tmp_path, token_file)
    proc = run(cmd, env, 300, cwd=work)
    assert proc.returncode == 0 and "ACTION train OK" in proc.stdout, proc.stdout[-4000:] + proc.stderr[-2000:]
    data = dict(line[len("ACTIONDATA "):].split("=", 1) for line in proc.stdout.splitlines()
                if line.startswith("ACTIONDATA "))
    assert data["final_status"] == "SUCCEEDED"
    assert secure_rm.application(data["application_id"]).final_status == "SUCCEEDED"


# ------------------------------------------------------------------ HA: failover under a running job
RUN = "hdfs://tony/tmp/e2e/ha-run"


def _kill_active(cluster: LocalCluster, names: tuple[str, str], states) -> tuple[str, float]:
    """SIGKILL whichever of `names` is active; the seconds until the other one is."""
    active = names[states().index("active")]
    daemon = next(d for d in cluster.daemons if d.name == active)
    pid = cluster.pid(daemon)
    assert pid
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    deadline = killed + 90
    while "active" not in states():
        assert time.monotonic() < deadline, f"no active one 90 s after killing {active}: {states()}"
        time.sleep(0.2)
    return active, time.monotonic() - killed


def test_ps_job_goes_on_through_rm_and_namenode_failover(secure_cluster, secure_rm, tmp_path):
    """Last in the module: it kills daemons (and restarts them as standbys)."""
    ha_cluster, ha_rm = secure_cluster, secure_rm
    env = secure_env(secure_cluster, tmp_path)
    conf = HadoopConf.load(ha_cluster.conf_dir)
    login = KerberosLogin(secure_cluster.kdc.user_principal, str(secure_cluster.kdc.user_keytab))
    fs = webhdfs(conf, login=login, uri=RUN)
    paths = prepare(RUN, fs)
    assert paths["input"] == f"{RUN}/data"  # the nameservice is kept, not re-pointed to one NameNode
    follow = subprocess.Popen(
        [str(BIN / "ytf-submit"), *keytab_args(secure_cluster), "-r", "chief:1,worker:2,ps:1", "-m", "1536",
         "--tracked", "chief", "--untracked", "worker,ps",
         "-i", paths["input"], "-o", paths["output"], "-t", "-n", "ha-failover", "--follow",
         "python3 -m tony_airflow.examples.digits_ps --epochs 14 --sleep-per-epoch 3"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watched: dict = {}
    try:
        app_id, seen = _wait_training(follow)
        # an Airflow sensor, deferred, watches it too: its trigger polls every second through the failover
        watcher = threading.Thread(target=watch_with_a_deferred_sensor, args=(app_id, secure_cluster, watched),
                                   daemon=True)
        watcher.start()
        rm, rm_s = _kill_active(ha_cluster, ("resourcemanager", "resourcemanager-rm2"), ha_cluster.rm_states)
        record("HA: active RM SIGKILLed -> the other active", rm_s)
        record("HA: active RM SIGKILLed -> the application RUNNING again (recovered)",
               rm_s + _until(lambda: ha_rm.application(app_id).state == "RUNNING"))
        time.sleep(4)  # the chief checkpoints and the executor pushes every few seconds: kill under a push
        killed_at = time.time()
        nn, nn_s = _kill_active(ha_cluster, ("namenode", "namenode-nn2"), ha_cluster.nn_states)
        record("HA: active NameNode SIGKILLed -> the other active", nn_s)
        out = hdfs_path(paths["output"])
        record("HA: active NameNode SIGKILLed -> the next push landed",
               nn_s + _until(lambda: _newest_ms(fs, out) > killed_at * 1000))
        rest, _ = follow.communicate(timeout=400)
        output = seen + rest
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    assert follow.returncode == 0, output[-3000:]
    assert output.count("Submitted application") == 1, "submitted again"
    watcher.join(timeout=120)
    assert watched.get("event", {}).get("status") == "success" and "error" not in watched, watched
    report = ha_rm.application(app_id)
    assert report.final_status == "SUCCEEDED", report.diagnostics
    assert report.id == app_id and [a.id for a in ha_rm.applications(tags=None) if a.name == "ha-failover"] == [app_id]

    metrics = json.loads(fs.cat(f"{out}/metrics.json"))
    assert metrics["epochs_run"] == list(range(14)) and metrics["test_accuracy"] > 0.8
    index = fs.cat(f"{out}/checkpoints/checkpoint").decode()
    latest = re.search(r'^model_checkpoint_path: "([^"]+)"', index, re.MULTILINE).group(1)
    files = fs.find(out)
    assert f"{out}/checkpoints/{latest}.index" in files, (latest, files)
    assert not [f for f in files if ".tony-part" in f], files
    assert fs.info(f"{out}/model.weights.h5")["size"] > 0

    # what was killed comes back as standby; the cluster serves as before
    ha_cluster.up(log=lambda *_: None)
    assert sorted(ha_cluster.rm_states()) == ["active", "standby"]
    assert sorted(ha_cluster.nn_states()) == ["active", "standby"]
    # the other front ends: status and logs through whichever RM is active now
    ticket = ticket_env_for(secure_cluster, tmp_path)
    status = run([str(BIN / "tony"), "status", app_id], ticket, 120)
    assert status.returncode == 0 and "SUCCEEDED" in status.stdout, status.stdout + status.stderr
    logs = run([str(BIN / "tony"), "logs", "--raw", app_id], ticket, 180)  # YARN's dump: its hosts
    assert logs.returncode == 0 and "test accuracy" in logs.stdout, logs.stderr[-2000:]
    hosts = set(re.findall(r"^Container: container_\S+ on (198\.18\.0\.\d+)_", logs.stdout, re.MULTILINE))
    if secure_cluster.network:
        assert len(hosts) >= 2, hosts  # every host's containers, read from the aggregated logs
    print(f"killed {rm} ({rm_s:.1f} s to a new active RM) and {nn} ({nn_s:.1f} s to a new active NameNode)")


def _newest_ms(fs, root: str) -> int:
    """The modification time of the newest file under `root` (ms, as WebHDFS gives it)."""
    return max((int(f.get("modificationTime") or 0) for f in fs.find(root, detail=True).values()
                if str(f.get("type")).lower() == "file"), default=0)


def _until(done, within: float = 120) -> float:
    """Seconds until `done()` is true (it may fail meanwhile: a daemon is taking over)."""
    started = time.monotonic()
    while time.monotonic() - started < within:
        try:
            if done():
                break
        except Exception:
            pass
        time.sleep(0.2)
    return time.monotonic() - started


def _wait_training(follow: subprocess.Popen) -> tuple[str, str]:
    """The application id once the chief trains (it has printed an epoch), read from ytf-submit's output,
    and that output so far."""
    app_id, seen = None, []
    deadline = time.monotonic() + 240
    assert follow.stdout is not None
    for line in follow.stdout:
        seen.append(line)
        found = re.search(r"Submitted application (application_\d+_\d+)", line)
        app_id = found.group(1) if found else app_id
        if app_id and "epoch 1 loss" in line:
            return app_id, "".join(seen)
        assert time.monotonic() < deadline, "the chief did not train within 240 s"
    raise AssertionError(f"ytf-submit ended before training: exit {follow.wait()}")
