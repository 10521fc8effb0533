"""`tony image build`: the image the local cluster's tasks run in, made here (no registry is reachable).

A Debian root file system (debootstrap, Debian's packages) with Python, and the project's own
TensorFlow, Keras, TensorBoard and scikit-learn versions from PyPI installed into it by this
machine's pip (its wheel cache makes a rebuild quick); imported into the engine as
`tony-airflow/tensorflow:<version>`. Built once per set of inputs: the image carries their digest
as a label, and the root file system is kept as a tarball, so a second engine only imports it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from tony_airflow import __version__
from tony_airflow.errors import ClusterError, UsageError
from tony_airflow.files import whole_file

IMAGE = f"tony-airflow/tensorflow:{__version__}"
SUITE = "bookworm"  # its python3 is 3.11, the project's
MIRROR = "http://deb.debian.org/debian"
DEBIAN_PACKAGES = ("python3", "bash", "procps", "ca-certificates")
PYTHON_PACKAGES = ("tensorflow-cpu", "tf_keras", "tensorboard", "scikit-learn")
MARKER = "/etc/tony-airflow-image"  # only the image has it: what a task reads to know where it runs
INPUTS_LABEL = "org.tony-airflow.image-inputs"
SITE = "usr/local/lib/python3.11/dist-packages"  # on Debian python3's path, apart from Debian's own packages


def cache_dir() -> Path:
    return Path.home() / ".cache" / "tony-airflow" / "images"


def python_requirements() -> list[str]:
    """The versions this installation has (pyproject's `tensorflow` extra), pinned exactly."""
    pins = []
    for name in PYTHON_PACKAGES:
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            raise UsageError(f"tony image build: {name} is not installed here; allowed: an environment with "
                             "the 'tensorflow' extra (make venv)") from None
    return pins


def inputs_digest(requirements: list[str]) -> str:
    text = json.dumps({"suite": SUITE, "mirror": MIRROR, "debian": DEBIAN_PACKAGES, "python": requirements,
                       "image": IMAGE, "site": SITE}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def built_digest(engine: str, image: str = IMAGE) -> str:
    done = subprocess.run([engine, "image", "inspect", "--format", f'{{{{index .Config.Labels "{INPUTS_LABEL}"}}}}',
                           image], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    return done.stdout.strip() if done.returncode == 0 else ""


def prepare(log: Callable[[str], None] = print, force: bool = False) -> tuple[Path, str]:
    """The root file system's tarball (made when absent or `force`) and its inputs' digest: the slow part,
    which needs no engine (the tests start it early, beside other work)."""
    requirements = python_requirements()
    digest = inputs_digest(requirements)
    tarball = cache_dir() / f"rootfs-{digest}.tar"
    if force or not tarball.exists():
        _root_filesystem(tarball, requirements, digest, log)
    return tarball, digest


def build(engine: str = "docker", log: Callable[[str], None] = print, force: bool = False) -> str:
    """The image in `engine`, built or imported only when its inputs changed; returns its name."""
    if shutil.which(engine) is None:
        raise ClusterError(f"tony image build: {engine} is not installed")
    digest = inputs_digest(python_requirements())
    if not force and built_digest(engine) == digest:
        log(f"{IMAGE} is up to date in {engine} (inputs {digest})")
        return IMAGE
    tarball, digest = prepare(log, force)
    log(f"[3/3] importing into {engine}")
    started = time.monotonic()
    with open(tarball, "rb") as data:
        done = subprocess.run([engine, "import", "--change", f"LABEL {INPUTS_LABEL}={digest}",
                               "--change", 'CMD ["/bin/bash"]', "-", IMAGE], stdin=data, capture_output=True,
                              text=True, timeout=1800)
    if done.returncode != 0:
        raise ClusterError(f"tony image build: {engine} import failed: {done.stderr.strip().splitlines()[-1:]}")
    log(f"{IMAGE} built in {engine} ({time.monotonic() - started:.0f}s to import)")
    return IMAGE


def _root_filesystem(tarball: Path, requirements: list[str], digest: str, log: Callable[[str], None]) -> None:
    if shutil.which("debootstrap") is None:
        raise ClusterError("tony image build: debootstrap is not installed; install Debian's debootstrap "
                           "(make test does)")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rootfs-", dir=tarball.parent) as tmp:
        root = Path(tmp) / "root"
        log(f"[1/3] debootstrap {SUITE} with {', '.join(DEBIAN_PACKAGES)}")
        _step(["debootstrap", "--variant=minbase", f"--include={','.join(DEBIAN_PACKAGES)}", SUITE, str(root),
               MIRROR], "debootstrap")
        log(f"[2/3] pip install {' '.join(requirements)}")
        _step([sys.executable, "-m", "pip", "install", "-q", "--no-warn-script-location", "--target",
               str(root / SITE), *requirements], "pip install")
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(root / cache, ignore_errors=True)
        (root / MARKER.lstrip("/")).write_text(f"{IMAGE}\ninputs {digest}\n")
        with whole_file(tarball) as partial:  # whole or absent: an interrupted build starts again
            _step(["tar", "-C", str(root), "-cf", str(partial), "."], "tar")
    for old in tarball.parent.glob("rootfs-*.tar"):
        if old != tarball:
            old.unlink(missing_ok=True)


def _step(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["(no output)"]
        raise ClusterError(f"tony image build: {what} failed (exit code {done.returncode}): {last[0][:300]}")
