"""The local cluster's ports lie outside the kernel's ephemeral range, as Hadoop's defaults do
(8020, 8032, 8088, 9870): while a daemon is down (an HA test kills one and starts it again), an
outgoing connection may be given any free ephemeral port as its own, and a daemon's port taken that
way made its restart fail with "Address already in use"."""

from __future__ import annotations

import socket

from tony_airflow.local.cluster import config
from tony_airflow.local.cluster.config import PORT_KEYS, ClusterSettings, free_ports, listening_ports


def _ephemeral() -> range:
    low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    return range(low, high + 1)


def test_chosen_ports_are_free_distinct_and_outside_the_ephemeral_range():
    ports = free_ports(40)
    assert len(set(ports)) == 40
    assert not [p for p in ports if p in _ephemeral()]
    assert all(config.port_is_free(p) for p in ports)


def test_a_cluster_chooses_its_ports_outside_the_ephemeral_range():
    ports = ClusterSettings.choose().ports
    assert set(ports) == set(PORT_KEYS)
    assert not [p for p in ports.values() if p in _ephemeral()]


def test_a_busy_port_is_not_chosen(monkeypatch):
    with socket.socket() as held:
        held.bind((config.HOST, 0))
        busy = held.getsockname()[1]
        # the kernel's port for `held` lies in the ephemeral range, where neighbours may be any connection's:
        # room for many of them taken (with three ports, a fresh-clone run failed it)
        monkeypatch.setattr(config, "listening_ports", lambda *_: range(busy, busy + 200))
        assert busy not in free_ports(2)


def test_the_range_lies_below_the_ephemeral_one_else_above_it():
    assert listening_ports((32768, 60999)) == range(config.LOWEST_PORT, 32768)
    assert listening_ports((10500, 60999)) == range(61000, 65536)
    # no room outside: any port the kernel gives (the old way)
    assert listening_ports((1024, 65535)) == range(1024, 65536)


def test_a_cluster_started_again_keeps_its_free_ports_and_moves_only_a_busy_one(tmp_path):
    """`tony cluster up` after a crash: the addresses a user (or a test, or an Airflow connection) holds for
    the ResourceManager and the NameNode stay what they were; only a port something else took meanwhile
    moves (a fresh-clone run saw every port move for one busy one, and the RM its tests held was gone)."""
    from tony_airflow.local.cluster.cluster import LocalCluster

    cluster = LocalCluster(tmp_path)
    before = ClusterSettings.choose()
    before.save(cluster.settings_file)
    taken = next(iter(before.ports))
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind((config.HOST, before.ports[taken]))
        held.listen()
        after = cluster._decide_settings(None, some_running=False)
    moved = {key for key in before.ports if after.ports[key] != before.ports[key]}
    assert moved == {taken}
    assert after.ports[taken] not in before.ports.values()
    assert len(set(after.ports.values())) == len(after.ports)


def test_a_moved_port_never_takes_the_kdcs(tmp_path, monkeypatch):
    """The KDC's port is kept outside `ports`; a busy daemon port moves elsewhere (a reviewer's script)."""
    from tony_airflow.local.cluster import cluster as cluster_module
    from tony_airflow.local.cluster.cluster import LocalCluster

    cluster = LocalCluster(tmp_path)
    before = ClusterSettings.choose()
    before.kdc_port = free_ports(1)[0]
    before.save(cluster.settings_file)
    taken = next(iter(before.ports))
    real = cluster_module.free_ports
    monkeypatch.setattr(cluster_module, "free_ports", lambda n: [before.kdc_port, *real(n)])
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind((config.HOST, before.ports[taken]))
        held.listen()
        after = cluster._decide_settings(None, some_running=False)
    assert after.ports[taken] != before.kdc_port and after.ports[taken] not in before.ports.values()
