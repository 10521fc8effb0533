"""Three hosts in production shape (`tony cluster up --secure --ha --nodes 3`, the session's one such
cluster): addressing across hosts, and losing one.

Each host is a network namespace with its own NodeManager and DataNode under that host's principals
(`nm/<address>`, `dn/<address>`); its containers live in it. The spread of a job over the three hosts
is forced by size: a host's NodeManager offers 4096 MiB, a task asks 2560 MiB, so no host holds two
tasks (the AM's 512 MiB and TensorBoard's 1024 MiB fit beside one). A host is lost for real: its
NodeManager and containers killed with SIGKILL, or its only link set down while everything on it lives
on. Every command here runs as a user after `kinit` (a ticket cache of the module's own); the tasks
have their delegation tokens only.

This module runs after tests/e2e/test_secure.py (their names sort so) and ends with a crash of the whole
cluster, which `tony cluster up` brings back.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bench import torch_elastic
from tests.e2e.helpers import (
    PAYLOADS,
    containers_on,
    hosts_idle,
    kill_host,
    record,
    rejoin,
    victim_host,
    watch_with_a_deferred_sensor,
)
from tony_airflow.core.executor.output_commit import QUIET_S
from tony_airflow.local.cluster import LocalCluster
from tony_airflow.local.cluster.config import AM_LABEL
from tony_airflow.local.cluster.network import Host
from tony_airflow.yarn.hdfs import is_part, webhdfs
from tony_airflow.yarn.rest import ResourceManagerClient

pytest.importorskip("tensorflow")
pytest.importorskip("gssapi")

BIN = Path(sys.executable).parent
TASK_MB = "2560"  # one task per host (see the module's docstring)
# A host is lost once a checkpoint is in HDFS; the training must still be under way then (CI saw a job of
# 8 epochs end before any checkpoint of it was seen there), so that it resumes from what it lost.
TRAIN_TO_LOSE = "python3 -m tony_airflow.examples.digits_keras --epochs 14 --sleep-per-epoch 1"
# The same with the 32 MiB ballast rewritten beside it: each save stays unchanged for twice the mirror's quiet
# time, so a round can publish it whole (rule 2: a file changed within QUIET_S holds the prefix back). With a save
# every ~1.3 s and the ballast's uploads between rounds, a CI run saw 8 epochs end with only one data file of the
# backup in HDFS, never its index or pointer: the job SUCCEEDED before any host could be lost.
TRAIN = f"python3 -m tony_airflow.examples.digits_keras --epochs 8 --sleep-per-epoch {2 * QUIET_S:g}"


@pytest.fixture(scope="module", autouse=True)
def hosts_env(secure_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory):
    """Every command and WebHDFS call of these tests talks to the production-shape cluster with a ticket
    (`kinit -kt`, as a user's shell)."""
    if secure_cluster.network is None:
        pytest.skip("a multi-host cluster makes network namespaces, which needs root (as in CI)")
    ccache = tmp_path_factory.mktemp("hosts-ticket") / "ccache"
    saved = dict(os.environ)
    os.environ.update({**secure_cluster.env(), "KRB5CCNAME": f"FILE:{ccache}"})
    os.environ.pop("HADOOP_TOKEN_FILE_LOCATION", None)
    try:
        kdc = secure_cluster.kdc
        subprocess.run(["kinit", "-kt", str(kdc.user_keytab), kdc.user_principal], check=True)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _submit(*args: str) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "ytf-submit"), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _app_id(submit: subprocess.Popen) -> str:
    first = submit.stdout.readline()  # "Submitted application <id>"
    if not first.strip():  # it ended before submitting: say why
        raise AssertionError(f"ytf-submit exited {submit.wait()} before submitting: {submit.stderr.read()[-2000:]}")
    app_id = first.split()[-1]
    assert app_id.startswith("application_"), first
    return app_id


def _finish(submit: subprocess.Popen, timeout: float = 600) -> tuple[str, str]:
    try:
        return submit.communicate(timeout=timeout)
    finally:
        if submit.poll() is None:
            submit.kill()


def _hosts_of(cluster: LocalCluster, app_id: str, submit: subprocess.Popen) -> tuple[Host, Host]:
    """(the chief's host, the AM's host), from the job's own history as the AM writes it."""
    network = cluster.network
    assert network
    deadline = time.monotonic() + 120
    while True:
        assert submit.poll() is None, submit.communicate()
        events = _events(app_id, live=True)
        am = next((e["host"] for e in events if e["event"] == "AM_STARTED"), None)
        chief = next((e["host"] for e in events if e["event"] == "TASK_REGISTERED" and e["task"] == "worker:0"), None)
        if am and chief:
            by_address = {h.address: h for h in network.hosts}
            return by_address[chief], by_address[am]
        assert time.monotonic() < deadline, "the chief did not register"
        time.sleep(1)


def _wait_for_a_push(out: str, submit: subprocess.Popen, within: float = 90) -> bool:
    """Wait until the chief is publishing a file (one under a temporary name is in HDFS); False if
    none was seen within `within` seconds."""
    fs = webhdfs()
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        assert submit.poll() is None, submit.communicate()
        if any(is_part(p) for p in fs.find(out)):
            return True
        time.sleep(0.05)
    return False


def _wait_for_checkpoint(out: str, submit: subprocess.Popen) -> None:
    fs = webhdfs()
    deadline = time.monotonic() + 300
    while not fs.exists(f"{out}/backup/chief/checkpoint"):  # a backup has reached HDFS: attempt 2 can resume
        assert submit.poll() is None, submit.communicate()
        assert time.monotonic() < deadline, "no checkpoint reached HDFS"
        time.sleep(1)


def _events(app_id: str, live: bool = False) -> list[dict]:
    """The job's history events: `live` while it runs (the AM appends to `events.jsonl.inprogress`)."""
    fs = webhdfs()
    path = f"/tmp/tony-history/{app_id}/events.jsonl"
    if live:
        path = next((p for p in (f"{path}.inprogress", path) if fs.exists(p)), None)
        if path is None:
            return []
    text = fs.cat(path).decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _metrics(out: str) -> dict:
    return json.loads(webhdfs().cat(f"{out}/metrics.json"))


def _expiry_s(cluster: LocalCluster) -> float:
    return cluster.settings.nm_liveness_expiry_ms / 1000.0


# --------------------------------------------------------------------------------------------- the hosts
def test_three_hosts_are_three_nodes_that_reach_only_each_other(secure_cluster, secure_rm):
    cluster = secure_cluster
    network = cluster.network
    nodes = secure_rm.get("/ws/v1/cluster/nodes")["nodes"]["node"]
    assert sorted(n["nodeHostName"] for n in nodes) == sorted(h.address for h in network.hosts)
    assert len({n["id"] for n in nodes}) == 3 and all(n["state"] == "RUNNING" for n in nodes)
    health = cluster.health()
    assert health["hdfs"] == "3 live DataNode(s)"
    for host in network.hosts:
        assert health[f"host {host.name}"].startswith(f"{host.address} ({host.netns}), link up, node ")
        routes = subprocess.run([*network.exec_prefix(host), "ip", "route"], capture_output=True, text=True).stdout
        assert "default" not in routes and routes.split()[0] == str(network.network), routes
    # from a host: the bridge (ResourceManager) answers; the machine's loopback is the host's own
    probe = ("import socket, sys\n"
             "for target in sys.argv[1:]:\n"
             "    host, port = target.rsplit(':', 1)\n"
             "    try:\n"
             "        socket.create_connection((host, int(port)), timeout=3).close(); print(target, 'open')\n"
             "    except OSError as exc:\n"
             "        print(target, type(exc).__name__)\n")
    rm_port = cluster.settings.ports["yarn.resourcemanager.webapp.address"]
    other = network.hosts[1]
    result = subprocess.run([*network.exec_prefix(network.hosts[0]), sys.executable, "-c", probe,
                             f"{network.bridge_address}:{rm_port}", f"127.0.0.1:{rm_port}",
                             f"{other.address}:{cluster.settings.ports['yarn.nodemanager.webapp.address']}"],
                            capture_output=True, text=True)
    assert result.stdout.splitlines() == [
        f"{network.bridge_address}:{rm_port} open", f"127.0.0.1:{rm_port} ConnectionRefusedError",
        f"{other.address}:{cluster.settings.ports['yarn.nodemanager.webapp.address']} open"], result


def test_pytorch_master_addr_is_worker_0s_host(secure_cluster, secure_rm):
    submit = _submit("-r", "worker:2", "-m", TASK_MB, "--framework", "pytorch", "-n", "multihost-pytorch",
                     "-s", str(PAYLOADS / "own_host.py"), "python3 ${DTF_TASK_SCRIPT}")
    app_id = _app_id(submit)
    stdout, stderr = _finish(submit)
    assert submit.returncode == 0, stderr[-2000:]
    read = subprocess.run([str(BIN / "tony"), "logs", "--raw", app_id], capture_output=True, text=True, timeout=120)
    logs = read.stdout
    lines = {ln.split()[2]: ln.split() for ln in logs.splitlines() if ln.startswith("own-host OK ")}
    assert set(lines) == {"worker:0", "worker:1"}, (read.returncode, read.stderr[-2000:], logs[-3000:])
    worker0_host = lines["worker:0"][3]
    assert lines["worker:1"][3] != worker0_host
    assert {ln[5] for ln in lines.values()} == {f"MASTER_ADDR={worker0_host}"}


def test_an_elastic_torch_job_replaces_a_killed_worker_and_the_other_hosts_keep_theirs(secure_cluster, secure_rm):
    """#42 across hosts: --elastic 1:2, the workers spread over two hosts; worker:1's container SIGKILLed
    mid-training -> one replacement container (on whichever host YARN gives), the master's and worker 0's
    containers keep theirs, torchrun's agents re-form the group across the hosts, the training resumes from
    rank 0's checkpoint and the job SUCCEEDS in its one attempt."""
    pytest.importorskip("torch")
    out = "/tmp/e2e/multihost-torch-elastic"
    # 2 GiB: torchrun's agent and its process each import torch (a fresh-clone run: 1.7 GB of 1.5 GB)
    killed = torch_elastic.run_and_kill_a_worker(out, "multihost-torch-elastic", "--spread", "worker",
                                                 memory="2048")
    assert killed.returncode == 0, killed.stderr[-3000:]
    assert secure_rm.application(killed.app_id).final_status == "SUCCEEDED"
    registered = [e for e in killed.events if e["event"] == "TASK_REGISTERED"]
    containers = {t: [e["container_id"] for e in registered if e["task"] == t] for t in ("master:0", "worker:0",
                                                                                     "worker:1")}
    assert len(containers["master:0"]) == 1 and len(containers["worker:0"]) == 1, containers
    assert containers["worker:1"][0] == killed.container != containers["worker:1"][-1], containers
    assert len(containers["worker:1"]) == 2, containers
    hosts = {e["host"] for e in registered}
    assert len(hosts) >= 2 and hosts <= {h.address for h in secure_cluster.network.hosts}, hosts
    assert [e["event"] for e in killed.events].count("WORKER_REPLACED") == 1
    attempts = [e for e in killed.events if e["event"] == "ATTEMPT_STARTED"]
    assert len(attempts) == 1, attempts
    logs = subprocess.run([str(BIN / "tony"), "logs", "--raw", killed.app_id], capture_output=True, text=True,
                          timeout=120).stdout
    replaced, stepping = torch_elastic.recovery_seconds(killed, logs)
    record("elastic on 3 hosts: worker container SIGKILLed -> its replacement running", replaced)
    record("elastic on 3 hosts: worker container SIGKILLed -> training stepping again", stepping)
    metrics = _metrics(out)
    assert metrics["resumed_at_epoch"] > 0, metrics  # re-formed and resumed (torchelastic counts only failures)
    assert metrics["world_size"] == 3 and len({r["parameters"] for r in metrics["ranks"]}) == 1, metrics


def test_spread_puts_each_worker_on_a_host_of_its_own_and_more_workers_than_hosts_are_refused(secure_cluster,
                                                                                              secure_rm):
    """`--spread worker` (#41 item 3): small tasks that YARN would pack on one host, one per host instead."""
    submit = _submit("-r", "worker:3", "-m", "512", "--spread", "worker", "-n", "spread", "sleep 1")
    app_id = _app_id(submit)
    stdout, stderr = _finish(submit)
    assert submit.returncode == 0, stderr[-2000:]
    hosts = {e["task"]: e["host"] for e in _events(app_id) if e["event"] == "TASK_REGISTERED"}
    assert sorted(hosts.values()) == sorted(h.address for h in secure_cluster.network.hosts), hosts
    refused = subprocess.run([str(BIN / "ytf-submit"), "-r", "worker:4", "--spread", "worker", "sleep 1"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and refused.stdout == "", refused
    assert refused.stderr.strip() == ("error: spread: worker asks 4 hosts, one per task; the cluster's default "
                                      "partition has 3 running host(s); allowed: at most 3 worker tasks")


# ------------------------------------------------------------------------------------- losing a host
def _resumes_on_the_other_hosts(cluster: LocalCluster, rm: ResourceManagerClient, name: str, lose, restore,
                                *extra: str) -> None:
    """The chief's host is lost while the chief publishes a 32 MiB file rewritten in place: attempt 2
    runs on the other hosts and resumes from whole files, and with `--max-attempts 1`: a lost host is
    not the job's fault and does not spend its attempts (issue #29)."""
    out = f"/tmp/e2e/{name}"
    # The AM on a host of its own, as production clusters keep AMs on stable hosts: the last host labelled
    # `am` (a non-exclusive partition: the tasks go to the unlabelled hosts first, and to its idle room when
    # attempt 2 needs it). Placement is YARN's (one CI run saw the chief beside the AM five times in a row).
    assert cluster.network
    am_host = cluster.network.hosts[-1]
    cluster.label_host(am_host, AM_LABEL)
    submit = None
    try:
        if webhdfs().exists(out):
            webhdfs().rm(out, recursive=True)
        submit = _submit("-r", "worker:2", "-m", TASK_MB, "-o", f"hdfs://{out}", "-n", name, "--max-attempts", "1",
                         "--am_node_label", AM_LABEL, "-s", str(PAYLOADS / "ballast.py"), *extra,
                         f"python3 ${{DTF_TASK_SCRIPT}} {TRAIN}")
        app_id = _app_id(submit)
        victim, placed_am = _hosts_of(cluster, app_id, submit)
        assert placed_am == am_host and victim != am_host, (placed_am, victim)
        _lose_the_chiefs_host(cluster, rm, name, out, submit, app_id, victim, lose, restore)
    finally:
        if submit is not None and submit.poll() is None:  # failed before the job ended: nothing left running
            subprocess.run([str(BIN / "tony"), "kill", app_id], capture_output=True, timeout=120)
            _finish(submit)
        cluster.label_host(am_host, "")


def _lose_the_chiefs_host(cluster: LocalCluster, rm: ResourceManagerClient, name: str, out: str,
                          submit: subprocess.Popen, app_id: str, victim: Host, lose, restore) -> None:
    _wait_for_checkpoint(out, submit)
    mid_push = _wait_for_a_push(out, submit)
    try:
        lose(victim)
        lost_at = time.time()
        stdout, stderr = _finish(submit)
    finally:
        restore(victim)
    record(f"{name}: the chief's host was lost mid-push (1 = yes)", float(mid_push))
    assert submit.returncode == 0, stderr[-2000:]
    metrics = _metrics(out)
    assert metrics["attempt"] == 2 and metrics["resumed"] is True
    assert metrics["epochs_run"][0] > 0, metrics  # attempt 2 went on from the checkpoint
    ballast = webhdfs().cat(f"{out}/ballast.bin")  # whatever the loss cut, HDFS holds a whole copy
    assert len(ballast) == 32 << 20 and hashlib.sha256(ballast[:-32]).digest() == ballast[-32:]
    assert not [p for p in webhdfs().find(out) if is_part(p)]
    events = _events(app_id)
    lost = [e for e in events if e["event"] == "HOST_LOST"]
    assert [(e["attempt"], e["host"]) for e in lost] == [(1, victim.address)], lost
    text = subprocess.run([str(BIN / "tony"), "history", "show", app_id], capture_output=True, text=True).stdout
    assert f"lost host(s): {victim.address} (worker:" in text, text[:2000]
    ended = next(e for e in events if e["event"] == "ATTEMPT_ENDED" and e["attempt"] == 1)
    assert ended["reason"].startswith(f"host {victim.address} lost"), ended
    assert (ended["cause"], ended["counted"]) == ("lost host", False), ended
    assert "(not counted: lost host)" in rm.application(app_id).diagnostics
    assert "(not counted: lost host)" in text
    second = [e for e in events if e.get("attempt") == 2 and e["event"] == "TASK_REGISTERED"]
    assert len(second) == 2 and victim.address not in {e["host"] for e in second}, second
    running = max(e["time"] for e in events if e.get("attempt") == 2 and e["event"] == "TASK_STARTED")
    record(f"{name}: host lost -> HOST_LOST", lost[0]["time"] - lost_at)
    record(f"{name}: host lost -> attempt 1 failed", ended["time"] - lost_at)
    record(f"{name}: chief's host lost -> attempt 2 running", running - lost_at)
    record(f"{name}: host rejoined after", rejoin(cluster, rm, victim))


def test_a_killed_host_is_left_behind_by_the_second_attempt(secure_cluster, secure_rm):
    _resumes_on_the_other_hosts(
        secure_cluster, secure_rm, "multihost-kill-retry",
        lose=lambda host: kill_host(secure_cluster, host, datanode=True),
        restore=lambda host: secure_cluster.up(log=lambda *_: None))


def test_a_cut_link_is_caught_by_a_short_heartbeat_timeout_and_names_the_host(secure_cluster, secure_rm):
    network = secure_cluster.network
    out = "/tmp/e2e/multihost-cut-once"
    submit = _submit("-r", "worker:2", "-m", TASK_MB, "-o", f"hdfs://{out}", "-n", "multihost-cut-once",
                     "--heartbeat-timeout", "5", "--max-free-retries", "0", TRAIN_TO_LOSE)
    app_id = _app_id(submit)
    _wait_for_checkpoint(out, submit)
    victim = victim_host(secure_cluster, app_id)
    network.set_link(victim, up=False)
    cut, cut_at = time.monotonic(), time.time()
    try:
        _finish(submit)
    finally:
        network.set_link(victim, up=True)
    failed_after = time.monotonic() - cut
    record("3 secure HA hosts: link cut -> job FAILED (heartbeat timeout 5 s, no retry)", failed_after)
    assert submit.returncode == 1
    lost = [e for e in _events(app_id) if e["event"] == "HOST_LOST"]
    assert [(e["host"], e["by_yarn"]) for e in lost] == [(victim.address, False)], lost
    record("3 secure HA hosts: link cut -> HOST_LOST (heartbeat timeout 5 s)", lost[0]["time"] - cut_at)
    diagnostics = secure_rm.application(app_id).diagnostics
    # the AM's own heartbeat timeout caught it: YARN had not declared the host lost yet
    assert f"host {victim.address} lost (its NodeManager" in diagnostics and "does not answer" in diagnostics
    assert "heartbeat timeout" in diagnostics, diagnostics
    assert failed_after <= _expiry_s(secure_cluster) + 30, failed_after
    record("3 secure HA hosts: cut host rejoins after its link is up", rejoin(secure_cluster, secure_rm, victim))


def test_a_cut_link_is_left_behind_by_the_second_attempt(secure_cluster, secure_rm):
    network = secure_cluster.network
    _resumes_on_the_other_hosts(
        secure_cluster, secure_rm, "multihost-cut-retry",
        lose=lambda host: network.set_link(host, up=False),
        restore=lambda host: network.set_link(host, up=True))
    assert all(network.link_is_up(h) for h in network.hosts)


# ------------------------------------------------------------------------------------- losing the AM
def test_a_lost_am_host_is_survived_by_a_new_am_attempt_that_resumes_the_job(secure_cluster, secure_rm):
    """The AM's host SIGKILLed (NodeManager, DataNode, every process) mid-training: YARN starts a second
    AM attempt, which reads the job's history and resumes from the checkpoint; with --max-attempts 1."""
    cluster, rm = secure_cluster, secure_rm
    out, name = "/tmp/e2e/multihost-am-lost", "multihost-am-lost"
    hosts_idle(cluster, rm)
    if webhdfs().exists(out):
        webhdfs().rm(out, recursive=True)
    submit = _submit("-r", "worker:2", "-m", TASK_MB, "-o", f"hdfs://{out}", "-n", name, "--max-attempts", "1",
                     TRAIN_TO_LOSE)
    app_id = _app_id(submit)
    _, am_host = _hosts_of(cluster, app_id, submit)
    watched: dict = {}
    watcher = threading.Thread(target=watch_with_a_deferred_sensor, args=(app_id, cluster, watched), daemon=True)
    watcher.start()
    _wait_for_checkpoint(out, submit)
    others = [h for h in cluster.network.hosts if h != am_host]
    old_seen: list[tuple[float, str]] = []  # AM attempt 1's containers still alive on the other hosts, and when
    sampling = threading.Event()

    def sample() -> None:
        first_attempt = f"{app_id.split('_', 1)[1]}_01_"
        while not sampling.is_set():
            for host in others:
                old_seen.extend((time.time(), c) for c in containers_on(cluster, host).values() if first_attempt in c)
            time.sleep(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    kill_host(cluster, am_host, datanode=True)
    lost_at = time.time()
    try:
        stdout, stderr = _finish(submit)
    finally:
        sampling.set()
        cluster.up(log=lambda *_: None)
    assert submit.returncode == 0, stderr[-2000:]
    diagnostics = rm.application(app_id).diagnostics
    assert "SUCCEEDED on attempt 2/2" in diagnostics and "(not counted: AM lost)" in diagnostics, diagnostics
    metrics = _metrics(out)
    assert metrics["attempt"] == 2 and metrics["resumed"] is True and metrics["epochs_run"][0] > 0, metrics
    events = _events(app_id)
    ams = [(e["am_attempt"], e["host"]) for e in events if e["event"] == "AM_STARTED"]
    assert [a for a, _ in ams] == [1, 2] and ams[0][1] == am_host.address and ams[1][1] != am_host.address, ams
    assert [(e["am_attempt"], e["host"]) for e in events if e["event"] == "AM_LOST"] == [(1, am_host.address)]
    text = subprocess.run([str(BIN / "tony"), "history", "show", app_id], capture_output=True, text=True).stdout
    assert f"AM attempt 1 lost on host {am_host.address}" in text, text[:2000]
    second_running = min(e["time"] for e in events if e["event"] == "TASK_STARTED" and e["attempt"] == 2)
    assert not [c for at, c in old_seen if at > second_running], old_seen  # nothing of AM attempt 1 ran on
    watcher.join(timeout=120)
    assert watched.get("value") == app_id and watched["event"]["status"] == "success", watched
    assert watched["event"]["tracking_url"].rstrip("/").endswith(f"/proxy/{app_id}"), watched
    second_am = next(e["time"] for e in events if e["event"] == "AM_STARTED" and e["am_attempt"] == 2)
    record("3 secure HA hosts: AM host lost -> AM attempt 2 started", second_am - lost_at)
    record("3 secure HA hosts: AM host lost -> attempt 2 running", second_running - lost_at)
    record("3 secure HA hosts: AM's host rejoined after", rejoin(cluster, rm, am_host))


def test_an_am_whose_nodemanager_is_stopped_is_followed_by_a_second_am_that_finishes_the_job(secure_cluster,
                                                                                            secure_rm):
    """Issue 51, item 1: the AM's NodeManager is stopped (SIGTERM, as a decommission or an NM restart does) mid-job.
    The NM stops its containers with SIGTERM: the AM records JOB_FINISHED KILLED (`stopped_by` SIGTERM) and closes
    its log in the 250 ms before SIGKILL. YARN starts AM attempt 2 — no user killed the application — and that
    AM goes on with the job (it took the recorded KILLED as final, exited 143 and the job ended FAILED): the job
    SUCCEEDS on AM attempt 2, resumed from its checkpoint."""
    cluster, rm = secure_cluster, secure_rm
    out, name = "/tmp/e2e/multihost-am-nm-stopped", "multihost-am-nm-stopped"
    hosts_idle(cluster, rm)
    if webhdfs().exists(out):
        webhdfs().rm(out, recursive=True)
    submit = _submit("-r", "worker:2", "-m", TASK_MB, "-o", f"hdfs://{out}", "-n", name, "--max-attempts", "1",
                     TRAIN_TO_LOSE)
    app_id = _app_id(submit)
    _, am_host = _hosts_of(cluster, app_id, submit)
    _wait_for_checkpoint(out, submit)
    nodemanager = next(cluster.pid(d) for d in cluster.daemons if d.name == f"nodemanager-{am_host.name}")
    assert nodemanager
    os.kill(nodemanager, signal.SIGTERM)  # a graceful stop: its containers get SIGTERM, then SIGKILL
    stopped_at = time.time()
    try:
        _, stderr = _finish(submit)
    finally:
        cluster.up(log=lambda *_: None)
        rejoin(cluster, rm, am_host)  # the tests after this one need the host
    events = _events(app_id)
    ams = [(e["am_attempt"], e["host"]) for e in events if e["event"] == "AM_STARTED"]
    recorded_killed = [e for e in events if e["event"] == "JOB_FINISHED" and e.get("stopped_by") == "SIGTERM"]
    assert submit.returncode == 0, (stderr[-2000:], ams, recorded_killed)
    diagnostics = rm.application(app_id).diagnostics
    assert "SUCCEEDED on attempt 2/2" in diagnostics and "(not counted: AM lost)" in diagnostics, diagnostics
    assert [a for a, _ in ams] == [1, 2] and ams[0][1] == am_host.address, ams
    assert events[-1]["event"] == "JOB_FINISHED" and events[-1]["status"] == "SUCCEEDED", events[-3:]
    metrics = _metrics(out)
    assert metrics["attempt"] == 2 and metrics["resumed"] is True, metrics
    lost = [e for e in events if e["event"] == "AM_LOST"]
    # the stopped AM had the time to say KILLED (the case of the issue), and the new AM did not take it as the end
    assert recorded_killed and lost[-1].get("resumed") == "SIGTERM", (recorded_killed, lost)
    second_am = next(e["time"] for e in events if e["event"] == "AM_STARTED" and e["am_attempt"] == 2)
    record("3 secure HA hosts: AM's NodeManager stopped -> AM attempt 2 started", second_am - stopped_at)


def test_a_lost_am_host_is_survived_by_a_trainer_that_writes_data_index_then_a_pointer(secure_cluster, secure_rm):
    """Found as a new user would (issue #40 item 11): a trainer without TensorFlow saves data, index, then a
    pointer by rename; the AM's host was killed mid-job and every retry found the pointer naming a file
    HDFS never got. The pointer now reaches HDFS only after the files written before it: the job SUCCEEDS,
    resumed from a checkpoint of one save."""
    cluster, rm = secure_cluster, secure_rm
    out, name = "/tmp/e2e/multihost-am-lost-pointer", "multihost-am-lost-pointer"
    hosts_idle(cluster, rm)
    fs = webhdfs()
    if fs.exists(out):
        fs.rm(out, recursive=True)
    submit = _submit("-r", "worker:2", "-m", TASK_MB, "-o", f"hdfs://{out}", "-n", name, "--max-attempts", "1",
                     "--env", "STEPS=25", "--env", "STEP_S=2.0", "-s", str(PAYLOADS / "pointer_trainer.py"),
                     "python3 ${DTF_TASK_SCRIPT}")
    app_id = _app_id(submit)
    _, am_host = _hosts_of(cluster, app_id, submit)
    deadline = time.monotonic() + 300
    while not fs.exists(f"{out}/ckpt/checkpoint"):
        assert submit.poll() is None, submit.communicate()
        assert time.monotonic() < deadline, "no pointer reached HDFS"
        time.sleep(0.5)
    # (2 s a step: the pointer is published once what it names is quiet, well before the job ends; at 1 s a
    # step, the first pointer one run saw came with the last steps, after which the job no longer lost its AM)
    kill_host(cluster, am_host, datanode=True)
    lost_at = time.time()
    try:
        _, stderr = _finish(submit)
    finally:
        cluster.up(log=lambda *_: None)
        rejoin(cluster, rm, am_host)  # the tests after this one need the host, whatever this one found
    assert submit.returncode == 0, stderr[-2000:]
    diagnostics = rm.application(app_id).diagnostics
    assert "SUCCEEDED on attempt 2/2" in diagnostics and "(not counted: AM lost)" in diagnostics, diagnostics
    metrics = _metrics(out)
    assert metrics["attempt"] == 2 and metrics["resumed_from"] is not None, metrics
    named = fs.cat(f"{out}/ckpt/checkpoint").decode().split('"')[1]
    data, index = fs.cat(f"{out}/ckpt/{named}.data"), fs.cat(f"{out}/ckpt/{named}.index")
    assert data.split(b"|")[0] == index.split(b"|")[0] and index.split(b"|")[1] == hashlib.sha256(data).hexdigest().encode()
    # the new AM went on with the lost AM's log and closed it (once, events.jsonl never appeared: the dead
    # writer's lease on the log refused every append of the new AM; HistoryStore._take_over)
    events = _events(app_id)
    assert events[-1]["event"] == "JOB_FINISHED" and events[-1]["status"] == "SUCCEEDED", events[-3:]
    assert [e["am_attempt"] for e in events if e["event"] == "AM_STARTED"] == [1, 2]
    second = [e["time"] for e in events if e["event"] == "TASK_STARTED" and e["attempt"] == 2]
    record("3 secure HA hosts: AM host lost (pointer trainer) -> attempt 2 running", min(second) - lost_at)


PAGE_PROBE = ("import sys, urllib.request, urllib.error\n"
              "try:\n"
              "    print(urllib.request.urlopen(sys.argv[1], timeout=10).status)\n"
              "except urllib.error.HTTPError as exc:\n"
              "    print(exc.code)\n")


def test_the_ams_pages_are_read_through_the_proxy_or_by_the_ams_own_user_on_its_host(secure_cluster, secure_rm):
    """#44 item 8: the job's output and events are not readable by another user's process on the AM's host
    (another user's container on that NodeManager), nor from another host; through the tracking URL (the
    RM's proxy, its view ACLs, skein's AmIpFilter) they are."""
    cluster, rm = secure_cluster, secure_rm
    network = cluster.network
    submit = _submit("-r", "worker:1", "-m", TASK_MB, "-n", "multihost-pages", "--follow",
                     "python3 -c \"import os, time; print('AM-AT', os.environ['TONY_AM_ADDRESS'], flush=True); "
                     "time.sleep(300)\"")
    app_id = _app_id(submit)
    try:
        deadline = time.monotonic() + 180
        address = ""
        while not address:
            line = submit.stdout.readline()
            assert line and time.monotonic() < deadline, "the task did not say where its AM is"
            if "AM-AT " in line:
                address = line.split("AM-AT ", 1)[1].split()[0]
        url = f"http://{address}/status.json"
        am_host = next(h for h in network.hosts if h.address == address.rsplit(":", 1)[0])
        other = next(h for h in network.hosts if h != am_host)

        def probe(host: Host, *as_user: str) -> str:
            python = "/usr/bin/python3" if as_user else sys.executable
            done = subprocess.run([*network.exec_prefix(host), *as_user, python, "-c", PAGE_PROBE, url],
                                  capture_output=True, text=True, timeout=60)
            return done.stdout.strip() or done.stderr.strip()[-300:]

        nobody = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
        assert probe(am_host) == "200"          # the AM's own user (root here) beside it
        assert probe(am_host, *nobody) == "403"  # another user on the AM's host
        assert probe(other) == "403"            # another host
        tracking = rm.application(app_id).tracking_url.rstrip("/")
        page = rm.fetch(f"{tracking}/pages/tony/status.json", timeout=30)
        assert page.status_code == 200 and page.json(), page.text[:300]
    finally:
        subprocess.run([str(BIN / "tony"), "kill", app_id], capture_output=True, timeout=120)
        _finish(submit, timeout=120)


# ------------------------------------------------------------------------- tasks in an image (#31)
def test_podman_runs_tasks_on_their_hosts_and_a_killed_nodemanager_leaves_no_container(
        secure_cluster, secure_rm, small_images):
    """podman's host network is the caller's: each task's container is on its own host. When a host's
    NodeManager is SIGKILLed its executors live on until the job ends and their AM is gone; then they stop,
    and their containers end with them (the lease)."""
    from tests.e2e.conftest import BUSYBOX
    from tony_airflow.core.executor.engine import LABEL
    from tony_airflow.local.containers import daemon

    submit = _submit("-r", "worker:2", "-m", TASK_MB, "--docker_image", BUSYBOX, "--docker_engine", "podman",
                     "--heartbeat-timeout", "10", "--max-free-retries", "0", "-n", "multihost-podman",
                     "sleep 600")
    app_id = _app_id(submit)
    selector = f"{LABEL}.application={app_id}"
    deadline = time.monotonic() + 120
    while len(daemon.project_containers(selector, engines=("podman",))) < 2:
        assert submit.poll() is None and time.monotonic() < deadline, submit.communicate()
        time.sleep(0.5)
    victim = victim_host(secure_cluster, app_id)
    nodemanager = next(secure_cluster.pid(d) for d in secure_cluster.daemons
                       if d.name == f"nodemanager-{victim.name}")
    os.kill(nodemanager, signal.SIGKILL)
    killed = time.monotonic()
    _finish(submit)
    assert submit.returncode == 1
    while daemon.project_containers(selector, engines=("podman",)):
        assert time.monotonic() - killed < _expiry_s(secure_cluster) + 10 + 30 + 30, "containers left"
        time.sleep(0.5)
    record("3 secure HA hosts, podman: NodeManager killed -> no container of the job", time.monotonic() - killed)
    secure_cluster.up(log=lambda *_: None)
    rejoin(secure_cluster, secure_rm, victim)


def test_docker_on_a_host_in_a_network_namespace_is_refused_in_one_line(secure_cluster, secure_rm,
                                                                        small_images):
    from tests.e2e.conftest import BUSYBOX

    proc = subprocess.run([str(BIN / "ytf-submit"), "-r", "worker:1", "--docker_image", BUSYBOX, "-n",
                           "multihost-docker", "true"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert "worker:0: docker on 198.18.0." in last and "use docker_engine: podman" in last, last


# ------------------------------------------------------------------------- last: a crash of the whole cluster
def test_up_after_a_crash_clears_what_the_crashed_run_left_on_its_hosts(secure_cluster, secure_rm):
    """Last of the module: every daemon SIGKILLed (the machine's session died), a stray process left in a
    host's namespace; `tony cluster up` stops the stray, makes the hosts again and starts all three."""
    cluster = secure_cluster
    network = cluster.network
    stray = subprocess.Popen([*network.exec_prefix(network.hosts[1]), "sleep", "600"], start_new_session=True)
    for pid in cluster.running().values():
        if pid:
            os.kill(pid, signal.SIGKILL)
    assert stray.poll() is None
    from tony_airflow.cli import tony as cli

    assert cli.run(["cluster", "up", "--state-dir", str(cluster.state_dir)]) == 0
    assert stray.wait(timeout=30) is not None  # stopped by `up`, not left running in a namespace
    assert all(cluster.running().values()) and cluster.is_ready()
    assert network.pids(network.hosts[1]) and stray.pid not in network.pids(network.hosts[1])
