"""The Oozie server's class path: Oozie 5.2.1's closure merged with the local cluster's Hadoop jars.

Oozie 5.2.1 was built against Hadoop 2 and ships old copies of libraries Hadoop 3.4 ships newer. The
rule, found by running the server against the local cluster (issue #33):
- where both ship an artifact, Hadoop's newer copy is taken (Guava, ZooKeeper, Curator, Jackson, ...),
  except Jetty: Oozie's embedded server is written against Jetty 9.3, so its `org.eclipse.jetty`
  artifacts are kept and Hadoop's 9.4 copies of them left out; Hadoop's Jetty artifacts that Oozie does
  not have stay (its YARN client needs the websocket-api/-client/-common 9.4 jars:
  `NoClassDefFoundError: org/eclipse/jetty/websocket/api/WebSocketException` otherwise);
- Hadoop's `jsp-api-2.1` is dropped: its `javax.el` (EL 2.1) hides Oozie's EL 3.0, which Oozie's
  workflow EL evaluator needs;
- `javax.servlet:servlet-api:2.5` is dropped (Servlet 3.1 is Jetty 9.3's), and Oozie's SLF4J binding
  (`slf4j-log4j12`), so that Hadoop's is the one;
- Oozie's web application archive is not a class path entry: its static files are the web root.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

JETTY_GROUP = "org.eclipse.jetty"
# Servlet 2.5 (Jetty 9.3 is 3.1); Oozie's SLF4J binding beside Hadoop's (one binding, Hadoop's reload4j)
DROPPED = {("javax.servlet", "servlet-api"), ("org.slf4j", "slf4j-log4j12")}
# Hadoop's JSP 2.1 API, whose javax.el is EL 2.1: Oozie's EL evaluator needs EL 3.0 (its apache-el), else
# `NoSuchMethodError: javax.el.ExpressionFactory.newInstance()` at the first workflow submitted
HADOOP_DROPPED = {"jsp-api"}
WEBAPP = ("org.apache.oozie", "oozie-webapp")
# `artifact-version[-classifier].jar`, the version starting with a digit: how copy-dependencies names files
_FLAT = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d[^/]*)\.jar$")


@dataclass(frozen=True)
class Artifact:
    group: str  # "" when only the file name is known (the Hadoop jars are copied flat)
    artifact: str
    version: str
    path: Path


def oozie_artifacts(root: Path) -> list[Artifact]:
    """The jars and wars under `root`, copied in Maven's repository layout (group/artifact/version/file)."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".jar", ".war") or not path.is_file():
            continue
        parts = path.relative_to(root).parts
        if len(parts) < 4:
            continue
        found.append(Artifact(".".join(parts[:-3]), parts[-3], parts[-2], path))
    return found


def hadoop_artifacts(lib: Path) -> list[Artifact]:
    """The local cluster's jars, copied flat (`artifact-version.jar`)."""
    found = []
    for path in sorted(lib.glob("*.jar")):
        match = _FLAT.match(path.name)
        if match:
            found.append(Artifact("", match["artifact"], match["version"], path))
    return found


def server_classpath(oozie: list[Artifact], hadoop: list[Artifact]) -> list[Path]:
    """Hadoop's jars, less the Jetty ones Oozie brings, then Oozie's, less those Hadoop has newer."""
    hadoop_names = {a.artifact for a in hadoop}
    oozie_jetty = {a.artifact for a in oozie if a.group == JETTY_GROUP}
    kept_oozie = []
    for a in oozie:
        if (a.group, a.artifact) in DROPPED or (a.group, a.artifact) == WEBAPP:
            continue
        if a.group != JETTY_GROUP and a.artifact in hadoop_names:
            continue
        kept_oozie.append(a.path)
    kept_hadoop = [a.path for a in hadoop if a.artifact not in oozie_jetty and a.artifact not in HADOOP_DROPPED]
    return [*kept_hadoop, *kept_oozie]


def webapp_archive(oozie: list[Artifact]) -> Path:
    return next(a.path for a in oozie if (a.group, a.artifact) == WEBAPP)


def sharelib_jars(oozie: list[Artifact]) -> list[Path]:
    """What the `oozie` sharelib holds: the launcher (oozie-sharelib-oozie) and json-simple, which it
    writes its action data with."""
    wanted = {("org.apache.oozie", "oozie-sharelib-oozie"), ("com.googlecode.json-simple", "json-simple")}
    return [a.path for a in oozie if (a.group, a.artifact) in wanted]
