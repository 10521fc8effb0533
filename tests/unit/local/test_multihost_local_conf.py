"""The multi-host local cluster on paper: addresses, names, per-host configuration, refused options."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from tony_airflow.cli import tony as cli
from tony_airflow.local.cluster.cluster import daemons_of
from tony_airflow.local.cluster.config import DAEMON_PORTS, ClusterSettings, write_conf
from tony_airflow.local.cluster.network import MAX_HOSTS, SLOTS, SUBNET, HostNetwork
from tony_airflow.yarn.hadoop_conf import HadoopConf

IFNAMSIZ = 15  # the kernel's limit on a link's name


@pytest.mark.parametrize("slot", [0, 1, SLOTS - 1])
def test_every_address_is_in_the_test_range_and_every_slot_apart(slot: int):
    network = HostNetwork(slot, MAX_HOSTS)
    addresses = [network.bridge_address, *(h.address for h in network.hosts)]
    assert all(ipaddress.ip_address(a) in network.network for a in addresses)
    assert network.network.subnet_of(SUBNET) and SUBNET == ipaddress.ip_network("198.18.0.0/24")
    assert len(set(addresses)) == MAX_HOSTS + 1
    assert network.network.broadcast_address not in {ipaddress.ip_address(a) for a in addresses}
    assert all(len(name) <= IFNAMSIZ for h in network.hosts for name in (h.link, h.netns, network.bridge))
    others = {HostNetwork(s, 1).network for s in range(SLOTS) if s != slot}
    assert not any(network.network.overlaps(o) for o in others)


def test_slot_0_has_the_bridge_at_1_and_hosts_from_2():
    network = HostNetwork(0, 3)
    assert network.bridge_address == "198.18.0.1"
    assert [(h.name, h.netns, h.address, h.link) for h in network.hosts] == [
        ("h1", "tony0h1", "198.18.0.2", "tony0h1v"), ("h2", "tony0h2", "198.18.0.3", "tony0h2v"),
        ("h3", "tony0h3", "198.18.0.4", "tony0h3v")]
    assert network.host("198.18.0.3").name == "h2" and network.host("h3").netns == "tony0h3"
    # run in the namespace, with the host's address as host name (skein's tracking URL is built from it)
    prefix = network.exec_prefix(network.hosts[0])
    assert prefix[1] == "--net=/run/netns/tony0h1" and "--uts" in prefix and prefix[-1] == "198.18.0.2"


def _settings(nodes: int) -> ClusterSettings:
    settings = ClusterSettings.choose()
    settings.nodes, settings.net_slot = nodes, 2
    return settings


def test_each_host_has_its_own_addresses_and_directories_and_the_masters_are_on_the_bridge(tmp_path: Path):
    settings = _settings(3)
    write_conf(tmp_path / "conf", tmp_path, tmp_path / "jars", settings, container_path="/usr/bin")
    main = HadoopConf.load(tmp_path / "conf")
    bridge = settings.network.bridge_address
    assert bridge == "198.18.0.33"
    assert main.get("fs.defaultFS") == f"hdfs://{bridge}:{settings.ports['fs.defaultFS']}"
    assert main.get("yarn.resourcemanager.address").startswith(bridge + ":")
    assert main.get("yarn.nm.liveness-monitor.expiry-interval-ms") == "10000"
    assert main.get("dfs.replication") == "3"
    assert main.get("dfs.namenode.datanode.registration.ip-hostname-check") == "false"
    dirs = set()
    for host in settings.network.hosts:
        conf = HadoopConf.load(tmp_path / f"conf-{host.name}")
        assert conf.get("yarn.nodemanager.hostname") == host.address
        for key in DAEMON_PORTS["nodemanager"] + DAEMON_PORTS["datanode"]:
            assert conf.get(key) == f"{host.address}:{settings.ports[key]}", key
        assert conf.get("fs.defaultFS") == main.get("fs.defaultFS")
        dirs |= {conf.get("yarn.nodemanager.local-dirs"), conf.get("dfs.datanode.data.dir")}
    assert len(dirs) == 6  # nothing shared between hosts


def test_a_multi_host_cluster_runs_a_datanode_and_a_nodemanager_per_host_in_its_namespace():
    daemons = daemons_of(_settings(3))
    assert [d.name for d in daemons] == ["namenode", "resourcemanager", "datanode-h1", "nodemanager-h1",
                                         "datanode-h2", "nodemanager-h2", "datanode-h3", "nodemanager-h3"]
    assert [d.host.name if d.host else None for d in daemons][:3] == [None, None, "h1"]
    assert {d.conf for d in daemons if d.host} == {"conf-h1", "conf-h2", "conf-h3"}
    assert [d.name for d in daemons_of(_settings(1))] == ["namenode", "datanode", "resourcemanager", "nodemanager"]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("argv, expected", [
    (["--nodes", "0"], f"--nodes: 0 hosts; allowed: 1 to {MAX_HOSTS}"),
    (["--nodes", str(MAX_HOSTS + 1)], f"allowed: 1 to {MAX_HOSTS}"),
    (["--nodes", "-3"], "allowed: 1 to"),
    (["--nodes", "three"], "--nodes: invalid int value: 'three'"),
    (["--nodes", "0", "--ha"], f"--nodes: 0 hosts; allowed: 1 to {MAX_HOSTS}"),
    (["--ha", "--nameservice", "my.cluster"], "--nameservice: 'my.cluster' is not a host name label"),
    (["--ha", "--nameservice", "bad_name"], "--nameservice: 'bad_name' is not a host name label"),
    (["--nodes", "2", "--gpus", "1"], "allowed with --gpus: --nodes 1"),
])
def test_bad_host_counts_and_combinations_are_refused_before_anything_starts(argv, expected, capsys, tmp_path):
    state = tmp_path / "c"
    assert cli.run(["cluster", "up", "--state-dir", str(state), *argv]) == 2
    assert expected in _one_line(capsys)
    assert not state.exists()


def test_without_root_a_multi_host_cluster_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert cli.run(["cluster", "up", "--state-dir", str(tmp_path / "c"), "--nodes", "3"]) == 2
    assert "needs root; allowed without root: --nodes 1" in _one_line(capsys)


def test_a_stopped_cluster_whose_slot_was_taken_moves_to_a_free_one(tmp_path, monkeypatch):
    from tony_airflow.local.cluster import cluster as cluster_module
    from tony_airflow.local.cluster.cluster import LocalCluster

    owners = {0: str(tmp_path / "other"), 1: ""}
    monkeypatch.setattr(HostNetwork, "owner", lambda self: owners.get(self.slot, ""))
    monkeypatch.setattr(cluster_module, "free_slot", lambda: 1)
    mine = LocalCluster(tmp_path / "mine")
    settings = _settings(3)
    settings.net_slot = 0
    mine._place_hosts(settings, some_running=False)
    assert settings.net_slot == 1  # slot 0 is the other cluster's now: left alone
    owners[1] = str(mine.state_dir)
    mine._place_hosts(settings, some_running=False)
    assert settings.net_slot == 1  # its own slot is kept
    fresh = ClusterSettings.choose()
    fresh.nodes = 3
    mine._place_hosts(fresh, some_running=False)
    assert (fresh.net_slot, fresh.nm_memory_mb, fresh.max_alloc_mb) == (1, 4096, 4096)


def test_an_ha_cluster_runs_two_namenodes_two_rms_zookeeper_and_a_journalnode(tmp_path: Path):
    settings = _settings(1)
    settings.nameservice = "tony"
    daemons = daemons_of(settings, tmp_path)
    assert [d.name for d in daemons] == ["zookeeper", "journalnode", "namenode", "namenode-nn2", "zkfc-nn1",
                                         "zkfc-nn2", "resourcemanager", "resourcemanager-rm2", "datanode",
                                         "nodemanager"]
    assert {d.name: d.conf for d in daemons if d.conf != "conf"} == {
        "namenode": "conf-nn1", "namenode-nn2": "conf-nn2", "zkfc-nn1": "conf-nn1", "zkfc-nn2": "conf-nn2",
        "resourcemanager": "conf-rm1", "resourcemanager-rm2": "conf-rm2"}
    write_conf(tmp_path / "conf", tmp_path, tmp_path / "jars", settings, container_path="/usr/bin")
    shared = HadoopConf.load(tmp_path / "conf")
    assert shared.get("fs.defaultFS") == "hdfs://tony"
    assert shared.get("dfs.namenode.rpc-address") is None and shared.get("yarn.resourcemanager.address") is None
    assert shared.namenode_web_addresses() == [f"http://127.0.0.1:{settings.ports['dfs.namenode.http-address']}",
                                               f"http://127.0.0.1:{settings.ports['nn2:http']}"]
    assert len(shared.rm_web_addresses()) == 2
    assert HadoopConf.load(tmp_path / "conf-nn2").get("dfs.ha.namenode.id") == "nn2"
    assert HadoopConf.load(tmp_path / "conf-rm1").get("yarn.resourcemanager.ha.id") == "rm1"
