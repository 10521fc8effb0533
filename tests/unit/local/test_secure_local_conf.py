"""The secure local cluster's generated configuration: KDC files and Hadoop's Kerberos settings."""

from __future__ import annotations

import re
from pathlib import Path

from tony_airflow.local.cluster.config import ClusterSettings, write_conf
from tony_airflow.local.cluster.kdc import REALM, Kdc
from tony_airflow.local.cluster.secure import SERVICE_USERS, auth_to_local
from tony_airflow.yarn.hadoop_conf import HadoopConf


def _apply(rules: str, principal: str) -> str:
    """Hadoop's auth_to_local for the rule forms used here ([n:...](regex)s/x/y/)."""
    name, _, realm = principal.partition("@")
    parts = name.split("/")
    for rule in rules.splitlines():
        if rule == "DEFAULT":
            return parts[0] if realm == REALM else principal
        m = re.fullmatch(r"RULE:\[(\d):([^\]]+)\]\(([^)]*)\)s/([^/]*)/([^/]*)/", rule)
        assert m, rule
        if int(m.group(1)) != len(parts):
            continue
        text = m.group(2).replace("$0", realm).replace("$1", parts[0]).replace("$2", parts[-1])
        if re.fullmatch(m.group(3), text):
            return re.sub(m.group(4), m.group(5), text, count=1)
    raise AssertionError(principal)


def test_daemons_map_to_hadoop_service_users_and_users_to_their_short_name():
    rules = auth_to_local()
    for service, user in SERVICE_USERS.items():
        assert _apply(rules, f"{service}/localhost@{REALM}") == user
    assert _apply(rules, f"root@{REALM}") == "root"
    assert _apply(rules, f"alice@{REALM}") == "alice"


def test_secure_site_files_turn_kerberos_on_everywhere(tmp_path: Path):
    settings = ClusterSettings.choose()
    settings.secure, settings.kdc_port = True, 12345
    write_conf(tmp_path / "conf", tmp_path, tmp_path / "jars", settings, container_path="/usr/bin:/bin")
    conf = HadoopConf.load(tmp_path / "conf")
    keytab = str(tmp_path / "kdc" / "service.keytab")
    assert conf.get("hadoop.security.authentication") == "kerberos"
    assert conf.get("hadoop.security.authorization") == "true"
    assert conf.get("hadoop.http.authentication.type") == "kerberos"
    assert conf.get("hadoop.http.authentication.simple.anonymous.allowed") == "false"
    assert conf.get("dfs.block.access.token.enable") == "true"
    assert conf.get("ignore.secure.ports.for.testing") == "true"
    assert conf.get("dfs.data.transfer.protection") == "authentication"
    for key in ("dfs.namenode.keytab.file", "dfs.datanode.keytab.file", "yarn.resourcemanager.keytab",
                "yarn.nodemanager.keytab", "hadoop.http.authentication.kerberos.keytab"):
        assert conf.get(key) == keytab, key
    assert conf.get("yarn.resourcemanager.principal") == f"rm/localhost@{REALM}"


def test_a_plain_cluster_stays_simple(tmp_path: Path):
    write_conf(tmp_path / "conf", tmp_path, tmp_path / "jars", ClusterSettings.choose(), container_path="/bin")
    conf = HadoopConf.load(tmp_path / "conf")
    assert conf.get("hadoop.security.authentication") == "simple"
    assert conf.get("hadoop.http.authentication.type") is None


def test_kdc_files_stay_under_the_state_dir(tmp_path: Path):
    kdc = Kdc(tmp_path / "kdc", user="alice")
    kdc.root.mkdir()
    kdc._write_conf(4242)
    krb5 = kdc.krb5_conf.read_text()
    assert f"default_realm = {REALM}" in krb5 and "kdc = 127.0.0.1:4242" in krb5
    assert "udp_preference_limit = 1" in krb5 and "rdns = false" in krb5
    assert "kdc_tcp_listen = 127.0.0.1:4242" in kdc.kdc_conf.read_text()
    assert kdc.user_principal == f"alice@{REALM}"
    assert set(kdc.env()) == {"KRB5_CONFIG", "KRB5_KDC_PROFILE", "KRB5CCNAME"}
    assert all(str(tmp_path) in v for v in kdc.env().values())


def test_on_many_hosts_the_kdc_is_reached_on_the_bridge_and_hosts_log_in_as_themselves(tmp_path: Path):
    kdc = Kdc(tmp_path / "kdc", user="alice")
    kdc.root.mkdir()
    kdc._write_conf(4242, "198.18.0.1")
    assert "kdc = 198.18.0.1:4242" in kdc.krb5_conf.read_text()
    assert "kdc_tcp_listen = 127.0.0.1:4242, 198.18.0.1:4242" in kdc.kdc_conf.read_text()
    settings = ClusterSettings.choose()
    settings.secure, settings.kdc_port, settings.nodes, settings.net_slot = True, 4242, 3, 0
    settings.nameservice = "tony"
    write_conf(tmp_path / "conf", tmp_path, tmp_path / "jars", settings, container_path="/usr/bin:/bin")
    shared, host = HadoopConf.load(tmp_path / "conf"), HadoopConf.load(tmp_path / "conf-h2")
    for conf in (shared, host):  # the NameNode checks a DataNode's principal against its host: the same pattern
        assert conf.get("dfs.datanode.kerberos.principal") == f"dn/_HOST@{REALM}"
        assert conf.get("yarn.nodemanager.principal") == f"nm/_HOST@{REALM}"
    assert shared.get("dfs.namenode.kerberos.principal") == f"nn/localhost@{REALM}"
    assert shared.get("dfs.journalnode.kerberos.principal") == f"nn/localhost@{REALM}"  # QJM talks to it as the NN
    assert host.get("yarn.nodemanager.hostname") == "198.18.0.3"
