"""The output's commit protocol: how a task's local output directory reaches HDFS, whatever fault hits.

The rules (docs/ARCHITECTURE.md, "The output's commit protocol", says why each one):

1. One writer at a time, fenced by an epoch. A writer claims the output by creating
   `.tony-writer-<epoch>` (holding its application and attempt) with overwrite=false, the epoch one above
   every mark there: HDFS's create is atomic, so two claims never share an epoch. A writer is fenced once
   a mark of a greater epoch from another (application, attempt) exists; it checks that before every
   rename, append and delete, not once a round. A claim then removes every other writer's temporary file, so an
   older writer's upload under way can no longer be renamed into place.
2. What HDFS shows is a prefix of the program's write history: a round publishes the files that
   changed in the order they were last modified and stops at the first one it cannot publish whole
   (changed within QUIET_S, gone, changed while it was taken). A pointer written last (TensorFlow's
   `checkpoint`, PyTorch's `latest`, a hand-written one) never overtakes the files written before it,
   whatever the framework. Deletions are published only by a round that reached the end, and never
   from a directory that is gone (YARN removes an ended container's directory; a walk then finds nothing).
3. A version of a file is (size, mtime_ns, inode), recorded when it is published or pulled. A round
   first opens every file of its prefix, then copies each into a local snapshot (the next save may drop
   or rewrite it meanwhile), then uploads the snapshots: each under a temporary name, renamed into place
   with one NameNode operation.
4. Files that only grow (TensorBoard's event files, a log appended to) publish as prefixes by APPEND and
   never hold the order back. A file the executor cannot read is not part of the output (said once).
5. A reader (a retry resuming, the evaluator, TensorBoard) takes files in HDFS's modification order,
   stops at the first one gone or changed since its listing, keeps what HDFS has and no more (what HDFS
   no longer has is removed), and never takes a temporary file or a writer's mark. A task beside its
   chief (a worker, a ps) takes what HDFS held when its attempt's chief claimed the output — what the
   chief resumed from — skipping the chief's newer files and trying again when one cut its pull short.
6. A stop: the final push publishes only files unchanged since QUIET_S before the stop (everything after
   a clean exit); a round under way finishes its current upload first; a writer whose AM is gone
   (halt) publishes nothing more.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import random
import shutil
import stat as stat_module
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tony_airflow import retries
from tony_airflow.files import umask
from tony_airflow.yarn.hdfs import OutputFiles, RemoteFile, WebHdfsFiles, hdfs_path, is_part, part_name, webhdfs

log = logging.getLogger("tony.executor.output")
SYNC_INTERVAL_S = 5.0
QUIET_S = 1.0          # a file left unchanged this long is taken to be whole
QUIET_MARGIN_S = 0.25  # a round for a file that waited for its quiet time comes this long after it
FINAL_TRIES = 3        # the final push, with FINAL_BACKOFF_S * try between tries
FINAL_BACKOFF_S = 2.0
MAX_OPEN = 256         # files a round takes at once; the rest of the prefix comes in the next round
MARK_PREFIX = ".tony-writer"  # `.tony-writer-<epoch>`, holding "<application> <attempt> <writer>": who may publish
EVENTS = ".tfevents."  # TensorBoard's event files: they grow in place
SNAPSHOTS = ".tony-snapshots"  # beside the output directory: the versions a round is uploading
CLAIM_TRIES = 20
CLAIM_WAIT_S = 120.0   # how long a task beside the chief waits for its attempt's claim (the chief may stage input first)
PULL_TRIES = 5         # pulls of the claimed state, each cut short by the chief's new output replacing a file


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
    """A writer's claim on the output: its epoch, and the (application, attempt) it writes for."""
    epoch: int
    app: str
    attempt: int

    @property
    def name(self) -> str:
        return mark_name(self.epoch)

    def content(self, writer: str) -> bytes:
        return f"{self.app} {self.attempt} {writer}\n".encode()

    @classmethod
    def read(cls, epoch: int, data: bytes) -> Mark:
        words = data.decode("utf-8", "replace").split()
        try:
            return cls(epoch, words[0], int(words[1]))
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


def _retried_at_the_end(exc: BaseException) -> bool:
    """The final push is tried again after any error but a newer attempt's fence, a directory that is gone
    (the program has ended: it will not come back), and an interrupt."""
    return isinstance(exc, Exception) and not isinstance(exc, (WriterFenced, OutputDirectoryGone))


class Mirror:
    """A local directory kept in step with one HDFS directory, by the rules above."""

    def __init__(self, uri: str, local: Path, files: OutputFiles | None = None, writer: str = "",
                 attempt: tuple[str, int] = ("", 0)):
        self.uri = uri
        self.remote = hdfs_path(uri).rstrip("/") or "/"
        self.local = local.absolute()
        self.files: OutputFiles = files or WebHdfsFiles(webhdfs(uri=uri))
        self.writer = writer or "w"
        self.attempt = attempt                      # (application id, attempt number) of this writer
        self.epoch = 0                              # this writer's epoch (0: none seen yet)
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
            for path, info in self.files.list(self.remote).items():
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
                if self._seen.get(rel) == info or (info.size == 0 and while_written):
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
                if tmp is not None:
                    _clear_way(self.local, rel)
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
            count += self._drop_gone(wanted)
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
        for rel in sorted(set(self._seen) - set(remote)):
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
            mine = Mark(max(self._epochs(), default=0) + 1, app, attempt)
            try:
                self.files.create_new(f"{self.remote}/{mine.name}", mine.content(self.writer))
            except FileExistsError:
                continue  # another writer took that epoch at the same moment: the next one
            self.epoch = mine.epoch
            self._marks_read[mine.epoch] = mine
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

    def adopt(self) -> None:
        """The files HDFS holds now are this writer's to replace and remove (a chief resuming)."""
        self._own.update(self._held)

    def _epochs(self) -> list[int]:
        return [e for name in self.files.names(self.remote) if (e := mark_epoch(name)) is not None]

    def _whose(self, epoch: int) -> tuple[str, int] | None:
        """(application, attempt) of a mark, read once; None: gone meanwhile (a newer claim removed it)."""
        mark = self._marks_read.get(epoch)
        if mark is None:
            try:
                mark = Mark.read(epoch, self.files.read(f"{self.remote}/{mark_name(epoch)}"))
            except FileNotFoundError:
                return None
            if mark.app:  # not kept while empty: HDFS shows a mark before its bytes arrive
                self._marks_read[epoch] = mark
        return mark.app, mark.attempt

    def _fence(self) -> None:
        """Before every rename, append and delete: fenced once another (application, attempt) holds a
        newer epoch. One LISTSTATUS; a newer mark's owner is read once."""
        if self._halted.is_set():
            raise WriterFenced("this writer was stopped")
        for epoch in sorted(self._epochs(), reverse=True):
            if epoch <= self.epoch:
                break
            whose = self._whose(epoch)
            if whose != self.attempt:
                self._halted.set()
                app, attempt = whose or ("another writer", 0)
                raise WriterFenced(f"{self.uri} was claimed by {app} attempt {attempt} "
                                   f"(epoch {epoch} > {self.epoch})")

    # ------------------------------------------------------------------ writing
    def push(self, cutoff: float | None = None, background: bool = False) -> int:
        """Publish the prefix of what changed (rule 2). Returns how many files were published or removed.

        `cutoff`: only files unchanged since then are taken (default: QUIET_S ago); math.inf takes
        everything (the program exited 0: nothing writes any more). A round that stopped at a file
        changed less than QUIET_S ago waits for it once, rather than leave it to a later round by which
        time the next save may have dropped it. `background`: a round of the loop, which ends after its
        current upload once the loop is told to stop (the final push goes on from there)."""
        in_round = cutoff is None
        count, blocked_at = self._round(time.time() - QUIET_S if cutoff is None else cutoff, background)
        if in_round and blocked_at is not None and self._settle(blocked_at):
            more, blocked_at = self._round(time.time() - QUIET_S, background)
            count += more
        self.waiting = blocked_at is not None
        return count

    def _round(self, cutoff: float, background: bool) -> tuple[int, float | None]:
        """One round: (files published or removed, the mtime of the file the prefix stopped at)."""
        self._fence()
        present = self._walk()
        changed = sorted((st.st_mtime_ns, rel) for rel, st in present.items()
                         if self._held.get(rel) != Version.of(st))
        grown: list[str] = []
        taken: list[tuple[str, BinaryIO, Version]] = []
        blocked_at: float | None = None
        complete = True
        count = 0
        with contextlib.ExitStack() as stack:
            for _, rel in changed:
                st = present[rel]
                if self._only_grows(rel, st):
                    grown.append(rel)
                    continue
                if st.st_mtime > cutoff or len(taken) >= MAX_OPEN:
                    blocked_at = st.st_mtime if st.st_mtime > cutoff else None
                    complete = False
                    break
                try:
                    fh = stack.enter_context(self._open_local(rel))
                except PermissionError as exc:
                    self._say_unreadable(rel, exc)
                    continue
                except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                    complete = False  # gone or replaced since the walk: the prefix ends here
                    break
                if Version.of(os.fstat(fh.fileno())) != Version.of(st):
                    complete = False
                    break
                taken.append((rel, fh, Version.of(st)))
            snapshots, whole = self._snapshot(taken)
            complete = complete and whole
        try:
            for rel, snap, version, digest in snapshots:
                if background and self._stop.is_set():
                    complete = False
                    break  # stopping: the final push goes on from here
                count += self._publish(rel, snap, version, digest)
        finally:
            for _, snap, _, _ in snapshots:
                _unlink(snap)
            self._tidy_tmp_dir()
        sizes = self._remote_sizes() if any(rel in self._held for rel in grown) else {}
        for rel in grown:
            count += self._grow(rel, sizes)
        if complete:
            self._still_there()  # a removal that began during the walk: the walk may have seen half of it
            count += self._remove_deleted(present)
        return count, blocked_at

    def _still_there(self) -> None:
        """The local directory exists (rule 2's deletions come from walking it, never from its absence)."""
        if not self.local.is_dir():
            raise OutputDirectoryGone(f"the local output directory {self.local} no longer exists "
                                      f"(its container was cleaned up?): nothing more is published to {self.uri}")

    def _walk(self) -> dict[str, os.stat_result]:
        """Every regular file under the directory (not an upload under way), by its path relative to it."""
        self._still_there()
        found: dict[str, os.stat_result] = {}
        for root, _dirs, names in os.walk(self.local, onerror=lambda exc: None):
            for name in names:
                path = os.path.join(root, name)
                rel = os.path.relpath(path, self.local)
                if is_bookkeeping(name):
                    continue
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                if stat_module.S_ISREG(st.st_mode):
                    found[rel] = st
        return found

    def _open_local(self, rel: str) -> BinaryIO:
        """The program's file, for reading (a root executor reads what a chmod 000 hides from users)."""
        return (self.local / rel).open("rb")

    def _only_grows(self, rel: str, st: os.stat_result) -> bool:
        """A file that only grows publishes as a prefix, at once (rule 4): TensorBoard's event files, and a
        file whose published bytes are still its first bytes (a log being appended to)."""
        if EVENTS in os.path.basename(rel):
            return True
        held, published = self._held.get(rel), self._hashes.get(rel)
        if held is None or published is None or held.inode != st.st_ino or st.st_size <= held.size:
            return False
        try:
            with (self.local / rel).open("rb") as fh:
                return _digest_of(fh, held.size) == published.digest()
        except OSError:
            return False

    def _snapshot(self, taken: list[tuple[str, BinaryIO, Version]]) -> tuple[list[Snapshot], bool]:
        """A local copy of each taken version (rule 3); stops at the first that changed while copied."""
        out: list[Snapshot] = []
        for rel, fh, version in taken:
            fd, name = tempfile.mkstemp(prefix=f".{os.path.basename(rel)}.tony-part-", dir=self._tmp_dir())
            snap = Path(name)
            digest = hashlib.sha256()
            try:
                with os.fdopen(fd, "wb") as copy:
                    fh.seek(0)
                    left = version.size
                    while left > 0:
                        chunk = fh.read(min(left, 1 << 20))
                        if not chunk:
                            break
                        digest.update(chunk)
                        copy.write(chunk)
                        left -= len(chunk)
                if left or Version.of(os.fstat(fh.fileno())) != version:
                    raise FileChanged(rel)
            except (FileChanged, OSError):
                _unlink(snap)
                return out, False
            out.append((rel, snap, version, digest))
        return out, True

    def _publish(self, rel: str, snap: Path, version: Version, digest: Any) -> int:
        """Publish one snapshot; HDFS now holds `version` of `rel`."""
        with snap.open("rb") as fh:
            self._put(rel, fh)
        self._held[rel], self._hashes[rel] = version, digest
        self._own.add(rel)
        return 1

    def _put(self, rel: str, data: bytes | BinaryIO) -> None:
        """Upload under a temporary name, then rename into place once the fence check passed (rule 1)."""
        remote = f"{self.remote}/{rel}"
        part = part_name(remote, self.writer)
        self._clear_remote_way(rel)
        self._mkdirs_for(rel)
        try:
            self.files.create(part, data)
            self._fence()
            try:
                self.files.rename_over(part, remote)
            except RuntimeError:  # HDFS refused: a directory stands where this file goes, left by a cut writer
                self._fence()
                self.files.delete(remote, recursive=True)
                self.files.rename_over(part, remote)
        except FileNotFoundError:
            self._fence()  # a newer claim removed the temporary file (rule 1): say so
            raise
        except BaseException:
            _forget(self.files, part)
            raise

    def _grow(self, rel: str, remote_sizes: dict[str, int]) -> int:
        """A file that only grows: append what HDFS lacks (a cut append leaves a prefix), or publish it whole
        the first time. Any prefix of it is valid, so it never waits for a quiet moment."""
        remote = f"{self.remote}/{rel}"
        events = EVENTS in os.path.basename(rel)  # no digest kept: the name says it only grows
        try:
            with self._open_local(rel) as fh:
                version = Version.of(os.fstat(fh.fileno()))
                have = remote_sizes.get(rel, -1) if rel in self._held else -1
                if 0 <= have <= version.size:
                    fh.seek(have)
                    tail = fh.read(version.size - have)
                    if tail:
                        self._fence()
                        self.files.append(remote, tail)
                    digest = None
                    if not events and rel in self._hashes and have == self._held[rel].size:
                        digest = self._hashes[rel].copy()
                        digest.update(tail)
                    size = have + len(tail)
                else:  # new, gone from HDFS, or rewritten shorter: published whole again
                    data = fh.read(version.size)
                    digest = None if events else hashlib.sha256(data)
                    self._put(rel, data)
                    size = len(data)
        except PermissionError as exc:
            self._say_unreadable(rel, exc)
            return 0
        except FileNotFoundError:
            return 0
        self._held[rel] = Version(size, version.mtime_ns, version.inode)
        if digest is None:
            self._hashes.pop(rel, None)
        else:
            self._hashes[rel] = digest
        self._own.add(rel)
        return 1

    def _mkdirs_for(self, rel: str) -> None:
        """The directories `rel` needs; when HDFS refuses (a file stands in the way, left by a writer cut
        before it removed it), each of them that is a file goes: a directory that holds anything stays."""
        try:
            self.files.mkdirs(os.path.dirname(f"{self.remote}/{rel}"))
            return
        except RuntimeError:
            pass
        parts = Path(rel).parts[:-1]
        for n in range(1, len(parts) + 1):
            self._fence()
            with contextlib.suppress(Exception):
                self.files.delete(f"{self.remote}/{'/'.join(parts[:n])}")
        self.files.mkdirs(os.path.dirname(f"{self.remote}/{rel}"))

    def _remote_sizes(self) -> dict[str, int]:
        """rel -> size in HDFS: one listing for a round's growing files (their appends start there)."""
        return {rel: info.size for rel, info in self._remote_files().items()}

    def _clear_remote_way(self, rel: str) -> None:
        """A path that changed kind: what HDFS holds in the way (a file where a directory now is, or a
        directory where a file now is) goes first, or the rename would fail for ever."""
        parts = Path(rel).parts
        ancestors = {str(Path(*parts[:n])) for n in range(1, len(parts))}
        above = [held for held in self._held if held in ancestors]
        below = [held for held in self._held if held.startswith(rel + "/")]
        for held in above:
            self._fence()
            self.files.delete(f"{self.remote}/{held}")
        if below:
            self._fence()
            self.files.delete(f"{self.remote}/{rel}", recursive=True)
        for held in above + below:
            self._forget_held(held)

    def _forget_held(self, rel: str) -> None:
        self._held.pop(rel, None)
        self._own.discard(rel)
        self._hashes.pop(rel, None)
        self._seen.pop(rel, None)

    def _remove_deleted(self, present: dict[str, os.stat_result]) -> int:
        """Files the program removed leave HDFS too, once a round reached the end (rule 2)."""
        removed = 0
        for rel in sorted(self._own - set(present)):
            if rel in self._unreadable:
                continue
            self._fence()
            self.files.delete(f"{self.remote}/{rel}")
            self._forget_held(rel)
            removed += 1
        return removed

    def _say_unreadable(self, rel: str, exc: OSError) -> None:
        if rel not in self._unreadable:
            self._unreadable.add(rel)
            log.warning("not published (this task cannot read it): %s: %s", rel, exc.strerror or exc)

    def _settle(self, mtime: float) -> bool:
        """Wait until a file last changed at `mtime` is quiet; False if stopped meanwhile."""
        delay = min(QUIET_S, mtime + QUIET_S - time.time())
        return not self._stop.wait(max(0.0, delay) + 0.01)

    # --------------------------------------------------------------- background
    def start(self, direction: str, interval: float = SYNC_INTERVAL_S) -> None:
        """Keep syncing in the background: 'push' (the chief), 'pull' (TensorBoard), 'both' (an evaluator)."""
        def step() -> None:
            if direction == "pull":
                self.pull(only_tensorboard=True)
            elif direction == "both":
                self.pull(events=False)
            if direction in ("push", "both"):
                self.push(background=True)

        def loop() -> None:
            while not self._stop.wait(next_round_in(self.waiting, interval)):
                try:
                    with self._lock:
                        if self._stop.is_set():
                            return
                        step()
                except WriterFenced as exc:
                    log.warning("no longer publishing to %s: %s", self.uri, exc)
                    return
                except Exception as exc:  # a transient WebHDFS error: try again next round
                    log.warning("sync %s %s failed: %s", direction, self.uri, exc)

        self._thread = threading.Thread(target=loop, name=f"mirror-{direction}", daemon=True)
        self._thread.start()

    def halt(self) -> None:
        """Publish nothing more, now (the AM is gone: a newer attempt may be writing)."""
        self._halted.set()
        self._stop.set()

    def finish(self, cutoff: float = math.inf) -> int:
        """Stop the background rounds and push once more, only files unchanged since `cutoff`.

        A round under way ends after its current upload (each WebHDFS request has a deadline, so this
        wait is bounded by the upload's progress, not by a fixed time); the final push goes on from
        there. Raises when the output could not be published after FINAL_TRIES tries."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        policy = retries.tries(FINAL_TRIES, FINAL_BACKOFF_S, _retried_at_the_end,
                               log=log, what=f"final push to {self.uri}")
        with self._lock:
            try:
                return policy(self.push, cutoff)
            except WriterFenced as exc:
                log.warning("final push to %s skipped: %s", self.uri, exc)
                return 0

    def stop(self) -> None:
        """Stop the background rounds (a reader: nothing to publish)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def next_round_in(waiting: bool, interval: float) -> float:
    """Seconds to the next round: soon after a file's quiet time when one waited for it, else the interval
    less up to a fifth at random, so that rounds never lock in phase with a program's saves."""
    if waiting:
        return QUIET_S + QUIET_MARGIN_S
    return interval * random.uniform(0.8, 1.0)


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

