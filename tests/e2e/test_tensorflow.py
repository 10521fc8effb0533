"""Real distributed TensorFlow on the local YARN, reading and writing HDFS."""

from __future__ import annotations

import json
import os
import re
import signal
import tempfile
import time
from pathlib import Path

import pytest

from tests.e2e.helpers import assert_training_shown, submit_watching_training, ytf_submit
from tony_airflow.yarn.hdfs import webhdfs

pytest.importorskip("tensorflow")


def _metrics(path: str) -> dict:
    return json.loads(webhdfs().cat(f"{path}/metrics.json"))


def _models_in_local_tmp(since: float) -> list[str]:
    """Saved models that a task wrote into this host's /tmp since `since` (its containers run here)."""
    found = []
    for entry in Path(tempfile.gettempdir()).iterdir():
        try:
            if entry.is_dir() and entry.stat().st_mtime >= since and (entry / "model.keras").exists():
                found.append(str(entry))
        except OSError:
            continue
    return found


def test_multi_worker_mirrored_two_workers(local_cluster, rm, tmp_path):
    out = "/tmp/e2e/mwms"
    started = time.time()
    # issue #52: the job's progress while it runs (digits_keras reports with tony_progress.KerasCallback)
    proc, seen = submit_watching_training(rm, tmp_path, "-r", "worker:2", "-o", f"hdfs://{out}", "-n", "mwms",
                                          "--follow", "python3 -m tony_airflow.examples.digits_keras --epochs 4 "
                                          "--sleep-per-epoch 1.5")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert_training_shown(proc, seen, "worker:0", epochs=4, steps=4 * 20)
    # issue #53 item 6: where the model is, as the job named it, not the container's local mirror
    assert re.search(rf"^\[worker:0\] test accuracy \S+; model written to hdfs://{out}$", proc.stdout, re.M), proc.stdout
    metrics = _metrics(out)
    assert metrics["workers"] == 2
    assert metrics["losses"][-1] < metrics["losses"][0] * 0.5, metrics["losses"]
    assert metrics["test_accuracy"] > 0.8
    files = webhdfs().find(out)
    assert f"{out}/model.keras" in files
    assert any("/tensorboard/" in f and "tfevents" in f for f in files)
    assert _models_in_local_tmp(started) == [], "a worker's own copy of the model stayed in /tmp"


def test_parameter_server_strategy_chief_worker_ps(local_cluster, rm):
    out = "/tmp/e2e/pss"
    proc, app_id = ytf_submit("-r", "chief:1,worker:1,ps:1", "--tracked", "chief", "--untracked", "worker,ps",
                              "-o", f"hdfs://{out}", "-n", "pss",
                              "python3 -m tony_airflow.examples.digits_ps --epochs 4", timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = _metrics(out)
    assert metrics["losses"][-1] < metrics["losses"][0] * 0.5, metrics["losses"]
    files = webhdfs().find(out)
    assert f"{out}/model.weights.h5" in files
    assert any("/checkpoints/ckpt-" in f for f in files)


def _user_process(task: str, index: int) -> int | None:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if (b"digits_keras" in cmd and b"bash" not in cmd.split(b"\0")[0] and b"executor/guard.py" not in cmd
                and f"DTF_TASK_JOB_NAME={task}".encode() in env and f"DTF_TASK_INDEX={index}".encode() in env):
            return int(entry.name)
    return None


def test_killed_attempt_resumes_from_its_checkpoint(local_cluster, rm):
    out = "/tmp/e2e/resume"
    fs = webhdfs()
    import subprocess
    import sys

    cmd = [str(Path(sys.executable).parent / "ytf-submit"), "-r", "worker:2", "-o", f"hdfs://{out}",
           "--max-attempts", "2", "-n", "resume",
           "python3 -m tony_airflow.examples.digits_keras --epochs 8 --sleep-per-epoch 2"]
    submit = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not fs.exists(f"{out}/backup/chief/checkpoint"):  # a backup has reached HDFS
            assert submit.poll() is None, f"the job ended before a checkpoint reached HDFS: {submit.communicate()}"
            assert time.monotonic() < deadline, "no checkpoint reached HDFS"
            time.sleep(1)
        pid = _user_process("worker", 0)
        assert pid, "the chief's training process was not found"
        os.kill(pid, signal.SIGKILL)  # the chief dies mid-training
        stdout, stderr = submit.communicate(timeout=600)
    finally:
        if submit.poll() is None:
            submit.kill()
    assert submit.returncode == 0, stderr[-2000:]
    metrics = _metrics(out)
    assert metrics["attempt"] == 2 and metrics["resumed"] is True
    assert metrics["epochs_run"][0] > 0, metrics  # attempt 2 did not start again from epoch 0
    assert metrics["epochs_run"][-1] == 7


def test_chief_and_worker_read_their_input_from_hdfs(local_cluster, rm, tmp_path):
    from tony_airflow.examples.digits_data import write_npz

    fs = webhdfs()
    fs.makedirs("/tmp/e2e/digits-input", exist_ok=True)
    for path in write_npz(str(tmp_path / "npz")):
        fs.put_file(path, f"/tmp/e2e/digits-input/{Path(path).name}")
    out = "/tmp/e2e/chief-worker"
    proc, app_id = ytf_submit("-r", "chief:1,worker:1", "-i", "hdfs:///tmp/e2e/digits-input",
                              "-o", f"hdfs://{out}", "-n", "chief-worker",
                              "python3 -m tony_airflow.examples.digits_keras --epochs 3", timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = _metrics(out)
    assert metrics["workers"] == 2 and metrics["losses"][-1] < metrics["losses"][0]
    from tests.e2e.helpers import aggregated_logs

    logs = aggregated_logs(rm, app_id)
    assert logs.count("loaded train data from ") == 2 and "tony-input/digits_train.npz" in logs
