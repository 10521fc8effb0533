"""tf-yarn's packed environment: one pex of `.venv-tfyarn`, built once and uploaded to HDFS once.

tf-yarn ships its Python to the containers as an archive (cluster-pack builds a pex of the
submitting environment); its users upload it once and name it in `pyenv_zip_path`. The pex is
built from that venv's pinned requirements (`pip freeze`; resolving tf-yarn's own loose ones
picks a TensorBoard TensorFlow 2.15 refuses), cached under ~/.cache by their digest. Containers
unpack it into one PEX_ROOT (runner.PEX_ROOT), so only a host's first run pays the unpacking.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from tony_airflow.yarn.hdfs import create_file, webhdfs

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tony-airflow" / "peers" / "tfyarn"


class PackError(RuntimeError):
    pass


def own_environ() -> dict[str, str]:
    """The environment for the venv's own tools: without PYTHONPATH, whose packages (a checkout's
    egg-info) `pip freeze` would list as the venv's and pex could not resolve."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def requirements(python: str) -> list[str]:
    frozen = subprocess.run([python, "-m", "pip", "freeze", "--exclude-editable"], check=True,
                            capture_output=True, text=True, env=own_environ()).stdout.split()
    return sorted(r for r in frozen if not r.lower().startswith("pex=="))


def build_pex(python: str) -> Path:
    """The pex of `python`'s environment (made once per set of pinned requirements)."""
    reqs = requirements(python)
    digest = hashlib.sha256("\n".join(reqs).encode()).hexdigest()[:16]
    pex = CACHE / f"tfyarn-{digest}.pex"
    if pex.exists():
        return pex
    CACHE.mkdir(parents=True, exist_ok=True)
    listing = CACHE / f"tfyarn-{digest}.txt"
    listing.write_text("\n".join(reqs) + "\n")
    part = pex.with_suffix(".pex.part")
    # --intransitive: the frozen list is the whole environment (tf-keras alone would pull in `tensorflow`,
    # the GPU build, which the venv does not have)
    done = subprocess.run([str(Path(python).parent / "pex"), "-r", str(listing), "--intransitive",
                           "--inherit-path=fallback", "-o", str(part)], capture_output=True, text=True,
                          env=own_environ())
    if done.returncode != 0:
        raise PackError(f"pex failed: {(done.stderr or done.stdout).strip()[-1000:]}")
    part.rename(pex)
    return pex


def uploaded(pex: Path) -> str:
    """The pex on HDFS (`~/.tony-airflow/peers/`), uploaded when missing or of another size."""
    fs = webhdfs()
    path = f"{fs.home_directory()}/.tony-airflow/peers/{pex.name}"
    size = pex.stat().st_size
    try:
        if int(fs.info(path)["length"]) == size:
            return f"hdfs://{path}"
    except FileNotFoundError:
        pass
    with pex.open("rb") as data:
        create_file(fs, path, data)
    return f"hdfs://{path}"
