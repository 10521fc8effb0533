"""The hosts of a multi-host local cluster: Linux network namespaces on a bridge.

Each worker host is a network namespace with one veth into a bridge in the
root namespace. Addresses come from 198.18.0.0/24 (RFC 2544, reserved for
network testing), cut into sixteen /28 slots so that clusters with different
state directories can be up at once: slot k's bridge holds 198.18.0.(16k+1),
its hosts 198.18.0.(16k+2) onwards. A namespace has no default route and
there is no NAT: a process in it reaches its own loopback, the other hosts and
the bridge address (where the ResourceManager and NameNode listen), nothing
else. Processes started in a namespace (a NodeManager, the containers it
forks) share the machine's filesystem and process table, not its network.

What runs on a host also gets a UTS namespace whose host name is the host's
address: Java's InetAddress.getLocalHost() then answers that address, not the
machine's name (which /etc/hosts maps to 127.0.0.1), and skein's AM registers
its web UI, the YARN tracking URL, under that answer (Jetty's Server.getURI()).
A host name that is a name would need DNS or /etc/hosts entries in the root
namespace, and the NodeManagers, which take their node id from the reverse
lookup of their address, would all register as that one name.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

from tony_airflow.errors import ClusterError, UsageError

SUBNET = ipaddress.IPv4Network("198.18.0.0/24")
SLOT_PREFIX = 28
SLOTS = 2 ** (SLOT_PREFIX - SUBNET.prefixlen)
MAX_HOSTS = 2 ** (32 - SLOT_PREFIX) - 3  # minus network, broadcast and the bridge's own address
# Sets the host name (in the UTS namespace `unshare --uts` made), then execs the rest: the pid stays the same
_SET_HOSTNAME = "import os, socket, sys; socket.sethostname(sys.argv[1]); os.execvp(sys.argv[2], sys.argv[2:])"


def ip_command() -> str:
    found = shutil.which("ip") or next((p for p in ("/usr/sbin/ip", "/sbin/ip") if os.path.exists(p)), None)
    if not found:
        raise UsageError("--nodes: a multi-host cluster needs iproute2's `ip`; install it (apt-get install iproute2)")
    return found


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([ip_command(), *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise ClusterError(f"`ip {' '.join(args)}` failed: {proc.stderr.strip() or proc.returncode}")
    return proc


@dataclass(frozen=True)
class Host:
    """One worker host: its number (1..N), namespace, address and the root end of its link."""

    number: int
    netns: str
    address: str
    link: str

    @property
    def name(self) -> str:
        return f"h{self.number}"


@dataclass(frozen=True)
class HostNetwork:
    """The bridge and the N namespaces of one slot."""

    slot: int
    nodes: int

    @property
    def prefix(self) -> str:
        return f"tony{self.slot}"

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    @property
    def network(self) -> ipaddress.IPv4Network:
        return list(SUBNET.subnets(new_prefix=SLOT_PREFIX))[self.slot]

    @property
    def bridge_address(self) -> str:
        return str(self.network.network_address + 1)

    @property
    def hosts(self) -> list[Host]:
        base = self.network.network_address + 1
        return [Host(i, f"{self.prefix}h{i}", str(base + i), f"{self.prefix}h{i}v") for i in range(1, self.nodes + 1)]

    def host(self, name_or_address: str) -> Host:
        for host in self.hosts:
            if name_or_address in (host.name, host.address, host.netns):
                return host
        raise KeyError(name_or_address)

    # ----------------------------------------------------------------- up/down
    def up(self, owner: str) -> None:
        """Make the bridge and the namespaces, after removing whatever an earlier run of this slot left.
        `owner` (the cluster's state directory) is kept as the bridge's alias: see `owner()`."""
        self.down()
        cidr = f"/{SLOT_PREFIX}"
        _run("link", "add", self.bridge, "type", "bridge")
        _run("link", "set", self.bridge, "alias", owner)
        _run("addr", "add", self.bridge_address + cidr, "dev", self.bridge)
        _run("link", "set", self.bridge, "up")
        for host in self.hosts:
            _run("netns", "add", host.netns)
            _run("link", "add", host.link, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
            _run("link", "set", host.link, "master", self.bridge)
            _run("link", "set", host.link, "up")
            _run("-n", host.netns, "addr", "add", host.address + cidr, "dev", "eth0")
            _run("-n", host.netns, "link", "set", "eth0", "up")
            _run("-n", host.netns, "link", "set", "lo", "up")

    def down(self) -> None:
        """Remove namespaces, links and bridge of this slot (stop what runs in them first: `all_pids`)."""
        for netns in self.namespaces():
            if netns.startswith(self.prefix + "h"):
                _run("netns", "delete", netns, check=False)
        for link in self.links():
            if link.startswith(self.prefix + "h") or link == self.bridge:
                _run("link", "delete", link, check=False)

    def all_pids(self) -> list[int]:
        """Every process in any namespace of this slot, whatever the host count it was made with."""
        return [pid for netns in self.namespaces() if netns.startswith(self.prefix + "h")
                for pid in self._pids(netns)]

    def exists(self) -> bool:
        return self.bridge in self.links()

    def owner(self) -> str:
        """The state directory of the cluster that made this slot's bridge ("" when there is none)."""
        out = _run("-o", "link", "show", self.bridge, check=False).stdout
        return out.split(" alias ", 1)[1].split("\\")[0].strip() if " alias " in out else ""

    # ----------------------------------------------------------------- queries
    @staticmethod
    def namespaces() -> list[str]:
        out = _run("netns", "list", check=False).stdout
        return [line.split()[0] for line in out.splitlines() if line.strip()]

    @staticmethod
    def links() -> list[str]:
        out = _run("-o", "link", "show", check=False).stdout
        return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]

    def pids(self, host: Host) -> list[int]:
        return self._pids(host.netns)

    @staticmethod
    def _pids(netns: str) -> list[int]:
        out = _run("netns", "pids", netns, check=False).stdout
        return [int(p) for p in out.split() if p.isdigit()]

    def link_is_up(self, host: Host) -> bool:
        out = _run("-o", "link", "show", host.link, check=False).stdout
        return "state UP" in out or ",UP" in out.split(">")[0]

    def set_link(self, host: Host, up: bool) -> None:
        """Cut or restore one host's only link (its processes live on; they just cannot be reached)."""
        _run("link", "set", host.link, "up" if up else "down")

    def exec_prefix(self, host: Host) -> list[str]:
        """What runs a command on the host: in its network namespace, with the host's address as host
        name. Every step execs the next, so the command keeps the pid it was started with.

        nsenter joins the network namespace only; `ip netns exec` would also make a mount namespace with a
        sysfs of its own, where no cgroup is mounted, and a container engine on the host (podman's runc,
        issue #31) could not start a container there ("no cgroup mount found in mountinfo")."""
        nsenter = shutil.which("nsenter") or "/usr/bin/nsenter"
        unshare = shutil.which("unshare") or "/usr/bin/unshare"
        return [nsenter, f"--net=/run/netns/{host.netns}", unshare, "--uts", sys.executable, "-c", _SET_HOSTNAME,
                host.address]


def free_slot() -> int:
    """The first slot no bridge uses (a crashed run's slot is reused by its own state directory only)."""
    links = set(HostNetwork.links())
    for slot in range(SLOTS):
        if HostNetwork(slot, 1).bridge not in links:
            return slot
    raise ClusterError(f"every one of the {SLOTS} multi-host slots of {SUBNET} is in use; "
                       "stop a multi-host cluster with `tony cluster down` first")
