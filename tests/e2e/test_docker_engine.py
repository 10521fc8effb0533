"""Issue #31: tasks in an image, run by the node's real container engine (docker 20.10, podman 4.3).

The image of the training is `tony image build`'s (Debian bookworm from Debian's packages, the
project's TensorFlow from PyPI); the lifecycle tests use a busybox image made here in a second (the
same code path, a smaller image). After every test no container of the job is left, running or not.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import BUSYBOX, NO_SHELL
from tests.e2e.helpers import BIN, PAYLOADS, as_from_a_terminal, record, run_dag, ytf_submit
from tony_airflow.cli.dag_test import local_yarn_connection
from tony_airflow.core.executor.engine import LABEL
from tony_airflow.local.cluster import LocalCluster
from tony_airflow.local.containers import daemon
from tony_airflow.yarn.hdfs import webhdfs
from tony_airflow.yarn.rest import application_of_container

SITE = "/usr/local/lib/python3.11/dist-packages"


def _containers(app_id: str) -> list[tuple[str, str]]:
    return daemon.project_containers(f"{LABEL}.application={app_id}")


def _no_container_of(app_id: str, within: float = 60, selector: str = "") -> float:
    """Seconds until no container of the application (or of `selector`) exists in either engine."""
    started = time.monotonic()
    selector = selector or f"{LABEL}.application={app_id}"
    while found := daemon.project_containers(selector):
        assert time.monotonic() - started < within, f"containers of {selector} still there: {found}"
        time.sleep(0.05)
    return time.monotonic() - started


def _running(app_id: str, count: int, submit: subprocess.Popen | None = None, within: float = 120) -> None:
    deadline = time.monotonic() + within
    while len(_containers(app_id)) < count:
        assert submit is None or submit.poll() is None, submit.communicate() if submit else ""
        assert time.monotonic() < deadline, f"{count} containers of {app_id} never ran"
        time.sleep(0.2)


def _popen(*args: str) -> tuple[subprocess.Popen, str]:
    submit = subprocess.Popen([str(BIN / "ytf-submit"), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, preexec_fn=as_from_a_terminal)  # the ctrl-c case plays a user's Ctrl-C
    first = submit.stdout.readline()
    app_id = first.split()[-1]
    assert app_id.startswith("application_"), first + submit.stderr.read()
    return submit, app_id


# ------------------------------------------------------------------------------- what the task gets
def test_ps_and_two_workers_run_in_the_image_with_the_task_environment(local_cluster, rm, tony_image, tmp_path):
    out = tmp_path / "seen"
    out.mkdir()
    proc, app_id = ytf_submit("-r", "ps:1,worker:2", "-m", "1024", "--docker_image", tony_image, "-o", str(out),
                              "--env", "STAY=ps", "-s", str(PAYLOADS / "in_image.py"), "-n", "in-image",
                              "python3 ${DTF_TASK_SCRIPT}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    _check_seen(out, tony_image, app_id)


def _check_seen(out: Path, image: str, app_id: str) -> None:
    seen = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert sorted(seen) == ["ps-0", "worker-0", "worker-1"]
    ports = set()
    for name, task in seen.items():
        assert task["marker"].startswith(image), task  # the image's file, not the host's
        assert task["python"] == "/usr/bin/python3", task  # the image's Python
        assert task["env"]["DTF_TASK_INDEX"] == name[-1] and json.loads(task["env"]["TF_CONFIG"])["cluster"]
        assert "core-site.xml" in task["hadoop_conf"]  # HADOOP_CONF_DIR, mounted read-only
        assert task["port"] == int(task["env"]["TONY_TASK_PORT"])  # it bound the port the executor reserved
        assert task["cwd"] == task["home"] and "/appcache/" + app_id in task["cwd"]
        assert task["uid"] == os.getuid() and not task["path_has_venv"]
        ports.add(task["port"])
    assert len(ports) == 3
    assert _no_container_of(app_id, within=30) < 30  # the ps's container too, stopped when the workers finished


def test_the_operator_runs_the_same_job_in_the_image(local_cluster, rm, tony_image, tmp_path):
    out = tmp_path / "seen"
    out.mkdir()
    (tmp_path / "airflow").mkdir()
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW_CONN_YARN_DEFAULT": local_yarn_connection(local_cluster), "TONY_E2E_IMAGE": tony_image,
           "TONY_E2E_SEEN_DIR": str(out)}
    summary, log = run_dag(env, Path(__file__).resolve().parent / "airflow_dags" / "e2e_dags.py", "tony_in_image")
    assert summary["state"] == "success", log[-4000:]
    _check_seen(out, tony_image, summary["xcoms"]["train"]["application_id"])


def test_an_azkaban_job_with_tonys_docker_keys_runs_in_the_image(local_cluster, rm, tony_image, tmp_path):
    """What Azkaban's ProcessJob runs for a `type=tensorflow` job (tests/e2e/test_azkaban.py drives Azkaban
    itself): `tony-azkaban` with the job's properties."""
    out = tmp_path / "seen"
    out.mkdir()
    props = tmp_path / "train.job.properties"
    props.write_text("\n".join([
        "type=tensorflow", "tony.ps.instances=1", "tony.worker.instances=2", "tony.worker.memory=1g",
        "tony.ps.memory=1g", f"script={PAYLOADS / 'in_image.py'}", "task_command=python3 ${DTF_TASK_SCRIPT}",
        f"output={out}", "worker_env.STAY=ps", "tony.docker.enabled=true",
        f"tony.docker.containers.image={tony_image}", "name=azkaban-in-image", ""]))
    proc = subprocess.run([str(BIN / "tony-azkaban")], env={**os.environ, "JOB_PROP_FILE": str(props)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    app_id = proc.stdout.split("Submitted application ")[1].split()[0]
    _check_seen(out, tony_image, app_id)


def test_digits_train_with_tensorflow_from_the_image_and_tensorboard_from_the_tracking_url(
        local_cluster, rm, tony_image, tmp_path):
    src = tmp_path / "src"
    package = Path(__file__).resolve().parents[2] / "tony_airflow"
    for name in ("__init__.py", "examples/__init__.py", "examples/digits_keras.py", "examples/digits_data.py"):
        (src / "tony_airflow" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(package / name, src / "tony_airflow" / name)
    out = "/tmp/e2e/docker-mwms"
    submit, app_id = _popen("-r", "worker:2", "--docker_image", tony_image, "-t", "-o", f"hdfs://{out}",
                            "--src_dir", str(src), "-n", "docker-mwms",
                            'python3 -c "import tensorflow as tf; print(\'TF_FROM\', tf.__file__)" && '
                            "python3 -m tony_airflow.examples.digits_keras --epochs 15 --sleep-per-epoch 2")
    try:
        deadline = time.monotonic() + 300
        text = ""
        while "epoch_loss" not in text:
            tracking = rm.application(app_id).tracking_url  # the AM's proxy address once it runs
            text = _get(tracking.rstrip("/") + "/pages/tensorboard/data/plugin/scalars/tags")
            assert submit.poll() is None, submit.communicate()
            assert time.monotonic() < deadline, f"TensorBoard never reported the loss tag: {text[-300:]}"
            time.sleep(2)
        assert "/proxy/" + app_id in tracking
        stdout, stderr = submit.communicate(timeout=600)
    finally:
        if submit.poll() is None:
            submit.kill()
    assert submit.returncode == 0, stdout[-2000:] + stderr[-2000:]
    metrics = json.loads(webhdfs().cat(f"{out}/metrics.json"))
    assert metrics["workers"] == 2 and metrics["test_accuracy"] > 0.8, metrics
    logs = subprocess.run([str(BIN / "tony"), "logs", app_id], capture_output=True, text=True, timeout=120).stdout
    assert f"TF_FROM {SITE}/tensorflow/__init__.py" in logs, logs[-3000:]
    assert _no_container_of(app_id, within=30) < 30


def _get(url: str) -> str:
    try:
        return httpx.get(url, timeout=30).text
    except httpx.HTTPError as exc:
        return str(exc)


# ------------------------------------------------------------------------- nothing left behind
@pytest.mark.parametrize("engine", ["docker", "podman"])
@pytest.mark.parametrize("how", ["tony kill", "ctrl-c", "executor SIGKILL"])
def test_every_way_of_ending_leaves_no_container(local_cluster: LocalCluster, rm, small_images, engine, how):
    submit, app_id = _popen("-r", "worker:2", "-m", "256", "--docker_image", BUSYBOX, "--docker_engine", engine,
                            "-n", f"ending-{how.replace(' ', '-')}", "sleep 600")
    try:
        _running(app_id, 2, submit)
        if how == "tony kill":
            assert subprocess.run([str(BIN / "tony"), "kill", app_id], capture_output=True, timeout=120).returncode == 0
        elif how == "ctrl-c":
            submit.send_signal(signal.SIGINT)
        else:
            executors = [p for p in local_cluster.container_processes()
                         if application_of_container(p.container_id) == app_id
                         and "tony_airflow.core.executor" in p.cmdline]
            assert len(executors) == 2, executors
            os.kill(executors[0].pid, signal.SIGKILL)
            own = _no_container_of(app_id, 30, f"{LABEL}.container={executors[0].container_id}")
            record(f"{engine}: executor SIGKILL -> its own container gone (the lease)", own)
        ended = time.monotonic()
        gone = _no_container_of(app_id, within=90)
        record(f"{engine}: {how} -> no container of the job", time.monotonic() - ended)
        assert gone < 90
    finally:
        if submit.poll() is None:
            submit.wait(timeout=120)
    if how != "ctrl-c":
        assert submit.returncode == 1


# ------------------------------------------------------------------------------- failures, one line
@pytest.mark.parametrize("image, memory, command, line, extra", [
    ("nosuch/image:1", "256", "true", "worker:0: image 'nosuch/image:1' not found on ", ()),
    (NO_SHELL, "256", "true", f"worker:0: image '{NO_SHELL}' has no /bin/sh on ", ()),
    (BUSYBOX, "128", "head -c 400000000 /dev/zero | tail", "worker:0: the command went over its container's memory "
                                                            "limit (128 MiB)", ()),
    (BUSYBOX, "256", "true", "worker:0: the docker daemon is not running on ",
     ("--env", "DOCKER_HOST=unix:///nonexistent/docker.sock")),  # the node's docker client finds no daemon
], ids=["no-such-image", "no-shell", "memory-limit", "no-daemon"])
def test_what_the_engine_refuses_is_the_jobs_last_line(local_cluster, rm, small_images, image, memory, command,
                                                       line, extra):
    proc, app_id = ytf_submit("-r", "worker:1", "-m", memory, "--docker_image", image, "-n", "engine-fails", *extra,
                              command)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]  # what the user reads last
    assert line in last, last
    assert _no_container_of(app_id) < 60


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_an_elastic_worker_its_engine_killed_for_memory_is_not_replaced(local_cluster, rm, small_images, engine):
    """#51 item 12: the engine's cgroup, not YARN, killed worker:1 for its memory (exit 137 without YARN's memory
    line): the AM counted it as lost and asked for a replacement, which met the same limit, up to the free
    retries. Now it is a memory kill, as YARN's is: not replaced, and the job's last line says why."""
    oom_worker_1 = ('case "$DTF_TASK_JOB_NAME$DTF_TASK_INDEX" in worker1) head -c 400000000 /dev/zero | tail;; '
                    '*) sleep 60;; esac')
    proc, app_id = ytf_submit("-r", "master:1,worker:2", "--framework", "pytorch", "--elastic", "1:2", "-m", "128",
                              "--docker_image", BUSYBOX, "--docker_engine", engine, "-n", "engine-oom-elastic",
                              oom_worker_1)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "replacing it" not in out and "lost on" not in out, out[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "worker:1" in last and "went over its container's memory limit (128 MiB)" in last, last
    assert _no_container_of(app_id) < 60


def test_cluster_down_removes_the_projects_containers_of_that_cluster_only(local_cluster, small_images):
    from tony_airflow.cli import tony as cli

    nm_dir = local_cluster.nm_local_dirs[0]
    ours = subprocess.run(["docker", "run", "-d", "--network", "host", "--label", f"{LABEL}=1", "--label",
                           f"{LABEL}.workdir={nm_dir}/usercache/x", BUSYBOX, "sleep", "600"],
                          capture_output=True, text=True, check=True).stdout.strip()
    other = subprocess.run(["podman", "run", "-d", "--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit",
                            "nproc=1024:1024", "--network", "host", "--label", f"{LABEL}=1", "--label",
                            f"{LABEL}.workdir=/elsewhere/nm-local/x", BUSYBOX, "sleep", "600"],
                           capture_output=True, text=True, check=True).stdout.strip()
    try:
        cli._engine_down(local_cluster.state_dir, local_cluster.nm_local_dirs)  # what `tony cluster down` does first
        left = daemon.project_containers()
        assert ("docker", ours[:12]) not in left and ("podman", other[:12]) in left, left
    finally:
        subprocess.run(["docker", "rm", "-f", ours], capture_output=True)
        subprocess.run(["podman", "rm", "-f", "-t", "0", other], capture_output=True)


# ------------------------------------------------------------------------------- the node admin's rules
def test_a_mount_or_user_the_nodes_admin_did_not_allow_is_refused_in_one_line(local_cluster, rm, small_images,
                                                                              tmp_path):
    """#44 item 1: `--docker-user root --mount /:/host:rw` wrote into the node's /tmp as root. Now the
    executor reads the node's container-executor.cfg (none here: nothing beyond the container's own
    directories) and the job fails with the rule's name, nothing written."""
    mark = tmp_path / "written-through-the-mount"
    to_root = tmp_path / "to-root"  # #51 item 7: a symlink is checked, and mounted, as where it leads
    to_root.symlink_to("/")
    cases = [(("--mount", "/:/host:rw"), "mount /:/host:rw: refused by this node's docker.allowed.rw-mounts"),
             (("--mount", f"{to_root}:/host:rw"),
              f"mount {to_root}:/host:rw (source /): refused by this node's docker.allowed.rw-mounts"),
             (("--docker-user", "65534:65534"),
              "docker_user 65534:65534: refused by this node's tony.docker.allowed-users")]
    for extra, line in cases:
        proc, app_id = ytf_submit("-r", "worker:1", "-m", "256", "--docker_image", BUSYBOX, "-n", "admin-rules",
                                  *extra, f"echo x > /host{mark}")
        assert proc.returncode == 1, proc.stderr[-2000:]
        last = proc.stderr.strip().splitlines()[-1]
        assert line in last and "container-executor.cfg" in last, last
        assert _no_container_of(app_id) < 60
    assert not mark.exists()


def test_a_mount_the_admin_allows_runs_and_what_it_leaves_the_nodemanager_can_remove(local_cluster, rm,
                                                                                     small_images, tmp_path):
    allowed = tmp_path / "scratch"
    allowed.mkdir()
    cfg = local_cluster.conf_dir / "container-executor.cfg"
    cfg.write_text(f"[docker]\n  docker.allowed.rw-mounts={allowed}\n")
    try:
        proc, app_id = ytf_submit("-r", "worker:1", "-m", "256", "--docker_image", BUSYBOX, "-n", "admin-allows",
                                  "--mount", f"{allowed}:/scratch:rw", "echo from-the-container > /scratch/out")
    finally:
        cfg.unlink()
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = allowed / "out"
    assert out.read_text().strip() == "from-the-container"
    assert out.stat().st_uid == os.getuid()  # the YARN container's own user: the NodeManager removes it
    assert _no_container_of(app_id) < 60
