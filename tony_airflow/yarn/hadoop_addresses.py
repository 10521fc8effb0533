"""Where a cluster's ResourceManagers and NameNodes are, and the token services that name them, by
Hadoop's own rules: the Java client's code is cited beside each rule, and the unit tables in
`tests/unit/yarn/test_hadoop_addresses.py` take their cases from Hadoop's documentation of each key.

The client talks to the cluster over HTTP (the RM's REST API, WebHDFS), so what it needs is each
daemon's web address; the delegation tokens it hands to YARN name the RPC addresses, as Hadoop's
`ClientRMProxy` and `HAUtilClient` would.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlparse

from tony_airflow.errors import ClusterError, UsageError

# YarnConfiguration's defaults
RM_HOSTNAME_DEFAULT = "0.0.0.0"
RM_PORTS = {"yarn.resourcemanager.address": 8032, "yarn.resourcemanager.webapp.address": 8088,
            "yarn.resourcemanager.webapp.https.address": 8090}
# DFSConfigKeys / HdfsClientConfigKeys' defaults
NN_RPC_PORT = 8020
NN_HTTP_PORT, NN_HTTPS_PORT = 9870, 9871
WILDCARD = "0.0.0.0"


class Conf(Protocol):
    """What the rules read: a Hadoop configuration with `${…}` expanded (`hadoop_conf.HadoopConf`)."""

    def get(self, key: str, default: str | None = None) -> str | None: ...


def _ids(conf: Conf, key: str) -> list[str]:
    """Configuration.getTrimmedStringCollection: comma-separated, trimmed, empty ones dropped."""
    return [part.strip() for part in (conf.get(key) or "").split(",") if part.strip()]


def _true(conf: Conf, key: str) -> bool:
    return (conf.get(key) or "false").strip().lower() == "true"


def _policy(conf: Conf, key: str) -> str:
    """HttpConfig.Policy.fromString of `yarn.http.policy` / `dfs.http.policy` (default HTTP_ONLY)."""
    value = (conf.get(key) or "HTTP_ONLY").strip().upper()
    if value not in ("HTTP_ONLY", "HTTPS_ONLY", "HTTP_AND_HTTPS"):
        raise UsageError(f"{key}: {value!r} is not a policy; allowed: HTTP_ONLY, HTTPS_ONLY, HTTP_AND_HTTPS")
    return value


def yarn_uses_https(conf: Conf) -> bool:
    """YarnConfiguration.useHttps: only HTTPS_ONLY moves the RM's web address to its https one."""
    return _policy(conf, "yarn.http.policy") == "HTTPS_ONLY"


def hdfs_uses_https(conf: Conf) -> bool:
    """DFSUtil.getHttpPolicy: only HTTPS_ONLY makes WebHDFS swebhdfs. The deprecated `dfs.https.enable`
    never does: Hadoop 2 read it only with no policy set, as HTTP_AND_HTTPS (http stays on); Hadoop 3
    does not read it at all."""
    return _policy(conf, "dfs.http.policy") == "HTTPS_ONLY"


def with_port(address: str, default_port: int) -> tuple[str, int]:
    """NetUtils.createSocketAddr(target, defaultPort): `host[:port]`, the default port when none."""
    text = address.strip()
    if "://" in text:
        text = urlparse(text).netloc
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        return text, default_port
    return host, int(port)


# ------------------------------------------------------------------- ResourceManagers
def rm_ids(conf: Conf) -> list[str]:
    """The RM ids of an HA cluster (HAUtil.isHAEnabled + getRMHAIds); empty without HA."""
    return _ids(conf, "yarn.resourcemanager.ha.rm-ids") if _true(conf, "yarn.resourcemanager.ha.enabled") else []


def rm_address(conf: Conf, key: str, rm_id: str | None = None) -> str:
    """`host:port` of one RM service address (`key` is yarn.resourcemanager.address, .webapp.address, …).

    HA (HAUtil.getConfKeyForRMInstance + checkAndSetRMRPCAddress): `<key>.<rm-id>`, else
    `yarn.resourcemanager.hostname.<rm-id>` with the key's default port, else the configuration is wrong.
    Without HA (yarn-default.xml): `<key>`, else `${yarn.resourcemanager.hostname}:<default port>`."""
    port = RM_PORTS[key]
    if rm_id is not None:
        value = conf.get(f"{key}.{rm_id}")
        if value is None:
            host = conf.get(f"yarn.resourcemanager.hostname.{rm_id}")
            if host is None:
                raise UsageError(f"yarn.resourcemanager.hostname.{rm_id}: not set (nor {key}.{rm_id}); "
                                 "an HA ResourceManager needs one of them")
            value = f"{host.strip()}:{port}"
    else:
        value = conf.get(key) or f"{conf.get('yarn.resourcemanager.hostname') or RM_HOSTNAME_DEFAULT}:{port}"
    host, real_port = with_port(value, port)
    return f"{host}:{real_port}"


def rm_web_addresses(conf: Conf) -> list[str]:
    """`scheme://host:port` of every RM's web app (WebAppUtils.getRMWebAppURLWithoutScheme per RM id)."""
    https = yarn_uses_https(conf)
    key = "yarn.resourcemanager.webapp.https.address" if https else "yarn.resourcemanager.webapp.address"
    scheme = "https" if https else "http"
    ids = rm_ids(conf)
    return [f"{scheme}://{rm_address(conf, key, rm_id)}" for rm_id in (ids or [None])]  # type: ignore[list-item]


def rm_rpc_addresses(conf: Conf) -> list[str]:
    """`host:port` of every RM's client RPC address (what the RM delegation token's service names)."""
    ids = rm_ids(conf)
    return [rm_address(conf, "yarn.resourcemanager.address", rm_id) for rm_id in (ids or [None])]  # type: ignore[list-item]


# -------------------------------------------------------------------------- NameNodes
@dataclass(frozen=True)
class NameNodes:
    """The NameNodes behind one `hdfs://` authority."""

    authority: str            # `mycluster` (a nameservice) or `host:port`
    web: tuple[str, ...]      # `scheme://host:port` of each one's HTTP server, in configured order
    rpc: tuple[str, ...]      # `host:port` of each one's RPC server
    logical: bool             # an HA nameservice with a failover proxy provider: its token names it

    def token_service(self, use_ip: bool | None = None, conf: Conf | None = None) -> str:
        """The HDFS delegation token's service: `ha-hdfs:<nameservice>` (HAUtilClient
        .buildTokenServiceForLogicalUri), else the NameNode's RPC address (SecurityUtil.buildTokenService)."""
        if self.logical:
            return f"ha-hdfs:{self.authority}"
        return build_token_service(self.rpc[0], uses_ip(conf) if use_ip is None else use_ip)


def default_fs(conf: Conf) -> str:
    """`fs.defaultFS` (core-default.xml: file:///), also under its deprecated name `fs.default.name`."""
    return (conf.get("fs.defaultFS") or conf.get("fs.default.name") or "file:///").strip()


def nameservices(conf: Conf) -> list[str]:
    """DFSUtilClient.getNameServiceIds: `dfs.nameservices`."""
    return _ids(conf, "dfs.nameservices")


def _authority_of(conf: Conf, uri: str | None) -> str:
    """The authority an `hdfs://` URI (or a bare path, or `hdfs:///x`) names: the default FS's when it
    names none. `viewfs://` is refused: its mount table is client-side Java configuration this client
    does not evaluate."""
    target = uri or ""
    scheme = urlparse(target).scheme if "://" in target or target.startswith("hdfs:") else ""
    if scheme == "viewfs" or (not scheme and urlparse(default_fs(conf)).scheme == "viewfs"):
        raise UsageError(f"{uri or 'fs.defaultFS'}: viewfs:// is not supported; allowed: the hdfs:// path "
                         "its mount table points to (hdfs://<nameservice>/…)")
    if scheme and scheme != "hdfs":
        raise UsageError(f"{uri}: not an HDFS path; allowed: /path, hdfs:///path or hdfs://<authority>/path")
    authority = urlparse(target).netloc if scheme else ""
    if authority:
        return authority
    default = urlparse(default_fs(conf))
    if default.scheme != "hdfs" or not default.netloc:
        raise UsageError(f"fs.defaultFS: {default_fs(conf)!r} names no HDFS; allowed: hdfs://<authority> "
                         "(or give paths as hdfs://<authority>/path)")
    return default.netloc


def namenodes(conf: Conf, uri: str | None = None) -> NameNodes:
    """The NameNodes of `uri`'s authority (WebHdfsFileSystem.resolveNNAddr): a nameservice gives every
    `dfs.namenode.http(s)-address.<ns>.<nn>` of `dfs.ha.namenodes.<ns>` (an NN without one is skipped,
    as DFSUtilClient.getAddressesForNameserviceId does); a host gives its own web server, the configured
    `dfs.namenode.http(s)-address` when it is this cluster's NameNode (a wildcard host replaced by the RPC
    host: DFSUtil.getInfoServerWithDefaultHost), else the default port on that host."""
    authority = _authority_of(conf, uri)
    https = hdfs_uses_https(conf)
    scheme = "https" if https else "http"
    web_key = "dfs.namenode.https-address" if https else "dfs.namenode.http-address"
    web_default = NN_HTTPS_PORT if https else NN_HTTP_PORT
    host, sep, port = authority.rpartition(":")
    if not sep and authority in nameservices(conf):
        return _nameservice(conf, authority, scheme, web_key, web_default)
    rpc_host, rpc_port = with_port(authority, NN_RPC_PORT)
    configured = conf.get("dfs.namenode.rpc-address")
    default = urlparse(default_fs(conf))
    ours = {with_port(a, NN_RPC_PORT) for a in (configured, default.netloc if default.scheme == "hdfs" else None)
            if a}
    if (rpc_host, rpc_port) in ours:
        web_host, web_port = with_port(conf.get(web_key) or f"{WILDCARD}:{web_default}", web_default)
        if web_host == WILDCARD:
            web_host = rpc_host
    else:
        web_host, web_port = rpc_host, web_default
    return NameNodes(authority, (f"{scheme}://{web_host}:{web_port}",), (f"{rpc_host}:{rpc_port}",), False)


def _nameservice(conf: Conf, ns: str, scheme: str, web_key: str, web_default: int) -> NameNodes:
    nn_ids = _ids(conf, f"dfs.ha.namenodes.{ns}")
    suffixes = [f"{ns}.{nn}" for nn in nn_ids] or [ns]  # a federated nameservice without HA: `<key>.<ns>`
    web, rpc = [], []
    for suffix in suffixes:
        rpc_value = conf.get(f"dfs.namenode.rpc-address.{suffix}")
        web_value = conf.get(f"{web_key}.{suffix}")
        if web_value is None:
            continue
        web_host, web_port = with_port(web_value, web_default)
        if web_host == WILDCARD and rpc_value:
            web_host = with_port(rpc_value, NN_RPC_PORT)[0]
        web.append(f"{scheme}://{web_host}:{web_port}")
        if rpc_value:
            host, port = with_port(rpc_value, NN_RPC_PORT)
            rpc.append(f"{host}:{port}")
    if not web:
        key = f"{web_key}.{suffixes[0]}"
        raise UsageError(f"{key}: not set; the nameservice {ns!r} needs the web address of each of its "
                         f"NameNodes ({', '.join(f'{web_key}.{s}' for s in suffixes)})")
    # the DFS client fails over (and names its token `ha-hdfs:<ns>`) when a failover proxy provider is
    # configured for the nameservice (NameNodeProxiesClient.createFailoverProxyProvider)
    failover = bool(conf.get(f"dfs.client.failover.proxy.provider.{ns}"))
    return NameNodes(ns, tuple(web), tuple(rpc), failover)


# ------------------------------------------------------------------------------ tokens
def uses_ip(conf: Conf | None) -> bool:
    """`hadoop.security.token.service.use_ip` (default true)."""
    value = (conf.get("hadoop.security.token.service.use_ip") if conf is not None else None) or "true"
    return value.strip().lower() == "true"


def build_token_service(address: str, use_ip: bool) -> str:
    """SecurityUtil.buildTokenService: `ip:port` with use_ip (a host that does not resolve is an error),
    else the host name in lower case."""
    host, port = with_port(address, 0)
    if use_ip:
        try:
            host = str(socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0])
        except (OSError, IndexError):
            raise ClusterError(f"{host}: the host name does not resolve; a token service names its address "
                               "(hadoop.security.token.service.use_ip is true)") from None
    else:
        host = host.lower()
    return f"{host}:{port}"


def rm_token_service(conf: Conf) -> str:
    """ClientRMProxy.getRMDelegationTokenService: every RM's client address, joined with commas under HA."""
    use_ip = uses_ip(conf)
    return ",".join(build_token_service(a, use_ip) for a in rm_rpc_addresses(conf))


def rm_principal_host(conf: Conf) -> str:
    """The host the RM principal's `_HOST` stands for when asking for a token: the first RM's."""
    return urlparse(rm_web_addresses(conf)[0]).hostname or "localhost"
