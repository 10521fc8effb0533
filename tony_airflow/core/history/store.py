"""Where job history lives: one directory per application under a history root.

Layout (TonY's, flattened): `<root>/<application id>/job.json` (the effective
job spec) and `<root>/<application id>/events.jsonl.inprogress`, renamed to
`events.jsonl` when the AM ends the job. A crashed AM leaves the in-progress
file, which is still readable line by line. The root is an HDFS path (plain
`/path` or `hdfs://...`, over WebHDFS) or a `file://` path (one machine only).
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tony_airflow.yarn.rest import is_application_id

if TYPE_CHECKING:  # fsspec is a tenth of a second to import; the client needs only history_dir()
    from fsspec import AbstractFileSystem

log = logging.getLogger("tony.history")

DEFAULT_HISTORY_DIR = "/tmp/tony-history"
HISTORY_DIR_ENV = "TONY_HISTORY_DIR"
EVENTS = "events.jsonl"
IN_PROGRESS = EVENTS + ".inprogress"
SPEC = "job.json"
ATTEMPT_MARK = "attempt-"  # attempt-<N>: training attempt N began (HistoryStore.mark_attempt)
JOB_DIR_MODE = 0o750  # the job's user, and the history root's group (the history server's readers)


def history_dir(configured: str | None = None) -> str:
    """The history root: the given one, else $TONY_HISTORY_DIR, else /tmp/tony-history on HDFS."""
    return configured or os.environ.get(HISTORY_DIR_ENV) or DEFAULT_HISTORY_DIR


@dataclass
class JobFiles:
    """What one application's history directory holds."""

    app_id: str
    events_path: str
    complete: bool           # the AM renamed the log at the end
    modified: float          # seconds since the epoch


class HistoryStore:
    """Reads and writes the history root through one fsspec filesystem."""

    def __init__(self, fs: AbstractFileSystem, root: str):
        self.fs = fs
        self.root = root.rstrip("/") or "/"

    @classmethod
    def open(cls, uri: str | None = None) -> HistoryStore:
        uri = history_dir(uri)
        if uri.startswith("file://"):
            from fsspec.implementations.local import LocalFileSystem

            return cls(LocalFileSystem(), uri[len("file://"):])
        from tony_airflow.yarn.hdfs import hdfs_path, webhdfs

        return cls(webhdfs(uri=uri if uri.startswith("hdfs:") else None), hdfs_path(uri))

    # ----------------------------------------------------------- layout
    def job_dir(self, app_id: str) -> str:
        return posixpath.join(self.root, app_id)

    def path(self, app_id: str, name: str) -> str:
        return posixpath.join(self.root, app_id, name)

    # ----------------------------------------------------------- writing
    def start_job(self, app_id: str, spec_json: str) -> None:
        """Create the job's directory, its spec and an empty in-progress log."""
        if not self.fs.exists(self.root):
            self.fs.makedirs(self.root, exist_ok=True)
            self._share_root()
        self.fs.makedirs(self.job_dir(app_id), exist_ok=True)
        self._set_mode(self.job_dir(app_id), JOB_DIR_MODE)  # not readable by every user of the shared root
        self.fs.pipe_file(self.path(app_id, SPEC), spec_json.encode())
        self.fs.pipe_file(self.path(app_id, IN_PROGRESS), b"")

    def _share_root(self) -> None:
        """A shared root, like /tmp (1777): every user's AM writes its own directory into it."""
        self._set_mode(self.root, 0o1777)

    def _set_mode(self, path: str, mode: int) -> None:
        """WebHDFS reads `permission` as an octal string; fsspec's chmod sends the
        integer in decimal (0o1777 -> "1023", i.e. d----w--wt), so call it directly."""
        try:
            call = getattr(self.fs, "_call", None)
            if call is not None:
                call("SETPERMISSION", method="put", path=path, permission=format(mode, "o"))
            elif hasattr(self.fs, "chmod"):
                self.fs.chmod(path, mode)
            else:
                os.chmod(path, mode)
        except (AttributeError, NotImplementedError, OSError) as exc:
            log.warning("could not set the mode of %s to %o: %s", path, mode, exc)

    def append(self, app_id: str, lines: list[str]) -> None:
        data = "".join(line + "\n" for line in lines).encode()
        path = self.path(app_id, IN_PROGRESS)
        from fsspec.implementations.webhdfs import WebHDFS

        if isinstance(self.fs, WebHDFS):
            from tony_airflow.yarn.hdfs import append_bytes

            append_bytes(self.fs, path, data)
            return
        with self.fs.open(path, "ab") as out:
            out.write(data)

    def resume_job(self, app_id: str) -> list[dict[str, Any]] | None:
        """A new AM attempt goes on with the job's log: the events so far (None: there is no log).
        A log the lost AM had closed is opened again; a line it was cut off writing is ended, so
        that the next line does not join it (readers skip it)."""
        for name in (IN_PROGRESS, EVENTS):
            path = self.path(app_id, name)
            try:
                data = self.fs.cat_file(path)
            except FileNotFoundError:
                continue
            if name == EVENTS:
                self.fs.mv(path, self.path(app_id, IN_PROGRESS))
                if data and not data.endswith(b"\n"):
                    self.append(app_id, [""])
            else:
                self._take_over(path, data + (b"\n" if data and not data.endswith(b"\n") else b""))
            return list(parse_lines(data.decode("utf-8", "replace")))
        return None

    def _take_over(self, path: str, data: bytes) -> None:
        """Put the lost AM's log back as a file of this writer's own, whole (a temporary name, then one
        rename over it). Its last append may have been cut off with its host, and HDFS keeps that dead
        writer's lease on the file: for a minute (the soft limit), longer while the DataNode that served the
        append is not declared dead, every append of the new AM would fail; the rename ends that lease."""
        from fsspec.implementations.webhdfs import WebHDFS

        if isinstance(self.fs, WebHDFS):
            from tony_airflow.yarn.hdfs import replace_bytes

            replace_bytes(self.fs, path, data, writer="history")
            return
        part = f"{path}.part-{os.getpid()}"
        self.fs.pipe_file(part, data)
        self.fs.mv(part, path)

    def mark_attempt(self, app_id: str, attempt: int) -> None:
        """The durable record that training attempt `attempt` began, written before it begins: a new AM
        takes its next attempt number above every mark, even one the lost AM's log never flushed."""
        self.fs.pipe_file(self.path(app_id, f"{ATTEMPT_MARK}{attempt}"), b"")

    def marked_attempts(self, app_id: str) -> list[int]:
        try:
            names = self.fs.ls(self.job_dir(app_id), detail=False)
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            base = posixpath.basename(str(name).rstrip("/"))
            if base.startswith(ATTEMPT_MARK) and base[len(ATTEMPT_MARK):].isdigit():
                found.append(int(base[len(ATTEMPT_MARK):]))
        return sorted(found)

    def finish_job(self, app_id: str) -> None:
        self.fs.mv(self.path(app_id, IN_PROGRESS), self.path(app_id, EVENTS))

    # ----------------------------------------------------------- reading
    def jobs(self) -> list[JobFiles]:
        """Every application with a history directory, newest first."""
        if not self.fs.exists(self.root):
            return []
        found = []
        for entry in self.fs.ls(self.root, detail=True):
            app_id = posixpath.basename(entry["name"].rstrip("/"))
            if entry.get("type") != "directory" or not is_application_id(app_id):
                continue
            files = self.find(app_id)
            if files is not None:
                found.append(files)
        return sorted(found, key=lambda f: _app_order(f.app_id), reverse=True)

    def find(self, app_id: str) -> JobFiles | None:
        for name, complete in ((EVENTS, True), (IN_PROGRESS, False)):
            path = self.path(app_id, name)
            try:
                info = self.fs.info(path)
            except FileNotFoundError:
                continue
            return JobFiles(app_id, path, complete, _mtime(info))
        return None

    def events(self, files: JobFiles) -> list[dict[str, Any]]:
        """The events of one log; a torn last line (the AM died mid-write) is skipped."""
        return list(parse_lines(self.fs.cat_file(files.events_path).decode(errors="replace")))

    def spec(self, app_id: str) -> dict[str, Any] | None:
        try:
            return json.loads(self.fs.cat_file(self.path(app_id, SPEC)))
        except (FileNotFoundError, ValueError):
            return None

    # ----------------------------------------------------------- retention
    def purge(self, max_age_s: float, now: float | None = None) -> list[str]:
        """Delete the history of jobs that ended more than `max_age_s` ago; return their ids.

        A finished log's age is counted from its last event; an in-progress log
        (an AM that died without closing it) from its last write.
        """
        now = time.time() if now is None else now
        purged = []
        for files in self.jobs():
            ended = files.modified
            if files.complete:
                events = self.events(files)
                ended = events[-1]["time"] if events else files.modified
            if now - ended > max_age_s:
                self.fs.rm(self.job_dir(files.app_id), recursive=True)
                purged.append(files.app_id)
        return purged


def parse_lines(text: str) -> Iterator[dict[str, Any]]:
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            log.warning("skipping a torn event line: %.80s", line)
            continue
        if isinstance(event, dict) and "event" in event and "time" in event:
            yield event


def _mtime(info: dict[str, Any]) -> float:
    """fsspec's local FS gives seconds ('mtime'); WebHDFS gives milliseconds ('modificationTime')."""
    if "modificationTime" in info:
        return info["modificationTime"] / 1000.0
    return float(info.get("mtime") or info.get("created") or 0.0)


def _app_order(app_id: str) -> tuple[int, int]:
    _, ts, seq = app_id.split("_")
    return int(ts), int(seq)
