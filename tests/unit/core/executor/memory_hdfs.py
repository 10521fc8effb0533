"""An in-memory HDFS with HDFS's visible rules, one WebHDFS request at a time, for the output's tests.

What it keeps of HDFS (the NameNode's FSDirectory rules, as WebHDFS shows them):
- a CREATE empties the file at once and its data arrives in 4 MiB pieces, each visible to readers (an
  APPEND likewise); CREATE with overwrite=false fails when the path exists, in one step;
- a path is a file or a directory: a file cannot be made under a file, nor where a directory is;
  MKDIRS fails where a file is in the way; RENAME with OVERWRITE replaces a file, never a directory,
  and fails when its source is gone; DELETE of a non-empty directory needs recursive;
- every request can fail: the link lost after any step (`cut_after`), or `before(step)` runs first
  (another writer's action in the middle of this one's round, or a request that fails).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tony_airflow.yarn.hdfs import RemoteFile, is_part

PIECE = 4 << 20  # WebHDFS's DataNode writes show up in pieces of this size (fsspec's block)


class LinkDown(OSError):
    def __init__(self) -> None:
        super().__init__(113, "No route to host")


class HdfsRefused(RuntimeError):
    """What fsspec raises for a RemoteException it does not map (ParentNotDirectory, FileAlreadyExists…)."""


class MemoryHDFS:
    """OutputFiles in memory, with HDFS's rules and WebHDFS's visible effects one step at a time."""

    def __init__(self, cut_after: int | None = None) -> None:
        self.files: dict[str, bytes] = {}
        self.mtimes: dict[str, int] = {}
        self.dirs: set[str] = {"/"}
        self.steps = 0
        self.cut_after = cut_after
        self.clock = 0
        self.ops: list[str] = []
        self.before: Callable[[str, str], None] | None = None  # (op, path) -> may raise, or act as another client

    def copy(self, cut_after: int | None = None) -> MemoryHDFS:
        other = MemoryHDFS(cut_after)
        other.files, other.mtimes, other.clock, other.dirs = dict(self.files), dict(self.mtimes), self.clock, set(
            self.dirs)
        return other

    # ------------------------------------------------------------ the rules
    def _step(self, op: str, path: str = "") -> None:
        if self.cut_after is not None and self.steps >= self.cut_after:
            raise LinkDown()
        if self.before is not None:
            hook, self.before = self.before, None  # not re-entered by what the hook does
            try:
                hook(op, path)
            finally:
                self.before = hook
        self.steps += 1
        self.ops.append(op)

    def _parents(self, path: str) -> list[str]:
        parts = path.strip("/").split("/")[:-1]
        return ["/" + "/".join(parts[:n]) for n in range(1, len(parts) + 1)]

    def _make_parents(self, path: str) -> None:
        for parent in self._parents(path):
            if parent in self.files:
                raise HdfsRefused(f"ParentNotDirectoryException: {parent} (is not a directory)")
            self.dirs.add(parent)

    def _write(self, path: str, data: bytes) -> None:
        """Set a file's bytes (also the tests' way of putting a file there)."""
        self._make_parents(path)
        self.files[path] = data
        self.clock += 1
        self.mtimes[path] = self.clock

    def is_dir(self, path: str) -> bool:
        return path in self.dirs or any(p.startswith(path.rstrip("/") + "/") for p in self.files)

    # ------------------------------------------------------------ OutputFiles
    def list(self, root: str) -> dict[str, RemoteFile]:
        self._step("list", root)
        return {p: RemoteFile(len(b), self.mtimes[p]) for p, b in self.files.items() if p.startswith(root + "/")}

    def entries(self, directory: str) -> dict[str, RemoteFile]:
        self._step("entries", directory)
        prefix = directory.rstrip("/") + "/"
        return {p: RemoteFile(len(b), self.mtimes[p]) for p, b in self.files.items()
                if p.startswith(prefix) and "/" not in p[len(prefix):]}

    def names(self, directory: str) -> list[str]:
        self._step("names", directory)
        prefix = directory.rstrip("/") + "/"
        found = {prefix + p[len(prefix):].split("/")[0] for p in [*self.files, *self.dirs] if p.startswith(prefix)}
        return sorted(found)

    def read(self, path: str, start: int = 0) -> bytes:
        self._step("read", path)
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path][start:]

    def download(self, path: str, local: str) -> None:
        Path(local).write_bytes(self.read(path))

    def create(self, path: str, data) -> None:
        payload = data if isinstance(data, bytes) else data.read()
        self._step("create", path)
        if self.is_dir(path):
            raise HdfsRefused(f"FileAlreadyExistsException: {path} is a directory")
        self._write(path, b"")
        for i in range(0, len(payload), PIECE):
            self._step("piece", path)
            if path not in self.files:
                raise FileNotFoundError(f"LeaseExpiredException: {path} was deleted while written")
            self.files[path] += payload[i:i + PIECE]
            self.clock += 1
            self.mtimes[path] = self.clock

    def create_new(self, path: str, data: bytes) -> None:
        self._step("create_new", path)
        if path in self.files or self.is_dir(path):
            raise FileExistsError(path)
        self._write(path, data)

    def append(self, path: str, data: bytes) -> None:
        self._step("append", path)
        if path not in self.files:
            raise FileNotFoundError(path)
        for i in range(0, len(data), PIECE):
            self._step("piece", path)
            self._write(path, self.files[path] + data[i:i + PIECE])

    def rename_over(self, source: str, destination: str) -> None:
        self._step("rename", destination)
        if source not in self.files:
            raise FileNotFoundError(source)
        if self.is_dir(destination):
            raise HdfsRefused(f"rename destination {destination} is a directory")
        self._make_parents(destination)
        self.files[destination] = self.files.pop(source)
        self.mtimes[destination] = self.mtimes.pop(source)

    def delete(self, path: str, recursive: bool = False) -> None:
        self._step("delete", path)
        below = [p for p in self.files if p.startswith(path.rstrip("/") + "/")]
        if below and not recursive:
            raise HdfsRefused(f"PathIsNotEmptyDirectoryException: {path} is non empty")
        for p in below:
            self.files.pop(p)
            self.mtimes.pop(p)
        self.dirs = {d for d in self.dirs if d != path and not d.startswith(path.rstrip("/") + "/")}
        self.files.pop(path, None)
        self.mtimes.pop(path, None)

    def mkdirs(self, path: str) -> None:
        self._step("mkdirs", path)
        if path in self.files:
            raise HdfsRefused(f"ParentNotDirectoryException: {path}")
        self._make_parents(path + "/x")

    # ------------------------------------------------------------ for assertions
    def visible(self, root: str = "/out") -> dict[str, bytes]:
        """What a reader takes: every file but those under a temporary name and the writers' marks."""
        return {p[len(root) + 1:]: b for p, b in self.files.items()
                if p.startswith(root + "/") and not is_part(p) and "/.tony-writer" not in p}
