"""The cluster users really have, HA: two ResourceManagers and two NameNodes of the nameservice `tony`
(`tony cluster up --ha`). A TensorFlow job with hdfs://tony/ input and output goes on while the active
RM and then the active NameNode are SIGKILLed under it, and the client that submitted it follows it to
SUCCEEDED without submitting again; its output is whole."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest

from tests.e2e.helpers import BIN, record
from tony_airflow.examples.pipeline_steps import prepare
from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.hdfs import hdfs_path, webhdfs
from tony_airflow.yarn.local import LocalCluster
from tony_airflow.yarn.rest import ResourceManagerClient

pytest.importorskip("tensorflow")

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


def test_ps_job_goes_on_through_rm_and_namenode_failover(ha_cluster: LocalCluster, ha_rm: ResourceManagerClient):
    env = {**os.environ, **ha_cluster.env()}
    conf = HadoopConf.load(ha_cluster.conf_dir)
    fs = webhdfs(conf, uri=RUN)
    paths = prepare(RUN, fs)
    assert paths["input"] == f"{RUN}/data"  # the nameservice is kept, not re-pointed to one NameNode
    follow = subprocess.Popen(
        [str(BIN / "ytf-submit"), "-r", "chief:1,worker:2,ps:1", "--tracked", "chief", "--untracked", "worker,ps",
         "-i", paths["input"], "-o", paths["output"], "-t", "-n", "ha-failover", "--follow",
         "python3 -m tony_airflow.examples.digits_ps --epochs 14 --sleep-per-epoch 3"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        app_id, seen = _wait_training(follow)
        rm, rm_s = _kill_active(ha_cluster, ("resourcemanager", "resourcemanager-rm2"), ha_cluster.rm_states)
        record("HA: active RM SIGKILLed -> the other active", rm_s)
        time.sleep(4)  # the chief checkpoints and the executor pushes every few seconds: kill under a push
        nn, nn_s = _kill_active(ha_cluster, ("namenode", "namenode-nn2"), ha_cluster.nn_states)
        record("HA: active NameNode SIGKILLed -> the other active", nn_s)
        rest, _ = follow.communicate(timeout=400)
        output = seen + rest
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    assert follow.returncode == 0, output[-3000:]
    assert output.count("Submitted application") == 1, "submitted again"
    report = ha_rm.application(app_id)
    assert report.final_status == "SUCCEEDED", report.diagnostics
    assert report.id == app_id and [a.id for a in ha_rm.applications(tags=None) if a.name == "ha-failover"] == [app_id]

    out = hdfs_path(paths["output"])
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
    status = subprocess.run([str(BIN / "tony"), "status", app_id], env=env, capture_output=True, text=True, timeout=120)
    assert status.returncode == 0 and "SUCCEEDED" in status.stdout, status.stdout + status.stderr
    logs = subprocess.run([str(BIN / "tony"), "logs", app_id], env=env, capture_output=True, text=True, timeout=180)
    assert logs.returncode == 0 and "test accuracy" in logs.stdout, logs.stderr[-2000:]
    print(f"killed {rm} ({rm_s:.1f} s to a new active RM) and {nn} ({nn_s:.1f} s to a new active NameNode)")


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
