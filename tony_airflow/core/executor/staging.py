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
import threading
from pathlib import Path

from tony_airflow.yarn.hdfs import hdfs_path, webhdfs

log = logging.getLogger("tony.executor.staging")
SYNC_INTERVAL_S = 5.0


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
                tmp = target.with_name(target.name + ".tony-part")
                self.fs.get_file(remote_file, str(tmp))
                os.replace(tmp, target)
            self._pushed[rel] = (target.stat().st_size, int(target.stat().st_mtime_ns))
            count += 1
        return count

    def push(self) -> int:
        """Upload local files that are new or changed since the last push. Returns how many."""
        count = 0
        # TensorFlow's `checkpoint` index files last: a push cut short must not publish an index
        # naming a checkpoint whose files did not reach HDFS (a later attempt restores from it)
        for path in sorted(self.local.rglob("*"), key=lambda p: (p.name == "checkpoint", p)):
            if not path.is_file() or path.name.endswith(".tony-part"):
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
            except FileNotFoundError:
                continue
            self._pushed[rel] = key
            count += 1
        return count

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
