"""HDFS from Python, over WebHDFS (fsspec's implementation).

WebHDFS needs no native libhdfs and no JVM in the client, which is what a
Python task container and an Airflow worker have.
"""

from __future__ import annotations

import getpass
import os
import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlparse

from tony_airflow.errors import ClusterError
from tony_airflow.yarn.discovery import require_conf_dir
from tony_airflow.yarn.failover import NN_FAILOVER_WAIT_S, active_namenode_call, failover_rounds, nn_is_standby, ordered
from tony_airflow.yarn.hadoop_addresses import NameNodes, namenodes
from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.hadoop_tls import tls_verify
from tony_airflow.yarn.tokens import HDFS_DELEGATION_KIND, find_token


class NoActiveNameNode(ConnectionError):
    """A round in which no NameNode served the call (each dead or standby): asked again while time is left."""


if TYPE_CHECKING:  # fsspec (and httpx) cost a tenth of a second each: loaded when a filesystem is made
    from fsspec.implementations.webhdfs import WebHDFS

    from tony_airflow.yarn.kerberos import KerberosLogin


# A newer HDFS delegation token than the one this process's filesystems were made with: the AM got it from
# the job's keytab before the old one expired (core/am/token_renewal.py) and handed it to its executors.
_renewed_token: str | None = None


def use_hdfs_token(url_string: str) -> None:
    """From now on every WebHDFS call of this process that carries a delegation token carries this one."""
    global _renewed_token
    _renewed_token = url_string


def renewed_hdfs_token() -> str | None:
    """The token `use_hdfs_token` installed, if any."""
    return _renewed_token


def webhdfs(conf: HadoopConf | None = None, user: str | None = None, login: KerberosLogin | None = None,
            token: str | None = None, uri: str | None = None) -> WebHDFS:
    """A filesystem object for the HDFS of `uri`'s authority (the default filesystem's when it names none;
    paths are absolute HDFS paths). An HA nameservice gives every NameNode of it: calls go to the active
    one and fail over as Hadoop's WebHdfsFileSystem does.

    On a Kerberos cluster every call carries an HDFS delegation token: `token` when given, else the one
    in HADOOP_TOKEN_FILE_LOCATION (a container, an Azkaban or Oozie job), else one fetched once
    with SPNEGO as `login` (a keytab, else the ticket cache), as Hadoop's own WebHdfsFileSystem does."""
    if conf is None:
        conf_dir = require_conf_dir()
        conf = HadoopConf.load(conf_dir)
    nns = namenodes(conf, uri)
    first = urlparse(nns.web[0])
    https = first.scheme == "https"
    verify = tls_verify(conf) if https else True
    where = {"host": first.hostname, "port": first.port, "use_https": https, "session_verify": verify,
             "namenodes": nns.web, "use_listings_cache": False}
    if conf.kerberos:
        token = token or _delegation_token(nns, login, verify)
        return _webhdfs_class()(token=token, **where)
    user = user or os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
    return _webhdfs_class()(user=user, **where)


# Every WebHDFS request has a deadline: a DataNode that hangs must not hang a chief's final push or the
# AM's shutdown for ever. (connect, read) seconds; the read timeout is between bytes, not for a whole file.
WEBHDFS_TIMEOUT_S = (10.0, 60.0)
# Only a connection that was never made is retried here (the request was not sent, so retrying cannot
# apply an APPEND or a CREATE twice); anything else is the caller's to retry.
WEBHDFS_CONNECT_RETRIES = 3

_CLASS: type | None = None


class NameNodeStandby(Exception):
    """A NameNode answered that it is standby: the call was not served, ask the next one."""


def _connect_failed(exc: BaseException) -> bool:
    """A connection that was never made (refused, unreachable): the request was not sent."""
    from urllib3.exceptions import ConnectTimeoutError, MaxRetryError, NewConnectionError

    reason = exc.args[0] if exc.args else None
    if isinstance(reason, MaxRetryError):
        reason = reason.reason
    return isinstance(reason, NewConnectionError | ConnectTimeoutError)


def _webhdfs_class() -> type:
    """fsspec's WebHDFS, whose requests all carry WEBHDFS_TIMEOUT_S and retry a refused connection, and
    which fails over between the NameNodes of an HA nameservice."""
    global _CLASS
    if _CLASS is None:
        import requests
        from fsspec.implementations.webhdfs import WebHDFS
        from requests.adapters import HTTPAdapter
        from urllib3.util.retry import Retry

        class _DeadlineSession(requests.Session):
            def request(self, *args, **kwargs):
                kwargs.setdefault("timeout", WEBHDFS_TIMEOUT_S)
                resp = super().request(*args, **kwargs)
                if resp.status_code == 403 and nn_is_standby(resp.status_code, _json_or_none(resp)):
                    raise NameNodeStandby(resp.url)
                return resp

        class TimedWebHDFS(WebHDFS):
            def __init__(self, *args, namenodes: tuple[str, ...] = (), **kwargs):
                self.namenodes = tuple(namenodes)
                self._active = 0
                self._chosen = threading.local()  # the NameNode a call of this thread goes to (see `url`)
                super().__init__(*args, **kwargs)

            # fsspec builds every request from `self.url`, and fsspec shares one instance between threads
            # (the mirror's rounds, the history's flush): a failover in one thread must not move another
            # thread's request. The NameNode a call chose is that thread's; fsspec's own `url` is the default.
            @property
            def url(self) -> str:
                return getattr(self._chosen, "url", None) or self.__dict__["_base_url"]

            @url.setter
            def url(self, value: str) -> None:
                if "_base_url" not in self.__dict__:
                    self.__dict__["_base_url"] = value  # fsspec's __init__
                else:
                    self._chosen.url = value

            def _connect(self) -> None:
                super()._connect()
                made: requests.Session = self.session  # type: ignore[has-type]  # fsspec's: its TLS settings and authentication
                session = _DeadlineSession()
                session.cert, session.verify, session.auth = made.cert, made.verify, made.auth
                # one NameNode: a refused connection is tried again here; several: the next one is (_call)
                tries = WEBHDFS_CONNECT_RETRIES if len(self.namenodes) < 2 else 0
                retry = Retry(total=tries, connect=tries, read=0, status=0, other=0, redirect=False,
                              backoff_factor=0.5, allowed_methods=None)
                for scheme in ("http://", "https://"):
                    session.mount(scheme, HTTPAdapter(max_retries=retry))
                self.session = session

            def _call(self, op, method="get", path=None, data=None, redirect=True, **kwargs):
                """The call, to the active NameNode: a standby answer or a refused connection (neither
                served the call) passes it to the next, for up to NN_FAILOVER_WAIT_S. It carries the
                newest delegation token the process was given (`use_hdfs_token`)."""
                if _renewed_token and self.pars.get("delegation") not in (None, _renewed_token):
                    self.pars["delegation"] = _renewed_token
                if len(self.namenodes) < 2:
                    return super()._call(op, method, path, data, redirect, **kwargs)
                def one_round() -> Any:
                    reasons = []
                    for index in ordered(self.namenodes, self._active):
                        self.url = f"{self.namenodes[index]}/webhdfs/v1"
                        try:
                            out = super(TimedWebHDFS, self)._call(op, method, path, data, redirect, **kwargs)
                        except NameNodeStandby:
                            reasons.append(f"{self.namenodes[index]}: standby")
                            continue
                        except requests.ConnectionError as exc:
                            if not _connect_failed(exc):
                                raise
                            reasons.append(f"{self.namenodes[index]}: not reachable")
                            continue
                        self._active = index
                        return out
                    raise NoActiveNameNode("webhdfs: no active NameNode: " + "; ".join(reasons))

                return failover_rounds(NN_FAILOVER_WAIT_S, NoActiveNameNode)(one_round)

        _CLASS = TimedWebHDFS
    return _CLASS


def _json_or_none(resp) -> object:
    try:
        return resp.json()
    except ValueError:
        return None


def _delegation_token(nns: NameNodes, login: KerberosLogin | None, verify: str | bool = True) -> str:
    if not (login and login.uses_keytab):
        given = find_token(HDFS_DELEGATION_KIND)
        if given is not None:
            return given.url_string()
    from tony_airflow.yarn.kerberos import spnego

    try:
        answer = active_namenode_call(nns.web, "GET", "/webhdfs/v1/", auth=spnego(login),
                                      params={"op": "GETDELEGATIONTOKEN"}, verify=verify)
    except ClusterError as exc:
        raise ClusterError(f"webhdfs: no delegation token: {exc}") from None
    return answer["Token"]["urlString"]


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
    """An upload's body read as it is sent: an open file, or one version of it (core/executor/output_commit.py)."""

    def read(self, size: int = -1, /) -> bytes: ...


class OutputFiles(Protocol):
    """The HDFS operations the output mirror is built from, each one WebHDFS request or one redirect
    pair; unit tests stand in for it with an in-memory HDFS that can be cut after any of them."""

    def names(self, directory: str) -> list[str]: ...  # (before `list`, which names the method in this scope)
    def list(self, root: str) -> dict[str, RemoteFile]: ...
    def entries(self, directory: str) -> dict[str, RemoteFile]: ...
    def read(self, path: str, start: int = 0) -> bytes: ...
    def download(self, path: str, local: str) -> None: ...
    def create(self, path: str, data: bytes | Readable) -> None: ...
    def create_new(self, path: str, data: bytes) -> None: ...
    def append(self, path: str, data: bytes) -> None: ...
    def rename_over(self, source: str, destination: str) -> None: ...
    def delete(self, path: str, recursive: bool = False) -> None: ...
    def mkdirs(self, path: str) -> None: ...


class WebHdfsFiles:
    """OutputFiles over WebHDFS (fsspec's filesystem with this module's deadlines)."""

    def __init__(self, fs: WebHDFS):
        self.fs = fs

    def names(self, directory: str) -> list[str]:  # before `list`, which names the method in this scope
        """The paths of the entries of one directory (not below it): one LISTSTATUS."""
        try:
            return [str(p) for p in self.fs.ls(directory, detail=False)]
        except FileNotFoundError:
            return []

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

    def entries(self, directory: str) -> dict[str, RemoteFile]:
        """The files directly in one directory, with their sizes and times: one LISTSTATUS (a worker waiting
        for its chief's claim looks for the marks there, not through the whole output)."""
        try:
            listing = self.fs.ls(directory, detail=True)
        except FileNotFoundError:
            return {}
        return {str(info["name"]): RemoteFile(int(info.get("size") or 0), int(info.get("modificationTime") or 0))
                for info in listing if info.get("type") != "directory"}

    def read(self, path: str, start: int = 0) -> bytes:
        return self.fs.cat_file(path, start=start or None)

    def download(self, path: str, local: str) -> None:
        self.fs.get_file(path, local)

    def create(self, path: str, data: bytes | Readable) -> None:
        create_file(self.fs, path, data)

    def create_new(self, path: str, data: bytes) -> None:
        """CREATE with overwrite=false: FileExistsError when the path exists (the NameNode decides, once)."""
        create_file(self.fs, path, data, overwrite=False)

    def append(self, path: str, data: bytes) -> None:
        append_bytes(self.fs, path, data)

    def rename_over(self, source: str, destination: str) -> None:
        rename_over(self.fs, source, destination)

    def delete(self, path: str, recursive: bool = False) -> None:
        try:
            self.fs._call("DELETE", "delete", path, recursive="true" if recursive else "false")
        except FileNotFoundError:
            pass

    def mkdirs(self, path: str) -> None:
        self.fs.mkdir(path)


def create_file(fs: WebHDFS, path: str, data: bytes | Readable, permission: str | None = None,
                overwrite: bool = True) -> None:
    """WebHDFS CREATE in its two steps (the NameNode's redirect, then the data to the DataNode), with the
    file's permission set at creation. fsspec's writer takes four requests and drops the permission.
    overwrite=False: the DataNode's create fails with FileAlreadyExistsException when the path exists
    (raised here as FileExistsError)."""
    params = {"overwrite": "true" if overwrite else "false", **({"permission": permission} if permission else {})}
    try:
        redirect = fs._call("CREATE", "put", path, redirect=False, **params)
    except RuntimeError as exc:  # fsspec's error for a RemoteException it does not map
        if "FileAlreadyExistsException" in str(exc) or "already exists" in str(exc):
            raise FileExistsError(path) from None
        raise
    resp = fs.session.put(fs._apply_proxy(redirect.headers["Location"]), data=data,
                          headers={"content-type": "application/octet-stream"})
    if not overwrite and resp.status_code in (400, 403, 409) and "AlreadyExists" in resp.text:
        raise FileExistsError(path)
    resp.raise_for_status()
