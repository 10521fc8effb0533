"""HDFS from Python, over WebHDFS (fsspec's implementation).

WebHDFS needs no native libhdfs and no JVM in the client, which is what a
Python task container and an Airflow worker have.
"""

from __future__ import annotations

import getpass
import os
from typing import TYPE_CHECKING, BinaryIO
from urllib.parse import urlparse

from tony_airflow.errors import ClusterError
from tony_airflow.yarn.discovery import require_conf_dir
from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.tokens import HDFS_DELEGATION_KIND, find_token

if TYPE_CHECKING:  # fsspec (and httpx) cost a tenth of a second each: loaded when a filesystem is made
    from fsspec.implementations.webhdfs import WebHDFS

    from tony_airflow.yarn.kerberos import KerberosLogin


def webhdfs(conf: HadoopConf | None = None, user: str | None = None, login: KerberosLogin | None = None,
            token: str | None = None) -> WebHDFS:
    """A filesystem object for the cluster's HDFS (paths are absolute HDFS paths).

    On a Kerberos cluster every call carries an HDFS delegation token: `token` when given, else the one
    in HADOOP_TOKEN_FILE_LOCATION (a container, an Azkaban or Oozie job), else one fetched once
    with SPNEGO as `login` (a keytab, else the ticket cache), as Hadoop's own WebHdfsFileSystem does."""
    from fsspec.implementations.webhdfs import WebHDFS

    if conf is None:
        conf_dir = require_conf_dir()
        conf = HadoopConf.load(conf_dir)
    address = urlparse(conf.namenode_web_address())
    if conf.kerberos:
        token = token or _delegation_token(conf, login)
        return WebHDFS(host=address.hostname, port=address.port, token=token, use_listings_cache=False)
    user = user or os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
    return WebHDFS(host=address.hostname, port=address.port, user=user, use_listings_cache=False)


def _delegation_token(conf: HadoopConf, login: KerberosLogin | None) -> str:
    if not (login and login.uses_keytab):
        given = find_token(HDFS_DELEGATION_KIND)
        if given is not None:
            return given.url_string()
    import httpx

    from tony_airflow.yarn.kerberos import spnego

    auth = spnego(login)
    url = f"{conf.namenode_web_address()}/webhdfs/v1/"
    try:
        resp = httpx.get(url, params={"op": "GETDELEGATIONTOKEN"}, auth=auth, timeout=30, follow_redirects=True)
    except httpx.TransportError as exc:
        raise ClusterError(f"webhdfs: {url} did not answer: {exc}") from None
    if resp.status_code >= 400:
        raise ClusterError(f"webhdfs: no delegation token from {url}: HTTP {resp.status_code} {resp.text[:200]}")
    return resp.json()["Token"]["urlString"]


def hdfs_path(url: str) -> str:
    """`hdfs://nn:8020/a/b` or `hdfs:///a/b` or `/a/b` -> `/a/b`."""
    return urlparse(url).path if url.startswith("hdfs:") else url


def append_bytes(fs: WebHDFS, path: str, data: bytes) -> None:
    """WebHDFS APPEND (NameNode redirect, then the DataNode). fsspec's `open(path, "ab")`
    never follows the redirect for appends (its WebHDFile sets no upload location)."""
    redirect = fs._call("APPEND", "POST", path, redirect=False)
    resp = fs.session.post(fs._apply_proxy(redirect.headers["Location"]), data=data,
                           headers={"content-type": "application/octet-stream"})
    resp.raise_for_status()


PART_SUFFIX = ".tony-part"  # a file being written under a temporary name; readers skip it


def replace_bytes(fs: WebHDFS, path: str, data: bytes) -> None:
    """Write `path` whole or not at all. WebHDFS CREATE truncates in place, so a writer cut off
    mid-upload would leave readers an empty or partial file; a temporary name and one RENAME
    with OVERWRITE (a single NameNode operation) never does."""
    part = path + PART_SUFFIX
    fs.pipe_file(part, data)
    # With options the NameNode does rename2: no body on success, an HTTP error (raised) otherwise
    fs._call("RENAME", "put", part, destination=path, renameoptions="OVERWRITE")


def create_file(fs: WebHDFS, path: str, data: bytes | BinaryIO, permission: str | None = None) -> None:
    """WebHDFS CREATE in its two steps (the NameNode's redirect, then the data to the DataNode), with the
    file's permission set at creation. fsspec's writer takes four requests and drops the permission."""
    params = {"overwrite": "true", **({"permission": permission} if permission else {})}
    redirect = fs._call("CREATE", "put", path, redirect=False, **params)
    resp = fs.session.put(fs._apply_proxy(redirect.headers["Location"]), data=data,
                          headers={"content-type": "application/octet-stream"})
    resp.raise_for_status()
