"""Issue #15 on the real local cluster: faults a user meets on a busy or unlucky day.

Each test injects the fault for real (a full queue, a signal, a lost AM, a memory
hog, a 50 MB line) and checks the outcome the user sees, and that nothing is left.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import psutil
import pytest

from tests.e2e.helpers import BIN, PAYLOADS, aggregated_logs, as_from_a_terminal, record, wait_terminal, ytf_submit
from tony_airflow.core.client import TonyClient
from tony_airflow.core.executor.task import AM_LOST_EXIT
from tony_airflow.core.history.reader import load_by_id
from tony_airflow.core.history.store import HistoryStore
from tony_airflow.core.spec import build_job_spec
from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.hdfs import webhdfs
from tony_airflow.yarn.rest import application_of_container

SMALL = ["-m", "384"]


def _popen(*args: str, **kwargs) -> subprocess.Popen:
    """A command as a user starts it from a terminal (its Ctrl-C and SIGTERM are the tests' to play)."""
    return subprocess.Popen([str(BIN / args[0]), *args[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=as_from_a_terminal, **kwargs)


def _read_until(stream, marker: str, timeout: float = 120) -> list[str]:
    lines, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        lines.append(line)
        if marker in line:
            return lines
    raise AssertionError(f"{marker!r} not seen: {lines}")


def _app_id(lines: list[str]) -> str:
    return next(w for line in lines for w in line.split() if w.startswith("application_"))


def _wait_running(handle_or_rm, app_id: str, client: TonyClient, tasks: int, timeout: float = 120) -> None:
    handle = client.handle(app_id)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        progress = handle.progress()
        if progress and progress.running >= tasks:
            return
        time.sleep(0.5)
    raise AssertionError(f"{app_id}: {tasks} tasks never ran")


# ------------------------------------------------------------------ 1: a gang that forms slowly
def test_a_gang_that_forms_slower_than_the_heartbeat_timeout_succeeds(local_cluster, rm):
    """Another application fills the queue for ~25 s, so one task of ours waits for it;
    the heartbeat timeout is 10 s. The waiting tasks are alive: the job succeeds."""
    blocker = build_job_spec({"cluster_requirement": "worker:2", "task_memory": "5120", "name": "queue-filler",
                              "script": str(PAYLOADS / "sleep.py"), "command": "python3 ${DTF_TASK_SCRIPT}",
                              "env": {"SLEEP_S": "25"}})
    with TonyClient() as client:
        filler = client.submit(blocker)
        _wait_running(rm, filler.app_id, client, tasks=2)
        job = build_job_spec({"cluster_requirement": "ps:1,worker:2", "task_memory": "2048",
                              "script": str(PAYLOADS / "sleep.py"), "command": "python3 ${DTF_TASK_SCRIPT}",
                              "env": {"SLEEP_S": "2"}, "timeouts": {"heartbeat": 10}, "name": "slow-gang"})
        handle = client.submit(job)
        report = handle.wait()
        assert filler.wait().final_status == "SUCCEEDED"
    assert report.final_status == "SUCCEEDED", report.diagnostics
    events = load_by_id(HistoryStore.open(), handle.app_id).events
    registered = sorted(e["time"] for e in events if e["event"] == "TASK_REGISTERED")
    record("slow gang: first to last registration", registered[-1] - registered[0])
    assert registered[-1] - registered[0] > 10, "the last task did not wait longer than the heartbeat timeout"


# ------------------------------------------------------------------ a scheduler's retry
def test_a_retried_azkaban_job_follows_the_application_its_dead_try_left_running(local_cluster, rm, tmp_path):
    """Issue #30 item 1: Azkaban's executor lost the first try (SIGKILL: it could kill nothing); the retry
    of the same job of the same execution finds the application by its tags and follows it to its end,
    and no second application writes the same output."""
    props = tmp_path / "train.job"
    props.write_text(f"type=tensorflow\ncluster_requirement=worker:1\ntask_memory=384\n"
                     f"task_command=python3 {PAYLOADS / 'sleep.py'}\nworker_env.SLEEP_S=25\n"
                     f"azkaban.flow.execid=4242\nazkaban.flow.flowid=nightly\nazkaban.flow.projectname=ml\n"
                     f"azkaban.job.id=Train\n")
    env = {**os.environ, "JOB_PROP_FILE": str(props)}
    first = _popen("tony-azkaban", env=env)
    app_id = _app_id(_read_until(first.stdout, "Submitted application"))
    first.kill()
    first.communicate(timeout=30)
    assert not rm.application(app_id).is_terminal
    retry = subprocess.run([str(BIN / "tony-azkaban")], env=env, capture_output=True, text=True, timeout=300)
    assert retry.returncode == 0, retry.stdout[-2000:] + retry.stderr[-2000:]
    assert f"Following {app_id}, submitted by an earlier try of this job" in retry.stdout, retry.stdout[-2000:]
    tagged = rm.applications(tags=["azkaban_exec_id:4242"])
    assert [a.id for a in tagged] == [app_id] and tagged[0].final_status == "SUCCEEDED"


# ------------------------------------------------------------------ 5, 6: signals
def test_two_tries_of_one_azkaban_job_at_once_leave_one_training(local_cluster, rm, tmp_path):
    """Issue #51 item 16: looking for an earlier try's application and submitting are two steps, so two tries
    of one job started together (an Oozie launcher's next attempt beside one not yet gone, a scheduler's
    recovery) both found nothing and both submitted: two trainings for one output. Each try settles on the
    older application after submitting: one training runs, the younger is killed, both tries report the one."""
    props = tmp_path / "train.job"
    props.write_text(f"type=tensorflow\ncluster_requirement=worker:1\ntask_memory=384\n"
                     f"task_command=python3 {PAYLOADS / 'sleep.py'}\nworker_env.SLEEP_S=10\n"
                     f"azkaban.flow.execid=4343\nazkaban.flow.flowid=nightly\nazkaban.flow.projectname=ml\n"
                     f"azkaban.job.id=Train\n")
    env = {**os.environ, "JOB_PROP_FILE": str(props)}
    tries = [_popen("tony-azkaban", env=env) for _ in range(2)]
    outs = [t.communicate(timeout=300) for t in tries]
    assert [t.returncode for t in tries] == [0, 0], outs
    tagged = rm.applications(tags=["azkaban_exec_id:4343"])
    ran = [a for a in tagged if a.final_status == "SUCCEEDED"]
    assert len(ran) == 1 and all(a.state == "KILLED" for a in tagged if a not in ran), (tagged, outs)
    for out, _ in outs:  # each try ended with the one training
        assert re.search(rf"{ran[0].id} (FINISHED )?SUCCEEDED", out), out[-2000:]


def test_sigterm_during_submission_kills_what_was_submitted_and_exits_143(local_cluster, rm, tmp_path):
    """Azkaban cancels right away: the SIGTERM lands while the job is being submitted."""
    props = tmp_path / "train.job"
    props.write_text(f"type=tensorflow\ncluster_requirement=worker:1\ntask_memory=384\n"
                     f"task_command=python3 {PAYLOADS / 'sleep.py'}\nworker_env.SLEEP_S=300\n")
    proc = _popen("tony-azkaban", env={**os.environ, "JOB_PROP_FILE": str(props)})
    _read_until(proc.stdout, "Submitting")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, out + err
    assert "Traceback" not in out + err
    app_id = _app_id([out])
    assert "SIGTERM: killing " + app_id in out
    assert wait_terminal(rm, app_id, timeout=30).state == "KILLED"


def test_ctrl_c_on_ytf_submit_kills_the_application(local_cluster, rm):
    proc = _popen("ytf-submit", "-r", "worker:1", *SMALL, "--env", "SLEEP_S=300", "-s", str(PAYLOADS / "sleep.py"),
                  "python3 ${DTF_TASK_SCRIPT}")
    app_id = _app_id(_read_until(proc.stdout, "Submitted application"))
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert f"SIGINT: killing {app_id}" in err and "Traceback" not in err
    assert rm.application(app_id).state == "KILLED"


def test_detach_leaves_the_application_running(local_cluster, rm):
    proc, app_id = ytf_submit("--detach", "-r", "worker:1", *SMALL, "--env", "SLEEP_S=300",
                              "-s", str(PAYLOADS / "sleep.py"), "python3 ${DTF_TASK_SCRIPT}")
    try:
        assert proc.returncode == 0 and app_id, proc.stderr
        assert f"tony kill {app_id}" in proc.stdout
        assert not rm.application(app_id).is_terminal
    finally:
        subprocess.run([str(BIN / "tony"), "kill", app_id], check=True, capture_output=True, timeout=60)
    assert wait_terminal(rm, app_id, timeout=30).state == "KILLED"


# ------------------------------------------------------------------ 7: client mode after a kill
def test_the_local_chief_stops_when_its_job_is_killed(local_cluster, rm):
    proc = _popen("ytf-submit", "--client", "-r", "worker:1", *SMALL, "--env", "SLEEP_S=300",
                  "--heartbeat-timeout", "10", "-s", str(PAYLOADS / "sleep.py"), "python3 ${DTF_TASK_SCRIPT}")
    app_id = _app_id(_read_until(proc.stdout, "Submitted application"))
    me = psutil.Process(proc.pid)
    deadline = time.monotonic() + 120
    while not any("sleep.py" in " ".join(c.cmdline()) for c in me.children(recursive=True)):
        assert time.monotonic() < deadline, "the local chief never started"
        time.sleep(0.5)
    chief = [c for c in me.children(recursive=True)]
    killed_at = time.monotonic()
    subprocess.run([str(BIN / "tony"), "kill", app_id], check=True, capture_output=True, timeout=60)
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - killed_at
    record("client mode: tony kill -> ytf-submit exited", took)
    assert proc.returncode == 1, out + err
    assert took < 30, f"the local chief outlived the kill by {took:.0f}s"
    assert not [c for c in chief if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert rm.application(app_id).state == "KILLED"


# ------------------------------------------------------------------ 14: the AM is gone
def test_executors_stop_when_the_am_is_gone(local_cluster, rm):
    """The AM's processes die while its NodeManager is frozen (it cannot clean up): every executor
    stops its command and exits on its own after the heartbeat timeout; history then says FAILED."""
    # one AM attempt: this is about the executors of a lost AM (a second AM attempt would go on: test_secure_hosts)
    proc = _popen("ytf-submit", "-r", "ps:1,worker:2", *SMALL, "--env", "SLEEP_S=600", "--heartbeat-timeout", "10",
                  "--am-attempts", "1", "-s", str(PAYLOADS / "sleep.py"), "python3 ${DTF_TASK_SCRIPT}")
    app_id = _app_id(_read_until(proc.stdout, "Submitted application"))
    with TonyClient() as client:
        _wait_running(rm, app_id, client, tasks=3)
    nodemanager = local_cluster.running()["nodemanager"]
    os.kill(nodemanager, signal.SIGSTOP)
    try:
        procs = [p for p in local_cluster.container_processes() if application_of_container(p.container_id) == app_id]
        am = [p for p in procs if p.container_id.endswith("_000001")]
        executors = [p for p in procs if "tony_airflow.core.executor" in p.cmdline]
        assert am and len(executors) == 3, procs
        for p in am:
            os.kill(p.pid, signal.SIGKILL)
        lost_at = time.monotonic()
        alive = executors
        while alive and time.monotonic() - lost_at < 60:
            time.sleep(1)
            alive = [p for p in alive if psutil.pid_exists(p.pid) and psutil.Process(p.pid).status() != "zombie"]
        took = time.monotonic() - lost_at
        record("AM killed -> every executor exited (heartbeat timeout 10 s)", took)
        users = [p for p in local_cluster.container_processes()
                 if application_of_container(p.container_id) == app_id and "sleep.py" in p.cmdline]
    finally:
        os.kill(nodemanager, signal.SIGCONT)
    assert not alive, f"executors still running {took:.0f}s after the AM died: {alive}"
    assert not users, f"user commands outlived their executors: {users}"
    report = wait_terminal(rm, app_id, timeout=120)
    proc.communicate(timeout=60)
    assert report.final_status == "FAILED"
    logs = aggregated_logs(rm, app_id)
    assert "the AM at" in logs and "has not answered for" in logs
    job = load_by_id(HistoryStore.open(), app_id, rm=rm)
    assert job.status == "FAILED"
    assert not [r for a in job.attempts for r in a.tasks.values() if r.status in ("RUNNING", "REGISTERED")]
    assert AM_LOST_EXIT == 75


def test_a_sigkilled_executor_takes_its_command_with_it(local_cluster, rm):
    """YARN SIGKILLs a container 250 ms after its SIGTERM (the OOM killer at once): the executor can die
    before it has stopped its command. A command behind a wrapper whose process ignores SIGTERM, as
    TensorFlow's MultiWorkerMirroredStrategy workers do, goes with it all the same."""
    proc = _popen("ytf-submit", "-r", "worker:1", *SMALL, "--env", "SLEEP_S=600", "--env", "IGNORE_SIGTERM=1",
                  "--max-attempts", "1", "-s", str(PAYLOADS / "sleep.py"),
                  "python3 ${DTF_TASK_SCRIPT}; echo the command is a grandchild of the executor")
    app_id = _app_id(_read_until(proc.stdout, "Submitted application"))
    try:
        with TonyClient() as client:
            _wait_running(rm, app_id, client, tasks=1)
        # RUNNING means the executor started its wrapper; the shell's python may come a moment later (a
        # CI run under load looked before it had): counted looks, no wall clock.
        for _ in range(120):
            procs = [p for p in local_cluster.container_processes()
                     if application_of_container(p.container_id) == app_id]
            executor = [p for p in procs if "tony_airflow.core.executor" in p.cmdline and "guard" not in p.cmdline]
            command = [p for p in procs if "sleep.py" in p.cmdline]
            if command:
                break
            time.sleep(0.25)
        assert len(executor) == 1 and len(command) == 1, procs
    except BaseException:
        rm.kill(app_id)
        raise
    assert psutil.Process(command[0].pid).ppid() != executor[0].pid  # a grandchild: no parent-death signal
    os.kill(executor[0].pid, signal.SIGKILL)
    killed_at = time.monotonic()
    for _ in range(120):  # counted polls; the group goes at once
        if not psutil.pid_exists(command[0].pid) or psutil.Process(command[0].pid).status() == "zombie":
            break
        time.sleep(0.25)
    record("executor SIGKILLed -> its command (ignoring SIGTERM) gone", time.monotonic() - killed_at)
    assert not psutil.pid_exists(command[0].pid) or psutil.Process(command[0].pid).status() == "zombie", \
        "the command outlived its executor"
    proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert wait_terminal(rm, app_id, timeout=60).final_status == "FAILED"


# ------------------------------------------------------------------ 16: memory limits
def test_a_task_over_its_memory_is_killed_by_yarn_with_yarns_reason(local_cluster, rm):
    proc, app_id = ytf_submit("-r", "worker:1", "-m", "512", "--env", "HOG_MB=2048",
                              "-s", str(PAYLOADS / "hog.py"), "python3 ${DTF_TASK_SCRIPT}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    diagnostics = rm.application(app_id).diagnostics
    assert "worker:0 exited with code" in diagnostics
    assert "512 MB physical memory used" in diagnostics, diagnostics
    assert "512 MB physical memory used" in proc.stderr.strip().splitlines()[-1]


# ------------------------------------------------------------------ 17: a 50 MB line
def test_the_exit_code_survives_a_50_mb_line_without_newline(local_cluster, rm):
    proc, app_id = ytf_submit("-r", "worker:1", "-m", "512", "--env", "STDERR_MB=50",
                              "-s", str(PAYLOADS / "long_stderr.py"), "python3 ${DTF_TASK_SCRIPT}")
    assert proc.returncode == 1
    diagnostics = rm.application(app_id).diagnostics
    assert "worker:0 exited with code 3" in diagnostics, diagnostics[:500]
    assert "the end of a very long line" in diagnostics
    assert len(diagnostics) < 10_000


# ------------------------------------------------------------------ 18, 19: paths and permissions
@pytest.mark.parametrize("option,path", [("-o", "hdfs://"), ("-i", "hdfs:///")])
def test_a_root_path_is_refused_before_submission(local_cluster, rm, option, path):
    before = len(rm.applications())
    proc, app_id = ytf_submit("-r", "worker:1", option, path, "true")
    assert proc.returncode == 2 and app_id is None
    assert len(proc.stderr.strip().splitlines()) == 1 and "root of the filesystem" in proc.stderr
    assert len(rm.applications()) == before


def test_the_history_root_is_shared_like_tmp(local_cluster, rm):
    root = f"/tmp/e2e-history-{os.getpid()}"
    proc, app_id = ytf_submit("-r", "worker:1", *SMALL, "--history-dir", root, "true")
    assert proc.returncode == 0, proc.stderr
    assert webhdfs().info(root)["permission"] == "1777"
    assert HadoopConf.load(local_cluster.conf_dir).get("dfs.permissions.enabled") == "true"


# ------------------------------------------------------------------ 23: reports of the same moment
def test_a_ps_ending_with_the_workers_does_not_fail_the_job(local_cluster, rm):
    exit_at = time.time() + 30
    proc, app_id = ytf_submit("-r", "ps:1,worker:2", *SMALL, "--env", f"EXIT_AT={exit_at}", "--env", "LATE_S=0.3",
                              "-s", str(PAYLOADS / "together.py"), "python3 ${DTF_TASK_SCRIPT}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    logs = aggregated_logs(rm, app_id)
    assert "ps:0 exits now" in logs and "worker:1 exits now" in logs
