"""`YarnHook`: an Airflow connection of type `yarn` -> the core's clients.

The connection names the ResourceManager web address (or an HA list), the
Hadoop configuration directory that submission needs, a default queue, and
simple or Kerberos authentication. Without a `yarn_default` connection the hook
falls back to HADOOP_CONF_DIR, then to the local cluster of `tony cluster up`,
exactly like `ytf-submit`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from tony_airflow.core.client import TonyClient
from tony_airflow.providers.yarn.connection import UI_FIELD_BEHAVIOUR, YarnSettings, http_auth, kerberos_login
from tony_airflow.yarn.discovery import require_conf_dir
from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.hdfs import webhdfs
from tony_airflow.yarn.rest import ApplicationReport, ResourceManagerClient

if TYPE_CHECKING:
    from fsspec.implementations.webhdfs import WebHDFS


class YarnHook(BaseHook):
    """Talks to one YARN cluster: application reports and kill over the RM REST API, submission via the core."""

    conn_name_attr = "yarn_conn_id"
    default_conn_name = "yarn_default"
    conn_type = "yarn"
    hook_name = "Hadoop YARN (tony-airflow)"

    def __init__(self, yarn_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.yarn_conn_id = yarn_conn_id
        self._settings: YarnSettings | None = None
        self._rm: ResourceManagerClient | None = None

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """The form as the provider info describes it (Airflow versions that ask the hook)."""
        behaviour = UI_FIELD_BEHAVIOUR
        return {"hidden_fields": behaviour["hidden-fields"], "relabeling": behaviour["relabeling"],
                "placeholders": behaviour["placeholders"]}

    @property
    def settings(self) -> YarnSettings:
        if self._settings is None:
            try:
                conn = self.get_connection(self.yarn_conn_id)
            except AirflowNotFoundException:
                if self.yarn_conn_id != self.default_conn_name:
                    raise
                settings = YarnSettings()  # no yarn_default: HADOOP_CONF_DIR or the local cluster
            else:
                settings = YarnSettings.from_connection(conn)
            self._settings = settings.resolved()
        return self._settings

    def get_conn(self) -> ResourceManagerClient:
        """The connection's RM client, made once per hook: a poking sensor's pokes share its HTTP client."""
        if self._rm is None:
            s = self.settings
            self._rm = ResourceManagerClient(s.rm_addresses, user=s.user, auth=http_auth(s), origin=self.rm_origin())
        return self._rm

    def rm_origin(self) -> str:
        """Where the ResourceManager addresses came from, for the line said when none answers: the
        connection's host and extras, its hadoop_conf_dir, or HADOOP_CONF_DIR (no connection names one)."""
        s = self.settings
        this = f"the Airflow connection {self.yarn_conn_id!r}"
        if not s.rm_origin:
            return this
        return f"{s.rm_origin} of {this}" if s.hadoop_conf_dir else s.rm_origin

    def tony_client(self) -> TonyClient:
        """The core client, pointed at this connection's cluster (the one way anything is submitted)."""
        s = self.settings
        return TonyClient(conf_dir=s.hadoop_conf_dir, rm=self.get_conn(), principal=s.principal, keytab=s.keytab)

    def hdfs(self) -> WebHDFS:
        """The connection's HDFS over WebHDFS (on Kerberos, as its principal: a delegation token from its keytab)."""
        s = self.settings
        conf_dir = s.hadoop_conf_dir or require_conf_dir()
        return webhdfs(HadoopConf.load(conf_dir), user=s.user, login=kerberos_login(s))

    def test_connection(self) -> tuple[bool, str]:
        """Airflow's "Test" of the connection: (True, which ResourceManager answered, its Hadoop version and
        the user calls go as), or (False, the one-line reason: no RM answers, SPNEGO refused, standby only).
        A standby-only pair is said at once, not waited for as a job's calls wait for an election."""
        try:
            s = self.settings
            rm = ResourceManagerClient(s.rm_addresses, user=s.user, auth=http_auth(s), origin=self.rm_origin())
            rm.failover_wait_s = 0.0
            try:
                info = rm.get("/ws/v1/cluster/info").get("clusterInfo") or {}
            finally:
                rm.close()
        except Exception as exc:
            return False, " ".join(str(exc).split()) or type(exc).__name__
        who = s.principal if s.auth == "kerberos" else rm.user
        return True, f"ResourceManager {rm.active_address} (Hadoop {info.get('hadoopVersion', '?')}), user {who}"

    def application_report(self, application_id: str) -> ApplicationReport:
        return self.get_conn().application(application_id)

    def kill_application(self, application_id: str) -> None:
        """Kill it, and remove its staging directory once it ended (the core's one way to kill)."""
        self.tony_client().kill(application_id)
