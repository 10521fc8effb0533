"""Finding Java 17, and every JVM flag the project passes (Hadoop's daemons, skein's driver and AM).

One place for them: the local cluster's daemons and the client's skein driver both read it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tony_airflow.errors import UsageError

# Hadoop 3.4 predates Java 17's strong encapsulation: Guice, Jersey 1, the
# shaded protobuf and the IPC layer reach into these packages by reflection.
ADD_OPENS = [
    f"--add-opens=java.base/{pkg}=ALL-UNNAMED"
    for pkg in (
        "java.lang", "java.lang.invoke", "java.lang.reflect", "java.io", "java.net",
        "java.nio", "java.util", "java.util.concurrent", "java.util.concurrent.atomic",
        "java.util.regex", "java.text", "java.math", "java.security", "javax.crypto",
        "sun.nio.ch", "sun.nio.cs", "sun.security.action", "sun.security.util",
        "sun.util.calendar", "sun.net.dns", "sun.net.util",
    )
] + ["--add-opens=java.security.jgss/sun.security.krb5=ALL-UNNAMED"]

# skein's driver (a gRPC proxy each submitting process starts) and skein's Java AM are small JVMs on
# every job's start-up path: C1 only and the serial collector start them ~0.25 s sooner and leave
# more CPU to the job (bench.launch_latency).
LIGHT_JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]


def find_java_home() -> Path:
    """JAVA_HOME if set and usable, else the JDK behind `java` on PATH."""
    env = os.environ.get("JAVA_HOME")
    if env:
        home = Path(env)
        if not (home / "bin" / "java").exists():
            raise UsageError(f"JAVA_HOME: {env} has no bin/java; point it at a Java 17 JDK or unset it")
        return home
    java = shutil.which("java")
    if java is None:
        raise UsageError("java: not found; install Java 17 or set JAVA_HOME to a Java 17 JDK")
    return Path(java).resolve().parent.parent


def java_major_version(java_home: Path) -> int:
    out = subprocess.run([str(java_home / "bin" / "java"), "-version"],
                         capture_output=True, text=True).stderr
    # e.g. 'openjdk version "17.0.15" 2025-04-15'
    for token in out.split():
        token = token.strip('"')
        if token[:1].isdigit():
            major = token.split(".")[0]
            return int(major if major != "1" else token.split(".")[1])
    raise UsageError(f"java: cannot read the version of {java_home}/bin/java")


def check_java(java_home: Path) -> None:
    major = java_major_version(java_home)
    if major < 11:
        raise UsageError(f"java: {java_home} is Java {major}; Java 11 or newer is needed (17 is tested)")
