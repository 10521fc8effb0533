"""Hadoop's rules for addresses and token services, as tables. Each configuration is the example of
Hadoop's documentation of that key (ResourceManagerHA.md, HDFSHighAvailabilityWithQJM.md,
yarn-default.xml, hdfs-default.xml, core-default.xml, Configuration's javadoc), cut to what the rule reads."""

from __future__ import annotations

import pytest

from tony_airflow.errors import ClusterError, UsageError
from tony_airflow.yarn.hadoop_addresses import (
    build_token_service,
    namenodes,
    rm_rpc_addresses,
    rm_token_service,
    rm_web_addresses,
)
from tony_airflow.yarn.hadoop_conf import HadoopConf, expand


def conf(**props: str) -> HadoopConf:
    return HadoopConf(conf_dir=None, props={k.replace("__", "."): v for k, v in props.items()})  # type: ignore[arg-type]


def c(props: dict[str, str]) -> HadoopConf:
    return HadoopConf(conf_dir=None, props=props)  # type: ignore[arg-type]


RM_HA = {  # ResourceManagerHA.md, "Sample configurations"
    "yarn.resourcemanager.ha.enabled": "true",
    "yarn.resourcemanager.cluster-id": "cluster1",
    "yarn.resourcemanager.ha.rm-ids": "rm1,rm2",
    "yarn.resourcemanager.hostname.rm1": "master1",
    "yarn.resourcemanager.hostname.rm2": "master2",
}

RM_CASES = [
    # (what, props, web addresses, rpc addresses)
    ("nothing set: yarn-default's ${yarn.resourcemanager.hostname}:8088, hostname 0.0.0.0", {},
     ["http://0.0.0.0:8088"], ["0.0.0.0:8032"]),
    ("only the hostname: every address derived from it", {"yarn.resourcemanager.hostname": "rm.example.com"},
     ["http://rm.example.com:8088"], ["rm.example.com:8032"]),
    ("explicit addresses win over the hostname",
     {"yarn.resourcemanager.hostname": "rm", "yarn.resourcemanager.webapp.address": "web:1234",
      "yarn.resourcemanager.address": "rpc:4321"}, ["http://web:1234"], ["rpc:4321"]),
    ("an address without a port takes the key's default", {"yarn.resourcemanager.webapp.address": "web"},
     ["http://web:8088"], ["0.0.0.0:8032"]),
    ("HA, hostnames only (the documented sample): each address from hostname.<id> and the default port",
     RM_HA, ["http://master1:8088", "http://master2:8088"], ["master1:8032", "master2:8032"]),
    ("HA, webapp.address.<id> set: it wins for that RM",
     {**RM_HA, "yarn.resourcemanager.webapp.address.rm1": "master1:18088",
      "yarn.resourcemanager.address.rm2": "master2:18032"},
     ["http://master1:18088", "http://master2:8088"], ["master1:8032", "master2:18032"]),
    ("HA ids with HA disabled: the plain keys", {**RM_HA, "yarn.resourcemanager.ha.enabled": "false"},
     ["http://0.0.0.0:8088"], ["0.0.0.0:8032"]),
    ("rm-ids with spaces and an empty item (getStringCollection, trimmed)",
     {**RM_HA, "yarn.resourcemanager.ha.rm-ids": " rm1 , ,rm2 "},
     ["http://master1:8088", "http://master2:8088"], ["master1:8032", "master2:8032"]),
    ("yarn.http.policy HTTPS_ONLY: the https address, default port 8090",
     {**RM_HA, "yarn.http.policy": "HTTPS_ONLY"}, ["https://master1:8090", "https://master2:8090"],
     ["master1:8032", "master2:8032"]),
    ("HTTP_AND_HTTPS is not HTTPS_ONLY: the http address (YarnConfiguration.useHttps)",
     {"yarn.http.policy": "HTTP_AND_HTTPS", "yarn.resourcemanager.hostname": "rm"}, ["http://rm:8088"],
     ["rm:8032"]),
    ("${…} in an address", {"rm.host": "master9", "yarn.resourcemanager.webapp.address": "${rm.host}:8088"},
     ["http://master9:8088"], ["0.0.0.0:8032"]),
]


@pytest.mark.parametrize("what,props,web,rpc", RM_CASES, ids=[case[0] for case in RM_CASES])
def test_resourcemanager_addresses(what, props, web, rpc):
    assert rm_web_addresses(c(props)) == web
    assert rm_rpc_addresses(c(props)) == rpc


def test_an_ha_rm_without_hostname_or_address_is_named():
    props = {**RM_HA}
    del props["yarn.resourcemanager.hostname.rm2"]
    with pytest.raises(UsageError, match=r"yarn\.resourcemanager\.hostname\.rm2: not set"):
        rm_web_addresses(c(props))


def test_a_policy_that_is_not_one_is_named():
    with pytest.raises(UsageError, match=r"yarn\.http\.policy: 'HTTPS'.*allowed: HTTP_ONLY, HTTPS_ONLY"):
        rm_web_addresses(c({"yarn.http.policy": "https"}))


NN_HA = {  # HDFSHighAvailabilityWithQJM.md, "Configuration details"
    "fs.defaultFS": "hdfs://mycluster",
    "dfs.nameservices": "mycluster",
    "dfs.ha.namenodes.mycluster": "nn1,nn2,nn3",
    "dfs.namenode.rpc-address.mycluster.nn1": "machine1.example.com:8020",
    "dfs.namenode.rpc-address.mycluster.nn2": "machine2.example.com:8020",
    "dfs.namenode.rpc-address.mycluster.nn3": "machine3.example.com:8020",
    "dfs.namenode.http-address.mycluster.nn1": "machine1.example.com:9870",
    "dfs.namenode.http-address.mycluster.nn2": "machine2.example.com:9870",
    "dfs.namenode.http-address.mycluster.nn3": "machine3.example.com:9870",
    "dfs.client.failover.proxy.provider.mycluster":
        "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider",
}
MACHINES = tuple(f"http://machine{i}.example.com:9870" for i in (1, 2, 3))

NN_CASES = [
    # (what, props, uri, web addresses, logical)
    ("one NameNode: dfs.namenode.http-address", {"fs.defaultFS": "hdfs://nn:8020",
                                                 "dfs.namenode.http-address": "nn:50070"},
     None, ("http://nn:50070",), False),
    ("one NameNode, http-address unset: hdfs-default's 0.0.0.0:9870, the wildcard replaced by the RPC host",
     {"fs.defaultFS": "hdfs://nn.example.com:8020"}, None, ("http://nn.example.com:9870",), False),
    ("the default FS with no port: RPC port 8020, still this cluster's NameNode",
     {"fs.defaultFS": "hdfs://nn", "dfs.namenode.http-address": "0.0.0.0:50070"}, "hdfs:///data",
     ("http://nn:50070",), False),
    ("HA (the documented sample): every NameNode of the nameservice, in order", NN_HA, None, MACHINES, True),
    ("HA, hdfs:///path and /path: the default nameservice", NN_HA, "hdfs:///user/a", MACHINES, True),
    ("HA, hdfs://mycluster/path: the nameservice named", NN_HA, "hdfs://mycluster/x", MACHINES, True),
    ("HA, another NameNode's authority is kept: its host, the default web port", NN_HA,
     "hdfs://other-nn.example.com:8020/x", ("http://other-nn.example.com:9870",), False),
    ("HA, an NN without an http-address is skipped (getAddressesForNameserviceId)",
     {k: v for k, v in NN_HA.items() if k != "dfs.namenode.http-address.mycluster.nn3"}, None, MACHINES[:2], True),
    ("HA ids without a failover proxy provider: every NameNode, but no logical token service",
     {k: v for k, v in NN_HA.items() if "proxy.provider" not in k}, None, MACHINES, False),
    ("HA, a wildcard http-address takes the RPC host",
     {**NN_HA, "dfs.namenode.http-address.mycluster.nn1": "0.0.0.0:9870"}, None, MACHINES, True),
    ("dfs.http.policy HTTPS_ONLY: the https addresses", {
        **NN_HA, "dfs.http.policy": "HTTPS_ONLY",
        **{f"dfs.namenode.https-address.mycluster.nn{i}": f"machine{i}.example.com:9871" for i in (1, 2, 3)}},
     None, tuple(f"https://machine{i}.example.com:9871" for i in (1, 2, 3)), True),
    ("dfs.https.enable=true with HTTP_ONLY: still http (Hadoop 3's DFSUtil.getHttpPolicy reads only the policy)",
     {"fs.defaultFS": "hdfs://nn:8020", "dfs.namenode.http-address": "nn:9870", "dfs.http.policy": "HTTP_ONLY",
      "dfs.https.enable": "true"}, None, ("http://nn:9870",), False),
    ("dfs.https.enable=true and no policy: still http (Hadoop 2 made it HTTP_AND_HTTPS; Hadoop 3 ignores it)",
     {"fs.defaultFS": "hdfs://nn:8020", "dfs.namenode.http-address": "nn:9870", "dfs.https.enable": "true"},
     None, ("http://nn:9870",), False),
    ("federation without HA: <key>.<nameservice>",
     {"fs.defaultFS": "hdfs://ns1", "dfs.nameservices": "ns1,ns2",
      "dfs.namenode.rpc-address.ns1": "nn-host1:8020", "dfs.namenode.http-address.ns1": "nn-host1:9870",
      "dfs.namenode.rpc-address.ns2": "nn-host2:8020", "dfs.namenode.http-address.ns2": "nn-host2:9870"},
     "hdfs://ns2/x", ("http://nn-host2:9870",), False),
    ("${…} in fs.defaultFS", {"cluster": "mycluster", **NN_HA, "fs.defaultFS": "hdfs://${cluster}"}, None,
     MACHINES, True),
]


@pytest.mark.parametrize("what,props,uri,web,logical", NN_CASES, ids=[case[0] for case in NN_CASES])
def test_namenode_addresses(what, props, uri, web, logical):
    found = namenodes(c(props), uri)
    assert found.web == web
    assert found.logical is logical


@pytest.mark.parametrize("uri,field", [
    ("viewfs://cluster/data", "viewfs://cluster/data"),
    ("s3a://bucket/data", "s3a://bucket/data"),
])
def test_what_is_not_hdfs_is_refused_with_one_line(uri, field):
    with pytest.raises(UsageError, match=f"^{field}: "):
        namenodes(c(NN_HA), uri)


def test_a_viewfs_default_filesystem_is_refused():
    with pytest.raises(UsageError, match="viewfs:// is not supported"):
        namenodes(c({"fs.defaultFS": "viewfs://clusterX"}), "/data")


def test_a_nameservice_without_any_http_address_is_named():
    props = {k: v for k, v in NN_HA.items() if "http-address" not in k}
    with pytest.raises(UsageError, match=r"dfs\.namenode\.http-address\.mycluster\.nn1: not set"):
        namenodes(c(props))


TOKEN_CASES = [
    # (what, address, use_ip, service)
    ("use_ip: the address, not the name", "localhost:8020", True, "127.0.0.1:8020"),
    ("use_ip: an IP stays itself", "198.18.0.1:8032", True, "198.18.0.1:8032"),
    ("use_ip false: the host name, lower case", "NN1.Example.COM:8020", False, "nn1.example.com:8020"),
]


@pytest.mark.parametrize("what,address,use_ip,service", TOKEN_CASES, ids=[case[0] for case in TOKEN_CASES])
def test_token_service_of_an_address(what, address, use_ip, service):
    assert build_token_service(address, use_ip) == service


def test_use_ip_with_a_name_that_does_not_resolve_is_an_error():
    with pytest.raises(ClusterError, match="no-such-host.invalid: the host name does not resolve"):
        build_token_service("no-such-host.invalid:8020", True)


@pytest.mark.parametrize("props,service", [
    (NN_HA, "ha-hdfs:mycluster"),  # HAUtilClient.buildTokenServiceForLogicalUri
    ({"fs.defaultFS": "hdfs://localhost:9000"}, "127.0.0.1:9000"),
    ({"fs.defaultFS": "hdfs://LocalHost:9000", "hadoop.security.token.service.use_ip": "false"}, "localhost:9000"),
    ({"fs.defaultFS": "hdfs://localhost"}, "127.0.0.1:8020"),
], ids=["HA nameservice", "one NameNode, use_ip", "one NameNode, use_ip false", "no port: 8020"])
def test_hdfs_token_service(props, service):
    hadoop = c(props)
    assert namenodes(hadoop).token_service(conf=hadoop) == service


@pytest.mark.parametrize("props,service", [
    ({**RM_HA, "yarn.resourcemanager.hostname.rm1": "198.18.0.1", "yarn.resourcemanager.hostname.rm2": "198.18.0.2"},
     "198.18.0.1:8032,198.18.0.2:8032"),  # ClientRMProxy.getRMDelegationTokenService: every RM, comma-joined
    ({**RM_HA, "hadoop.security.token.service.use_ip": "false"}, "master1:8032,master2:8032"),
    ({"yarn.resourcemanager.hostname": "localhost"}, "127.0.0.1:8032"),  # no yarn.resourcemanager.address
], ids=["HA: every RM", "HA, use_ip false", "one RM from its hostname"])
def test_rm_token_service(props, service):
    assert rm_token_service(c(props)) == service


EXPANSION_CASES = [
    # (what, props, environ, key, value) -- Configuration's javadoc and substituteVars
    ("another key", {"basedir": "/user/${user.name}", "tempdir": "${basedir}/tmp"}, {}, "tempdir", None),
    ("env", {"otherdir": "${env.BASE_DIR}/other"}, {"BASE_DIR": "/base"}, "otherdir", "/base/other"),
    ("env :- default when unset or empty", {"d": "${env.NOPE:-/fallback}"}, {"NOPE": ""}, "d", "/fallback"),
    ("env - default only when unset", {"d": "${env.EMPTY-/fallback}"}, {"EMPTY": ""}, "d", ""),
    ("unbound: literal", {"d": "${nothing.here}/x"}, {}, "d", "${nothing.here}/x"),
    ("a loop: the value unexpanded", {"a": "${a}x"}, {}, "a", "${a}x"),
    ("a name with a space is not a variable", {"d": "${no pe}"}, {}, "d", "${no pe}"),
    ("nested through two keys", {"h": "rm1", "p": "${h}:8088", "w": "http://${p}"}, {}, "w", "http://rm1:8088"),
]


@pytest.mark.parametrize("what,props,environ,key,value", EXPANSION_CASES, ids=[case[0] for case in EXPANSION_CASES])
def test_expansion(what, props, environ, key, value):
    got = expand(props[key], props, environ)
    if value is None:  # ${user.name}: whoever runs the tests
        assert got.startswith("/user/") and got.endswith("/tmp") and "${" not in got
    else:
        assert got == value
