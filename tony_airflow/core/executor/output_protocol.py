"""The output's protocol: who may write it (marks, the epoch, the fence) and how readers take it.

docs/ARCHITECTURE.md, "The output's commit protocol", states the rules; `output_commit.py` lists them. This
module holds rule 1 (one writer at a time, fenced by an epoch) and rule 5 (readers), and the state both
sides of a mirror share: which local version of each file HDFS holds. What is whole and in which order is
`output_history.py`; the writing side (snapshots, uploads, the final push) is `output_publisher.py`.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tony_airflow.files import umask
from tony_airflow.yarn.hdfs import OutputFiles, RemoteFile, WebHdfsFiles, hdfs_path, is_part, webhdfs

log = logging.getLogger("tony.executor.output")
MARK_PREFIX = ".tony-writer"  # `.tony-writer-<epoch>`, holding "<application> <attempt> <writer>": who may publish
EVENTS = ".tfevents."  # TensorBoard's event files: they grow in place
SNAPSHOTS = ".tony-snapshots"  # beside the output directory: the versions a round is uploading
CLAIM_TRIES = 20
CLAIM_WAIT_S = 120.0   # how long a task beside the chief waits for its attempt's claim (the chief may stage input first)
PULL_TRIES = 5         # pulls of the claimed state, each cut short by the chief's new output replacing a file
MARK_READS = 20        # a mark read empty (HDFS shows a file before its bytes) is read again this often
MARK_READ_PAUSE_S = 0.05

@dataclass(frozen=True)
class Version:
    """One version of a local file, as the protocol tells versions apart."""
    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, st: os.stat_result) -> Version:
        return cls(st.st_size, st.st_mtime_ns, st.st_ino)


@dataclass(frozen=True)
class Mark:
    """A writer's claim on the output: its epoch, the (application, attempt) it writes for, and who wrote it."""
    epoch: int
    app: str
    attempt: int
    writer: str = ""

    @property
    def name(self) -> str:
        return mark_name(self.epoch)

    def content(self, writer: str) -> bytes:
        return f"{self.app} {self.attempt} {writer}\n".encode()

    @classmethod
    def read(cls, epoch: int, data: bytes) -> Mark:
        words = data.decode("utf-8", "replace").split()
        try:
            return cls(epoch, words[0], int(words[1]), words[2] if len(words) > 2 else "")
        except (IndexError, ValueError):
            return cls(epoch, "", 0)  # unreadable: another writer's, surely


def mark_name(epoch: int) -> str:
    return f"{MARK_PREFIX}-{epoch:010d}"


def mark_epoch(name: str) -> int | None:
    """The epoch a mark's file name holds, or None: not a mark."""
    base = os.path.basename(name)
    if not base.startswith(MARK_PREFIX + "-"):
        return None
    try:
        return int(base[len(MARK_PREFIX) + 1:])
    except ValueError:
        return None


Snapshot = tuple[str, Path, Version, Any]  # rel, the local copy, the version copied, its sha256


def is_hdfs(uri: str) -> bool:
    return uri.startswith("hdfs:")


def is_bookkeeping(name: str) -> bool:
    """Never part of the output a reader takes: an upload under way or a writer's mark."""
    return is_part(name) or os.path.basename(name).startswith(MARK_PREFIX)


def is_tensorboard_file(rel: str) -> bool:
    """What TensorBoard reads: event files and the plugins' assets."""
    return EVENTS in os.path.basename(rel) or "plugins" in Path(rel).parts[:-1]


class WriterFenced(RuntimeError):
    """A newer writer has claimed the output (or this one was halted): it publishes nothing more."""


class OutputDirectoryGone(RuntimeError):
    """The local output directory no longer exists: YARN removed the container's directory, or the program
    removed its output. What a walk then misses says nothing of what the program deleted: nothing is
    published and nothing removed from HDFS."""


class FileChanged(Exception):
    """A file changed while it was taken: the round's prefix ends before it."""


class OutputDirectory:
    """A local directory and the HDFS directory it mirrors: the claim, the fence and the readers' pulls."""

    def __init__(self, uri: str, local: Path, files: OutputFiles | None = None, writer: str = "",
                 attempt: tuple[str, int] = ("", 0)):
        self.uri = uri
        self.remote = hdfs_path(uri).rstrip("/") or "/"
        self.local = local.absolute()
        self.files: OutputFiles = files or WebHdfsFiles(webhdfs(uri=uri))
        self.writer = writer or "w"
        self.attempt = attempt                      # (application id, attempt number) of this writer
        self.epoch = 0                              # this writer's epoch (0: none seen yet)
        self.claimed = False                        # this writer made its own claim (not an evaluator's join)
        self._held: dict[str, Version] = {}         # rel -> the local version HDFS holds (pushed or pulled)
        self._hashes: dict[str, Any] = {}           # rel -> sha256 of the bytes published (tells an append)
        self._seen: dict[str, RemoteFile] = {}      # rel -> the remote version a pull copied
        self._own: set[str] = set()                 # files this writer may remove in HDFS
        self._unreadable: set[str] = set()          # said once each
        self._marks_read: dict[int, Mark] = {}      # epoch -> whose it is (a mark never changes)
        self._lock = threading.Lock()               # one round at a time: the loop's, the final push
        self._stop = threading.Event()
        self._halted = threading.Event()
        self._thread: threading.Thread | None = None
        self.waiting = False  # the last round stopped at a file changed within QUIET_S
        self._capped = False  # the last scan round stopped at MAX_OPEN files
        self._errors: dict[str, str] = {}  # rel -> why its last version could not be taken (said once)

    # ------------------------------------------------------------------ reading
    def pull(self, while_written: bool = True, events: bool = True, only_tensorboard: bool = False) -> int:
        """Take what HDFS holds that is new or changed since the last pull (rule 5). Returns how many.

        `while_written`: the directory may be written to now (an output): a file HDFS shows empty is
        not taken yet, and files HDFS no longer has are removed here. An input is complete, and its empty
        files (e.g. `_SUCCESS`) are copied too. `events`: take TensorBoard's event files (a task that
        only resumes from checkpoints needs none); `only_tensorboard`: nothing else (TensorBoard)."""
        return self._pull(while_written, events, only_tensorboard)[0]

    def pull_as_of_claim(self, events: bool = True, wait_s: float = CLAIM_WAIT_S, poll_s: float = 0.25,
                         stopped: threading.Event | None = None) -> int:
        """A task beside its chief (a worker, a ps) resumes from what the chief resumed from: what HDFS held
        when this attempt's chief claimed the output (rule 5). A file changed after the claim is the chief's
        new output and is not taken; a pull cut short by one (replaced while it was downloaded) is tried
        again, up to PULL_TRIES. No claim within `wait_s` (the chief cannot reach HDFS): a plain pull. The
        task `stopped` while it waits (its attempt ended): nothing is pulled."""
        claimed = self.claim_time(wait_s, poll_s, stopped)
        if stopped is not None and stopped.is_set():
            log.info("%s: the task was stopped while it waited for its chief's claim: nothing pulled", self.uri)
            return 0
        if claimed is None:
            log.warning("%s: no claim by this attempt's chief in %.0f s: taking what HDFS holds now", self.uri, wait_s)
            return self.pull(events=events)
        count = 0
        for _ in range(PULL_TRIES):
            taken, whole = self._pull(events=events, as_of_ms=claimed)
            count += taken
            if whole:
                break
        return count

    def claim_time(self, wait_s: float = CLAIM_WAIT_S, poll_s: float = 0.25,
                   stopped: threading.Event | None = None) -> int | None:
        """When this attempt's writer claimed the output (its mark's modification time, HDFS's ms), waiting up
        to `wait_s` for the claim, or until `stopped`; None when none came."""
        deadline = time.monotonic() + wait_s
        stopped = stopped or threading.Event()
        while True:
            for path, info in self.files.entries(self.remote).items():  # the marks are at the top: one LISTSTATUS
                epoch = mark_epoch(path)
                if epoch is not None and self._whose(epoch) == self.attempt:
                    return info.mtime_ms
            if time.monotonic() >= deadline or stopped.wait(poll_s):
                return None

    def _pull(self, while_written: bool = True, events: bool = True, only_tensorboard: bool = False,
              as_of_ms: int | None = None) -> tuple[int, bool]:
        """`pull`, and whether it took the whole listing (False: stopped at a file gone or replaced).
        `as_of_ms`: only files HDFS last changed then or before."""
        self.local.mkdir(parents=True, exist_ok=True)
        listing = self._remote_files()
        wanted = {rel: info for rel, info in listing.items() if rel not in self._own
                  and (events or EVENTS not in rel) and (not only_tensorboard or is_tensorboard_file(rel))
                  and (as_of_ms is None or info.mtime_ms <= as_of_ms)}
        count = 0
        whole = True
        staged: list[tuple[str, RemoteFile, Path | None]] = []
        try:
            for rel, info in sorted(wanted.items(), key=lambda item: (item[1].mtime_ms, item[0])):
                if self._seen.get(rel) == info:
                    continue
                try:
                    staged.append((rel, info, self._fetch(rel, info)))
                except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                    log.info("pull of %s stopped at %s: gone since the listing", self.uri, rel)
                    whole = False
                    break  # gone since the listing: what comes after it may depend on what replaced it
            if staged and while_written:
                again = self._remote_files()
                for n, (rel, info, _) in enumerate(staged):
                    # replaced meanwhile: the copy may not be the listed version (an event file only grows)
                    if EVENTS not in rel and again.get(rel) != info:
                        log.info("pull of %s stopped at %s: replaced since the listing", self.uri, rel)
                        whole = False
                        staged, dropped = staged[:n], staged[n:]
                        for _, _, tmp in dropped:
                            _unlink(tmp)
                        break
            for rel, info, tmp in staged:
                target = self.local / rel
                if tmp is not None:  # held before it is in place: an event-driven writer's watcher sees the
                    _clear_way(self.local, rel)  # rename at once and must know the version as pulled (R9)
                    self._held[rel] = Version.of(tmp.stat())
                    os.replace(tmp, target)
                self._seen[rel] = info
                self._held[rel] = Version.of(target.stat())
                count += 1
            staged = []
        finally:
            for _, _, tmp in staged:
                _unlink(tmp)
            self._tidy_tmp_dir()
        if while_written:
            count += self._drop_gone(listing)
        return count, whole

    def _remote_files(self) -> dict[str, RemoteFile]:
        listing = self.files.list(self.remote)
        out = {}
        for path, info in listing.items():
            rel = path[len(self.remote):].lstrip("/")
            if rel and not is_bookkeeping(rel):
                out[rel] = info
        return out

    def _fetch(self, rel: str, info: RemoteFile) -> Path | None:
        """The remote version, under a temporary local name; None: an event file grown in place."""
        target = self.local / rel
        try:
            local_size = target.stat().st_size if target.is_file() else 0
        except OSError:
            local_size = 0
        if EVENTS in target.name and 0 < local_size <= info.size:
            # TensorBoard keeps reading the file it opened: append the new tail in place.
            if local_size < info.size:
                with target.open("ab") as fh:
                    fh.write(self.files.read(f"{self.remote}/{rel}", start=local_size))
            return None
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.tony-part-pull-", dir=self._tmp_dir())
        os.fchmod(fd, 0o666 & ~umask())  # the program's file: the mode open() gives, not mkstemp's 0600
        os.close(fd)
        try:
            self.files.download(f"{self.remote}/{rel}", tmp)
        except BaseException:
            _unlink(Path(tmp))
            raise
        return Path(tmp)

    def _tmp_dir(self) -> str:
        """Beside the output directory (one filesystem: a pulled file is renamed into place), never in it."""
        where = self.local.parent / SNAPSHOTS
        where.mkdir(parents=True, exist_ok=True)
        return str(where)

    def _tidy_tmp_dir(self) -> None:
        """Nothing left behind (client mode runs in the user's own directory): the directory goes once empty."""
        with contextlib.suppress(OSError):
            (self.local.parent / SNAPSHOTS).rmdir()

    def _drop_gone(self, remote: dict[str, RemoteFile]) -> int:
        """A reader keeps what HDFS holds and no more: files it pulled that HDFS no longer has go."""
        gone = 0
        for rel in sorted(set(self._seen) - set(remote) - self._own):  # what this writer now writes is its own
            path = self.local / rel
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                if self._held.get(rel) == Version.of(path.stat()):  # unchanged here since the pull
                    path.unlink()
                    gone += 1
            self._seen.pop(rel, None)
            self._held.pop(rel, None)
        return gone

    # ---------------------------------------------------------------- the claim
    def claim(self) -> None:
        """Make this writer the output's only one (rule 1): an epoch above every mark, created with
        overwrite=false; then every other writer's temporary file goes, and older marks with it."""
        app, attempt = self.attempt
        self.files.mkdirs(self.remote)
        for _ in range(CLAIM_TRIES):
            mine = Mark(max(self._epochs(), default=0) + 1, app, attempt, self.writer)
            try:
                self.files.create_new(f"{self.remote}/{mine.name}", mine.content(self.writer))
            except FileExistsError:
                continue  # another writer took that epoch at the same moment: the next one
            self.epoch = mine.epoch
            self._marks_read[mine.epoch] = mine
            self.claimed = True
            break
        else:
            raise WriterFenced(f"{self.uri}: no epoch could be claimed in {CLAIM_TRIES} tries")
        own = f".tony-part-{self.writer}-"
        for path in self.files.list(self.remote):
            name = os.path.basename(path)
            epoch = mark_epoch(name)
            if (is_part(name) and own not in name) or (epoch is not None and epoch < self.epoch):
                self.files.delete(path)

    def join(self) -> None:
        """Write under the current claim without making one (an evaluator beside its chief): this
        writer's epoch is its own attempt's mark, else the newest there is."""
        epochs = self._epochs()
        own = [e for e in epochs if self._whose(e) == self.attempt]
        self.epoch = max(own or epochs or [0])

    @property
    def fenced(self) -> bool:
        """A newer writer claimed the output (or this one was halted): it publishes nothing more."""
        return self._halted.is_set()

    def adopt(self) -> None:
        """The files HDFS holds now are this writer's to replace and remove (a chief resuming)."""
        self._own.update(self._held)

    def _epochs(self) -> list[int]:
        return [e for name in self.files.names(self.remote) if (e := mark_epoch(name)) is not None]

    def _whose(self, epoch: int) -> tuple[str, int] | None:
        """(application, attempt) of a mark, read once; None: gone meanwhile (a newer claim removed it)."""
        mark = self._marks_read.get(epoch)
        for _ in range(MARK_READS):
            if mark is not None:
                break
            try:
                data = self.files.read(f"{self.remote}/{mark_name(epoch)}")
            except FileNotFoundError:
                return None
            if data:
                mark = self._marks_read[epoch] = Mark.read(epoch, data)
            else:  # HDFS shows a new mark at 0 bytes before its content: its writer is still creating it
                time.sleep(MARK_READ_PAUSE_S)
        if mark is None:  # empty for a whole second: a writer cut while claiming, surely not this one
            return "", 0
        return mark.app, mark.attempt

    def _fence(self) -> None:
        """Before every rename, append and delete: fenced once another (application, attempt) holds a
        newer epoch, or, for a writer that claimed, another writer of its own attempt does (an elastic job's
        writer role moved to a survivor's container while this one was cut off, issue 51). One LISTSTATUS;
        a newer mark's owner is read once."""
        if self._halted.is_set():
            raise WriterFenced("this writer was stopped")
        for epoch in sorted(self._epochs(), reverse=True):
            if epoch <= self.epoch:
                break
            whose = self._whose(epoch)
            mark = self._marks_read.get(epoch)
            moved = self.claimed and whose == self.attempt and mark is not None and mark.writer != self.writer
            if whose != self.attempt or moved:
                self._halted.set()
                app, attempt = whose or ("another writer", 0)
                by = f"{mark.writer} of the same attempt" if moved and mark is not None else f"{app} attempt {attempt}"
                raise WriterFenced(f"{self.uri} was claimed by {by} (epoch {epoch} > {self.epoch})")

    def _forget_held(self, rel: str) -> None:
        self._held.pop(rel, None)
        self._own.discard(rel)
        self._hashes.pop(rel, None)
        self._seen.pop(rel, None)


def _digest_of(fh: BinaryIO, size: int) -> bytes:
    digest = hashlib.sha256()
    left = size
    while left > 0:
        chunk = fh.read(min(left, 1 << 20))
        if not chunk:
            break
        digest.update(chunk)
        left -= len(chunk)
    return digest.digest()


def _clear_way(local: Path, rel: str) -> None:
    """Make room locally for `rel`: a file in the place of one of its directories, or a directory in its
    place, goes (the writer changed the path's kind)."""
    parts = Path(rel).parts
    for n in range(1, len(parts)):
        ancestor = local / Path(*parts[:n])
        if ancestor.is_file() or ancestor.is_symlink():
            ancestor.unlink()
    target = local / rel
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)


def _unlink(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _forget(files: OutputFiles, part: str) -> None:
    try:
        files.delete(part)
    except Exception:  # the link is down: the next claim removes it, and every reader skips it
        pass

