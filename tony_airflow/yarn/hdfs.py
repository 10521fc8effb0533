"""HDFS from Python, over WebHDFS (fsspec's implementation).

WebHDFS needs no native libhdfs and no JVM in the client, which is what a
Python task container and an Airflow worker have.
"""

from __future__ import annotations

import getpass
import os
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from tony_airflow.yarn.discovery import require_conf_dir
from tony_airflow.yarn.hadoop_conf import HadoopConf

if TYPE_CHECKING:  # fsspec is a tenth of a second to import: loaded when a filesystem is made
    from fsspec.implementations.webhdfs import WebHDFS


def webhdfs(conf: HadoopConf | None = None, user: str | None = None) -> WebHDFS:
    """A filesystem object for the cluster's HDFS (paths are absolute HDFS paths)."""
    from fsspec.implementations.webhdfs import WebHDFS

    if conf is None:
        conf_dir = require_conf_dir()
        conf = HadoopConf.load(conf_dir)
    address = urlparse(conf.namenode_web_address())
    user = user or os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
    return WebHDFS(host=address.hostname, port=address.port, user=user, use_listings_cache=False)


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
