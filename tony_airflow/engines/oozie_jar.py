"""The jar of tony-airflow's Oozie `<java>` action (`tony oozie jar DIR`).

Its one class, `tony.oozie.ActionMain` (oozie_java/, shipped as source), runs the Oozie entry point as the
shell action does, but fails with the command's one-line reason as its exception message, which Oozie's
launcher makes the action's error message: a shell action can only say "Main Class [ShellMain], exit code
[1]". It needs nothing but the JDK, so it is compiled here with javac for Java 8 (any Oozie 5's JVM).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from tony_airflow.errors import UsageError
from tony_airflow.files import whole_file

MAIN_CLASS = "tony.oozie.ActionMain"
JAR_NAME = "tony-oozie-action.jar"
SOURCE = Path(__file__).parent / "oozie_java" / "tony" / "oozie" / "ActionMain.java"
JAVA_RELEASE = "8"
MANIFEST = "Manifest-Version: 1.0\r\nCreated-By: tony-airflow\r\n\r\n"


def javac() -> str:
    """javac of JAVA_HOME, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    in_home = Path(home) / "bin" / "javac" if home else None
    found = str(in_home) if in_home and in_home.exists() else shutil.which("javac")
    if not found:
        raise UsageError("javac: not found; allowed: a JDK (8 or later) on PATH or in JAVA_HOME: "
                         "the action's jar is compiled from tony-airflow's source")
    return found


def build_jar(dest_dir: Path) -> Path:
    """`dest_dir/tony-oozie-action.jar`, written whole or not at all (a temporary name, then a rename)."""
    if dest_dir.exists() and not dest_dir.is_dir():
        raise UsageError(f"DIR: {dest_dir} is a file; allowed: a directory (made if missing), e.g. the "
                         "workflow application's lib/")
    dest_dir.mkdir(parents=True, exist_ok=True)
    jar = dest_dir / JAR_NAME
    with tempfile.TemporaryDirectory(prefix="tony-oozie-jar-") as tmp:
        classes = Path(tmp) / "classes"
        proc = subprocess.run([javac(), "--release", JAVA_RELEASE, "-Xlint:-options", "-encoding", "UTF-8",
                               "-d", str(classes), str(SOURCE)], capture_output=True, text=True)
        if proc.returncode != 0:
            first = next((line for line in proc.stderr.splitlines() if line.strip()), f"exit code {proc.returncode}")
            raise UsageError(f"javac: {SOURCE.name} did not compile: {first.strip()}")
        with whole_file(jar) as partial, zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as out:
            out.writestr("META-INF/MANIFEST.MF", MANIFEST)
            for cls in sorted(classes.rglob("*.class")):
                out.write(cls, cls.relative_to(classes).as_posix())
    return jar
