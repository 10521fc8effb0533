"""`tony cluster up` waits for the daemons it started: a daemon that has not exec'd Java yet
(its /proc cmdline is still the launcher's) is starting, not "exited during start"."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tony_airflow.errors import ClusterError
from tony_airflow.local.cluster.cluster import DAEMONS, LocalCluster
from tony_airflow.local.cluster.config import ClusterSettings


def _cluster(tmp_path) -> LocalCluster:
    cluster = LocalCluster(tmp_path)
    cluster.run_dir.mkdir(parents=True)
    cluster.log_dir.mkdir(parents=True)
    ClusterSettings.choose().save(cluster.settings_file)
    return cluster


def test_a_daemon_still_starting_is_not_reported_as_exited(tmp_path, monkeypatch):
    cluster = _cluster(tmp_path)
    # live processes whose command line does not (yet) name the daemon's Java main class
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) for _ in DAEMONS]
    try:
        for daemon, proc in zip(DAEMONS, procs):
            cluster._pid_file(daemon).write_text(f"{proc.pid}\n")
        monkeypatch.setattr(LocalCluster, "is_ready", lambda self: False)
        with pytest.raises(ClusterError, match="not ready within"):
            cluster.wait_ready(timeout=1.0)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_a_daemon_that_died_is_reported_at_once(tmp_path):
    cluster = _cluster(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for daemon in DAEMONS:
        cluster._pid_file(daemon).write_text(f"{dead.pid}\n")
    with pytest.raises(ClusterError, match=f"{DAEMONS[0].name} exited during start"):
        cluster.wait_ready(timeout=30)


def test_the_daemons_temporary_files_stay_in_the_state_directory(tmp_path):
    """Jetty unpacks each daemon's web apps into java.io.tmpdir and a killed daemon never removes them:
    they go under the cluster's own directory, which `tony cluster` owns, not into /tmp."""
    cluster = _cluster(tmp_path)
    cmd = cluster._java_cmd(tmp_path / "jdk", tmp_path / "jars", DAEMONS[0])
    assert f"-Djava.io.tmpdir={tmp_path / 'tmp'}" in cmd
    assert cmd.index(f"-Djava.io.tmpdir={tmp_path / 'tmp'}") < cmd.index(DAEMONS[0].main_class)


def test_the_resourcemanagers_node_attribute_store_is_in_the_state_directory(tmp_path):
    """Hadoop's default store is file:///tmp/hadoop-yarn-<user>/node-attribute/, which the RM makes at
    start and `tony cluster down` would leave behind."""
    from tony_airflow.local.cluster.config import write_conf
    from tony_airflow.yarn.hadoop_conf import HadoopConf

    write_conf(tmp_path / "conf", tmp_path, tmp_path / "jars", ClusterSettings.choose(), container_path="/bin")
    store = HadoopConf.load(tmp_path / "conf").get("yarn.node-attribute.fs-store.root-dir")
    assert store == f"file://{tmp_path / 'node-attributes'}"


def test_the_zkfcs_znode_is_made_again_when_the_namenodes_addresses_changed(tmp_path, monkeypatch):
    """The ZKFCs' znode keeps a breadcrumb naming the last active NameNode's RPC and ZKFC address, and
    DFSZKFailoverController refuses one that names an address its configuration does not have ("Mismatched
    address stored in ZK"): neither NameNode ever became active after `up` gave a crashed HA cluster new
    ports (a port of the old set was taken). formatZK runs again whenever those addresses changed, and
    only then."""
    cluster = _cluster(tmp_path)
    settings = ClusterSettings.load(cluster.settings_file)
    settings.nameservice = "tony"
    settings.save(cluster.settings_file)
    (tmp_path / "data" / "zookeeper").mkdir(parents=True)  # as `up` makes it
    runs: list[tuple[str, ...]] = []
    monkeypatch.setattr(LocalCluster, "_wait_port", lambda self, *a: None)
    monkeypatch.setattr(LocalCluster, "_run_once", lambda self, daemon, jh, jd, what, *args: runs.append(args))
    zkfc = next(d for d in cluster.daemons if d.name == "zkfc-nn1")
    prepare = lambda: cluster._prepare(zkfc, tmp_path / "jdk", tmp_path / "jars", 0.0)  # noqa: E731

    prepare()
    prepare()
    assert runs == [("-formatZK", "-nonInteractive", "-force")]  # once for the same addresses
    settings.ports["nn2:rpc"] += 1
    settings.save(cluster.settings_file)
    prepare()
    assert len(runs) == 2  # the addresses changed: the old breadcrumb goes with the rest of the znode


def test_the_standby_namenode_is_bootstrapped_once_the_first_answers_on_its_rpc_port(tmp_path, monkeypatch):
    """bootstrapStandby fetches the namespace from nn1's RPC port, which a NameNode opens after its HTTP port
    (after loading its image): under load, `cluster up --secure --ha` failed with 'Connection refused' from
    nn1's RPC address and exit 2, having waited for the HTTP port alone."""
    cluster = _cluster(tmp_path)
    settings = ClusterSettings.load(cluster.settings_file)
    settings.nameservice = "tony"
    settings.save(cluster.settings_file)
    steps: list[object] = []
    monkeypatch.setattr(LocalCluster, "_wait_port", lambda self, port, *a: steps.append(port))
    monkeypatch.setattr(LocalCluster, "_run_once", lambda self, daemon, jh, jd, what, *args: steps.append(what))
    nn2 = next(d for d in cluster.daemons if d.name == "namenode-nn2")
    cluster._prepare(nn2, tmp_path / "jdk", tmp_path / "jars", 0.0)
    assert steps[-1] == "bootstrap" and settings.ports["fs.defaultFS"] in steps[:-1], steps
