"""The local cluster in HA shape (`tony cluster up --ha`): two NameNodes of one nameservice sharing
their edits through a JournalNode (QJM), each watched by a ZKFC that fails over automatically; two
ResourceManagers electing their leader in ZooKeeper and keeping their state there (RM recovery, work-
preserving: running containers survive a failover); one ZooKeeper (Hadoop 3.4.2's own, 3.8.4).

Both NameNodes and both RMs listen on the same host, so each reads a configuration directory of its
own that says which one it is (`dfs.ha.namenode.id`, `yarn.resourcemanager.ha.id`): Hadoop would
otherwise find two ids matching the local address and refuse to start. Every other process reads
the shared `conf/`, which lists both, as a client of a production cluster does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from tony_airflow.errors import UsageError
from tony_airflow.yarn.hadoop_conf import read_site, write_site

NAMENODE_IDS = ("nn1", "nn2")
RM_IDS = ("rm1", "rm2")
DEFAULT_NAMESERVICE = "tony"
# A nameservice is the host part of hdfs://<nameservice>/…: a host name label (RFC 1123), no dots
# (Hadoop splits suffixed keys at dots: dfs.namenode.rpc-address.<ns>.<nn>)
_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")

RM_SERVICE_KEYS = ("yarn.resourcemanager.address", "yarn.resourcemanager.scheduler.address",
                   "yarn.resourcemanager.resource-tracker.address", "yarn.resourcemanager.admin.address",
                   "yarn.resourcemanager.webapp.address")
# The ports an HA cluster adds, after the single cluster's (PORT_KEYS): `--port-base N` keeps its order.
HA_PORT_KEYS = (
    "zookeeper",
    "dfs.journalnode.rpc-address", "dfs.journalnode.http-address",
    "nn2:rpc", "nn2:http", "zkfc:nn1", "zkfc:nn2",
    *(f"rm2:{key}" for key in RM_SERVICE_KEYS),
)
ZK_TICK_MS = 1000       # ZooKeeper's tick: sessions may be as short as 2 ticks
ZK_SESSION_MS = 5000    # the RMs' ZooKeeper session: an RM that died loses its leadership this soon


def zkfc_addresses(address: Callable[[str], str]) -> str:
    """What the ZKFCs' znode names of the NameNodes (its breadcrumb: the last active one's RPC address and
    ZKFC port, DFSZKFailoverController.dataToTarget), one line per NameNode; `address(key)` as in ha_sites."""
    rpc = namenode_rpc(address)
    return "".join(f"{nn} {rpc[nn]} {address(f'zkfc:{nn}')}\n" for nn in NAMENODE_IDS)


def namenode_rpc(address: Callable[[str], str]) -> dict[str, str]:
    """Each NameNode's RPC address (nn1 keeps the single cluster's port key)."""
    return {"nn1": address("fs.defaultFS"), "nn2": address("nn2:rpc")}


def check_nameservice(name: str) -> str:
    if not _LABEL.fullmatch(name or ""):
        raise UsageError(f"--nameservice: {name!r} is not a host name label; allowed: 1 to 63 lower-case "
                         "letters, digits and '-', not starting or ending with '-' (no dots)")
    return name


def ha_sites(ns: str, address, state_dir: Path, zk: str) -> dict[str, dict[str, object]]:
    """core-, hdfs- and yarn-site of an HA cluster, by file; `address(key)` is `host:port` of a port key."""
    nn_rpc = namenode_rpc(address)
    nn_http = {"nn1": address("dfs.namenode.http-address"), "nn2": address("nn2:http")}
    core: dict[str, object] = {
        "fs.defaultFS": f"hdfs://{ns}",
        "ha.zookeeper.quorum": zk,
        "hadoop.zk.address": zk,
        "hadoop.zk.timeout-ms": ZK_SESSION_MS,
        "ha.zookeeper.session-timeout.ms": ZK_SESSION_MS,
        # a client (a DataNode, skein's AM, the NM's localizer) that lost the active NN retries the other soon
        "ipc.client.connect.max.retries": 2,
        "ipc.client.connect.retry.interval": 500,
    }
    hdfs: dict[str, object] = {
        "dfs.nameservices": ns,
        "dfs.ha.namenodes." + ns: ",".join(NAMENODE_IDS),
        **{f"dfs.namenode.rpc-address.{ns}.{nn}": nn_rpc[nn] for nn in NAMENODE_IDS},
        **{f"dfs.namenode.http-address.{ns}.{nn}": nn_http[nn] for nn in NAMENODE_IDS},
        **{f"dfs.ha.zkfc.port.{ns}.{nn}": address(f"zkfc:{nn}").rsplit(":", 1)[1] for nn in NAMENODE_IDS},
        "dfs.namenode.shared.edits.dir": f"qjournal://{address('dfs.journalnode.rpc-address')}/{ns}",
        "dfs.journalnode.edits.dir": str(state_dir / "data" / "journal"),
        "dfs.journalnode.rpc-address": address("dfs.journalnode.rpc-address"),
        "dfs.journalnode.http-address": address("dfs.journalnode.http-address"),
        "dfs.client.failover.proxy.provider." + ns:
            "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider",
        "dfs.ha.automatic-failover.enabled": True,
        # no second machine to fence: the old active is dead or has stepped down (QJM lets one writer in)
        "dfs.ha.fencing.methods": "shell(/bin/true)",
        # the standby reads the edits every second, so a failover has little to catch up
        "dfs.ha.tail-edits.period": "1s",
        "dfs.client.failover.sleep.base.millis": 200,
        "dfs.client.failover.sleep.max.millis": 2000,
    }
    yarn: dict[str, object] = {
        "yarn.resourcemanager.ha.enabled": True,
        "yarn.resourcemanager.ha.rm-ids": ",".join(RM_IDS),
        "yarn.resourcemanager.cluster-id": f"{ns}-yarn",
        "yarn.resourcemanager.ha.automatic-failover.enabled": True,
        "yarn.resourcemanager.recovery.enabled": True,
        "yarn.resourcemanager.work-preserving-recovery.enabled": True,
        "yarn.resourcemanager.store.class":
            "org.apache.hadoop.yarn.server.resourcemanager.recovery.ZKRMStateStore",
        "yarn.resourcemanager.zk-state-store.parent-path": "/rmstore",
        "yarn.client.failover-sleep-base-ms": 200,
        "yarn.client.failover-sleep-max-ms": 2000,
        # the NodeManagers keep their containers while they find the new active RM
        "yarn.resourcemanager.connect.retry-interval.ms": 1000,
    }
    for rm in RM_IDS:
        yarn[f"yarn.resourcemanager.hostname.{rm}"] = address(RM_SERVICE_KEYS[0]).rsplit(":", 1)[0]
        for key in RM_SERVICE_KEYS:
            yarn[f"{key}.{rm}"] = address(key if rm == "rm1" else f"rm2:{key}")
    return {"core-site.xml": core, "hdfs-site.xml": hdfs, "yarn-site.xml": yarn}


SINGLE_ADDRESS_KEYS = ("dfs.namenode.rpc-address", "dfs.namenode.http-address", *RM_SERVICE_KEYS)


def write_daemon_conf(conf_dir: Path, target: Path, own: dict[str, dict[str, object]]) -> Path:
    """A copy of `conf_dir` for one NameNode or RM: the shared files plus what says which one it is."""
    target.mkdir(parents=True, exist_ok=True)
    for path in conf_dir.iterdir():
        if path.is_file():
            (target / path.name).write_bytes(path.read_bytes())
    for name, extra in own.items():
        write_site(target / name, {**read_site(conf_dir / name), **extra})
    return target


def namenode_conf(nn: str, state_dir: Path) -> dict[str, dict[str, object]]:
    return {"hdfs-site.xml": {"dfs.ha.namenode.id": nn,
                              "dfs.namenode.name.dir": f"file://{state_dir / 'data' / f'namenode-{nn}'}"}}


def rm_conf(rm: str) -> dict[str, dict[str, object]]:
    return {"yarn-site.xml": {"yarn.resourcemanager.ha.id": rm}}
