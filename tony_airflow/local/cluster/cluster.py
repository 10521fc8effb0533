"""Starting, checking and stopping the local single-node Hadoop.

NameNode, DataNode, ResourceManager and NodeManager run as four separate
`java` processes on the jars Maven resolved, all reading one generated
configuration directory under a state directory. Two clusters with different
state directories never collide: ports are chosen free (or from --port-base)
and kept in `cluster.json`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx

from tony_airflow.errors import ClusterError, UsageError
from tony_airflow.local.cluster import jars
from tony_airflow.local.cluster.config import (
    DAEMON_PORTS,
    GPU_LABEL,
    HOST_MEMORY_MB,
    HOST_VCORES,
    PORT_KEYS,
    ClusterSettings,
    cluster_labels,
    free_ports,
    host_conf_name,
    host_dirs,
    port_is_free,
    write_conf,
)
from tony_airflow.local.cluster.ha import NAMENODE_IDS, RM_IDS, ZK_TICK_MS, check_nameservice, zkfc_addresses
from tony_airflow.local.cluster.kdc import Kdc, service_principal
from tony_airflow.local.cluster.launchers import write_launchers
from tony_airflow.local.cluster.native import ensure_native, native_dir
from tony_airflow.local.cluster.network import MAX_HOSTS, Host, HostNetwork, free_slot
from tony_airflow.local.cluster.processes import (
    container_processes,
    pid_alive,
    pid_from_file,
    terminate,
    wait_exited,
)
from tony_airflow.local.cluster.secure import krb5_java_options
from tony_airflow.yarn.discovery import default_local_state_dir, local_environment
from tony_airflow.yarn.environ import scoped_environ
from tony_airflow.yarn.jvm import ADD_OPENS, check_java, find_java_home
from tony_airflow.yarn.kerberos import KerberosLogin, spnego


@dataclass(frozen=True)
class Daemon:
    name: str
    main_class: str
    heap_mb: int
    conf: str = "conf"
    host: Host | None = None  # a worker host of a multi-host cluster: the daemon runs in its namespace
    args: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """namenode, datanode, resourcemanager or nodemanager."""
        return self.name.split("-")[0]


NAMENODE = Daemon("namenode", "org.apache.hadoop.hdfs.server.namenode.NameNode", 384)
DATANODE = Daemon("datanode", "org.apache.hadoop.hdfs.server.datanode.DataNode", 256)
RESOURCEMANAGER = Daemon("resourcemanager", "org.apache.hadoop.yarn.server.resourcemanager.ResourceManager", 512)
NODEMANAGER = Daemon("nodemanager", "org.apache.hadoop.yarn.server.nodemanager.NodeManager", 384)
DAEMONS = (NAMENODE, DATANODE, RESOURCEMANAGER, NODEMANAGER)
GPU_NODEMANAGER = Daemon("nodemanager-gpu", NODEMANAGER.main_class, 384, conf="conf-gpu")
JOURNALNODE = Daemon("journalnode", "org.apache.hadoop.hdfs.qjournal.server.JournalNode", 192)
ZKFC_CLASS = "org.apache.hadoop.hdfs.tools.DFSZKFailoverController"


def zookeeper(settings: ClusterSettings, state_dir: Path) -> Daemon:
    """Hadoop's own ZooKeeper, standalone: `ZooKeeperServerMain <port> <dataDir> <tickTime>`."""
    return Daemon("zookeeper", "org.apache.zookeeper.server.ZooKeeperServerMain", 128,
                  args=(str(settings.ports["zookeeper"]), str(state_dir / "data" / "zookeeper"), str(ZK_TICK_MS)))


def ha_masters(settings: ClusterSettings, state_dir: Path) -> tuple[Daemon, ...]:
    """ZooKeeper and the JournalNode, both NameNodes with their ZKFCs, both ResourceManagers."""
    return (zookeeper(settings, state_dir), JOURNALNODE,
            replace(NAMENODE, conf="conf-nn1"), Daemon("namenode-nn2", NAMENODE.main_class, 384, conf="conf-nn2"),
            Daemon("zkfc-nn1", ZKFC_CLASS, 128, conf="conf-nn1"), Daemon("zkfc-nn2", ZKFC_CLASS, 128, conf="conf-nn2"),
            replace(RESOURCEMANAGER, conf="conf-rm1"),
            Daemon("resourcemanager-rm2", RESOURCEMANAGER.main_class, 512, conf="conf-rm2"))


def daemons_of(settings: ClusterSettings, state_dir: Path = Path(".")) -> tuple[Daemon, ...]:
    """The daemons a cluster of these settings runs, in start order (`state_dir`: ZooKeeper's data's)."""
    network = settings.network
    masters = ha_masters(settings, state_dir) if settings.ha else (NAMENODE, RESOURCEMANAGER)
    if network:
        return (*masters, *(
            Daemon(f"{d.name}-{host.name}", d.main_class, d.heap_mb, conf=host_conf_name(host),
                   host=host)
            for host in network.hosts for d in (DATANODE, NODEMANAGER)))
    if settings.ha:
        return (*masters, DATANODE, NODEMANAGER, *((GPU_NODEMANAGER,) if settings.gpus else ()))
    return DAEMONS + ((GPU_NODEMANAGER,) if settings.gpus else ())


def check_hosts(nodes: int, gpus: int) -> None:
    """Refuse host counts a local cluster cannot have, and what a multi-host cluster cannot be combined with."""
    if not 1 <= nodes <= MAX_HOSTS:
        raise UsageError(f"--nodes: {nodes} hosts; allowed: 1 to {MAX_HOSTS}")
    if nodes == 1:
        return
    if gpus:
        raise UsageError("--nodes: a multi-host cluster has no GPU node; allowed with --gpus: --nodes 1")
    if os.geteuid() != 0:
        raise UsageError("--nodes: a multi-host cluster makes network namespaces, which needs root; "
                         "allowed without root: --nodes 1")


def _one_active(states: str | None) -> bool:
    """An HA pair serves: one active, the other standby ("nn1 active, nn2 standby"); None: not HA."""
    if states is None:
        return True
    words = [item.split()[-1] for item in states.split(", ")]
    return words.count("active") == 1 and all(w in ("active", "standby") for w in words)


class LocalCluster:
    """One local Hadoop, identified by its state directory."""

    def __init__(self, state_dir: str | Path):
        self.state_dir = Path(state_dir).absolute()
        self.conf_dir = self.state_dir / "conf"
        self.bin_dir = self.state_dir / "bin"
        self.log_dir = self.state_dir / "logs"
        self.run_dir = self.state_dir / "run"
        self.nm_local_dir = self.state_dir / "nm-local"
        self.settings_file = self.state_dir / "cluster.json"
        self.kdc = Kdc(self.state_dir / "kdc")

    @classmethod
    def default(cls) -> LocalCluster:
        return cls(default_local_state_dir())

    def exists(self) -> bool:
        """Whether `tony cluster up` has configured this cluster (running or not)."""
        return (self.conf_dir / "yarn-site.xml").exists()

    # ---------------------------------------------------------------- settings
    @property
    def settings(self) -> ClusterSettings:
        if not self.settings_file.exists():
            raise ClusterError(f"no local cluster at {self.state_dir}; run `tony cluster up` first")
        return ClusterSettings.load(self.settings_file)

    @property
    def rm_urls(self) -> list[str]:
        """Every ResourceManager's web address (two with --ha)."""
        settings = self.settings
        keys = ["yarn.resourcemanager.webapp.address"] + (["rm2:yarn.resourcemanager.webapp.address"]
                                                          if settings.ha else [])
        return [f"http://{settings.address(key)}" for key in keys]

    @property
    def nn_urls(self) -> list[str]:
        """Every NameNode's web address (two with --ha)."""
        settings = self.settings
        keys = ["dfs.namenode.http-address"] + (["nn2:http"] if settings.ha else [])
        return [f"http://{settings.address(key)}" for key in keys]

    @property
    def rm_url(self) -> str:
        """The active ResourceManager's web address (the first when none is, or while it is not known)."""
        urls = self.rm_urls
        return next((url for url, state in zip(urls, self.rm_states()) if state == "active"), urls[0])

    @property
    def nn_url(self) -> str:
        """The active NameNode's web address (the first when none is, or while it is not known)."""
        urls = self.nn_urls
        return next((url for url, state in zip(urls, self.nn_states()) if state == "active"), urls[0])

    def rm_states(self) -> list[str]:
        """active / standby / down of each ResourceManager (`/ws/v1/cluster/info`'s haState)."""
        return self._ha_states(self.rm_urls, "/ws/v1/cluster/info", {},
                               lambda body: body["clusterInfo"].get("haState", ""))

    def nn_states(self) -> list[str]:
        """active / standby / down of each NameNode (the NameNodeStatus bean)."""
        return self._ha_states(self.nn_urls, "/jmx", {"qry": "Hadoop:service=NameNode,name=NameNodeStatus"},
                               lambda body: body["beans"][0].get("State", ""))

    def _ha_states(self, urls: list[str], path: str, params: dict[str, str], state) -> list[str]:
        if not self.settings.ha:
            return ["active"]
        states = []
        with self.kerberos_env():
            auth = self._http_auth()
            for url in urls:
                try:
                    body = httpx.get(f"{url}{path}", params=params, timeout=5, auth=auth).json()
                    states.append(str(state(body)).lower() or "unknown")
                except (httpx.HTTPError, ValueError, KeyError, IndexError):
                    states.append("down")
        return states

    @property
    def java_home(self) -> Path:
        return find_java_home()

    @property
    def secure(self) -> bool:
        return self.settings_file.exists() and self.settings.secure

    def java_opts(self) -> list[str]:
        if not self.secure:
            return list(ADD_OPENS)
        # Kerberos: this realm's krb5.conf, and libhadoop.so (SecureIOUtils refuses to run without it)
        return [*ADD_OPENS, *krb5_java_options(self.kdc), f"-Djava.library.path={native_dir()}"]

    def _http_auth(self) -> httpx.Auth | None:
        """SPNEGO as the NameNode's principal (the HDFS superuser) on a secure cluster whose KDC runs."""
        if not self.secure or self.kdc.pid() is None:
            return None
        with self.kerberos_env():
            return spnego(KerberosLogin(service_principal("nn"), str(self.kdc.service_keytab)))

    @contextlib.contextmanager
    def kerberos_env(self) -> Iterator[None]:
        """This realm's krb5.conf for gssapi in this process, for the duration (it reads KRB5_CONFIG)."""
        with scoped_environ({"KRB5_CONFIG": str(self.kdc.krb5_conf)} if self.secure else {}):
            yield

    def env(self) -> dict[str, str]:
        """What a user (and every child process) needs to talk to this cluster."""
        return local_environment(self.state_dir)

    @property
    def daemons(self) -> tuple[Daemon, ...]:
        return daemons_of(self.settings, self.state_dir) if self.settings_file.exists() else DAEMONS

    @property
    def network(self) -> HostNetwork | None:
        """The hosts of a multi-host cluster (None for the single-host one)."""
        return self.settings.network if self.settings_file.exists() else None

    @property
    def nm_local_dirs(self) -> tuple[Path, ...]:
        network = self.network
        hosts = tuple(host_dirs(self.state_dir, h)["nm-local"] for h in network.hosts) if network else ()
        return (self.nm_local_dir, self.state_dir / "nm-gpu-local", *hosts)

    # --------------------------------------------------------------------- pids
    def _pid_file(self, daemon: Daemon) -> Path:
        return self.run_dir / f"{daemon.name}.pid"

    def pid(self, daemon: Daemon) -> int | None:
        return pid_from_file(self._pid_file(daemon), daemon.main_class.encode())

    def _started_alive(self, daemon: Daemon) -> bool:
        """The process `up` started is alive; it may not have exec'd Java yet, so unlike pid()
        its command line is not checked (that check is for a stale pid file's reused pid)."""
        try:
            return pid_alive(int(self._pid_file(daemon).read_text()))
        except (OSError, ValueError):
            return False

    def running(self) -> dict[str, int | None]:
        return {d.name: self.pid(d) for d in self.daemons}

    # ----------------------------------------------------------------------- up
    def up(self, port_base: int | None = None, timeout: float = 180.0, log=print, gpus: int | None = None,
           secure: bool | None = None, nodes: int | None = None, preemption: bool | None = None,
           nameservice: str | None = None) -> None:
        """Start whatever is not running and wait until YARN and HDFS serve.

        `secure=True` first creates and starts this cluster's KDC and turns Kerberos on.
        `nodes=N` (N > 1) runs N worker hosts, each a network namespace with its own
        NodeManager and DataNode (`network.HostNetwork`). `nameservice="x"` makes it HA (`ha.py`):
        hdfs://x/ served by two NameNodes, two ResourceManagers; "" makes it a single-master one."""
        # before anything starts; again below with what the cluster kept from earlier runs
        if nameservice:
            check_nameservice(nameservice)
        check_hosts(1 if nodes is None else nodes, gpus or 0)
        java_home = find_java_home()
        check_java(java_home)
        if port_base is not None and not 1024 <= port_base <= 65535 - len(PORT_KEYS):
            raise UsageError(f"--port-base: {port_base} is out of range; allowed: 1024..{65535 - len(PORT_KEYS)}")
        jar_dir = jars.ensure_jars(log=log)

        running = self.running()
        settings = self._decide_settings(port_base, any(running.values()))
        if gpus is not None and gpus != settings.gpus:
            if any(running.values()):
                raise UsageError(f"--gpus: the cluster at {self.state_dir} is running with {settings.gpus} GPU(s); "
                                 "run `tony cluster down` first")
            settings.gpus = gpus
        if secure is not None and secure != settings.secure:
            if any(running.values()):
                state = "with" if settings.secure else "without"
                raise UsageError(f"--secure: the cluster at {self.state_dir} is running {state} Kerberos; "
                                 "run `tony cluster down` first")
            settings.secure = secure
        if preemption is not None and preemption != settings.preemption:
            if any(running.values()):
                state = "with" if settings.preemption else "without"
                raise UsageError(f"--preemption: the cluster at {self.state_dir} is running {state} preemption; "
                                 "run `tony cluster down` first")
            settings.preemption = preemption
        if nodes is not None and nodes != settings.nodes:
            if any(running.values()):
                raise UsageError(f"--nodes: the cluster at {self.state_dir} is running with {settings.nodes} "
                                 "host(s); run `tony cluster down` first")
            fresh = ClusterSettings(ports={})
            settings.nodes, settings.net_slot = nodes, fresh.net_slot
            settings.nm_memory_mb, settings.nm_vcores = fresh.nm_memory_mb, fresh.nm_vcores
            settings.max_alloc_mb, settings.max_alloc_vcores = fresh.max_alloc_mb, fresh.max_alloc_vcores
        if nameservice is not None and nameservice != settings.nameservice:
            if any(running.values()):
                state = f"HA (nameservice {settings.nameservice})" if settings.ha else "without HA"
                raise UsageError(f"--ha: the cluster at {self.state_dir} is running {state}; "
                                 "run `tony cluster down` first")
            settings.nameservice = nameservice
        check_hosts(settings.nodes, settings.gpus)
        self._place_hosts(settings, any(running.values()))
        if settings.secure and not settings.kdc_port:
            settings.kdc_port = free_ports(1)[0]
        daemons = daemons_of(settings, self.state_dir)
        running = {d.name: running.get(d.name) for d in daemons}
        for daemon in daemons:
            if running[daemon.name] is None and daemon.host is None:
                wait_exited(self._pid_file(daemon))  # a crashed run's daemon may still be letting go of its ports
                for key in DAEMON_PORTS[daemon.name]:
                    port = settings.ports[key]
                    if not port_is_free(port):
                        raise UsageError(
                            f"port {port} ({key}) is already in use; "
                            "choose another --port-base, or omit it to pick free ports")

        for sub in ("data", "logs", "run", "nm-local", "nm-logs", "nm-gpu-local", "nm-gpu-logs", "tmp",
                    "node-labels", "data/zookeeper", "data/journal"):
            (self.state_dir / sub).mkdir(parents=True, exist_ok=True)
        network = settings.network
        if network:
            self._network_up(network, any(running.values()), log)
            for host in network.hosts:
                for path in host_dirs(self.state_dir, host).values():
                    path.mkdir(parents=True, exist_ok=True)
        settings.save(self.settings_file)
        if settings.secure:
            ensure_native(log=log)
            self.kdc.create(settings.kdc_port, settings.master_host,
                            tuple(h.address for h in network.hosts) if network else ())
            self.kdc.start(self.log_dir)
        write_conf(self.conf_dir, self.state_dir, jar_dir, settings, container_path=self.env()["PATH"])
        write_launchers(self.bin_dir, self.conf_dir, jar_dir, java_home, self.java_opts(), self.log_dir)

        deadline = time.monotonic() + timeout
        for daemon in daemons:
            if running[daemon.name] is None:
                self._prepare(daemon, java_home, jar_dir, deadline)
                self._start(daemon, java_home, jar_dir)
        self.wait_ready(max(deadline - time.monotonic(), 30.0))
        self._add_labels()
        if settings.secure:
            self._make_user_home()

    def _place_hosts(self, settings: ClusterSettings, some_running: bool) -> None:
        """A multi-host cluster's slot of 198.18.0.0/24 (and, when new, the size of its hosts). A stopped
        cluster whose slot another cluster took meanwhile moves to a free one."""
        if settings.nodes == 1:
            return
        if settings.net_slot < 0:
            settings.nm_memory_mb, settings.nm_vcores = HOST_MEMORY_MB, HOST_VCORES
            settings.max_alloc_mb = min(settings.max_alloc_mb, HOST_MEMORY_MB)
            settings.max_alloc_vcores = min(settings.max_alloc_vcores, HOST_VCORES)
            settings.net_slot = free_slot()
        elif not some_running and not self._owns(settings.network):
            settings.net_slot = free_slot()

    def _owns(self, network: HostNetwork | None) -> bool:
        """Whether this cluster made the network's bridge, or there is none (a crashed run of ours)."""
        return network is not None and network.owner() in ("", str(self.state_dir))

    def _network_up(self, network: HostNetwork, some_running: bool, log) -> None:
        """The bridge and namespaces; when nothing runs, first whatever a crashed run left of them."""
        if some_running:
            if not network.exists():
                raise ClusterError(f"the hosts of the cluster at {self.state_dir} are gone while some of its "
                                   "daemons run; run `tony cluster down` first")
            return
        leftovers = network.all_pids()
        if leftovers:
            log(f"stopping {len(leftovers)} process(es) an earlier run left on its hosts")
            terminate(leftovers, grace=5.0)
        network.up(owner=str(self.state_dir))

    def _make_user_home(self) -> None:
        """`/user/<name>` of the user principal, owned by it (skein stages there), and a world-writable /tmp."""
        user = self.kdc.user
        with self.kerberos_env():
            auth = self._http_auth()
            base = f"{self.nn_url}/webhdfs/v1"
            for path, params in ((f"/user/{user}", {"op": "MKDIRS", "permission": "755"}),
                                 (f"/user/{user}", {"op": "SETOWNER", "owner": user}),
                                 ("/tmp", {"op": "MKDIRS", "permission": "1777"}),
                                 ("/tmp", {"op": "SETPERMISSION", "permission": "1777"})):
                resp = httpx.put(base + path, params=params, auth=auth, timeout=30, follow_redirects=True)
                if resp.status_code >= 400:
                    raise ClusterError(f"could not prepare {path} on the secure HDFS: "
                                       f"HTTP {resp.status_code} {resp.text[:200]}")

    def _add_labels(self) -> None:
        """The cluster's node labels (`cluster_labels`) through the ResourceManager's REST API, and the GPU
        NodeManager labelled `gpu`."""
        labels = cluster_labels(self.settings)
        if not labels:
            return
        self._rm_admin("post", "add-node-labels", json={"nodeLabelInfo": [
            {"name": name, "exclusivity": exclusive} for name, exclusive in labels.items()]}, check=False)
        if self.settings.gpus:
            port = self.settings.ports["gpu:yarn.nodemanager.address"]
            for node in self._rm_admin("get", "nodes").json()["nodes"]["node"]:
                if node["id"].endswith(f":{port}") and GPU_LABEL not in (node.get("nodeLabels") or []):
                    self._relabel(node["id"], GPU_LABEL)

    def label_host(self, host: Host, label: str) -> None:
        """Put a host's NodeManager in the partition `label` ("" = the default partition), as
        `yarn rmadmin -replaceLabelsOnNode` does."""
        nodes = self._rm_admin("get", "nodes").json()["nodes"]["node"]
        node = next((n for n in nodes if n["nodeHostName"] == host.address), None)
        if node is None:
            raise ClusterError(f"host {host.name} ({host.address}) has no NodeManager in the ResourceManager")
        self._relabel(node["id"], label)

    def _relabel(self, node_id: str, label: str) -> None:
        self._rm_admin("post", f"nodes/{node_id}/replace-labels", params={"labels": label})

    def _rm_admin(self, method: str, path: str, check: bool = True, **kwargs) -> httpx.Response:
        """A request to the active ResourceManager's `/ws/v1/cluster/<path>` as the cluster's user (SPNEGO on a
        secure cluster)."""
        params = {"user.name": os.environ.get("USER", "root"), **kwargs.pop("params", {})}
        with self.kerberos_env():
            resp = httpx.request(method, f"{self.rm_url}/ws/v1/cluster/{path}", params=params, timeout=30,
                                 auth=self._http_auth(), **kwargs)
        if check and resp.status_code >= 400:
            raise ClusterError(f"ResourceManager {method.upper()} {path}: HTTP {resp.status_code} {resp.text[:200]}")
        return resp

    def _decide_settings(self, port_base: int | None, some_running: bool) -> ClusterSettings:
        if self.settings_file.exists():
            old = ClusterSettings.load(self.settings_file)
            if port_base is None or port_base == old.port_base or some_running:
                if port_base is not None and port_base != old.port_base:
                    raise UsageError(f"--port-base: the cluster at {self.state_dir} is running on other ports; "
                                     "run `tony cluster down` first")
                busy = [key for key, port in old.ports.items() if not port_is_free(port)]
                if some_running or not busy or old.port_base is not None:
                    return old  # explicit ports are kept; a busy one is reported
                # Only what something else took moves: the RM's and NameNode's addresses a user (an Airflow
                # connection, a bookmark) holds stay what they were across `down`, a crash and `up`.
                kept = {*old.ports.values(), old.kdc_port}
                spare = iter(p for p in free_ports(len(kept) + len(busy)) if p not in kept)
                old.ports = {key: next(spare) if key in busy else port for key, port in old.ports.items()}
                return old
        return ClusterSettings.choose(port_base)

    def _java_cmd(self, java_home: Path, jar_dir: Path, daemon: Daemon, *args: str) -> list[str]:
        network = self.network
        inside = network.exec_prefix(daemon.host) if network and daemon.host else []
        return [
            *inside, str(java_home / "bin" / "java"), f"-Xmx{daemon.heap_mb}m", *self.java_opts(),
            f"-Dproc_{daemon.name}", f"-Dhadoop.log.dir={self.log_dir}",
            f"-Dyarn.log.dir={self.log_dir}", f"-Dhadoop.log.file={daemon.name}.log",
            f"-Dhadoop.home.dir={self.state_dir}", "-Dhadoop.root.logger=INFO,RFA",
            f"-Djava.io.tmpdir={self.state_dir / 'tmp'}",  # Jetty's unpacked web apps: ours, not /tmp's
            "-Dzookeeper.admin.enableServer=false",  # ZooKeeper's admin web server: not wanted (port 8080)
            "-cp", f"{self.state_dir / daemon.conf}:{jar_dir}/*", daemon.main_class, *daemon.args, *args,
        ]

    def _daemon_env(self, java_home: Path) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.env())
        env["JAVA_HOME"] = str(java_home)
        # Containers inherit this through the NodeManager's env whitelist, so
        # the JVMs they start (skein's AM) get the Java 17 options too.
        env["JDK_JAVA_OPTIONS"] = " ".join(self.java_opts())
        if self.secure:
            env["KRB5_CONFIG"] = str(self.kdc.krb5_conf)
        return env

    def _prepare(self, daemon: Daemon, java_home: Path, jar_dir: Path, deadline: float) -> None:
        """What must be done once before a daemon's first start: format the NameNode (with --ha: the
        first one, once the JournalNode listens), copy its namespace to the second one (bootstrapStandby,
        once the first serves), make the ZKFCs' znode in ZooKeeper (formatZK)."""
        settings = self.settings
        data = self.state_dir / "data"
        if daemon.name == "namenode":
            name_dir = data / ("namenode-nn1" if settings.ha else "namenode")
            if not (name_dir / "current" / "VERSION").exists():
                if settings.ha:
                    self._wait_port(settings.ports["dfs.journalnode.rpc-address"], JOURNALNODE, deadline)
                self._run_once(daemon, java_home, jar_dir, "format", "-format", "-nonInteractive", "-force")
        elif daemon.name == "namenode-nn2":
            if not (data / "namenode-nn2" / "current" / "VERSION").exists():
                # bootstrapStandby asks nn1's RPC port, which a NameNode opens after its HTTP one (after loading
                # its image): a loaded machine saw 'Connection refused' between the two, and exit 2
                for key in ("dfs.namenode.http-address", "fs.defaultFS"):
                    self._wait_port(settings.ports[key], NAMENODE, deadline)
                self._run_once(daemon, java_home, jar_dir, "bootstrap", "-bootstrapStandby", "-nonInteractive",
                               "-force")
        elif daemon.name == "zkfc-nn1":
            # made again when the NameNodes' addresses changed (new ports after a crash): its breadcrumb
            # names the last active one's, and a ZKFC refuses one its configuration does not have
            formatted, named = data / "zookeeper" / ".ha-formatted", zkfc_addresses(settings.address)
            if formatted.exists() and formatted.read_text() == named:
                return
            self._wait_port(settings.ports["zookeeper"], zookeeper(settings, self.state_dir), deadline)
            self._run_once(daemon, java_home, jar_dir, "formatZK", "-formatZK", "-nonInteractive", "-force")
            formatted.write_text(named)

    def _wait_port(self, port: int, daemon: Daemon, deadline: float) -> None:
        """Until `daemon` (started just before) listens on `port`; its last error if it dies first."""
        host = self.settings.master_host
        while time.monotonic() < deadline:
            if not self._started_alive(daemon):
                raise ClusterError(f"{daemon.name} exited during start: {self._log_tail(daemon)}")
            with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
                return
            time.sleep(0.3)
        raise ClusterError(f"{daemon.name} did not listen on {host}:{port} in time; see {self.log_dir}")

    def _run_once(self, daemon: Daemon, java_home: Path, jar_dir: Path, what: str, *args: str) -> None:
        """One administrative run of a daemon's main class (format, bootstrapStandby, formatZK)."""
        out = self.log_dir / f"{daemon.name}-{what}.out"
        with out.open("w") as fh:
            rc = subprocess.run(
                self._java_cmd(java_home, jar_dir, replace(daemon, args=()), *args),
                stdout=fh, stderr=subprocess.STDOUT, env=self._daemon_env(java_home),
                stdin=subprocess.DEVNULL,
            ).returncode
        if rc != 0:
            raise ClusterError(f"{daemon.name} {args[0]} failed (exit {rc}); see {out}")

    def _start(self, daemon: Daemon, java_home: Path, jar_dir: Path) -> None:
        out = (self.log_dir / f"{daemon.name}.out").open("w")
        proc = subprocess.Popen(
            self._java_cmd(java_home, jar_dir, daemon), stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=self._daemon_env(java_home), start_new_session=True,
            cwd=self.state_dir,
        )
        out.close()
        self._pid_file(daemon).write_text(f"{proc.pid}\n")

    # ------------------------------------------------------------------- health
    def health(self) -> dict[str, str]:
        """One word per daemon and per service: what a user checks first."""
        report = {}
        if self.secure:
            report["kdc"] = self.kdc.health()
        for daemon in self.daemons:
            pid = self.pid(daemon)
            report[daemon.name] = f"running (pid {pid})" if pid else "stopped"
        if self.settings_file.exists() and self.settings.ha:
            report["namenodes"] = ", ".join(f"{nn} {state}" for nn, state in zip(NAMENODE_IDS, self.nn_states()))
            report["resourcemanagers"] = ", ".join(f"{rm} {state}" for rm, state in zip(RM_IDS, self.rm_states()))
        with self.kerberos_env():
            auth = self._http_auth()
            yarn_nodes = self._yarn_nodes(auth)
            datanodes = self._datanodes(auth)
        running = [n for n in yarn_nodes or [] if n.get("state") == "RUNNING"]
        report["yarn"] = ("unreachable" if yarn_nodes is None else
                          f"{len(running)} RUNNING node(s)" if running else "no RUNNING node")
        if datanodes is None:
            report["hdfs"] = "unreachable"
        else:
            live, safemode = datanodes
            report["hdfs"] = (f"{len(live)} live DataNode(s)" + (", in safe mode" if safemode else "")
                              if live else "no live DataNode")
        network = self.network
        if network:
            live = datanodes[0] if datanodes else set()
            for host in network.hosts:
                report[f"host {host.name}"] = self._host_health(network, host, yarn_nodes or [], live)
        return report

    def _host_health(self, network: HostNetwork, host: Host, yarn_nodes: list[dict], live: set[str]) -> str:
        """One line per worker host: its address, its link, and what YARN and HDFS think of it."""
        node = next((n for n in yarn_nodes if n.get("nodeHostName") == host.address
                     or str(n.get("id", "")).startswith(host.address + ":")), None)
        yarn = f"node {node['id']} {node.get('state')}" if node else "no YARN node"
        hdfs = "DataNode live" if host.address in live else "DataNode not live"
        link = "link up" if network.link_is_up(host) else "link DOWN"
        return f"{host.address} ({host.netns}), {link}, {yarn}, {hdfs}"

    def _yarn_nodes(self, auth: httpx.Auth | None) -> list[dict] | None:
        try:
            nodes = httpx.get(f"{self.rm_url}/ws/v1/cluster/nodes", timeout=5, auth=auth,
                              params={"states": "NEW,RUNNING,UNHEALTHY,LOST,SHUTDOWN,REBOOTED,DECOMMISSIONED"}
                              ).json()
        except (httpx.HTTPError, ValueError):
            return None
        return (nodes.get("nodes") or {}).get("node") or []

    def _datanodes(self, auth: httpx.Auth | None) -> tuple[set[str], bool] | None:
        """The addresses of the live DataNodes, and whether HDFS is in safe mode."""
        try:
            beans = httpx.get(f"{self.nn_url}/jmx", auth=auth,
                              params={"qry": "Hadoop:service=NameNode,name=NameNodeInfo"}, timeout=5).json()
            info = beans["beans"][0]
            live = json.loads(info.get("LiveNodes") or "{}")
        except (httpx.HTTPError, ValueError, KeyError, IndexError):
            return None
        return {str(v.get("xferaddr", k)).rsplit(":", 1)[0] for k, v in live.items()}, bool(info.get("Safemode"))

    def is_ready(self) -> bool:
        health = self.health()
        nodes = len([d for d in self.daemons if d.kind == "nodemanager"])
        datanodes = len([d for d in self.daemons if d.kind == "datanode"])
        return (all(health[d.name].startswith("running") for d in self.daemons)
                and health["yarn"] == f"{nodes} RUNNING node(s)"
                and health["hdfs"] == f"{datanodes} live DataNode(s)"
                and all(_one_active(health.get(key)) for key in ("namenodes", "resourcemanagers")))

    def wait_ready(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for daemon in self.daemons:
                if not self._started_alive(daemon):
                    raise ClusterError(f"{daemon.name} exited during start: {self._log_tail(daemon)}")
            if self.is_ready():
                return
            time.sleep(0.5)
        raise ClusterError(f"the local cluster was not ready within {timeout:.0f}s: {self.health()}")

    def _log_tail(self, daemon: Daemon) -> str:
        lines: list[str] = []
        for name in (f"{daemon.name}.out", f"{daemon.name}.log"):
            path = self.log_dir / name
            if path.exists():
                lines += [ln for ln in path.read_text(errors="replace").splitlines()
                          if "ERROR" in ln or "Exception" in ln or "Error:" in ln]
        return (lines[-1].strip() if lines else f"see {self.log_dir}")[:400]

    # --------------------------------------------------------------------- down
    def down(self, log=print) -> None:
        """Stop the Oozie server on it if one runs (`tony oozie server up`), the daemons, then any container
        process they left behind."""
        from tony_airflow.local.cluster.oozie import OozieServer

        OozieServer(self).down()
        daemons = self.daemons if self.settings_file.exists() else DAEMONS
        pids = [p for p in (self.pid(d) for d in reversed(daemons)) if p]
        terminate(pids, grace=15.0)
        leftovers = self.container_processes()
        if leftovers:
            log(f"stopping {len(leftovers)} leftover container process(es)")
            terminate([p.pid for p in leftovers], grace=5.0)
        for daemon in daemons:
            self._pid_file(daemon).unlink(missing_ok=True)
        self.kdc.stop()
        network = self.network
        if network and self._owns(network):  # never another cluster's, which took the slot meanwhile
            leftovers = network.all_pids()
            if leftovers:
                log(f"stopping {len(leftovers)} leftover process(es) on the hosts")
                terminate(leftovers, grace=5.0)
            network.down()

    def container_processes(self):
        return [p for d in self.nm_local_dirs for p in container_processes(d)]
