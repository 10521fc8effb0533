"""Submitting a skein application over the ResourceManager's REST API and WebHDFS.

What skein's Java driver does for `Client.submit`, without starting a JVM in the
client (1.6 s of every `ytf-submit`, and the 7.8 MB skein.jar uploaded again for
every application): ask the RM for an application id, stage the files in
`~/.skein/<app id>` the way skein's ApplicationMaster expects them (`.skein.proto`
holding the finished spec, which names `.skein.crt`/`.skein.pem` and each
service's `.skein.sh`), and submit the AM's launch context. skein's AM in the container is
unchanged; it deletes the directory when the application ends. What does not
change between applications (skein.jar, the user's skein credentials, the
services' scripts) is uploaded once into `~/.tony-airflow/cache` (UserCache).

On a Kerberos cluster the calls are made with SPNEGO and the application gets an
HDFS and an RM delegation token renewable by the RM, as skein's driver does.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import urlparse

import skein

from tony_airflow import retries
from tony_airflow.yarn import am_launch
from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.hdfs import PART_SUFFIX, create_file
from tony_airflow.yarn.rest import ResourceManagerClient, ResourceManagerError
from tony_airflow.yarn.staging_dirs import staging_dir
from tony_airflow.yarn.tokens import HadoopToken

if TYPE_CHECKING:
    from fsspec.implementations.webhdfs import WebHDFS

SKEIN_JAR = Path(skein.__file__).parent / "java" / "skein.jar"
LOG_DIR = "<LOG_DIR>"  # YARN expands these in a launch context (ApplicationConstants)
CPS = "<CPS>"
# YarnConfiguration.DEFAULT_YARN_CROSS_PLATFORM_APPLICATION_CLASSPATH, used when yarn.application.classpath is unset
DEFAULT_CLASSPATH = (
    "{{HADOOP_CONF_DIR}}", "{{HADOOP_COMMON_HOME}}/share/hadoop/common/*",
    "{{HADOOP_COMMON_HOME}}/share/hadoop/common/lib/*", "{{HADOOP_HDFS_HOME}}/share/hadoop/hdfs/*",
    "{{HADOOP_HDFS_HOME}}/share/hadoop/hdfs/lib/*", "{{HADOOP_YARN_HOME}}/share/hadoop/yarn/*",
    "{{HADOOP_YARN_HOME}}/share/hadoop/yarn/lib/*",
)
APP_DIR_MODE = "700"
FILE_MODE = "600"
UPLOAD_THREADS = 8


@dataclass(frozen=True)
class Submitted:
    app_id: str
    app_dir: str  # hdfs:// URI of the staging directory (skein's AM removes it at the end)


class Stager:
    """Stages an application's files in its HDFS directory: every upload at once, in parallel.

    Each WebHDFS CREATE may wait 400 ms for the NameNode to see its block
    (DFSClient's completeFile retry), so they are not made one after another; and the
    spec that names them (`.skein.proto`) is not made to wait for them: every file
    gets one modification time, set after the upload (SETTIMES), which the spec names
    in advance, as YARN's localizer checks it."""

    def __init__(self, fs: WebHDFS, namenode: str, app_dir: str, timestamp_ms: int):
        self.fs, self.namenode, self.app_dir, self.timestamp = fs, namenode, app_dir, timestamp_ms
        self._uploads: dict[str, Callable[[], None]] = {}  # HDFS path -> its upload
        self._by_source: dict[str, str] = {}  # local path -> HDFS path (a file shared by services goes up once)

    def uri(self, path: str) -> str:
        return f"{self.namenode}{path}"

    def _file(self, path: str, type_: str, visibility: str, size: int, timestamp: int) -> skein.File:
        return skein.File(self.uri(path), type=type_, visibility=visibility, size=size, timestamp=timestamp)

    def existing(self, path: str, type_: str, visibility: str = "application") -> skein.File:
        """A file already on HDFS, as it is."""
        info = self.fs.info(path)
        return self._file(path, type_, visibility, int(info["length"]), int(info["modificationTime"]))

    def put_bytes(self, name: str, data: bytes, type_: str = "file") -> skein.File:
        path = posixpath.join(self.app_dir, name)
        self._uploads[path] = lambda: create_file(self.fs, path, data, FILE_MODE)
        return self._file(path, type_, "application", len(data), self.timestamp)

    def stage(self, file: skein.File) -> skein.File:
        """A local file uploaded (under a directory named by its path's hash, as skein does); an HDFS one as it is."""
        url = urlparse(file.source)
        type_, visibility = str(file.type).lower(), str(file.visibility).lower()
        if url.scheme != "file":
            return self.existing(url.path, type_, visibility)
        source = url.path
        path = self._by_source.get(source)
        if path is None:
            digest = hashlib.md5(source.encode(), usedforsecurity=False).hexdigest()
            path = posixpath.join(self.app_dir, digest, posixpath.basename(source))
            self._by_source[source] = path

            def upload() -> None:
                with open(source, "rb") as data:
                    create_file(self.fs, path, data, FILE_MODE)

            self._uploads[path] = upload
        return self._file(path, type_, visibility, os.stat(source).st_size, self.timestamp)

    def flush(self) -> None:
        """Upload everything staged (WebHDFS CREATE makes the directories), then give each file its time."""
        def settime(path: str) -> None:
            self.fs._call("SETTIMES", "put", path, modificationtime=str(self.timestamp), accesstime="-1")

        with ThreadPoolExecutor(max_workers=UPLOAD_THREADS, thread_name_prefix="stage") as pool:
            list(pool.map(lambda upload: upload(), self._uploads.values()))
            list(pool.map(settime, self._uploads))


class UserCache:
    """Files that stay the same from one application to the next, kept once per user in
    `~/.tony-airflow/cache` and localized PRIVATE (each NodeManager keeps one copy for the user):
    skein.jar, the user's skein credentials, the services' scripts. Fewer uploads per submission,
    and each upload may cost the 400 ms of a NameNode that has not seen the block yet."""

    def __init__(self, fs: WebHDFS, home: str, stager: Stager):
        self.fs, self.stager, self.dir = fs, stager, f"{home}/.tony-airflow/cache"
        self.listing: dict[str, tuple[int, int]] = {}  # name -> (length, modification time)
        try:
            for info in fs.ls(self.dir, detail=True):
                self.listing[posixpath.basename(info["name"])] = (int(info["length"]), int(info["modificationTime"]))
        except FileNotFoundError:
            fs._call("MKDIRS", "put", self.dir, permission=APP_DIR_MODE)

    def file(self, name: str, size: int, data: Callable[[], bytes | BinaryIO]) -> skein.File:
        path = f"{self.dir}/{name}"
        if self.listing.get(name, (-1, 0))[0] != size:
            part = f"{path}{PART_SUFFIX}-{uuid.uuid4().hex[:8]}"
            create_file(self.fs, part, data(), FILE_MODE)
            # no OVERWRITE: when another client published the same file first, theirs stays (an application
            # of theirs may already name its modification time) and this copy goes
            if not self.fs._call("RENAME", "put", part, destination=path).json().get("boolean"):
                self.fs.rm(part)
            info = self.fs.info(path)
            self.listing[name] = (int(info["length"]), int(info["modificationTime"]))
        size, timestamp = self.listing[name]
        return self.stager._file(path, "file", "private", size, timestamp)

    def put_bytes(self, suffix: str, data: bytes) -> skein.File:
        """Content-addressed: the name is the content's hash."""
        return self.file(f"{hashlib.sha256(data).hexdigest()[:20]}{suffix}", len(data), lambda: data)

    def skein_jar(self) -> skein.File:
        size = SKEIN_JAR.stat().st_size
        return self.file(f"skein-{skein.__version__}-{size}.jar", size, SKEIN_JAR.read_bytes)


def application_classpath(conf: HadoopConf) -> str:
    """What skein's driver gives its AM: the container's own CLASSPATH, the localized jars, the cluster's."""
    configured = [c.strip() for c in (conf.get("yarn.application.classpath") or "").split(",") if c.strip()]
    return CPS.join(["{{CLASSPATH}}", "./*", *(configured or DEFAULT_CLASSPATH)])


def user_credentials() -> tuple[bytes, bytes]:
    """The user's skein certificate and key (`~/.skein`, made on first use, as skein's own client does)."""
    security = skein.Security.from_default()
    pems = []
    for given, file in ((security.cert_bytes, security.cert_file), (security.key_bytes, security.key_file)):
        pems.append(given if given is not None else Path(urlparse(file.source).path).read_bytes())
    return pems[0], pems[1]


def launch_context(spec: skein.ApplicationSpec, stager: Stager, cache: UserCache, conf: HadoopConf, app_id: str,
                   user: str, lang: str | None) -> tuple[dict[str, skein.File], dict[str, str], str]:
    """Finish `spec` as skein's driver does (spec.master and services are changed in place) and
    return the AM container's files, environment and command. The TLS credentials of skein's
    AM are the user's own (`~/.skein`, as skein's driver uses them)."""
    cert_pem, key_pem = user_credentials()
    cert = cache.put_bytes(".skein.crt", cert_pem)
    key = cache.put_bytes(".skein.pem", key_pem)
    for name, service in spec.services.items():
        script = cache.put_bytes(".sh", service.script.encode())
        service.files = {**{k: stager.stage(f) for k, f in service.files.items()},
                         ".skein.sh": script, ".skein.crt": cert, ".skein.pem": key}
        service.script = f"bash .skein.sh >{LOG_DIR}/{name}.log 2>&1"
        if lang:
            service.env = {**service.env, "LANG": lang}
    master = spec.master
    master.security = skein.Security(cert_file=cert, key_file=key)
    master.files = {**{k: stager.stage(f) for k, f in master.files.items()},
                    ".skein.jar": cache.skein_jar(),
                    ".skein.crt": cert, ".skein.pem": key}
    files = dict(master.files)
    files[".skein.proto"] = stager.put_bytes(".skein.proto", spec.to_protobuf().SerializeToString())
    env = {**master.env, "CLASSPATH": application_classpath(conf), "SKEIN_APPLICATION_ID": app_id}
    if lang:
        env["LANG"] = lang
    if not conf.kerberos:
        env["HADOOP_USER_NAME"] = user
    files[am_launch.SCRIPT_NAME] = cache.put_bytes(".sh", am_launch.SCRIPT.encode())  # with its CDS archive
    # -Xrs: a signal ends skein's JVM without its exit hook, which took attempt 1 for the last one (the spec's
    # max_attempts=1) and, SIGTERMed with a NodeManager going away, deleted the staging directory the next AM
    # attempt localizes (issue 51 item 1); its own end still runs it. A killed job's directory: tony kill, the sweep.
    command = am_launch.command("{{JAVA_HOME}}/bin/java",
                                f"-Xmx128M -Xrs -Dskein.log.level={str(master.log_level).upper()} "
                                f"-Dskein.log.directory={LOG_DIR} "
                                f"com.anaconda.skein.ApplicationMaster {stager.uri(stager.app_dir)}",
                                f"{LOG_DIR}/application.master.log")
    return files, env, command


def _entries(mapping: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {"entry": [{"key": k, "value": v} for k, v in sorted(mapping.items())]}


def _resource(file: skein.File) -> dict[str, Any]:
    return {"resource": file.source, "type": str(file.type).upper(), "visibility": str(file.visibility).upper(),
            "size": file.size, "timestamp": file.timestamp}


def submission_body(spec: skein.ApplicationSpec, app_id: str, files: dict[str, skein.File], env: dict[str, str],
                    command: str, tokens: list[HadoopToken], am_attempts: int = 1,
                    attempt_validity_ms: int = 0) -> dict[str, Any]:
    """The RM's `application-submission-context` (ResourceManagerRest: Cluster Applications API (Submit))."""
    container: dict[str, Any] = {
        "local-resources": _entries({k: _resource(f) for k, f in files.items()}),
        "environment": _entries(env),
        "commands": {"command": command},
    }
    if tokens:
        container["credentials"] = {"tokens": _entries({t.alias: t.url_string() for t in tokens}), "secrets": {}}
    body: dict[str, Any] = {
        "application-id": app_id, "application-name": spec.name, "queue": spec.queue, "priority": 0,
        "am-container-spec": container, "unmanaged-AM": False, "max-app-attempts": am_attempts,
        "resource": {"memory": spec.master.resources.memory, "vCores": spec.master.resources.vcores},
        "application-type": "skein", "keep-containers-across-application-attempts": False,
        "application-tags": {"tag": sorted(spec.tags)},
    }
    if spec.node_label:  # the AM's container only (Hadoop's ApplicationSubmissionContextInfo names it so)
        body["am-container-node-label-expression"] = spec.node_label
    if attempt_validity_ms > 0:  # AM failures older than this do not count against max-app-attempts
        body["attempt-failures-validity-interval"] = attempt_validity_ms
    return body


def submit(spec: skein.ApplicationSpec, rm: ResourceManagerClient, fs: WebHDFS, conf: HadoopConf,
           tokens: list[HadoopToken] | None = None, lang: str | None = None, am_attempts: int = 1,
           attempt_validity_ms: int = 0) -> Submitted:
    """Submit `spec` (changed in place into its staged form); the staging directory goes if YARN refuses."""
    app_id = rm.new_application()
    home = fs.home_directory()
    namenode = conf.get("fs.defaultFS") or ""
    namenode = namenode.rstrip("/") if namenode.startswith("hdfs://") else f"hdfs://{urlparse(namenode).netloc}"
    app_dir = staging_dir(home, app_id)
    fs._call("MKDIRS", "put", app_dir, permission=APP_DIR_MODE)
    try:
        stager = Stager(fs, namenode, app_dir, int(time.time() * 1000))
        files, env, command = launch_context(spec, stager, UserCache(fs, home, stager), conf, app_id,
                                             rm.user, lang)
        stager.flush()
        body = submission_body(spec, app_id, files, env, command, tokens or [], am_attempts, attempt_validity_ms)
    except BaseException:
        _forget_staging(fs, app_dir)
        raise
    try:
        rm.submit_application(body)
    except ResourceManagerError as exc:
        # No answer is not a refusal: the RM may have taken the application, whose AM needs these files.
        if not (exc.transient and _was_accepted(rm, app_id)):
            _forget_staging(fs, app_dir)
            raise
    except BaseException:
        _forget_staging(fs, app_dir)
        raise
    return Submitted(app_id, stager.uri(app_dir))


LOOKUP_TRIES, LOOKUP_PAUSE_S = 5, 2.0  # asking the RM whether a submission it did not answer arrived


def _was_accepted(rm: ResourceManagerClient, app_id: str) -> bool:
    """Whether the RM knows `app_id` (a submission whose answer was lost); it says so within a few tries."""
    def known() -> bool:
        try:
            rm.application(app_id)
            return True
        except ResourceManagerError as exc:
            if exc.transient:
                raise
            return False  # 404: the submission never arrived

    transient = retries.tries(LOOKUP_TRIES, LOOKUP_PAUSE_S,
                              lambda exc: isinstance(exc, ResourceManagerError) and exc.transient)
    try:
        return transient(known)
    except ResourceManagerError:
        raise ResourceManagerError(f"the ResourceManager did not answer whether it took {app_id}; its staging "
                                   "directory is kept: see `tony status` for it", transient=True) from None


def _forget_staging(fs: WebHDFS, app_dir: str) -> None:
    try:
        fs.rm(app_dir, recursive=True)
    except Exception:  # the submission's own error is the one to report
        pass
