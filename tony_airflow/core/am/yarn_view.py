"""What a waiting AM reads of the ResourceManager: the cluster's gangs, its queue, its nodes.

Three REST calls (Hadoop's RMWebServices), made only while the gang waits for containers, every
gang.WATCH_S. A cluster whose RM web services the AM cannot read (a secure RM that asks for SPNEGO,
which an AM holding only delegation tokens cannot do) gives nothing: the gang then keeps what it holds
and waits, as before, and its line says only which containers it waits for.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from tony_airflow.core.am.gang import GangView
from tony_airflow.core.protocol import APP_TAG

log = logging.getLogger("tony.am")
READ_TIMEOUT_S = 5.0  # the AM's attempt loop waits for a look at the RM: never for long
AFTER_FAILURE_S = 60.0  # a look that failed (an RM that asks for SPNEGO) is not tried again before this
# RMAppImpl's diagnostics from the kill on ("Application killed by user.", "Application application_… was killed
# by user ada at 10.0.0.1"): the REST state stays RUNNING while the kill is under way (KILLING is not shown)
KILLED_BY_USER = "killed by user"


@dataclass
class ClusterView:
    me: GangView | None = None
    gangs: list[GangView] = field(default_factory=list)  # every running tony-airflow application, me too
    queue: dict[str, Any] | None = None                  # the scheduler's tree (the gang's queue is found in it)
    nodes: list[dict[str, Any]] | None = None


class YarnView:
    """Reads the RM for one application; after a failure it says so once and reads again next time."""

    def __init__(self, rm: Any, app_id: str, clock: Any = time.monotonic):
        self.rm = rm
        self.app_id = app_id
        self._failing = False
        self._clock = clock
        self._quiet_until = 0.0  # after a failed look: not before then (each look may hold the AM's loop)

    @classmethod
    def from_container(cls, app_id: str) -> YarnView | None:
        """The RM of the configuration YARN gave the AM's container (HADOOP_CONF_DIR)."""
        from tony_airflow.yarn.hadoop_conf import HadoopConf
        from tony_airflow.yarn.rest import ResourceManagerClient

        conf_dir = os.environ.get("HADOOP_CONF_DIR", "")
        try:
            rm = ResourceManagerClient.from_conf(HadoopConf.load(conf_dir), timeout=READ_TIMEOUT_S)
            rm.failover_wait_s = READ_TIMEOUT_S  # a look that fails is skipped: the next one comes soon
            return cls(rm, app_id)
        except Exception as exc:
            log.warning("the gang cannot read the ResourceManager (%s): it will wait without the wait-die rule", exc)
            return None

    def killed(self) -> bool | None:
        """Whether the RM says this application was killed (a user's or an admin's kill: KILLED, or its
        "killed by user" diagnostics while the kill is under way, which the REST state does not show);
        None when the RM cannot be read. One read, with its failover; for a new AM's take-over."""
        try:
            report = self.rm.application(self.app_id)
        except Exception as exc:
            log.warning("could not read this application's state from the ResourceManager: %s", exc)
            return None
        return (report.state == "KILLED" or report.final_status == "KILLED"
                or KILLED_BY_USER in report.diagnostics.lower())

    def read(self, detail: bool = True) -> ClusterView:
        view = ClusterView()
        if self._clock() < self._quiet_until:
            return view
        try:
            body = self.rm.get("/ws/v1/cluster/apps", states="RUNNING", applicationTags=APP_TAG)
            apps = (body.get("apps") or {}).get("app") or []
            view.gangs = [GangView.from_rm(a) for a in apps]
            view.me = next((g for g in view.gangs if g.app_id == self.app_id), None)
            if detail:
                view.queue = self.rm.get("/ws/v1/cluster/scheduler")
                view.nodes = (self.rm.get("/ws/v1/cluster/nodes").get("nodes") or {}).get("node") or []
            if self._failing:
                log.info("the ResourceManager answers again")
            self._failing = False
        except Exception as exc:
            if not self._failing:
                log.warning("could not read the ResourceManager's view of the cluster (again in %.0fs): %s",
                            AFTER_FAILURE_S, exc)
            self._failing = True
            self._quiet_until = self._clock() + AFTER_FAILURE_S
        return view
