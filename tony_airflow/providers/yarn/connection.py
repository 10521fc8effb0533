"""The `yarn` connection's settings and its HTTP authentication, without Airflow.

Plain data so that the hook (in a worker) and the trigger (in the triggerer,
which carries them serialized) share one reading of a connection, and so that
this module imports nothing of Airflow's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from tony_airflow.errors import UsageError
from tony_airflow.yarn.discovery import resolve_conf_dir
from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.kerberos import KerberosLogin, spnego

AUTH_TYPES = ("simple", "kerberos")
EXTRA_KEYS = ("hadoop_conf_dir", "rm_addresses", "queue", "auth", "principal", "keytab")
# The connection form's own fields (provider info `conn-fields`): one per extra, so the UI shows them
# instead of a JSON text box. Airflow stores them in the extra, some versions as `extra__yarn__<name>`.
FORM_PREFIX = "extra__yarn__"


def _text(label: str, description: str) -> dict[str, Any]:
    return {"label": label, "schema": {"type": ["string", "null"]}, "description": description}


CONN_FIELDS: dict[str, dict[str, Any]] = {
    "rm_addresses": _text("More ResourceManagers (HA)",
                          "RM web addresses besides Host, comma-separated; all are tried in turn"),
    "hadoop_conf_dir": _text("Hadoop configuration directory",
                             "HADOOP_CONF_DIR for submission and, without Host, the RM addresses"),
    "queue": _text("YARN queue", "The queue jobs go to unless the task names one"),
    "auth": {"label": "Authentication", "description": "simple, or kerberos with a principal and keytab",
             "schema": {"type": ["string", "null"], "enum": [*AUTH_TYPES, None], "default": "simple"}},
    "principal": _text("Kerberos principal", "e.g. etl@EXAMPLE.COM (auth kerberos)"),
    "keytab": _text("Kerberos keytab", "Path of the principal's keytab on workers and triggerers"),
}
UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden-fields": ["password", "extra"],
    "relabeling": {"host": "ResourceManager web address(es), comma-separated for HA", "login": "User",
                   "schema": "Scheme (http or https)"},
    "placeholders": {"host": "rm1.example.com:8088,rm2.example.com:8088", "schema": "http",
                     "hadoop_conf_dir": "/etc/hadoop/conf", "queue": "default", "keytab": "/etc/security/etl.keytab"},
}


def form_extra(extra: dict[str, Any]) -> dict[str, Any]:
    """A connection's extra as given: form fields under their plain names, unset ones (None, "") dropped."""
    plain = {(k[len(FORM_PREFIX):] if k.startswith(FORM_PREFIX) else k): v for k, v in extra.items()}
    return {k: v for k, v in plain.items() if v not in (None, "")}


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
    rm_origin: str = ""  # `HADOOP_CONF_DIR=…` when `resolved` read the addresses there (said when none answers)

    @classmethod
    def from_connection(cls, conn: Any) -> YarnSettings:
        extra = form_extra(conn.extra_dejson or {})
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

    def resolved(self) -> YarnSettings:
        """Fill the ResourceManager addresses from the configuration directory when not given."""
        if self.rm_addresses:
            return self
        conf_dir = self.hadoop_conf_dir or resolve_conf_dir()
        if conf_dir is None:
            raise UsageError("yarn connection: no ResourceManager address, no hadoop_conf_dir, HADOOP_CONF_DIR "
                             "unset and no local cluster; set the connection's host or run `tony cluster up`")
        # hadoop_conf_dir stays as given: unset, the core client takes HADOOP_CONF_DIR or the local cluster
        return YarnSettings(**{**self.__dict__, "rm_addresses": HadoopConf.load(conf_dir).rm_web_addresses(),
                               "rm_origin": f"HADOOP_CONF_DIR={conf_dir}"})


def kerberos_login(settings: YarnSettings) -> KerberosLogin | None:
    """The connection's principal and keytab (Kerberos only): read in the worker and the triggerer."""
    return KerberosLogin(settings.principal, settings.keytab) if settings.auth == "kerberos" else None


def http_auth(settings: YarnSettings) -> httpx.Auth | None:
    """SPNEGO as the connection's principal (its keytab, no `kinit`) for Kerberos, nothing for simple auth.

    Needs the optional `kerberos` extra (gssapi, httpx-gssapi)."""
    login = kerberos_login(settings)
    return None if login is None else spnego(login)
