"""Build TonY from a checkout of tony-framework/TonY, outside this repository, for the benchmarks.

TonY is published on GitHub only, built with Gradle 4 (which does not run on Java 17) against
Hadoop 2 and an unshaded protobuf. This copies the parts `ClusterSubmitter` needs (tony-core's
main sources, schemas and resources, and the two submitter classes of tony-cli) from TONY_SRC
into `~/.cache/tony-airflow/peers/tony-<revision>`, adapts a handful of imports to Hadoop 3.4,
and builds one jar there with `bench/peers/tony/pom.xml`. No TonY code enters the repository.

    TONY_SRC=/path/to/TonY .venv/bin/python -m bench.peers.tony.adapt   # prints the jar's path
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

POM = Path(__file__).with_name("pom.xml")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tony-airflow" / "peers"
JAR = "target/tony-cli-all.jar"
# tony-cli's other submitters need tony-mini (a MiniYARNCluster) and tony-proxy: not built
CLI_CLASSES = ("ClusterSubmitter.java", "TonySubmitter.java")

# (pattern, replacement) over TonY's Java sources; each one a Hadoop 2 -> 3.4 or library move
REWRITES: tuple[tuple[str, str], ...] = (
    (r"\bcom\.google\.protobuf\b", "org.apache.hadoop.thirdparty.protobuf"),  # Hadoop's RPC: its shaded copy
    (r"\bProtobufRpcEngine\b", "ProtobufRpcEngine2"),  # the engine that speaks the shaded protobuf
    (r"\borg\.apache\.commons\.collections\.", "org.apache.commons.collections4."),
    (r"\borg\.apache\.commons\.lang\.", "org.apache.commons.lang3."),  # v0.5.3
    (r"\borg\.codehaus\.jackson\.map\.ObjectMapper\b", "com.fasterxml.jackson.databind.ObjectMapper"),
    (r"\borg\.codehaus\.jackson\.type\.TypeReference\b", "com.fasterxml.jackson.core.type.TypeReference"),
    # Azkaban's Hadoop jobtype plugin is not on Maven Central; TonY calls it only to load the
    # Azkaban-provided Hadoop configuration, which a plain cluster has in HADOOP_CONF_DIR
    (r"import azkaban\.[\w.]+;\n", ""),
    (r"HadoopConfigurationInjector\.injectResources\(new Props\(\)[^;]*\);", ";"),
)


class TonyBuildError(RuntimeError):
    pass


def source_tree() -> Path:
    """TONY_SRC, checked to be a TonY checkout."""
    given = os.environ.get("TONY_SRC")
    if not given:
        raise TonyBuildError("TONY_SRC is not set: set it to a checkout of https://github.com/tony-framework/TonY "
                             "(v0.5.3 or later), kept outside this repository")
    src = Path(given).expanduser()
    if not (src / "tony-core" / "src" / "main" / "java").is_dir():
        raise TonyBuildError(f"TONY_SRC={src} is not a TonY checkout (no tony-core/src/main/java)")
    return src


def revision(src: Path) -> str:
    """The checkout's commit, else a digest of its sources' names and sizes."""
    try:
        return subprocess.run(["git", "-C", str(src), "rev-parse", "--short=12", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        digest = hashlib.sha256()
        for path in sorted((src / "tony-core" / "src" / "main").rglob("*")):
            digest.update(f"{path.relative_to(src)}:{path.stat().st_size}".encode())
        return digest.hexdigest()[:12]


def adapt_java(text: str) -> str:
    for pattern, replacement in REWRITES:
        text = re.sub(pattern, replacement, text)
    return text


def copy_sources(src: Path, build: Path) -> None:
    main = build / "src" / "main"
    if main.exists():
        shutil.rmtree(main)
    shutil.copytree(src / "tony-core" / "src" / "main", main)
    cli_java = src / "tony-cli" / "src" / "main" / "java" / "com" / "linkedin" / "tony" / "cli"
    target = main / "java" / "com" / "linkedin" / "tony" / "cli"
    target.mkdir(parents=True, exist_ok=True)
    for name in CLI_CLASSES:
        shutil.copy2(cli_java / name, target / name)
    for java in main.rglob("*.java"):
        java.write_text(adapt_java(java.read_text()))


def build(quiet: bool = True) -> Path:
    """The built jar (made once per TonY revision)."""
    src = source_tree()
    where = CACHE / f"tony-{revision(src)}"
    jar = where / JAR
    if jar.exists():
        return jar
    where.mkdir(parents=True, exist_ok=True)
    copy_sources(src, where)
    command = ["mvn", "-B", *(["-q"] if quiet else []), "-f", str(POM), f"-Dtony.build={where}",
               "-DskipTests", "package"]
    done = subprocess.run(command, capture_output=quiet, text=True)
    if done.returncode != 0 or not jar.exists():
        tail = (done.stdout or "")[-3000:] if quiet else ""
        raise TonyBuildError(f"building TonY failed ({' '.join(command)}):\n{tail}")
    return jar


if __name__ == "__main__":
    try:
        print(build(quiet="-v" not in sys.argv))
    except TonyBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
