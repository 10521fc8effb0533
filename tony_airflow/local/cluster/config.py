"""The generated configuration of the local cluster: ports and the site files."""

from __future__ import annotations

import getpass
import json
import random
import socket
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from tony_airflow.errors import ClusterError
from tony_airflow.local.cluster.ha import (
    HA_PORT_KEYS,
    NAMENODE_IDS,
    RM_IDS,
    RM_SERVICE_KEYS,
    SINGLE_ADDRESS_KEYS,
    ha_sites,
    namenode_conf,
    rm_conf,
    write_daemon_conf,
)
from tony_airflow.local.cluster.kdc import Kdc
from tony_airflow.local.cluster.network import Host, HostNetwork
from tony_airflow.local.cluster.secure import secure_sites
from tony_airflow.yarn.hadoop_conf import write_site

HOST = "127.0.0.1"
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10000  # above the well-known and the usual fixed service ports
MIN_LISTENING_PORTS = 1000

# Every address a daemon binds, in a fixed order so that `--port-base N`
# gives N, N+1, ... to them.
PORT_KEYS = (
    "fs.defaultFS",
    "dfs.namenode.http-address",
    "dfs.datanode.address",
    "dfs.datanode.http.address",
    "dfs.datanode.ipc.address",
    "yarn.resourcemanager.address",
    "yarn.resourcemanager.scheduler.address",
    "yarn.resourcemanager.resource-tracker.address",
    "yarn.resourcemanager.admin.address",
    "yarn.resourcemanager.webapp.address",
    "yarn.nodemanager.address",
    "yarn.nodemanager.localizer.address",
    "yarn.nodemanager.webapp.address",
    # the second NodeManager of a GPU-advertising cluster (`--gpus N`)
    "gpu:yarn.nodemanager.address",
    "gpu:yarn.nodemanager.localizer.address",
    "gpu:yarn.nodemanager.webapp.address",
    # the daemons `--ha` adds (ha.HA_PORT_KEYS)
    *HA_PORT_KEYS,
)
GPU_LABEL = "gpu"
# A multi-host cluster's non-exclusive partition for application masters, on no host until one is labelled
# (`LocalCluster.label_host`): as production clusters keep AMs on stable hosts, and the many-host tests keep
# an AM off the host they lose. Non-exclusive: tasks may use its idle room, after the unlabelled hosts.
AM_LABEL = "am"

DAEMON_PORTS = {
    "namenode": ("fs.defaultFS", "dfs.namenode.http-address"),
    "datanode": ("dfs.datanode.address", "dfs.datanode.http.address", "dfs.datanode.ipc.address"),
    "resourcemanager": tuple(k for k in PORT_KEYS if k.startswith("yarn.resourcemanager.")),
    "nodemanager": tuple(k for k in PORT_KEYS if k.startswith("yarn.nodemanager.")),
    "nodemanager-gpu": tuple(k for k in PORT_KEYS if k.startswith("gpu:")),
    "zookeeper": ("zookeeper",),
    "journalnode": ("dfs.journalnode.rpc-address", "dfs.journalnode.http-address"),
    "namenode-nn2": ("nn2:rpc", "nn2:http"),
    "zkfc-nn1": ("zkfc:nn1",),
    "zkfc-nn2": ("zkfc:nn2",),
    "resourcemanager-rm2": tuple(f"rm2:{key}" for key in RM_SERVICE_KEYS),
}
# What a multi-host cluster's NodeManager offers by default: enough for a task and the AM, not two
# tasks of the tests' size (2560 MiB), so YARN spreads them over the hosts.
HOST_MEMORY_MB = 4096
HOST_VCORES = 4
# How soon YARN gives up on a silent NodeManager (and HDFS on a DataNode) in a multi-host cluster:
# seconds, not YARN's 10 minutes, so that losing a host is something a test can wait for.
NM_LIVENESS_EXPIRY_MS = 10_000
DN_RECHECK_MS = 5_000


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel gives outgoing connections (Linux's default when it cannot be read)."""
    try:
        low, high = map(int, EPHEMERAL_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def listening_ports(ephemeral: tuple[int, int] | None = None) -> range:
    """Where daemons listen: below the ephemeral range (as Hadoop's 8020, 8032, 8088), else above it.

    A port in the ephemeral range is free only while its daemon runs: while one is down (the HA
    tests kill one and start it again), any outgoing connection may be given it, and the restart
    fails with "Address already in use"."""
    low, high = ephemeral or ephemeral_range()
    if low - LOWEST_PORT >= MIN_LISTENING_PORTS:
        return range(LOWEST_PORT, low)
    if 65535 - high >= MIN_LISTENING_PORTS:
        return range(high + 1, 65536)
    return range(1024, 65536)


def free_ports(count: int) -> list[int]:
    """`count` distinct ports, free now, from `listening_ports()` in random order."""
    candidates = listening_ports()
    ports: list[int] = []
    for port in random.sample(candidates, len(candidates)):
        if port_is_free(port):
            ports.append(port)
            if len(ports) == count:
                return ports
    raise ClusterError(f"fewer than {count} free ports in {candidates.start}-{candidates.stop - 1}")


@dataclass
class ClusterSettings:
    """What `tony cluster up` decided once and keeps in `cluster.json`."""

    ports: dict[str, int]
    port_base: int | None = None
    nm_memory_mb: int = 16384
    nm_vcores: int = 16
    max_alloc_mb: int = 8192
    max_alloc_vcores: int = 8
    gpus: int = 0
    secure: bool = False
    preemption: bool = False  # two queues (default, high) and YARN's preemption monitor (PREEMPTION_QUEUES)
    kdc_port: int = 0
    nodes: int = 1  # worker hosts: 1 = NodeManager and DataNode on 127.0.0.1; more = network namespaces
    net_slot: int = -1  # the /28 of 198.18.0.0/24 a multi-host cluster holds (network.HostNetwork)
    nm_liveness_expiry_ms: int = NM_LIVENESS_EXPIRY_MS
    nameservice: str = ""  # `--ha`: two NameNodes of this nameservice, two RMs, ZooKeeper (ha.py); "" = no HA
    extra: dict[str, str] = field(default_factory=dict)  # more keys: `dfs.*` to hdfs-site, the rest to yarn-site

    @classmethod
    def choose(cls, port_base: int | None = None) -> ClusterSettings:
        if port_base is None:
            ports = dict(zip(PORT_KEYS, free_ports(len(PORT_KEYS))))
        else:
            ports = {key: port_base + i for i, key in enumerate(PORT_KEYS)}
        return cls(ports=ports, port_base=port_base)

    @classmethod
    def load(cls, path: Path) -> ClusterSettings:
        known = {f.name for f in fields(cls)}  # a cluster.json of an earlier version may hold more
        return cls(**{k: v for k, v in json.loads(path.read_text()).items() if k in known})

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")

    @property
    def network(self) -> HostNetwork | None:
        return HostNetwork(self.net_slot, self.nodes) if self.nodes > 1 else None

    @property
    def master_host(self) -> str:
        """Where the ResourceManager and NameNode listen: loopback, or the bridge every host reaches."""
        network = self.network
        return network.bridge_address if network else HOST

    def address(self, key: str) -> str:
        return f"{self.master_host}:{self.ports[key]}"

    @property
    def ha(self) -> bool:
        return bool(self.nameservice)


_LOG4J = """\
hadoop.root.logger=INFO,console
hadoop.log.dir=.
hadoop.log.file=hadoop.log
log4j.rootLogger=${hadoop.root.logger}
log4j.threshold=ALL
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.target=System.err
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{2}: %m%n
log4j.appender.RFA=org.apache.log4j.RollingFileAppender
log4j.appender.RFA.File=${hadoop.log.dir}/${hadoop.log.file}
log4j.appender.RFA.MaxFileSize=64MB
log4j.appender.RFA.MaxBackupIndex=2
log4j.appender.RFA.layout=org.apache.log4j.PatternLayout
log4j.appender.RFA.layout.ConversionPattern=%d{ISO8601} %p %c: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
log4j.logger.org.apache.hadoop.yarn.util.ProcfsBasedProcessTree=WARN
log4j.logger.org.eclipse.jetty=WARN
"""


def write_conf(conf_dir: Path, state_dir: Path, jar_dir: Path, settings: ClusterSettings,
               container_path: str) -> None:
    """Generate core-, hdfs-, yarn-site, capacity-scheduler and log4j for one cluster.

    `container_path` is the PATH containers get: whitelisting PATH is not enough,
    because launch_container.sh runs `export PATH=${PATH:-<NM's PATH>}` in a bash
    that has already set a default PATH of its own.
    """
    conf_dir.mkdir(parents=True, exist_ok=True)
    a = settings.address
    secure = secure_sites(Kdc(state_dir / "kdc"), settings.nodes > 1, settings.ha) if settings.secure else {}
    core = {
        "fs.defaultFS": f"hdfs://{a('fs.defaultFS')}",
        "hadoop.tmp.dir": str(state_dir / "tmp"),
        "hadoop.security.authentication": "simple",
        "hadoop.http.staticuser.user": "root",
        # An Oozie server (`tony oozie server up`) run by this user always impersonates the workflow's user,
        # itself included (E0307 otherwise)
        f"hadoop.proxyuser.{getpass.getuser()}.hosts": "*",
        f"hadoop.proxyuser.{getpass.getuser()}.groups": "*",
        **secure.get("core-site.xml", {}),
    }
    write_site(conf_dir / "core-site.xml", core)
    hdfs = {
        "dfs.namenode.rpc-address": a("fs.defaultFS"),
        "dfs.namenode.http-address": a("dfs.namenode.http-address"),
        "dfs.namenode.name.dir": f"file://{state_dir / 'data' / 'namenode'}",
        "dfs.datanode.data.dir": f"file://{state_dir / 'data' / 'datanode'}",
        "dfs.datanode.address": a("dfs.datanode.address"),
        "dfs.datanode.http.address": a("dfs.datanode.http.address"),
        "dfs.datanode.ipc.address": a("dfs.datanode.ipc.address"),
        "dfs.replication": 1,
        # As on a real cluster: permissions are checked (the superuser, the daemons' user, bypasses them).
        "dfs.permissions.enabled": True,
        "dfs.webhdfs.enabled": True,
        "dfs.namenode.safemode.extension": 0,
        "dfs.heartbeat.interval": 1,
        "dfs.namenode.heartbeat.recheck-interval": 30000,
        **secure.get("hdfs-site.xml", {}),
    }
    network = settings.network
    if network:
        hdfs.update({
            # a block survives the loss of a host (skein's staged files, a checkpoint)
            "dfs.replication": min(3, settings.nodes),
            # DataNodes register by address; there is no DNS to turn 198.18.0.x into a name
            "dfs.namenode.datanode.registration.ip-hostname-check": False,
            "dfs.namenode.heartbeat.recheck-interval": DN_RECHECK_MS,
            # a DataNode silent for seconds is passed over for reads and new blocks before it is declared dead
            "dfs.namenode.stale.datanode.interval": DN_RECHECK_MS,
            "dfs.namenode.avoid.read.stale.datanode": True,
            "dfs.namenode.avoid.write.stale.datanode": True,
            # a write whose pipeline lost a host goes on with the others: with three hosts there is no
            # spare to replace it with (Hadoop's advice for clusters of three nodes or fewer)
            "dfs.client.block.write.replace-datanode-on-failure.policy": "NEVER",
            # a connection to a host whose link went down fails in seconds, not minutes
            "dfs.client.socket-timeout": 15_000,
            "dfs.datanode.socket.write.timeout": 20_000,
        })
    hdfs.update({k: v for k, v in settings.extra.items() if k.startswith("dfs.")})
    write_site(conf_dir / "hdfs-site.xml", hdfs)
    yarn = {
        "yarn.resourcemanager.hostname": settings.master_host,
        "yarn.nodemanager.hostname": HOST,
        **{key: a(key) for key in PORT_KEYS if key.startswith("yarn.")},
        "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms": 250,
        "yarn.resourcemanager.recovery.enabled": False,
        "yarn.nodemanager.resource.memory-mb": settings.nm_memory_mb,
        "yarn.nodemanager.resource.cpu-vcores": settings.nm_vcores,
        "yarn.scheduler.minimum-allocation-mb": 128,
        "yarn.scheduler.maximum-allocation-mb": settings.max_alloc_mb,
        "yarn.scheduler.minimum-allocation-vcores": 1,
        "yarn.scheduler.maximum-allocation-vcores": settings.max_alloc_vcores,
        "yarn.nodemanager.vmem-check-enabled": False,
        # Kill containers over their memory as real clusters do. With `memory.enforced` (the default)
        # Hadoop 3.4's ContainersMonitorImpl leaves enforcement to cgroups, which this cluster has not.
        "yarn.nodemanager.pmem-check-enabled": True,
        "yarn.nodemanager.resource.memory.enforced": False,
        "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": 100,
        "yarn.nodemanager.disk-health-checker.min-free-space-per-disk-mb": 0,
        "yarn.nodemanager.local-dirs": str(state_dir / "nm-local"),
        "yarn.nodemanager.log-dirs": str(state_dir / "nm-logs"),
        "yarn.nodemanager.delete.debug-delay-sec": 0,
        "yarn.nodemanager.recovery.enabled": False,
        "yarn.nodemanager.env-whitelist": ",".join((
            "JAVA_HOME", "HADOOP_COMMON_HOME", "HADOOP_HDFS_HOME", "HADOOP_CONF_DIR",
            "CLASSPATH_PREPEND_DISTCACHE", "HADOOP_YARN_HOME", "HADOOP_HOME", "PATH", "LANG", "TZ",
            "JDK_JAVA_OPTIONS",
        )),
        "yarn.nodemanager.admin-env": ",".join((
            "MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX",
            "PATH=" + ":".join(p for p in container_path.split(":") if p and "," not in p),
        )),
        # No Hadoop distribution layout: the jar cache is the whole classpath.
        "yarn.application.classpath": f"$HADOOP_CONF_DIR,{jar_dir}/*",
        "yarn.log-aggregation-enable": True,
        "yarn.nodemanager.remote-app-log-dir": "/tmp/logs",
        "yarn.log-aggregation.retain-seconds": 7 * 24 * 3600,
        "yarn.node-labels.enabled": True,
        "yarn.node-labels.fs-store.root-dir": f"file://{state_dir / 'node-labels'}",
        # Hadoop's default is file:///tmp/hadoop-yarn-<user>/node-attribute/, made at every RM start
        "yarn.node-attribute.fs-store.root-dir": f"file://{state_dir / 'node-attributes'}",
        "yarn.node-labels.configuration-type": "centralized",
        "yarn.timeline-service.enabled": False,
        "yarn.webapp.ui2.enable": False,
    }
    if settings.gpus:
        yarn["yarn.resource-types"] = "yarn.io/gpu"
        write_site(conf_dir / "resource-types.xml", {"yarn.resource-types": "yarn.io/gpu"})
    if network:
        yarn.update({
            "yarn.nm.liveness-monitor.expiry-interval-ms": settings.nm_liveness_expiry_ms,
            "yarn.resourcemanager.nm.liveness-monitor.interval-ms": 1000,
            # an AM starting or stopping a container on a host that is gone gives up in seconds
            "yarn.client.nodemanager-connect.max-wait-ms": 15_000,
            "yarn.client.nodemanager-connect.retry-interval-ms": 1000,
            # a NodeManager whose link comes back reaches the ResourceManager again within a second
            "yarn.resourcemanager.connect.retry-interval.ms": 1000,
        })
    if settings.preemption:
        yarn.update(PREEMPTION_MONITOR)
    yarn.update(secure.get("yarn-site.xml", {}))
    if settings.ha:
        ha = ha_sites(settings.nameservice, a, state_dir, a("zookeeper"))
        for site in (core, hdfs, yarn):
            for key in SINGLE_ADDRESS_KEYS:  # as on a production HA cluster: only the per-id addresses
                site.pop(key, None)
        core.update(ha["core-site.xml"])
        hdfs.update(ha["hdfs-site.xml"])
        yarn.update(ha["yarn-site.xml"])
        write_site(conf_dir / "core-site.xml", core)
        write_site(conf_dir / "hdfs-site.xml", hdfs)
    yarn.update({k: v for k, v in settings.extra.items() if not k.startswith("dfs.")})
    write_site(conf_dir / "yarn-site.xml", yarn)
    write_site(conf_dir / "capacity-scheduler.xml", capacity_scheduler(settings))
    (conf_dir / "log4j.properties").write_text(_LOG4J)
    if settings.gpus:
        write_gpu_node_conf(conf_dir, state_dir, settings, yarn)
    if network:
        for host in network.hosts:
            write_host_conf(conf_dir, state_dir, host, settings, hdfs, yarn)
    if settings.ha:
        for nn in NAMENODE_IDS:
            write_daemon_conf(conf_dir, conf_dir.with_name(f"conf-{nn}"), namenode_conf(nn, state_dir))
        for rm in RM_IDS:
            write_daemon_conf(conf_dir, conf_dir.with_name(f"conf-{rm}"), rm_conf(rm))


# `tony cluster up --preemption`: YARN's own ProportionalCapacityPreemptionPolicy, looking every second and
# killing a marked container 3 s after the application master was told (Hadoop's defaults: 3 s and 15 s).
PREEMPTION_MONITOR = {
    "yarn.resourcemanager.scheduler.monitor.enable": True,
    "yarn.resourcemanager.scheduler.monitor.policies":
        "org.apache.hadoop.yarn.server.resourcemanager.monitor.capacity.ProportionalCapacityPreemptionPolicy",
    "yarn.resourcemanager.monitor.capacity.preemption.monitoring_interval": 1000,
    "yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill": 3000,
    "yarn.resourcemanager.monitor.capacity.preemption.total_preemption_per_round": 1.0,
    "yarn.resourcemanager.monitor.capacity.preemption.natural_termination_factor": 1.0,
    "yarn.resourcemanager.monitor.capacity.preemption.max_ignored_over_capacity": 0,
}
# ... and two queues, half the cluster guaranteed to each; either may use all of it while the other is idle
# (user-limit-factor 2: one user may take twice the queue's half), and gets its half back by preemption.
PREEMPTION_QUEUES = ("default", "high")


def capacity_scheduler(settings: ClusterSettings) -> dict[str, object]:
    """capacity-scheduler.xml: one queue, or with `preemption` two that take their half back."""
    queues = PREEMPTION_QUEUES if settings.preemption else ("default",)
    share = 100 // len(queues)
    conf: dict[str, object] = {
        "yarn.scheduler.capacity.root.queues": ",".join(queues),
        "yarn.scheduler.capacity.maximum-am-resource-percent": 0.5,
        "yarn.scheduler.capacity.root.accessible-node-labels": "*",
        "yarn.scheduler.capacity.resource-calculator":
            "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator",
    }
    labels = cluster_labels(settings)
    for label in labels:
        conf[f"yarn.scheduler.capacity.root.accessible-node-labels.{label}.capacity"] = 100
    for i, queue in enumerate(queues):
        prefix = f"yarn.scheduler.capacity.root.{queue}"
        conf.update({f"{prefix}.capacity": share, f"{prefix}.maximum-capacity": 100,
                     f"{prefix}.accessible-node-labels": "*"})
        if len(queues) > 1:
            conf[f"{prefix}.user-limit-factor"] = len(queues)
        for label in labels:  # a label's partition belongs to the first queue
            conf[f"{prefix}.accessible-node-labels.{label}.capacity"] = 100 if i == 0 else 0
    return conf


def cluster_labels(settings: ClusterSettings) -> dict[str, bool]:
    """The cluster's node labels and whether each is exclusive: `gpu` on the GPU node, `am` on a
    multi-host cluster."""
    return {**({GPU_LABEL: True} if settings.gpus else {}), **({AM_LABEL: False} if settings.network else {})}


def host_conf_name(host: Host) -> str:
    """The configuration directory of one host's daemons, beside `conf/` in the state directory."""
    return f"conf-{host.name}"


def host_conf_dir(conf_dir: Path, host: Host) -> Path:
    return conf_dir.with_name(host_conf_name(host))


def host_dirs(state_dir: Path, host: Host) -> dict[str, Path]:
    """The directories one host's DataNode and NodeManager own."""
    return {"data": state_dir / "data" / f"datanode-{host.name}", "nm-local": state_dir / f"nm-local-{host.name}",
            "nm-logs": state_dir / f"nm-logs-{host.name}"}


def write_host_conf(conf_dir: Path, state_dir: Path, host: Host, settings: ClusterSettings, hdfs: dict,
                    yarn: dict) -> Path:
    """`conf-h<N>/`: the cluster as one host's DataNode and NodeManager see it (their address, their dirs)."""
    target = host_conf_dir(conf_dir, host)
    target.mkdir(parents=True, exist_ok=True)
    for name in ("core-site.xml", "capacity-scheduler.xml", "log4j.properties"):
        (target / name).write_bytes((conf_dir / name).read_bytes())
    dirs = host_dirs(state_dir, host)
    port = settings.ports
    write_site(target / "hdfs-site.xml", {
        **hdfs,
        "dfs.datanode.data.dir": f"file://{dirs['data']}",
        **{key: f"{host.address}:{port[key]}" for key in DAEMON_PORTS["datanode"]},
        "dfs.datanode.hostname": host.address,
    })
    write_site(target / "yarn-site.xml", {
        **yarn,
        "yarn.nodemanager.hostname": host.address,
        **{key: f"{host.address}:{port[key]}" for key in DAEMON_PORTS["nodemanager"]},
        "yarn.nodemanager.local-dirs": str(dirs["nm-local"]),
        "yarn.nodemanager.log-dirs": str(dirs["nm-logs"]),
    })
    return target


_FAKE_NVIDIA_SMI = """#!/usr/bin/env bash
# The GPU discovery executable of the local cluster's GPU node: it reports
# {count} devices the way `nvidia-smi -x -q` does. There is no GPU here.
cat <<'XML'
<?xml version="1.0" ?>
<nvidia_smi_log>
  <driver_version>550.00</driver_version>
  <attached_gpus>{count}</attached_gpus>
{gpus}
</nvidia_smi_log>
XML
"""
_FAKE_GPU = """  <gpu id="00000000:0{index}:00.0">
    <product_name>Local Test GPU</product_name>
    <uuid>GPU-00000000-0000-0000-0000-00000000000{index}</uuid>
    <minor_number>{index}</minor_number>
    <fb_memory_usage><total>16384 MiB</total><used>0 MiB</used><free>16384 MiB</free></fb_memory_usage>
    <utilization><gpu_util>0 %</gpu_util></utilization>
    <temperature><gpu_temp>30 C</gpu_temp><gpu_temp_max_threshold>90 C</gpu_temp_max_threshold>
      <gpu_temp_slow_threshold>85 C</gpu_temp_slow_threshold></temperature>
  </gpu>"""


def write_gpu_node_conf(conf_dir: Path, state_dir: Path, settings: ClusterSettings, yarn: dict) -> Path:
    """`conf-gpu/`: the same cluster seen by a second NodeManager that advertises GPUs.

    It runs YARN's own GPU resource plugin with a discovery executable; the
    ResourceManager labels the node `gpu` once it has registered.
    """
    gpu_conf = conf_dir.with_name("conf-gpu")
    gpu_conf.mkdir(parents=True, exist_ok=True)
    for name in ("core-site.xml", "hdfs-site.xml", "capacity-scheduler.xml", "log4j.properties",
                 "resource-types.xml"):
        (gpu_conf / name).write_bytes((conf_dir / name).read_bytes())
    smi = state_dir / "bin" / "nvidia-smi"
    smi.parent.mkdir(parents=True, exist_ok=True)
    smi.write_text(_FAKE_NVIDIA_SMI.format(
        count=settings.gpus, gpus="\n".join(_FAKE_GPU.format(index=i) for i in range(settings.gpus))))
    smi.chmod(0o755)
    node = dict(yarn)
    for key in ("yarn.nodemanager.address", "yarn.nodemanager.localizer.address", "yarn.nodemanager.webapp.address"):
        node[key] = settings.address(f"gpu:{key}")
    node.update({
        "yarn.nodemanager.local-dirs": str(state_dir / "nm-gpu-local"),
        "yarn.nodemanager.log-dirs": str(state_dir / "nm-gpu-logs"),
        "yarn.nodemanager.resource-plugins": "yarn.io/gpu",
        "yarn.nodemanager.resource-plugins.gpu.allowed-gpu-devices": "auto",
        "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables": str(smi),
    })
    write_site(gpu_conf / "yarn-site.xml", node)
    return gpu_conf
