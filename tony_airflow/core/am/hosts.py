"""Lost hosts: telling a task that failed from a host that went away under it.

When a host dies (its NodeManager and containers killed) or is cut off (its
link down), its executors fall silent, and usually another task fails first,
with an error about a peer that stopped answering. The attempt's reason must
name the host, not that survivor. YARN says it too, but only once the
NodeManager's liveness expiry has passed: it then reports the host's
containers "released on a *lost* node" (exit -100).

So, when an attempt fails, the AM asks the NodeManager of every task still
running whether it answers (a refused or timed-out connection means the host
is gone or cut off: by then its tasks have often not been silent long enough
to tell), and counts YARN's lost-node reports. A retry then waits for
YARN's verdict on those hosts before asking for new containers: until YARN has
declared a host lost it may place the new attempt's containers right back on
it.
"""

from __future__ import annotations

import http.client
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from tony_airflow.yarn.hadoop_conf import HadoopConf

PROBE_TIMEOUT_S = 3.0
MAX_PROBES = 64  # NodeManagers asked at the same time
# YARN's default yarn.nm.liveness-monitor.expiry-interval-ms: how long a silent NodeManager stays RUNNING
DEFAULT_EXPIRY_S = 600.0
LOST_NODE_MARK = "lost node"  # in YARN's diagnostics: "Container released on a *lost* node"


class HostView(Protocol):
    """What this module reads of a task (core.am.registry.TaskState)."""

    host: str
    node_http: str
    yarn_diagnostics: str
    registered_at: float | None

    @property
    def id(self) -> str: ...

    @property
    def done(self) -> bool: ...


@dataclass
class LostHost:
    host: str
    node_http: str
    tasks: list[str] = field(default_factory=list)
    by_yarn: bool = False  # YARN has declared it lost (else: its NodeManager does not answer us)

    def describe(self) -> str:
        how = ("YARN declared its NodeManager lost" if self.by_yarn
               else f"its NodeManager {self.node_http or '?'} does not answer")
        return f"host {self.host} lost ({how}; tasks there: {', '.join(self.tasks)})"


def lost_by_yarn(task: HostView) -> bool:
    return LOST_NODE_MARK in task.yarn_diagnostics.replace("*", "").lower()


def suspects(tasks: Iterable[HostView]) -> dict[str, list[HostView]]:
    """NodeManager web address -> the tasks on it that YARN reported lost or that still run."""
    found: dict[str, list[HostView]] = {}
    for task in tasks:
        running = not task.done and task.registered_at is not None
        if task.node_http and (lost_by_yarn(task) or running):
            found.setdefault(task.node_http, []).append(task)
    return found


def answers(node_http: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a NodeManager's web server answers at all (any HTTP status counts)."""
    host, _, port = node_http.rpartition(":")
    try:
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        try:
            conn.request("GET", "/ws/v1/node/info")
            conn.getresponse().read()
        finally:
            conn.close()
        return True
    except (OSError, ValueError, http.client.HTTPException):
        return False


def find_lost(tasks: Iterable[HostView], probe=None) -> list[LostHost]:
    """The hosts of the attempt's tasks that are gone: declared lost by YARN, or running tasks whose
    NodeManager does not answer (each NodeManager asked once)."""
    probe = probe or answers
    found = suspects(tasks)
    asked = [http for http, on_it in found.items() if not any(lost_by_yarn(t) for t in on_it)]
    # every NodeManager at once: one probe's timeout for the whole attempt, not one per host
    with ThreadPoolExecutor(max_workers=min(MAX_PROBES, len(asked)) or 1) as pool:
        answered = dict(zip(asked, pool.map(probe, asked)))
    lost = []
    for node_http, on_it in found.items():
        by_yarn = any(lost_by_yarn(t) for t in on_it)
        if by_yarn or not answered[node_http]:
            lost.append(LostHost(on_it[0].host or node_http.rpartition(":")[0], node_http,
                                 sorted(t.id for t in on_it), by_yarn))
    return lost


def liveness_expiry_s(conf_dir: str | None = None) -> float:
    """The cluster's NodeManager liveness expiry, from the yarn-site.xml the container was given."""
    directory = conf_dir if conf_dir is not None else os.environ.get("HADOOP_CONF_DIR", "")
    try:
        value = HadoopConf.load(directory).get("yarn.nm.liveness-monitor.expiry-interval-ms") if directory else None
        return float(value) / 1000.0 if value else DEFAULT_EXPIRY_S
    except (OSError, ValueError):
        return DEFAULT_EXPIRY_S
