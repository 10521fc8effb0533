"""Getting Hadoop delegation tokens as a Kerberos principal, over HTTP, into a token file.

What a scheduler's security manager does for its jobs (Azkaban's HadoopSecurityManager,
Oozie's credentials): it logs in, fetches an HDFS and an RM delegation token, and hands
them to the job in a file named by HADOOP_TOKEN_FILE_LOCATION. The job then needs no
keytab. `tony tokens` does the same, for such schedulers and for the tests.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import httpx

from tony_airflow.errors import ClusterError
from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.kerberos import KerberosLogin, spnego
from tony_airflow.yarn.tokens import HDFS_DELEGATION_KIND, RM_DELEGATION_KIND, HadoopToken, from_url_string


def rpc_service(address: str) -> str:
    """Hadoop's token service name of an RPC address (`ip:port`, hadoop.security.token.service.use_ip)."""
    host, _, port = address.rpartition(":")
    return f"{'127.0.0.1' if host in ('localhost', '') else host}:{port}"


def _renewer(conf: HadoopConf) -> str:
    """The ResourceManager renews a running application's tokens: it must be their renewer."""
    principal = conf.get("yarn.resourcemanager.principal") or "yarn"
    host = urlparse(conf.rm_web_addresses()[0]).hostname or "localhost"
    return principal.replace("_HOST", host)


def _answer(resp: httpx.Response, what: str) -> dict:
    if resp.status_code >= 400:
        raise ClusterError(f"{what}: HTTP {resp.status_code}: {resp.text[:200]}")
    return resp.json()


def fetch_tokens(conf: HadoopConf, login: KerberosLogin | None = None) -> list[HadoopToken]:
    """An HDFS and an RM delegation token for `login` (a keytab, else the ticket cache), renewable by the RM."""
    auth, renewer = spnego(login), _renewer(conf)
    namenode = conf.get("dfs.namenode.rpc-address") or urlparse(conf.get("fs.defaultFS") or "").netloc
    rm_rpc = conf.get("yarn.resourcemanager.address") or ""
    with httpx.Client(auth=auth, timeout=30, follow_redirects=True) as http:
        hdfs = _answer(http.get(f"{conf.namenode_web_address()}/webhdfs/v1/",
                                params={"op": "GETDELEGATIONTOKEN", "renewer": renewer}), "webhdfs")
        rm = _answer(http.post(f"{conf.rm_web_addresses()[0]}/ws/v1/cluster/delegation-token",
                               json={"renewer": renewer}), "resourcemanager delegation-token")
    return [from_url_string(hdfs["Token"]["urlString"], kind=HDFS_DELEGATION_KIND, service=rpc_service(namenode)),
            from_url_string(rm["token"], kind=RM_DELEGATION_KIND, service=rpc_service(rm_rpc))]


def write_tokens(path: str | Path, conf: HadoopConf, login: KerberosLogin | None = None) -> list[HadoopToken]:
    from tony_airflow.yarn.tokens import write_token_file

    tokens = fetch_tokens(conf, login)
    write_token_file(path, tokens)
    return tokens
