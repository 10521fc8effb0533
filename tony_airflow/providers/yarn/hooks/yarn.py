"""`YarnHook`: an Airflow connection of type `yarn` -> the core's clients.

The connection names the ResourceManager web address (or an HA list), the
Hadoop configuration directory that submission needs, a default queue, and
simple or Kerberos authentication. Without a `yarn_default` connection the hook
falls back to HADOOP_CONF_DIR, then to the local cluster of `tony cluster up`,
exactly like `ytf-submit`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from tony_airflow.core.client import TonyClient
from tony_airflow.errors import UsageError
from tony_airflow.yarn.hadoop_conf import HadoopConf, resolve_conf_dir
from tony_airflow.yarn.rest import ApplicationReport, AsyncResourceManagerClient, ResourceManagerClient

if TYPE_CHECKING:
    from tony_airflow.providers.yarn.triggers.yarn import YarnApplicationTrigger

AUTH_TYPES = ("simple", "kerberos")
EXTRA_KEYS = ("hadoop_conf_dir", "rm_addresses", "queue", "auth", "principal", "keytab")


@dataclass(frozen=True)
class YarnSettings:
    """What a `yarn` connection says, resolved; plain data so a trigger can carry it."""

    rm_addresses: list[str] = field(default_factory=list)
    hadoop_conf_dir: str | None = None
    queue: str | None = None
    user: str | None = None
    auth: str = "simple"
    principal: str | None = None
    keytab: str | None = None

    @classmethod
    def from_connection(cls, conn: Any) -> "YarnSettings":
        extra = conn.extra_dejson or {}
        unknown = sorted(set(extra) - set(EXTRA_KEYS))
        if unknown:
            raise UsageError(f"yarn connection {conn.conn_id!r}: unknown extra {unknown[0]!r}; "
                             f"allowed: {', '.join(EXTRA_KEYS)}")
        auth = str(extra.get("auth") or "simple").lower()
        if auth not in AUTH_TYPES:
            raise UsageError(f"yarn connection {conn.conn_id!r}: auth {auth!r}; allowed: {', '.join(AUTH_TYPES)}")
        if auth == "kerberos" and not (extra.get("principal") and extra.get("keytab")):
            raise UsageError(f"yarn connection {conn.conn_id!r}: auth 'kerberos' needs extras 'principal' and 'keytab'")
        addresses = extra.get("rm_addresses") or []
        if isinstance(addresses, str):
            addresses = addresses.split(",")
        if conn.host:
            scheme = "https" if (conn.schema or "").lower() == "https" else "http"
            for host in conn.host.split(","):
                host = host.strip()
                if not host:
                    continue
                if "://" not in host:
                    host = f"{scheme}://{host}"
                if conn.port and host.count(":") < 2:
                    host = f"{host}:{conn.port}"
                addresses.append(host)
        return cls(rm_addresses=[a.strip() for a in addresses if a.strip()],
                   hadoop_conf_dir=extra.get("hadoop_conf_dir") or None, queue=extra.get("queue") or None,
                   user=conn.login or None, auth=auth, principal=extra.get("principal"), keytab=extra.get("keytab"))

    def resolved(self) -> "YarnSettings":
        """Fill the ResourceManager addresses from the configuration directory when not given."""
        if self.rm_addresses:
            return self
        conf_dir = self.hadoop_conf_dir or resolve_conf_dir()
        if conf_dir is None:
            raise UsageError("yarn connection: no ResourceManager address, no hadoop_conf_dir, HADOOP_CONF_DIR "
                             "unset and no local cluster; set the connection's host or run `tony cluster up`")
        # hadoop_conf_dir stays as given: unset, the core client takes HADOOP_CONF_DIR or the local cluster
        return YarnSettings(**{**self.__dict__, "rm_addresses": HadoopConf.load(conf_dir).rm_web_addresses()})

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def http_auth(settings: YarnSettings) -> httpx.Auth | None:
    """SPNEGO for a Kerberos cluster (needs the optional `httpx-gssapi`), nothing for simple auth."""
    if settings.auth != "kerberos":
        return None
    try:
        from httpx_gssapi import HTTPSPNEGOAuth  # type: ignore[import-not-found]
    except ImportError:
        raise UsageError("yarn connection: auth 'kerberos' needs the httpx-gssapi package; "
                         "pip install 'tony-airflow[kerberos]'") from None
    return HTTPSPNEGOAuth()


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

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["password"],
            "relabeling": {"host": "ResourceManager web address(es), comma-separated for HA", "login": "User"},
            "placeholders": {
                "host": "rm1.example.com:8088,rm2.example.com:8088",
                "extra": '{"hadoop_conf_dir": "/etc/hadoop/conf", "queue": "default", "auth": "simple"}',
            },
        }

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
        s = self.settings
        return ResourceManagerClient(s.rm_addresses, user=s.user, auth=http_auth(s))

    def get_async_conn(self) -> AsyncResourceManagerClient:
        s = self.settings
        return AsyncResourceManagerClient(s.rm_addresses, user=s.user, auth=http_auth(s))

    def tony_client(self) -> TonyClient:
        """The core client, pointed at this connection's cluster (the one way anything is submitted)."""
        s = self.settings
        return TonyClient(conf_dir=s.hadoop_conf_dir, rm=self.get_conn(), principal=s.principal, keytab=s.keytab)

    def application_trigger(self, application_id: str, poll_interval: float,
                            kill_on_task_kill: bool = True) -> "YarnApplicationTrigger":
        """The trigger that waits for `application_id`, carrying this connection's resolved addresses."""
        from tony_airflow.providers.yarn.triggers.yarn import YarnApplicationTrigger

        s = self.settings
        return YarnApplicationTrigger(application_id, s.rm_addresses, user=s.user, auth=s.auth,
                                      poll_interval=poll_interval, kill_on_task_kill=kill_on_task_kill)

    def application_report(self, application_id: str) -> ApplicationReport:
        return self.get_conn().application(application_id)

    def kill_application(self, application_id: str) -> None:
        self.get_conn().kill(application_id)

    async def async_application_report(self, application_id: str) -> ApplicationReport:
        return await self.get_async_conn().application(application_id)

    async def async_kill_application(self, application_id: str) -> None:
        await self.get_async_conn().kill(application_id)
