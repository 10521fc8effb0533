"""The writing side of a mirror: snapshots, uploads, files that only grow, deletions and the final push.

What to publish, and in which order, comes from the caller: the history of the writer's closes and
renames (`output_history.py`, fed by `output_events.py`), or — where events are not to be had — a scan of
the directory under the quiet rule (`push`: files unchanged for QUIET_S, in mtime order). Either way a
file is uploaded under a temporary name and renamed into place past the fence (`output_protocol.py`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat as stat_module
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from tony_airflow.core.executor.output_protocol import (
    EVENTS,
    FileChanged,
    OutputDirectory,
    OutputDirectoryGone,
    Snapshot,
    Version,
    WriterFenced,
    _digest_of,
    _forget,
    _unlink,
    is_bookkeeping,
)
from tony_airflow.yarn.hdfs import part_name

log = logging.getLogger("tony.executor.output")
QUIET_S = 1.0          # the fallback's rule: a file left unchanged this long is taken to be whole
QUIET_MARGIN_S = 0.25  # a round for a file that waited for its quiet time comes this long after it
MAX_OPEN = 256         # files a scan round takes at once; the rest of the prefix comes in the next round


def _retried_at_the_end(exc: BaseException) -> bool:
    """The final push is tried again after any error but a newer attempt's fence, a directory that is gone
    (the program has ended: it will not come back), and an interrupt."""
    return isinstance(exc, Exception) and not isinstance(exc, (WriterFenced, OutputDirectoryGone))


class Publisher(OutputDirectory):
    """Publishes a local directory's files to HDFS by the protocol's rules."""

    clock: Callable[[], float] = staticmethod(time.time)

    def _held_open(self) -> set[tuple[int, int]] | None:
        """(device, inode) of the files a process of the task holds open for writing; None: not known."""
        return None

    # ------------------------------------------------------------------ writing
    def push(self, cutoff: float | None = None, background: bool = False) -> int:
        """Publish the prefix of what changed (rule 2). Returns how many files were published or removed.

        `cutoff`: only files unchanged since then are taken (default: QUIET_S ago); math.inf takes
        everything (the program exited 0: nothing writes any more). A round that stopped at a file
        changed less than QUIET_S ago waits for it once, rather than leave it to a later round by which
        time the next save may have dropped it. `background`: a round of the loop, which ends after its
        current upload once the loop is told to stop (the final push goes on from there)."""
        in_round = cutoff is None
        count, blocked_at = self._round(self.clock() - QUIET_S if cutoff is None else cutoff, background)
        if in_round and blocked_at is not None and self._settle(blocked_at):
            more, blocked_at = self._round(self.clock() - QUIET_S, background)
            count += more
        self.waiting = blocked_at is not None
        return count

    def push_all(self, cutoff: float) -> int:
        """Scan rounds until one took everything it may: a round takes at most MAX_OPEN files at once, a push
        that must publish everything (the end; a first publish of a large directory) has no such cap."""
        count = 0
        while True:
            count += self.push(cutoff)
            if not self._capped:
                return count

    def _round(self, cutoff: float, background: bool) -> tuple[int, float | None]:
        """One round: (files published or removed, the mtime of the file the prefix stopped at). `_capped`:
        it stopped at MAX_OPEN files (the next round goes on from there)."""
        self._capped = False
        self._fence()
        present = self._walk()
        # mtime order; on a tie (a coarse kernel clock, `cp -p`, `tar x`) the inode, which filesystems give out
        # in creation order far more often than names sort that way (TensorFlow's `checkpoint` < `ckpt-N`)
        changed = sorted((st.st_mtime_ns, st.st_ino, rel) for rel, st in present.items()
                         if self._held.get(rel) != Version.of(st))
        grown: list[str] = []
        open_for_writing = self._held_open() or set()
        taken: list[tuple[str, BinaryIO, Version]] = []
        blocked_at: float | None = None
        complete = True
        count = 0
        with contextlib.ExitStack() as stack:
            for _, _, rel in changed:
                st = present[rel]
                if self._only_grows(rel, st):
                    grown.append(rel)
                    continue
                if (st.st_dev, st.st_ino) in open_for_writing:  # being written, however quiet it looks
                    blocked_at = st.st_mtime
                    complete = False
                    break
                if st.st_mtime > cutoff or len(taken) >= MAX_OPEN:
                    blocked_at = st.st_mtime if st.st_mtime > cutoff else None
                    self._capped = blocked_at is None
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
        if complete:  # rule 4: a growing file's bytes may name what a cut prefix left out
            sizes = self._remote_sizes() if any(rel in self._held for rel in grown) else {}
            for rel in grown:
                count += self._grow(rel, sizes, upto=present[rel].st_size)
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
            snap = None
            digest = hashlib.sha256()
            try:
                fd, name = tempfile.mkstemp(prefix=f".{os.path.basename(rel)}.tony-part-", dir=self._tmp_dir())
                snap = Path(name)
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
            except FileChanged:
                _unlink(snap)
                return out, False
            except OSError as exc:  # the local disk is full, an I/O error, a file-size limit: said, and kept
                _unlink(snap)
                why = f"its snapshot could not be written: {exc.strerror or exc}"
                if self._errors.get(rel) != why:
                    log.warning("output %s: %s: %s", self.uri, rel, why)
                self._errors[rel] = why
                return out, False
            self._errors.pop(rel, None)
            out.append((rel, snap, version, digest))
        return out, True

    def _publish(self, rel: str, snap: Path, version: Version, digest: Any) -> int:
        """Publish one snapshot; HDFS now holds `version` of `rel`."""
        with snap.open("rb") as fh:
            self._put(rel, fh)
        self._held[rel], self._hashes[rel] = version, digest
        self._own.add(rel)
        return 1

    def _publish_open(self, rel: str, fh: BinaryIO, version: Version, digest: Any) -> int:
        """Publish a file straight from the program's directory (nothing writes it any more: a clean exit)."""
        left = version.size
        while left > 0 and (chunk := fh.read(min(left, 1 << 20))):
            digest.update(chunk)
            left -= len(chunk)
        fh.seek(0)
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
            self._fence()  # also before the upload: a writer a newer claim fenced leaves no temporary file behind
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

    def _grow(self, rel: str, remote_sizes: dict[str, int], upto: int | None = None) -> int:
        """A file that only grows: append what HDFS lacks (a cut append leaves a prefix), or publish it whole
        the first time. Any prefix of it is valid, so it never waits for a quiet moment."""
        remote = f"{self.remote}/{rel}"
        events = EVENTS in os.path.basename(rel)  # no digest kept: the name says it only grows
        try:
            with self._open_local(rel) as fh:
                version = Version.of(os.fstat(fh.fileno()))
                if upto is not None and upto < version.size:  # only what was there when the history was read
                    version = Version(upto, version.mtime_ns, version.inode)
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

    def _remove_deleted(self, present: dict[str, os.stat_result]) -> int:
        """Files the program removed leave HDFS too, once a round reached the end (rule 2)."""
        removed = 0
        for rel in sorted(self._own - set(present)):
            self._unreadable.discard(rel)  # unreadable once, removed now: it leaves HDFS like any other
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
        delay = min(QUIET_S, mtime + QUIET_S - self.clock())
        return not self._stop.wait(max(0.0, delay) + 0.01)


