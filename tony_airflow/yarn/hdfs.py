"""HDFS from Python, over WebHDFS (fsspec's implementation).

WebHDFS needs no native libhdfs and no JVM in the client, which is what a
Python task container and an Airflow worker have.
"""

from __future__ import annotations

import getpass
import os
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol
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
    if conf is None:
        conf_dir = require_conf_dir()
        conf = HadoopConf.load(conf_dir)
    address = urlparse(conf.namenode_web_address())
    if conf.kerberos:
        token = token or _delegation_token(conf, login)
        return _webhdfs_class()(host=address.hostname, port=address.port, token=token, use_listings_cache=False)
    user = user or os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
    return _webhdfs_class()(host=address.hostname, port=address.port, user=user, use_listings_cache=False)


# Every WebHDFS request has a deadline: a DataNode that hangs must not hang a chief's final push or the
# AM's shutdown for ever. (connect, read) seconds; the read timeout is between bytes, not for a whole file.
WEBHDFS_TIMEOUT_S = (10.0, 60.0)
# Only a connection that was never made is retried here (the request was not sent, so retrying cannot
# apply an APPEND or a CREATE twice); anything else is the caller's to retry.
WEBHDFS_CONNECT_RETRIES = 3

_CLASS: type | None = None


def _webhdfs_class() -> type:
    """fsspec's WebHDFS, whose requests all carry WEBHDFS_TIMEOUT_S and retry a refused connection."""
    global _CLASS
    if _CLASS is None:
        import requests
        from fsspec.implementations.webhdfs import WebHDFS
        from requests.adapters import HTTPAdapter
        from urllib3.util.retry import Retry

        class _DeadlineSession(requests.Session):
            def request(self, *args, **kwargs):
                kwargs.setdefault("timeout", WEBHDFS_TIMEOUT_S)
                return super().request(*args, **kwargs)

        class TimedWebHDFS(WebHDFS):
            def _connect(self) -> None:
                super()._connect()
                made: requests.Session = self.session  # type: ignore[has-type]  # fsspec's: its TLS settings and authentication
                session = _DeadlineSession()
                session.cert, session.verify, session.auth = made.cert, made.verify, made.auth
                retry = Retry(total=WEBHDFS_CONNECT_RETRIES, connect=WEBHDFS_CONNECT_RETRIES, read=0, status=0,
                              other=0, redirect=False, backoff_factor=0.5, allowed_methods=None)
                for scheme in ("http://", "https://"):
                    session.mount(scheme, HTTPAdapter(max_retries=retry))
                self.session = session

        _CLASS = TimedWebHDFS
    return _CLASS


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


def is_part(name: str) -> bool:
    """A file under a temporary name (being written, or left by a writer that was cut off)."""
    return PART_SUFFIX in os.path.basename(name)


def part_name(path: str, writer: str) -> str:
    """A temporary name beside `path`, unique per writer and per call: two writers never share one."""
    return f"{path}{PART_SUFFIX}-{writer}-{uuid.uuid4().hex[:8]}"


def rename_over(fs: WebHDFS, source: str, destination: str) -> None:
    """One NameNode operation that puts `source` at `destination`, replacing a file there.
    WebHDFS's RENAME with `renameoptions=OVERWRITE` is the NameNode's rename2 (NamenodeWebHdfsMethods:
    options given -> `cp.rename2(...)`, no body on success, an HTTP error otherwise): atomic, so a
    reader sees the old file or the new one, never neither and never part of one."""
    fs._call("RENAME", "put", source, destination=destination, renameoptions="OVERWRITE")


def replace_bytes(fs: WebHDFS, path: str, data: bytes, writer: str = "w") -> None:
    """Write `path` whole or not at all. WebHDFS CREATE truncates in place, so a writer cut off
    mid-upload would leave readers an empty or partial file; a temporary name and one RENAME
    with OVERWRITE (a single NameNode operation) never does."""
    part = part_name(path, writer)
    try:
        create_file(fs, part, data)
        rename_over(fs, part, path)
    except BaseException:
        _forget(fs, part)
        raise


def _forget(fs: WebHDFS, part: str) -> None:
    try:
        fs._call("DELETE", "delete", part, recursive="false")
    except Exception:  # the link is down: the next writer or reader skips it (is_part)
        pass


@dataclass(frozen=True)
class RemoteFile:
    """One file of a listing: what a reader compares to tell a new version from the one it has."""
    size: int
    mtime_ms: int


class Readable(Protocol):
    """An upload's body read as it is sent: an open file, or one version of it (core/executor/staging.py)."""

    def read(self, size: int = -1, /) -> bytes: ...


class OutputFiles(Protocol):
    """The HDFS operations the output mirror is built from, each one WebHDFS request or one redirect
    pair; unit tests stand in for it with an in-memory HDFS that can be cut after any of them."""

    def list(self, root: str) -> dict[str, RemoteFile]: ...
    def read(self, path: str, start: int = 0) -> bytes: ...
    def download(self, path: str, local: str) -> None: ...
    def create(self, path: str, data: bytes | Readable) -> None: ...
    def append(self, path: str, data: bytes) -> None: ...
    def rename_over(self, source: str, destination: str) -> None: ...
    def delete(self, path: str) -> None: ...
    def mkdirs(self, path: str) -> None: ...


class WebHdfsFiles:
    """OutputFiles over WebHDFS (fsspec's filesystem with this module's deadlines)."""

    def __init__(self, fs: WebHDFS):
        self.fs = fs

    def list(self, root: str) -> dict[str, RemoteFile]:
        """Every file under `root` (recursively), or nothing when `root` does not exist."""
        found: dict[str, RemoteFile] = {}
        try:
            listing = self.fs.find(root, detail=True)
        except FileNotFoundError:
            return found
        for path, info in listing.items():
            if info.get("type") != "directory":
                found[path] = RemoteFile(int(info.get("size") or 0), int(info.get("modificationTime") or 0))
        return found

    def read(self, path: str, start: int = 0) -> bytes:
        return self.fs.cat_file(path, start=start or None)

    def download(self, path: str, local: str) -> None:
        self.fs.get_file(path, local)

    def create(self, path: str, data: bytes | Readable) -> None:
        create_file(self.fs, path, data)

    def append(self, path: str, data: bytes) -> None:
        append_bytes(self.fs, path, data)

    def rename_over(self, source: str, destination: str) -> None:
        rename_over(self.fs, source, destination)

    def delete(self, path: str) -> None:
        try:
            self.fs._call("DELETE", "delete", path, recursive="false")
        except FileNotFoundError:
            pass

    def mkdirs(self, path: str) -> None:
        self.fs.mkdir(path)


def create_file(fs: WebHDFS, path: str, data: bytes | Readable, permission: str | None = None) -> None:
    """WebHDFS CREATE in its two steps (the NameNode's redirect, then the data to the DataNode), with the
    file's permission set at creation. fsspec's writer takes four requests and drops the permission."""
    params = {"overwrite": "true", **({"permission": permission} if permission else {})}
    redirect = fs._call("CREATE", "put", path, redirect=False, **params)
    resp = fs.session.put(fs._apply_proxy(redirect.headers["Location"]), data=data,
                          headers={"content-type": "application/octet-stream"})
    resp.raise_for_status()
