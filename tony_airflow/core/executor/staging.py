"""HDFS input and output for programs that only see a local filesystem.

TensorFlow 2.21 has no HDFS filesystem, so the executor stages: an `hdfs://`
input is copied to a local directory before the command starts; an `hdfs://`
output is mirrored — pulled once at start (so a later attempt resumes from the
checkpoints an earlier one wrote), then pushed every few seconds and once more
when the command ends by the task that owns the output (the chief), or pulled
every few seconds by readers (TensorBoard). The command sees local paths in
DTF_INPUT_PATH / DTF_OUTPUT_PATH and the original URIs in DTF_INPUT_URI /
DTF_OUTPUT_URI. Transfers go over WebHDFS (fsspec).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from pathlib import Path

from tony_airflow.yarn.hdfs import PART_SUFFIX, hdfs_path, replace_bytes, webhdfs

log = logging.getLogger("tony.executor.staging")
SYNC_INTERVAL_S = 5.0
CHECKPOINT_INDEX = "checkpoint"  # TensorFlow's CheckpointState: names the latest checkpoint in its directory
_LATEST = re.compile(r'^model_checkpoint_path:\s*"([^"]*)"', re.MULTILINE)
_SHARDS = re.compile(r"\.data-\d+-of-(\d+)$")


def is_hdfs(uri: str) -> bool:
    return uri.startswith("hdfs:")


class Mirror:
    """A local directory kept in step with one HDFS directory."""

    def __init__(self, uri: str, local: Path, fs=None):
        self.uri = uri
        self.remote = hdfs_path(uri).rstrip("/") or "/"
        self.local = local.absolute()
        self.fs = fs or webhdfs()
        self._pushed: dict[str, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def pull(self, while_written: bool = True) -> int:
        """Copy remote files that are missing or differ in size locally. Returns how many.

        `while_written`: the directory may be written to right now (an output), so a file
        HDFS shows empty is not copied yet; an input is complete, and its empty files
        (e.g. `_SUCCESS`) are copied too.
        """
        self.local.mkdir(parents=True, exist_ok=True)
        if not self.fs.exists(self.remote):
            return 0
        count = 0
        for remote_file, info in self.fs.find(self.remote, detail=True).items():
            if info.get("type") == "directory":
                continue
            rel = remote_file[len(self.remote):].lstrip("/")
            if rel.endswith(PART_SUFFIX):
                continue  # a replacement under way (replace_bytes)
            target = self.local / rel
            size = int(info.get("size") or 0)
            local_size = target.stat().st_size if target.exists() else 0
            if target.exists() and size == local_size:
                continue
            if size == 0 and while_written:
                continue  # not written yet, or the writer is uploading it again (HDFS shows 0 until done)
            events = ".tfevents." in target.name
            if events and size < local_size:
                continue  # an event file only grows: a shorter one is an upload under way
            target.parent.mkdir(parents=True, exist_ok=True)
            if events and 0 < local_size < size:
                # Event files only grow, and TensorBoard keeps reading the file it
                # opened: append the new tail in place instead of replacing the file.
                with target.open("ab") as fh:
                    fh.write(self.fs.cat_file(remote_file, start=local_size))
            else:
                tmp = target.with_name(target.name + PART_SUFFIX)
                self.fs.get_file(remote_file, str(tmp))
                os.replace(tmp, target)
            self._pushed[rel] = (target.stat().st_size, int(target.stat().st_mtime_ns))
            count += 1
        return count

    def push(self) -> int:
        """Upload local files that are new or changed since the last push. Returns how many.

        A later attempt restores from TensorFlow's `checkpoint` index, so an index reaches HDFS
        only after every file of the checkpoint it names, and whole (replace_bytes). It is read
        before the walk: one read after would name a checkpoint saved during the push, whose
        files the walk did not see."""
        indexes = self._read_indexes()
        count = 0
        for path in sorted(self.local.rglob("*")):
            if not path.is_file() or path.name.endswith(PART_SUFFIX) or path.name == CHECKPOINT_INDEX:
                continue
            try:
                stat = path.stat()
            except FileNotFoundError:  # written and deleted between the walk and now
                continue
            rel = str(path.relative_to(self.local))
            key = (stat.st_size, stat.st_mtime_ns)
            if self._pushed.get(rel) == key:
                continue
            remote = f"{self.remote}/{rel}"
            try:
                self.fs.makedirs(os.path.dirname(remote), exist_ok=True)
                self.fs.put_file(str(path), remote)
            except FileNotFoundError:  # a checkpoint TensorFlow dropped meanwhile (max_to_keep)
                continue
            self._pushed[rel] = key
            count += 1
        for rel, (data, key) in indexes.items():
            if self._pushed.get(rel) == key or not self._has_files_of(rel, data):
                continue  # unchanged, or its checkpoint's files come in a later round
            remote = f"{self.remote}/{rel}"
            self.fs.makedirs(os.path.dirname(remote), exist_ok=True)
            replace_bytes(self.fs, remote, data)
            self._pushed[rel] = key
            count += 1
        return count

    def _read_indexes(self) -> dict[str, tuple[bytes, tuple[int, int]]]:
        """Every `checkpoint` index under the directory: its bytes and the (size, mtime) before the read
        (TensorFlow replaces it by rename, so a read sees one whole version)."""
        indexes = {}
        for path in self.local.rglob(CHECKPOINT_INDEX):
            try:
                stat = path.stat()
                data = path.read_bytes()
            except (FileNotFoundError, IsADirectoryError):
                continue
            indexes[str(path.relative_to(self.local))] = (data, (stat.st_size, stat.st_mtime_ns))
        return indexes

    def _has_files_of(self, index_rel: str, data: bytes) -> bool:
        """Whether the checkpoint a `checkpoint` index names has its `.index` and every data shard on HDFS."""
        match = _LATEST.search(data.decode("utf-8", "replace"))
        if match is None:
            return True  # not TensorFlow's index: nothing it depends on
        named = match.group(1)
        if os.path.isabs(named):
            try:
                named = str(Path(named).relative_to(self.local))
            except ValueError:
                return True  # a checkpoint outside the mirrored directory: not ours to wait for
        else:
            named = os.path.normpath(os.path.join(os.path.dirname(index_rel), named))
        shards = {rel: _SHARDS.search(rel) for rel in self._pushed if rel.startswith(named + ".data-")}
        wanted = {int(m.group(1)) for m in shards.values() if m}
        return f"{named}.index" in self._pushed and len(wanted) == 1 and len(shards) == wanted.pop()

    def start(self, direction: str, interval: float = SYNC_INTERVAL_S) -> None:
        """Keep syncing in the background: direction 'push' (writer) or 'pull' (reader)."""
        step = self.push if direction == "push" else self.pull

        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    step()
                except Exception as exc:  # a transient WebHDFS error: try again next round
                    log.warning("sync %s %s failed: %s", direction, self.uri, exc)

        self._thread = threading.Thread(target=loop, name=f"mirror-{direction}", daemon=True)
        self._thread.start()

    def stop(self, final_push: bool) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        if final_push:
            self.push()


def stage_input(uri: str, local: Path) -> str:
    """Copy an HDFS input locally; other inputs are passed through as they are."""
    if not is_hdfs(uri):
        return uri
    mirror = Mirror(uri, local)
    copied = mirror.pull(while_written=False)
    log.info("staged %d input file(s) from %s into %s", copied, uri, mirror.local)
    return str(mirror.local)
