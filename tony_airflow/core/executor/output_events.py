"""What the writer did to its output directory, from the kernel: closes, renames, removals, in their order.

The mirror used to guess when a file was whole (unchanged for a second) and in which order files were
written (their mtimes). Both guesses failed real programs (issue #50): a file saved more often than once a
second was never whole, a writer pausing with a file open had its half published, and coarse kernel clocks
gave a save's files equal mtimes. The kernel knows both: inotify's IN_CLOSE_WRITE says a writer released
the last reference to a file it had open for writing, IN_MOVED_TO that a file was renamed into place, and
the events of one inotify instance form one ordered queue (inotify(7)). `../shared/notes/output-events.md`
has the facts and the measurements this module relies on.

The library is inotify_simple: it hands over the raw events (watch, mask, cookie, name) and the queue's
overflow, with no threads of its own. watchdog hides exactly those (no cookies; an overflow's events are
discarded and nothing reaches the handler) and holds every rename back half a second to pair it.

A close is not yet "whole": another process of the task may still hold the file open for writing (a
`dup`, a forked DataLoader worker, a second `open`). `Writers` reads that from /proc (psutil's
`open_files()` of the task's processes), matching files by (device, inode).

Where events cannot be had — inotify cannot start, no watches are left (ENOSPC), the queue overflowed —
`EventSource` says why (`lost`), and the mirror falls back to the quiet rule and a full rescan.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import select
import stat as stat_module
import struct
import termios
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from inotify_simple import INotify
from inotify_simple import flags as F

log = logging.getLogger("tony.executor.output")

WATCHED = (F.CLOSE_WRITE | F.MOVED_FROM | F.MOVED_TO | F.CREATE | F.DELETE | F.MODIFY | F.DELETE_SELF
           | F.MOVE_SELF)
CLOSED = "closed"      # a writer closed it after writing, or it was renamed into place
FOUND = "found"        # a scan found it (a new or moved-in directory, a rescan): no event says it is whole
REMOVED = "removed"    # deleted, or renamed away
MODIFIED = "modified"  # written to: a version being made (not whole until a close)


@dataclass(frozen=True)
class Change:
    """One thing the writer did, in the order the kernel queued it."""
    kind: str
    rel: str
    at: float           # when it was read (the mirror's clock): the end's rule looks at the last moments
    is_dir: bool = False


@dataclass
class EventSource:
    """One inotify instance watching a directory tree (a watch per directory, added as directories appear).

    `read` returns the changes in queue order. A directory that appears (made, or renamed in) is watched and
    then scanned, since files may already be in it before its watch landed (inotify(7)): what the scan
    finds is FOUND, judged whole only by `Writers`. `lost` is set, with the reason, when events were lost
    (the queue overflowed, a watch could not be added): the caller rescans and falls back for a stretch."""
    root: Path
    clock: Callable[[], float] = time.time
    ignore: Callable[[str], bool] = lambda name: False
    lost: str = ""
    gone: bool = False  # the root itself was removed or moved
    _inotify: INotify | None = None
    _paths: dict[int, str] = field(default_factory=dict)  # watch descriptor -> directory, relative ('' = root)

    def open(self) -> list[Change]:
        """Start watching; returns what is there now (FOUND). Raises OSError when inotify is not to be had."""
        self._inotify = INotify()
        try:
            return self._watch_tree("")
        except OSError:
            self.close()
            raise

    def close(self) -> None:
        if self._inotify is not None:
            with contextlib.suppress(OSError):
                self._inotify.close()
            self._inotify = None
        self._paths.clear()

    @property
    def fileno(self) -> int:
        return self._inotify.fileno() if self._inotify is not None else -1

    def wait(self, timeout_s: float) -> bool:
        """Whether events are queued, waiting up to `timeout_s` for them."""
        if self._inotify is None:
            return False
        try:
            return bool(select.select([self._inotify.fileno()], [], [], timeout_s)[0])
        except (OSError, ValueError):
            return False

    def unread(self) -> int:
        """Bytes of events the kernel has queued and nobody has read (FIONREAD)."""
        if self._inotify is None:
            return 0
        try:
            return int(struct.unpack("i", fcntl.ioctl(self._inotify.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0])
        except (OSError, ValueError):
            return 0

    def read(self, timeout_s: float = 0.0) -> list[Change]:
        """The changes queued now (waiting up to `timeout_s` for the first). A MOVED_FROM that ends one read may
        have its MOVED_TO in the next (inotify(7)): both are handled on their own, so no pairing is needed."""
        if self._inotify is None:
            return []
        out: list[Change] = []
        for event in self._inotify.read(timeout=max(0, int(timeout_s * 1000))):
            out.extend(self._changes_of(event.wd, event.mask, event.name))
        return out

    def _changes_of(self, wd: int, mask: int, name: str) -> list[Change]:
        if mask & F.Q_OVERFLOW:
            self.lost = "the kernel's event queue overflowed (/proc/sys/fs/inotify/max_queued_events)"
            return []
        if mask & F.IGNORED:
            self._paths.pop(wd, None)
            return []
        parent = self._paths.get(wd)
        if parent is None:
            return []  # a watch removed meanwhile (its directory moved away)
        if mask & (F.DELETE_SELF | F.MOVE_SELF):
            if parent == "":
                self.gone = True
            return []
        if not name or self.ignore(name):
            return []
        rel = f"{parent}/{name}" if parent else name
        now = self.clock()
        if mask & F.ISDIR:
            if mask & (F.CREATE | F.MOVED_TO):
                try:
                    return self._watch_tree(rel)
                except OSError as exc:
                    self.lost = f"no watch could be added for {rel}: {exc.strerror or exc}"
                    return []
            if mask & (F.DELETE | F.MOVED_FROM):
                self._unwatch_under(rel)
                return [Change(REMOVED, rel, now, is_dir=True)]
            return []
        if mask & (F.CLOSE_WRITE | F.MOVED_TO):
            return [Change(CLOSED, rel, now)]
        if mask & (F.DELETE | F.MOVED_FROM):
            return [Change(REMOVED, rel, now)]
        if mask & F.MODIFY:
            return [Change(MODIFIED, rel, now)]
        return []  # CREATE of a file: nothing written yet; its close or its writes follow

    def _watch_tree(self, rel: str) -> list[Change]:
        """Watch `rel` and every directory below it, then list the files there (FOUND)."""
        assert self._inotify is not None
        found: list[tuple[tuple[int, int, int], Change]] = []
        start = self.root / rel if rel else self.root
        now = self.clock()
        for dirpath, dirnames, filenames in os.walk(start, onerror=lambda exc: None):
            sub = os.path.relpath(dirpath, self.root)
            sub = "" if sub == "." else sub
            dirnames[:] = [d for d in dirnames if not self.ignore(d)]
            try:
                wd = self._inotify.add_watch(dirpath, WATCHED | F.ONLYDIR | F.DONT_FOLLOW)
            except FileNotFoundError:
                continue  # gone meanwhile: its removal's events follow
            except OSError as exc:
                if exc.errno == errno.ENOTDIR:
                    continue
                raise
            self._paths[wd] = sub
            for name in filenames:
                if self.ignore(name):
                    continue
                path = os.path.join(dirpath, name)
                with contextlib.suppress(OSError):
                    st = os.lstat(path)
                    if stat_module.S_ISREG(st.st_mode):
                        found.append(((st.st_mtime_ns, st.st_ctime_ns, st.st_ino),
                                      Change(FOUND, f"{sub}/{name}" if sub else name, now)))
        # No event orders what a scan finds (files written into a new directory before its watch landed):
        # their clocks are the only clue, and on a tie (a coarse clock) the inode, which filesystems give
        # out in creation order within a directory far more often than names sort that way.
        return [change for _, change in sorted(found, key=lambda item: item[0])]

    def _unwatch_under(self, rel: str) -> None:
        """A directory removed or renamed away: its watches (and those below) no longer name paths here."""
        for wd, path in list(self._paths.items()):
            if path == rel or path.startswith(rel + "/"):
                self._paths.pop(wd, None)
                if self._inotify is not None:
                    with contextlib.suppress(OSError):
                        self._inotify.rm_watch(wd)


@dataclass(frozen=True)
class Held:
    """What the task's processes hold open for writing: files by (device, inode), and which of them only
    in append mode (O_APPEND: they only grow, as a log's FileHandler or a metrics writer)."""
    writing: frozenset[tuple[int, int]]
    appending: frozenset[tuple[int, int]]


class Writers:
    """Who holds files open for writing: the task's processes (`pids()`: the command's and every one below
    it), read from /proc through psutil. None: not readable (another user's processes, a container whose
    processes this one cannot see) — the caller trusts the close events alone then, and says so once."""

    def __init__(self, pids: Callable[[], Iterable[int]]):
        self._pids = pids
        self.denied = ""

    def held(self) -> Held | None:
        writing: set[tuple[int, int]] = set()
        appending: set[tuple[int, int]] = set()
        other: set[tuple[int, int]] = set()
        for proc in self._processes():
            try:
                files = proc.open_files()
            except psutil.NoSuchProcess:
                continue
            except psutil.AccessDenied as exc:
                self.denied = f"the task's open files cannot be read ({exc})"
                return None
            for f in files:
                mode = getattr(f, "mode", "r+")
                if mode == "r":
                    continue
                try:
                    st = os.stat(f"/proc/{proc.pid}/fd/{f.fd}")
                except OSError:
                    continue
                key = (st.st_dev, st.st_ino)
                writing.add(key)
                (appending if mode in ("a", "a+") else other).add(key)
        return Held(frozenset(writing), frozenset(appending - other))

    def _processes(self) -> list[psutil.Process]:
        out: list[psutil.Process] = []
        seen: set[int] = set()
        for pid in self._pids():
            try:
                top = psutil.Process(pid)
                tree = [top, *top.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for proc in tree:
                if proc.pid not in seen:
                    seen.add(proc.pid)
                    out.append(proc)
        return out


def file_key(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
