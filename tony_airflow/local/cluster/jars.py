"""The Hadoop jar closure, resolved from Maven Central by the pom.xml beside this file.

The Hadoop version is read from that pom, so it is written down in one place.
Jars land in a cache outside git and are resolved once per version.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from tony_airflow.errors import ClusterError, UsageError
from tony_airflow.files import replace_dir, whole_dir
from tony_airflow.yarn.discovery import cache_root

POM = Path(__file__).with_name("pom.xml")
_MAVEN_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
_COMPLETE_MARKER = ".complete"


def hadoop_version() -> str:
    """The `hadoop.version` property of the pom."""
    node = ET.parse(POM).getroot().find("m:properties/m:hadoop.version", _MAVEN_NS)
    version = (node.text or "").strip() if node is not None else ""
    if not version:
        raise ClusterError(f"{POM} has no <hadoop.version> property")
    return version


def jar_dir() -> Path:
    return cache_root() / f"hadoop-{hadoop_version()}" / "lib"


def _pom_digest(pom: Path = POM) -> str:
    """The cache is complete for this pom only: a dependency added to it resolves again."""
    return hashlib.sha256(pom.read_bytes()).hexdigest()[:16]


def ensure_jars(log=print) -> Path:
    """Resolve the jar closure with Maven unless a complete copy for this pom is cached."""
    return resolve_closure(POM, jar_dir(), "Hadoop", hadoop_version(), log=log)


def resolve_closure(pom: Path, target: Path, what: str, version: str, log=print, layout: bool = False,
                    properties: dict[str, str] | None = None) -> Path:
    """`mvn dependency:copy-dependencies` of `pom` into `target` unless a complete copy for this pom (and
    `version`) is there; written beside it and renamed, so `target` is whole or absent. `layout`: Maven's
    repository layout (group/artifact/version/), for a caller that must tell artifacts apart by name;
    `properties`: -D properties of the pom."""
    marker = target / _COMPLETE_MARKER
    stamp = [version, _pom_digest(pom)]
    if marker.exists() and marker.read_text().split() == stamp:
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise UsageError(f"maven: 'mvn' not found on PATH; Maven 3 is needed once to resolve the {what} jars")
    staging = whole_dir(target)  # its own: two resolutions at once do not share one
    log(f"Resolving {what} {version} jars from Maven Central into {target} ...")
    try:
        proc = subprocess.run(
            [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
             f"-DoutputDirectory={staging}", "-DincludeScope=runtime",
             *(["-Dmdep.useRepositoryLayout=true"] if layout else []),
             *(f"-D{key}={value}" for key, value in (properties or {}).items())],
            capture_output=True, text=True,
        )
    except OSError as exc:
        raise ClusterError(f"maven: could not run {mvn}: {exc}") from None
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        raise ClusterError(f"maven: could not resolve the {what} jars: " + " | ".join(tail))
    (staging / _COMPLETE_MARKER).write_text(" ".join(stamp) + "\n")
    replace_dir(staging, target)
    return target
