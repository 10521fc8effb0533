"""A real Oozie 5.2.1 server on the local cluster: `tony oozie server up|down|status`.

Oozie comes from Maven Central alone (the pom beside this file), runs as `EmbeddedOozieServer` (Jetty
9.3) on Java 17 with an embedded Derby database, and submits its launchers to the local YARN. It lives
in `<cluster state>/oozie/` and is stopped by `tony oozie server down` and by `tony cluster down`.

What it needs, each found by running it (issue #33): the class path of classpath.py; the web root
(the war's static files, without `WEB-INF/web.xml` and its Hadoop 2 jars: the embedded server maps its
servlets itself, "Multiple servlets map to path: /v1/jobs" otherwise) on the class path as `webapp/`;
an empty `conf/action-conf/` (E0100 otherwise); the database made once by `OozieDBCLI create -run`;
the `oozie` sharelib (the launcher's jars) in HDFS under `<system libpath>/lib_<timestamp>/oozie/`;
and the cluster's core-site allowing this user to impersonate (config.py).
"""

from __future__ import annotations

import getpass
import json
import os
import shlex
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

import httpx

from tony_airflow.errors import ClusterError, UsageError
from tony_airflow.local.cluster import jars
from tony_airflow.local.cluster.config import free_ports
from tony_airflow.local.cluster.oozie.classpath import (
    hadoop_artifacts,
    oozie_artifacts,
    server_classpath,
    sharelib_jars,
    webapp_archive,
)
from tony_airflow.local.cluster.processes import pid_from_file, rss_kib, stop_from_file
from tony_airflow.yarn.discovery import cache_root
from tony_airflow.yarn.hadoop_conf import HadoopConf, write_site
from tony_airflow.yarn.jvm import ADD_OPENS, find_java_home

POM = Path(__file__).with_name("pom.xml")
OOZIE_VERSION = "5.2.1"
MAIN_CLASS = "org.apache.oozie.server.EmbeddedOozieServer"
HEAP_MB = 512
HOST = "127.0.0.1"  # the launchers run in containers of this machine's NodeManager


LOG4J = """log4j.rootLogger=INFO, oozie
log4j.appender.oozie=org.apache.log4j.RollingFileAppender
log4j.appender.oozie.File=${oozie.log.dir}/oozie.log
log4j.appender.oozie.MaxFileSize=64MB
log4j.appender.oozie.MaxBackupIndex=2
log4j.appender.oozie.layout=org.apache.log4j.PatternLayout
log4j.appender.oozie.layout.ConversionPattern=%d{ISO8601} %5p %c{1}:%L - %m%n
log4j.logger.org.apache.hadoop.security.authentication.server.AuthenticationFilter=ERROR
log4j.logger.org.eclipse.jetty=WARN
log4j.logger.org.apache.openjpa=WARN
"""


def oozie_jar_dir() -> Path:
    return cache_root() / f"oozie-{OOZIE_VERSION}" / "repository"


class OozieServer:
    """The Oozie server of one local cluster (identified by the cluster's state directory)."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.home = cluster.state_dir / "oozie"
        self.conf_dir = self.home / "conf"
        self.data_dir = self.home / "data"
        self.log_dir = self.home / "logs"
        self.webroot = self.home / "webroot"
        self.bin_dir = self.home / "bin"
        self.pid_file = cluster.run_dir / "oozie.pid"
        self.settings_file = self.home / "server.json"

    # -------------------------------------------------------------------- where
    @property
    def port(self) -> int:
        return int(json.loads(self.settings_file.read_text())["port"])

    @property
    def url(self) -> str:
        """OOZIE_URL: what `oozie -oozie URL` and the REST API take."""
        return f"http://{HOST}:{self.port}/oozie"

    @property
    def version(self) -> str:
        return OOZIE_VERSION

    @property
    def system_libpath(self) -> str:
        return f"/user/{getpass.getuser()}/share/lib"

    def pid(self) -> int | None:
        return pid_from_file(self.pid_file, MAIN_CLASS.encode())

    def system_mode(self) -> str | None:
        """NORMAL when the server serves; None when nothing answers."""
        try:
            answer = httpx.get(f"{self.url}/v1/admin/status", timeout=5)
            return str(answer.json()["systemMode"]) if answer.status_code == 200 else None
        except (httpx.HTTPError, ValueError, KeyError, OSError):
            return None

    def status(self) -> str:
        pid = self.pid()
        if pid is None:
            return "stopped"
        mode = self.system_mode() if self.settings_file.exists() else None
        return f"running (pid {pid}, {rss_kib(pid) // 1024} MiB), {self.url}, system mode {mode or 'not answering'}"

    # ----------------------------------------------------------------------- up
    def up(self, log=print, timeout: float = 120.0) -> None:
        self._check_cluster()
        if self.pid() is not None and self.system_mode() == "NORMAL":
            return
        self.down()
        hadoop = jars.hadoop_version()  # the local cluster's: written only in its pom
        oozie = oozie_artifacts(jars.resolve_closure(POM, oozie_jar_dir(), "Oozie", f"{OOZIE_VERSION}+hadoop-{hadoop}",
                                                     log=log, layout=True, properties={"hadoop.version": hadoop}))
        classpath = [*server_classpath(oozie, hadoop_artifacts(jars.ensure_jars(log=log))), self.webroot]
        for path in (self.conf_dir / "action-conf", self.data_dir, self.log_dir, self.home / "tmp"):
            path.mkdir(parents=True, exist_ok=True)
        if not self.settings_file.exists():
            self.settings_file.write_text(json.dumps({"port": free_ports(1)[0]}) + "\n")
        self._write_conf()
        self._write_webroot(webapp_archive(oozie))
        self._write_cli(classpath)
        if not (self.data_dir / "oozie-db").exists():
            log("Creating Oozie's Derby database ...")
            self._java(classpath, "org.apache.oozie.tools.OozieDBCLI", "create", "-run", out="oozie-db.out")
        self._upload_sharelib(sharelib_jars(oozie), log)
        out = (self.log_dir / "oozie.out").open("w")
        proc = subprocess.Popen(self._java_cmd(classpath, MAIN_CLASS), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=self._env(), start_new_session=True, cwd=self.home)
        out.close()
        self.pid_file.write_text(f"{proc.pid}\n")
        deadline = time.monotonic() + timeout
        while self.system_mode() != "NORMAL":
            if proc.poll() is not None:
                raise ClusterError(f"the Oozie server exited ({proc.returncode}): {self._tail()}")
            if time.monotonic() > deadline:
                self.down()
                raise ClusterError(f"the Oozie server did not answer within {timeout:.0f}s: {self._tail()}")
            time.sleep(0.5)

    def down(self) -> None:
        stop_from_file(self.pid_file, MAIN_CLASS.encode(), grace=20.0)

    def _check_cluster(self) -> None:
        cluster = self.cluster
        if not cluster.exists() or not cluster.is_ready():
            raise UsageError(f"tony oozie server: the local cluster at {cluster.state_dir} is not running; "
                             "allowed: start it first (tony cluster up)")
        if cluster.secure or cluster.network is not None or cluster.settings.ha:
            raise UsageError("tony oozie server: runs on a plain local cluster; allowed: one started without "
                             "--secure, --ha and --nodes")

    # -------------------------------------------------------------- its files
    def _write_conf(self) -> None:
        # the one in oozie-core's jar logs everything to stdout at DEBUG: INFO into logs/oozie.log instead
        (self.conf_dir / "oozie-log4j.properties").write_text(LOG4J)
        write_site(self.conf_dir / "oozie-site.xml", {
            "oozie.http.hostname": HOST,
            "oozie.http.port": self.port,
            "oozie.base.url": f"http://{HOST}:{self.port}/oozie",
            "oozie.service.HadoopAccessorService.hadoop.configurations": f"*={self.cluster.conf_dir}",
            "oozie.service.WorkflowAppService.system.libpath": self.system_libpath,
        })

    def _write_webroot(self, war: Path) -> None:
        """The war's static files as the class path resource `webapp/` (WebRootResourceLocator); written
        beside it and renamed, so a start cut short leaves none rather than part of it."""
        target = self.webroot / "webapp"
        if target.is_dir():
            return
        staging = self.webroot / "webapp.partial"
        shutil.rmtree(staging, ignore_errors=True)
        with zipfile.ZipFile(war) as archive:
            for name in archive.namelist():
                if name == "WEB-INF/web.xml" or name.startswith("WEB-INF/lib/") or name.endswith("/"):
                    continue
                path = staging / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(archive.read(name))
        staging.rename(target)

    def _write_cli(self, classpath: list[Path]) -> None:
        """`<home>/bin/oozie`: Oozie's own command line (OozieCLI) for this server, logging warnings only."""
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        quiet = self.conf_dir / "cli-log4j.properties"
        quiet.write_text("log4j.rootLogger=WARN, stderr\nlog4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
                         "log4j.appender.stderr.target=System.err\n"
                         "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
                         "log4j.appender.stderr.layout.ConversionPattern=%p %c{2}: %m%n\n")
        java = find_java_home() / "bin" / "java"
        script = self.bin_dir / "oozie"
        script.write_text(
            "#!/usr/bin/env bash\n# Generated by `tony oozie server up`: Oozie's CLI for the local server.\n"
            f"export OOZIE_URL=\"${{OOZIE_URL:-{self.url}}}\"\n"
            f"exec {shlex.quote(str(java))} {' '.join(ADD_OPENS)} -Dlog4j.configuration=file:{shlex.quote(str(quiet))} "
            f"-cp {shlex.quote(':'.join(map(str, classpath)))} org.apache.oozie.cli.OozieCLI \"$@\"\n")
        script.chmod(0o755)

    def _upload_sharelib(self, jar_paths: list[Path], log) -> None:
        """The launcher's jars into `<libpath>/lib_<timestamp>/oozie/`, once: the newest lib_ is Oozie's."""
        from tony_airflow.yarn.hdfs import webhdfs

        fs = webhdfs(HadoopConf.load(self.cluster.conf_dir))
        root = self.system_libpath
        names = sorted(p.name for p in jar_paths)
        existing = sorted(p for p in (fs.ls(root, detail=False) if fs.exists(root) else [])
                          if p.rsplit("/", 1)[-1].startswith("lib_"))
        if existing and sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{existing[-1]}/oozie", detail=False)) == names:
            return
        target = f"{root}/lib_{time.strftime('%Y%m%d%H%M%S')}/oozie"
        log(f"Uploading Oozie's sharelib to {target} ...")
        fs.makedirs(target, exist_ok=True)
        for path in jar_paths:
            fs.put_file(str(path), f"{target}/{path.name}")

    # ------------------------------------------------------------------ java
    def _env(self) -> dict[str, str]:
        env = {**os.environ, **self.cluster.env()}
        env["JAVA_HOME"] = str(find_java_home())
        return env

    def _java_cmd(self, classpath: list[Path], main_class: str, *args: str) -> list[str]:
        return [
            str(find_java_home() / "bin" / "java"), f"-Xmx{HEAP_MB}m", *ADD_OPENS,
            f"-Doozie.home.dir={self.home}", f"-Doozie.config.dir={self.conf_dir}",
            f"-Doozie.data.dir={self.data_dir}", f"-Doozie.log.dir={self.log_dir}",
            f"-Djava.io.tmpdir={self.home / 'tmp'}",
            "-cp", ":".join(map(str, classpath)), main_class, *args,
        ]

    def _java(self, classpath: list[Path], main_class: str, *args: str, out: str) -> None:
        log_file = self.log_dir / out
        with log_file.open("w") as sink:
            rc = subprocess.run(self._java_cmd(classpath, main_class, *args), stdout=sink, stderr=subprocess.STDOUT,
                                env=self._env(), cwd=self.home, timeout=300).returncode
        if rc != 0:
            raise ClusterError(f"{main_class} {' '.join(args)} failed (exit {rc}); see {log_file}")

    def _tail(self) -> str:
        for name in ("oozie.log", "oozie.out"):
            path = self.log_dir / name
            if path.exists():
                lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
                errors = [ln for ln in lines if "ERROR" in ln or "Exception" in ln]
                return (errors or lines or [""])[-1][:400] + f" (see {path})"
        return f"see {self.log_dir}"
