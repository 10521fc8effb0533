"""Getting Hadoop delegation tokens as a Kerberos principal, over HTTP, into a token file.

What a scheduler's security manager does for its jobs (Azkaban's HadoopSecurityManager,
Oozie's credentials): it logs in, fetches an HDFS and an RM delegation token, and hands
them to the job in a file named by HADOOP_TOKEN_FILE_LOCATION. The job then needs no
keytab. `tony tokens` does the same, for such schedulers and for the tests.
"""

from __future__ import annotations

from pathlib import Path

from tony_airflow.yarn.hadoop_addresses import namenodes, rm_principal_host, rm_token_service
from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.hadoop_tls import tls_verify
from tony_airflow.yarn.kerberos import KerberosLogin, spnego
from tony_airflow.yarn.tokens import HDFS_DELEGATION_KIND, RM_DELEGATION_KIND, HadoopToken, from_url_string


def _renewer(conf: HadoopConf) -> str:
    """The ResourceManager renews a running application's tokens: it must be their renewer."""
    principal = conf.get("yarn.resourcemanager.principal") or "yarn"
    return principal.replace("_HOST", rm_principal_host(conf))


def fetch_tokens(conf: HadoopConf, login: KerberosLogin | None = None) -> list[HadoopToken]:
    """An HDFS and an RM delegation token for `login` (a keytab, else the ticket cache), renewable by the
    RM, asked of the active NameNode and the active RM, their services named as Hadoop's client names them."""
    from tony_airflow.yarn.failover import active_namenode_call
    from tony_airflow.yarn.rest import ResourceManagerClient

    auth, renewer = spnego(login), _renewer(conf)
    nns = namenodes(conf)
    https = any(a.startswith("https:") for a in (*nns.web, *conf.rm_web_addresses()))
    verify = tls_verify(conf) if https else True
    hdfs = active_namenode_call(nns.web, "GET", "/webhdfs/v1/", auth=auth, verify=verify,
                                params={"op": "GETDELEGATIONTOKEN", "renewer": renewer})
    rm = ResourceManagerClient(conf.rm_web_addresses(), auth=auth, timeout=30, verify=verify)
    try:
        answer = rm.delegation_token(renewer)
    finally:
        rm.close()
    return [from_url_string(hdfs["Token"]["urlString"], kind=HDFS_DELEGATION_KIND,
                            service=nns.token_service(conf=conf)),
            from_url_string(answer["token"], kind=RM_DELEGATION_KIND, service=rm_token_service(conf))]


def write_tokens(path: str | Path, conf: HadoopConf, login: KerberosLogin | None = None) -> list[HadoopToken]:
    from tony_airflow.yarn.tokens import write_token_file

    tokens = fetch_tokens(conf, login)
    write_token_file(path, tokens)
    return tokens
