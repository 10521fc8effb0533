"""libhadoop.so for the secure local cluster, unpacked from the artifact native-pom.xml names.

Only a Kerberos cluster needs it (SecureIOUtils, behind log aggregation and the
NodeManager's container-log pages); the plain cluster runs without native code as before.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

from tony_airflow.errors import ClusterError, UsageError
from tony_airflow.local.cluster.jars import jar_dir

POM = Path(__file__).with_name("native-pom.xml")
_ARCH = {"x86_64": "Linux-amd64", "amd64": "Linux-amd64", "aarch64": "Linux-aarch64", "arm64": "Linux-aarch64",
         "ppc64le": "Linux-ppc64le"}


def native_dir() -> Path:
    return jar_dir().with_name("native")


def ensure_native(log=print) -> Path:
    """The directory holding libhadoop.so (for -Djava.library.path), unpacked once."""
    target = native_dir()
    if (target / "libhadoop.so").exists():
        return target
    arch = _ARCH.get(platform.machine().lower())
    if platform.system() != "Linux" or arch is None:
        raise UsageError(f"--secure: no libhadoop.so for {platform.system()} {platform.machine()}; "
                         f"allowed: Linux on {', '.join(sorted(set(_ARCH)))}")
    mvn = shutil.which("mvn")
    if mvn is None:
        raise UsageError("maven: 'mvn' not found on PATH; Maven 3 is needed once to fetch libhadoop.so")
    staging = target.with_name("native.partial")
    shutil.rmtree(staging, ignore_errors=True)
    log("Fetching Hadoop's native library (libhadoop.so) from Maven Central ...")
    proc = subprocess.run(
        [mvn, "-q", "-B", "-f", str(POM), "dependency:unpack-dependencies", f"-DoutputDirectory={staging}",
         f"-Dmdep.unpack.includes=nativelib/{arch}/libhadoop.so",
         f"-DmarkersDirectory={staging / 'markers'}"],  # not into a target/ beside the pom
        capture_output=True, text=True,
    )
    found = staging / "nativelib" / arch / "libhadoop.so"
    if proc.returncode != 0 or not found.exists():
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        raise ClusterError("maven: could not fetch libhadoop.so: " + (" | ".join(tail) or "not in the artifact"))
    target.mkdir(parents=True, exist_ok=True)
    shutil.move(str(found), target / "libhadoop.so")
    shutil.rmtree(staging, ignore_errors=True)
    return target
