"""The Hadoop settings that turn the local cluster into a Kerberos one (`tony cluster up --secure`).

RPC and HTTP both demand Kerberos: WebHDFS, the ResourceManager's REST API and the
NodeManagers' web pages answer 401 to a request without SPNEGO. The DataNode runs
on unprivileged ports with SASL on data transfer (`ignore.secure.ports.for.testing`),
and containers run as the NodeManager's OS user (DefaultContainerExecutor): the
job's *Hadoop* identity is the submitting principal, not an OS account.
"""

from __future__ import annotations

import re

from tony_airflow.local.cluster.kdc import REALM, Kdc, service_principal

# Hadoop names of the daemons' principals: HDFS's superuser is `hdfs`, not the job's user.
SERVICE_USERS = {"nn": "hdfs", "dn": "hdfs", "rm": "yarn", "nm": "yarn", "jhs": "mapred"}


def auth_to_local() -> str:
    """Service principals of this realm -> hdfs/yarn/mapred; users -> their short name."""
    realm = re.escape(REALM)
    rules = [f"RULE:[2:$1/$2@$0]({service}/.*@{realm})s/.*/{user}/" for service, user in SERVICE_USERS.items()]
    return "\n".join((*rules, f"RULE:[1:$1@$0](.*@{realm})s/@.*//", "DEFAULT"))


def secure_sites(kdc: Kdc, multihost: bool = False, ha: bool = False) -> dict[str, dict[str, object]]:
    """core-, hdfs- and yarn-site additions, by file name. On many hosts each worker host's NodeManager
    and DataNode log in as their host's own principal (`nm/_HOST`, `dn/_HOST`: Hadoop puts in the host's
    name, which is its address here), and the NameNode accepts a DataNode by that pattern. With HA the
    JournalNode and the ZKFCs run as the NameNodes' principal."""
    keytab = str(kdc.service_keytab)
    http = "*"  # every HTTP/<host> principal of the keytab: clients say 127.0.0.1 or localhost
    core: dict[str, object] = {
        "hadoop.security.authentication": "kerberos",
        "hadoop.security.authorization": True,
        "hadoop.security.auth_to_local": auth_to_local(),
        "hadoop.rpc.protection": "authentication",
        # the daemons' Hadoop users have no OS account: no shell lookup of their groups (and no warning)
        "hadoop.user.group.static.mapping.overrides": "dr.who=;hdfs=supergroup;yarn=supergroup;mapred=supergroup;",
        "hadoop.http.filter.initializers": "org.apache.hadoop.security.AuthenticationFilterInitializer",
        "hadoop.http.authentication.type": "kerberos",
        "hadoop.http.authentication.simple.anonymous.allowed": False,
        "hadoop.http.authentication.kerberos.principal": http,
        "hadoop.http.authentication.kerberos.keytab": keytab,
        "hadoop.http.authentication.kerberos.name.rules": auth_to_local(),
        "hadoop.proxyuser.HTTP.hosts": "*",
        "hadoop.proxyuser.HTTP.groups": "*",
    }
    hdfs: dict[str, object] = {
        "dfs.block.access.token.enable": True,
        "dfs.namenode.kerberos.principal": service_principal("nn"),
        "dfs.namenode.keytab.file": keytab,
        "dfs.namenode.kerberos.internal.spnego.principal": http,
        "dfs.datanode.kerberos.principal": service_principal("dn"),
        "dfs.datanode.keytab.file": keytab,
        "dfs.web.authentication.kerberos.principal": http,
        "dfs.web.authentication.kerberos.keytab": keytab,
        # unprivileged DataNode ports: SASL protects data transfer instead (no jsvc here)
        "ignore.secure.ports.for.testing": True,
        "dfs.data.transfer.protection": "authentication",
        "dfs.http.policy": "HTTP_ONLY",
    }
    yarn: dict[str, object] = {
        "yarn.resourcemanager.principal": service_principal("rm"),
        "yarn.resourcemanager.keytab": keytab,
        "yarn.resourcemanager.webapp.spnego-principal": http,
        "yarn.resourcemanager.webapp.spnego-keytab-file": keytab,
        "yarn.nodemanager.principal": service_principal("nm"),
        "yarn.nodemanager.keytab": keytab,
        "yarn.nodemanager.webapp.spnego-principal": http,
        "yarn.nodemanager.webapp.spnego-keytab-file": keytab,
        "yarn.nodemanager.container-executor.class":
            "org.apache.hadoop.yarn.server.nodemanager.DefaultContainerExecutor",
    }
    if multihost:
        hdfs["dfs.datanode.kerberos.principal"] = f"dn/_HOST@{REALM}"
        yarn["yarn.nodemanager.principal"] = f"nm/_HOST@{REALM}"
    if ha:
        hdfs.update({
            "dfs.journalnode.kerberos.principal": service_principal("nn"),
            "dfs.journalnode.keytab.file": keytab,
            "dfs.journalnode.kerberos.internal.spnego.principal": http,
        })
    return {"core-site.xml": core, "hdfs-site.xml": hdfs, "yarn-site.xml": yarn}


def krb5_java_options(kdc: Kdc) -> list[str]:
    """Every JVM (daemons, skein's driver, skein's AM) reads this realm's krb5.conf."""
    return [f"-Djava.security.krb5.conf={kdc.krb5_conf}"]
