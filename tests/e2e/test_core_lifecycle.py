"""The core on the real local cluster: environment, outcomes, timeouts, failover, kill, signing."""

from __future__ import annotations

import json
import time

import httpx

from tests.e2e.helpers import PAYLOADS, aggregated_logs, wait_terminal, ytf_submit
from tony_airflow.core import protocol
from tony_airflow.core.client import TonyClient
from tony_airflow.core.spec import build_job_spec
from tony_airflow.yarn.rest import application_of_container

SMALL = ["-m", "384"]


def test_environment_contract_ps_and_two_workers(local_cluster, rm):
    proc, app_id = ytf_submit("-r", "ps:1,worker:2", *SMALL, "-i", "/data/in", "-o", "/data/out",
                              "--env", "MY_SETTING=42", "-s", str(PAYLOADS / "check_env.py"),
                              "python3 ${DTF_TASK_SCRIPT}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert app_id and f"{app_id} SUCCEEDED" in proc.stdout
    assert "Tracking URL: http" in proc.stdout
    report = rm.application(app_id)
    assert (report.state, report.final_status) == ("FINISHED", "SUCCEEDED")
    logs = aggregated_logs(rm, app_id)
    for task in ("ps:0", "worker:0", "worker:1"):
        assert f"{task} environment OK" in logs
    # the workers finished on their own; the ps was stopped by the AM
    assert logs.count("user command exited with code 0") == 2
    assert "stopped at the AM's request" in logs


def test_worker_failure_fails_the_job_with_its_stderr(local_cluster, rm):
    proc, app_id = ytf_submit("-r", "ps:1,worker:3", *SMALL, "--env", "OTHERS_SLEEP=300",
                              "-s", str(PAYLOADS / "exit_code.py"), "python3 ${DTF_TASK_SCRIPT}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = rm.application(app_id)
    assert report.final_status == "FAILED"
    assert "worker:1 exited with code 1" in report.diagnostics
    assert "ValueError: loss is NaN at step 7" in report.diagnostics
    # the one line the user sees names the task, the code and the error
    last = proc.stderr.strip().splitlines()[-1]
    assert "worker:1 exited with code 1" in last and "loss is NaN" in last
    # the other tasks (sleeping 300 s) were stopped, not waited for
    assert report.finished_time - report.started_time < 200_000


def test_ps_dying_early_fails_quickly(local_cluster, rm):
    proc, app_id = ytf_submit("-r", "ps:1,worker:2", *SMALL, "--env", "EXIT_EARLY=ps", "--env", "SLEEP_S=300",
                              "-s", str(PAYLOADS / "sleep.py"), "python3 ${DTF_TASK_SCRIPT}")
    assert proc.returncode == 1
    report = rm.application(app_id)
    assert "ps:0 exited early with code 0" in report.diagnostics
    assert report.finished_time - report.started_time < 200_000  # workers would sleep 300 s


def test_hanging_task_fails_by_application_timeout(local_cluster, rm):
    proc, app_id = ytf_submit("-r", "worker:1", *SMALL, "--timeout", "15", "--env", "SLEEP_S=600",
                              "-s", str(PAYLOADS / "sleep.py"), "python3 ${DTF_TASK_SCRIPT}")
    assert proc.returncode == 1
    assert "application timeout" in rm.application(app_id).diagnostics


def test_hanging_executor_fails_by_heartbeat_timeout(local_cluster, rm):
    """Freeze a real executor process (SIGSTOP): its heartbeats stop, the AM notices."""
    import os
    import signal

    job = build_job_spec({"cluster_requirement": "worker:2", "task_memory": 384,
                          "script": str(PAYLOADS / "sleep.py"), "command": "python3 ${DTF_TASK_SCRIPT}",
                          "env": {"SLEEP_S": "300"}, "timeouts": {"heartbeat": 8}})
    with TonyClient() as client:
        handle = client.submit(job)
        deadline = time.monotonic() + 120
        frozen = None
        while frozen is None and time.monotonic() < deadline:
            executors = [p for p in local_cluster.container_processes()
                         if "tony_airflow.core.executor" in p.cmdline
                         and application_of_container(p.container_id) == handle.app_id]
            frozen = executors[0].pid if executors else None
            progress = handle.progress()
            if frozen and progress and progress.running == 2:
                break
            frozen = None if not (progress and progress.running == 2) else frozen
            time.sleep(0.5)
        assert frozen, "no running executor found to freeze"
        os.kill(frozen, signal.SIGSTOP)
        report = handle.wait()
    assert report.final_status == "FAILED"
    assert "heartbeat timeout" in report.diagnostics and "sent no heartbeat for 8s" in report.diagnostics


def test_more_than_a_container_can_have_is_refused_before_submission(local_cluster, rm):
    before = len(rm.applications())
    proc, app_id = ytf_submit("-r", "worker:1", "-m", "64 GiB", "echo never")
    assert proc.returncode == 2 and app_id is None
    assert proc.stderr.strip().splitlines() == [
        "error: task_memory: worker[0] asks 65536 MiB; the cluster's maximum allocation is 8192 MiB"]
    proc, _ = ytf_submit("-r", "worker:1", "-c", "worker:64", "echo never")
    assert proc.returncode == 2 and "task_vcores" in proc.stderr
    assert len(rm.applications()) == before


def test_more_than_the_whole_cluster_is_refused_before_submission(local_cluster, rm):
    before = len(rm.applications())
    proc, app_id = ytf_submit("-r", "worker:6", "-m", "8 GiB", "echo never")
    assert proc.returncode == 2 and app_id is None
    assert proc.stderr.strip().splitlines() == [
        "error: cluster_requirement: the job asks 48.5 GiB and 7 vcores at once in the default partition; "
        "the cluster has 16.0 GiB and 16 vcores there"]
    assert len(rm.applications()) == before


def test_more_than_the_cluster_has_free_fails_within_the_allocation_timeout(local_cluster, rm):
    """Another application holds half the cluster: a job that fits the cluster, but not what is free."""
    blocker = build_job_spec({"cluster_requirement": "worker:1", "task_memory": "8 GiB", "name": "holds-half",
                              "script": str(PAYLOADS / "sleep.py"), "command": "python3 ${DTF_TASK_SCRIPT}",
                              "env": {"SLEEP_S": "300"}})
    with TonyClient() as client:
        holder = client.submit(blocker)
        try:
            deadline = time.monotonic() + 120
            while not ((p := holder.progress()) and p.running == 1):
                assert time.monotonic() < deadline, "the blocker never ran"
                time.sleep(0.5)
            proc, app_id = ytf_submit("-r", "worker:1", "-m", "8 GiB", "--allocation-timeout", "15", "echo never")
        finally:
            holder.kill()
            holder.wait(timeout=60)
    assert proc.returncode == 1
    diagnostics = rm.application(app_id).diagnostics
    assert "allocation timeout" in diagnostics and "8192 MiB" in diagnostics


def test_failover_second_attempt_succeeds(local_cluster, rm):
    proc, app_id = ytf_submit("-r", "ps:1,worker:2", *SMALL, "--max-attempts", "2",
                              "-s", str(PAYLOADS / "by_attempt.py"), "python3 ${DTF_TASK_SCRIPT}")
    assert proc.returncode == 0, proc.stderr
    logs = aggregated_logs(rm, app_id)
    assert "worker:0 attempt 1" in logs and "worker:0 attempt 2" in logs
    assert "simulated crash in attempt 1" in logs


def test_tony_kill(local_cluster, rm):
    proc, app_id = ytf_submit("-r", "ps:1,worker:1", *SMALL, "--no-wait", "--env", "SLEEP_S=600",
                              "-s", str(PAYLOADS / "sleep.py"), "python3 ${DTF_TASK_SCRIPT}")
    assert proc.returncode == 0 and app_id
    deadline = time.monotonic() + 120
    while rm.application(app_id).state != "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.5)
    import subprocess
    import sys
    from pathlib import Path

    tony = str(Path(sys.executable).parent / "tony")
    killed = subprocess.run([tony, "kill", app_id], capture_output=True, text=True, timeout=60)
    assert killed.returncode == 0, killed.stderr
    report = wait_terminal(rm, app_id)
    assert report.state == "KILLED"
    status = subprocess.run([tony, "status", app_id], capture_output=True, text=True, timeout=60)
    assert f"{app_id} KILLED KILLED" in status.stdout


def test_unsigned_and_forged_requests_are_refused(local_cluster, rm):
    job = build_job_spec({"cluster_requirement": "worker:1", "task_memory": 384,
                          "script": str(PAYLOADS / "sleep.py"), "command": "python3 ${DTF_TASK_SCRIPT}",
                          "env": {"SLEEP_S": "12"}})
    with TonyClient() as client:
        handle = client.submit(job)
        deadline = time.monotonic() + 120
        while not ((p := handle.progress()) and p.running == 1):
            assert time.monotonic() < deadline
            time.sleep(0.5)
        base = f"http://{handle.am_address}"
        body = json.dumps({"type": "worker", "index": 0, "attempt": 1, "host": "evil", "port": 1}).encode()
        unsigned = httpx.post(base + protocol.REGISTER, content=body)
        forged = httpx.post(base + protocol.REGISTER, content=body,
                            headers=protocol.sign("not-the-secret", "POST", protocol.REGISTER, body))
        good_headers = protocol.sign("x" * 64, "POST", protocol.REGISTER, body)
        stale = httpx.post(base + protocol.REGISTER, content=body,
                           headers={**good_headers, protocol.H_TIMESTAMP: "1000.0"})
        assert (unsigned.status_code, forged.status_code, stale.status_code) == (401, 401, 401)
        assert "unsigned" in unsigned.json()["error"] and "bad signature" in forged.json()["error"]
        status = httpx.get(base + protocol.STATUS_JSON).json()
        assert status["refused_requests"] >= 3
        assert status["tasks"][0]["host"] != "evil"
        report = handle.wait()
    assert report.final_status == "SUCCEEDED"


def test_job_file(local_cluster, rm, tmp_path):
    job_file = tmp_path / "job.yaml"
    job_file.write_text(f"""
tasks:
  worker: {{instances: 2, memory: 384 MiB}}
command: python3 ${{DTF_TASK_SCRIPT}}
script: {PAYLOADS / 'sleep.py'}
env: {{SLEEP_S: "1"}}
name: from-a-job-file
""")
    proc, app_id = ytf_submit("--conf", str(job_file))
    assert proc.returncode == 0, proc.stderr
    assert rm.application(app_id).name == "from-a-job-file"


def _staging_dirs() -> set[str]:
    from tony_airflow.yarn.hdfs import webhdfs

    fs = webhdfs()
    try:
        return {p.rsplit("/", 1)[1] for p in fs.ls(f"{fs.home_directory()}/.skein", detail=False)}
    except FileNotFoundError:
        return set()


def test_staging_directories_do_not_outlive_their_applications(local_cluster, rm):
    """Issue #30 item 4: the job spec, its secret and the shipped files stay in HDFS only while the
    application runs, however it ends: by itself (skein's AM), `tony kill`, or a kill by other means
    (`yarn application -kill`, the RM UI: the next submission's sweep)."""
    import subprocess
    import sys
    from pathlib import Path

    tony = str(Path(sys.executable).parent / "tony")
    apps = []
    for _ in range(2):
        proc, app_id = ytf_submit("-r", "worker:1", *SMALL, "--no-wait", "--env", "SLEEP_S=600",
                                  "-s", str(PAYLOADS / "sleep.py"), "python3 ${DTF_TASK_SCRIPT}")
        assert proc.returncode == 0 and app_id
        apps.append(app_id)
    by_tony, by_rm = apps
    assert set(apps) <= _staging_dirs()
    killed = subprocess.run([tony, "kill", by_tony], capture_output=True, text=True, timeout=120)
    assert killed.returncode == 0, killed.stderr
    assert by_tony not in _staging_dirs()
    rm.kill(by_rm)  # as `yarn application -kill` does: nothing of ours runs
    assert wait_terminal(rm, by_rm).state == "KILLED"
    proc, done = ytf_submit("-r", "worker:1", *SMALL, "--env", "SLEEP_S=0",
                            "-s", str(PAYLOADS / "sleep.py"), "python3 ${DTF_TASK_SCRIPT}")
    assert proc.returncode == 0, proc.stderr
    left = _staging_dirs()
    assert by_rm not in left and done not in left, left  # swept; removed by skein's AM at its end


def test_an_hdfs_input_that_does_not_exist_is_refused_and_an_empty_one_is_an_input(local_cluster, rm):
    """Issue #51 item 10: a missing input used to stage 0 files and SUCCEED; it is refused before
    submission (exit 2, one line naming it), as Spark refuses a missing path. An empty directory runs."""
    from tony_airflow.yarn.hdfs import webhdfs

    fs = webhdfs()
    missing, empty = "/tmp/e2e/no-such-input", "/tmp/e2e/an-empty-input"
    fs.rm(missing, recursive=True) if fs.exists(missing) else None
    fs.makedirs(empty, exist_ok=True)
    before = len(rm.applications())
    proc, app_id = ytf_submit("-r", "worker:1", *SMALL, "-i", f"hdfs://{missing}", "echo never")
    assert proc.returncode == 2 and app_id is None, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: input: hdfs://{missing} does not exist; allowed: an existing path in HDFS "
        "(an empty directory is allowed)"]
    assert len(rm.applications()) == before
    proc, app_id = ytf_submit("-r", "worker:1", *SMALL, "-i", f"hdfs://{empty}", "ls ${DTF_INPUT_PATH}")
    assert proc.returncode == 0 and app_id, proc.stdout + proc.stderr
