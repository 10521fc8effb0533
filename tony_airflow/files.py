"""Local files whole or absent, whoever else writes the same one at the same moment.

A fixed temporary name (`<target>.part`, `<target>.tmp`) is shared by two processes writing one target
(two `tony image build`s, two Azkaban jobs of one flow, two tasks staging one truststore): each truncates
the other's. A name of its own for each writer (`tempfile.mkstemp` beside the target, so that the rename
stays on one filesystem) and one `os.replace` leave the target one writer's whole version.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def whole_file(target: Path | str) -> Iterator[Path]:
    """A temporary path beside `target` to write; renamed over `target` when the block ends well,
    removed when it raises."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.fchmod(fd, 0o666 & ~umask())  # what open() would have given it (mkstemp's is 0600)
    os.close(fd)
    partial = Path(name)
    try:
        yield partial
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def write_whole(target: Path | str, data: bytes | str) -> None:
    with whole_file(target) as partial:
        if isinstance(data, str):
            partial.write_text(data)
        else:
            partial.write_bytes(data)


def whole_dir(target: Path) -> Path:
    """A fresh temporary directory beside `target` (its own, whoever else makes one now) to fill and
    then `replace_dir` into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    made = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    made.chmod(0o777 & ~umask())  # what mkdir would have given it (mkdtemp's is 0700)
    return made


def umask() -> int:
    """The process's umask, read without changing it (Linux's /proc; 022 elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


def replace_dir(staging: Path, target: Path) -> None:
    """Put a filled directory at `target`: what was there goes; if another writer put its own there in the
    meantime, theirs stays and this one goes (both are whole)."""
    import shutil

    if target.exists():
        shutil.rmtree(target, ignore_errors=True)
    try:
        staging.rename(target)
    except OSError:  # another writer's whole directory arrived first
        shutil.rmtree(staging, ignore_errors=True)
