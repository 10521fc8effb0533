"""The output's commit protocol: how a task's local output directory reaches HDFS, whatever fault hits.

The rules (docs/ARCHITECTURE.md, "The output's commit protocol", says why each one):

1. One writer at a time, fenced by an epoch (`output_protocol.py`). A writer claims the output by creating
   `.tony-writer-<epoch>` with overwrite=false, one above every mark there; it is fenced once a mark of a
   greater epoch from another (application, attempt) exists, checked before every rename, append, delete.
2. What HDFS shows is a prefix of the writer's history of closes, renames and removals, as the kernel
   queued them (`output_events.py`, `output_history.py`): a file is whole when its writer closed it after
   writing or renamed it into place and no process of the task still holds it open for writing; a file
   being written stops the prefix however long its writer pauses. Never mtimes, never names: a pointer
   written last (TensorFlow's `checkpoint`, a hand-written `latest`) never overtakes the files closed
   before it. Where events are not to be had (no inotify, no watches left, the queue overflowed) the
   quiet rule stands in, said once with the reason, after a full rescan: files unchanged for QUIET_S,
   in mtime order (`output_publisher.Publisher.push`).
3. A version is snapshotted at its close (a reflink where the filesystem has one, else an in-kernel copy),
   checked against the events that came meanwhile (changed while copied: not that version), and uploaded
   under a temporary name, renamed into place with one NameNode operation; the snapshot goes once uploaded.
4. Files that only grow (TensorBoard's event files, a file held open in append mode, a file whose published
   bytes are still its first bytes) publish as prefixes by APPEND, never stop the prefix, and go out only
   when every change before their size was read has been published.
5. Readers (a retry resuming, the evaluator, TensorBoard) take files in HDFS's modification order and keep
   what HDFS has and no more (`output_protocol.py`).
6. The end: after a clean exit (0) every file is published (no per-round cap; an error names the file and
   fails the task); after a stop or a failure only what was closed SETTLE_S before the end (a dying
   program's last closes may be the kernel's, not its own); a writer whose AM is gone publishes nothing.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import math
import os
import random
import stat as stat_module
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from tony_airflow import retries
from tony_airflow.core.executor.output_events import CLOSED, REMOVED, Change, EventSource, Held, Writers, file_key
from tony_airflow.core.executor.output_history import LOST, NEW, READY, SAME, Entry, History, removals_late
from tony_airflow.core.executor.output_protocol import (
    EVENTS,
    Mark,
    OutputDirectoryGone,
    Version,
    WriterFenced,
    _unlink,
    is_bookkeeping,
    is_hdfs,
    is_tensorboard_file,
    mark_epoch,
    mark_name,
)
from tony_airflow.core.executor.output_publisher import (
    MAX_OPEN,
    QUIET_MARGIN_S,
    QUIET_S,
    Publisher,
    _retried_at_the_end,
)
from tony_airflow.yarn.hdfs import OutputFiles

__all__ = ["EVENTS", "MAX_OPEN", "QUIET_S", "SETTLE_S", "Mark", "Mirror", "OutputDirectoryGone", "Version",
           "WriterFenced", "is_bookkeeping", "is_hdfs", "is_tensorboard_file", "mark_epoch", "mark_name",
           "next_round_in", "_retried_at_the_end"]

log = logging.getLogger("tony.executor.output")
SYNC_INTERVAL_S = 5.0  # the fallback's rounds (and a reader's pulls)
SETTLE_S = 0.5         # a close is published this long after it was read, while the program still runs
WATCH_POLL_S = 0.2     # the watcher's wait for events
UPLOAD_POLL_S = 0.05   # the uploader's look for entries ready to publish
FINAL_TRIES = 3        # the final push, with FINAL_BACKOFF_S * try between tries
FINAL_BACKOFF_S = 2.0
FICLONE = 0x40049409   # ioctl_ficlonerange(2): share the extents (btrfs, XFS reflink=1); atomic against writes


class Mirror(Publisher):
    """A local directory kept in step with one HDFS directory, by the rules above."""

    def __init__(self, uri: str, local: Path, files: OutputFiles | None = None, writer: str = "",
                 attempt: tuple[str, int] = ("", 0), clock: Callable[[], float] = time.time):
        super().__init__(uri, local, files, writer, attempt)
        self.clock = clock
        self.history = History()
        self.source: EventSource | None = None
        self.writers: Writers | None = None
        self.alive: Callable[[], bool] = lambda: True  # the program still runs: its closes are its own
        self.fallback = ""           # why the quiet rule stands in now ('' : the writer's events)
        self._fell_back = False      # the fallback was said in this stretch
        self._appending: set[str] = set()
        self._classified: dict[str, tuple[int, int]] = {}  # rel -> the file whose kind was looked at
        self._hist_lock = threading.RLock()
        self._lost_gen = 0  # times events were lost: a rescan hands back only if none was lost since it began
        self._threads: list[threading.Thread] = []

    @property
    def settle_s(self) -> float:
        """How long before a stop or failure a change must have been made to be published at the end."""
        return QUIET_S if self.source is None or self.fallback else SETTLE_S

    # --------------------------------------------------------------- the writer's events
    def watch(self, writers: Callable[[], Iterable[int]] | None = None,
              alive: Callable[[], bool] | None = None) -> bool:
        """Follow the writer through the kernel's events; False (the quiet rule stands in, said once) when
        they are not to be had. `writers`: the pids of the program's processes (who may hold a file open for
        writing); `alive`: whether the program still runs."""
        self.local.mkdir(parents=True, exist_ok=True)
        self.source = EventSource(self.local, clock=self.clock, ignore=is_bookkeeping)
        try:
            found = self.source.open()
        except OSError as exc:
            self.source = None
            self._fall_back(f"the kernel's file events cannot be had here ({exc.strerror or exc})")
            return False
        self.writers = Writers(writers) if writers is not None else None
        if alive is not None:
            self.alive = alive
        with self._hist_lock:
            for change in found:
                self.history.add(change)
            self._judge()
        return True

    def observe(self, timeout_s: float = 0.0) -> int:
        """The watcher's step: read what the kernel queued into the history and snapshot each path's newest
        close at once (the next save may rewrite it). Returns how many changes were read."""
        source = self.source
        if source is None:
            return 0
        if timeout_s > 0:
            source.wait(timeout_s)  # outside the lock; the read is inside: the uploader's look at the queue and
        with self._hist_lock:      # at the history then sees every change either in one or in the other
            if self.source is None:
                return 0
            changes = source.read(0)
            for change in changes:
                self._add(change)
            if source.gone:
                source.close()
                self.source = None
                self._fall_back("the output directory was removed or moved")
            self._notice_lost()
            self._judge()
        return len(changes)

    def _add(self, change: Change) -> None:
        self.history.add(change)
        if change.kind in (CLOSED, REMOVED):  # the next writer of this path may write another way (R11)
            self._classified.pop(change.rel, None)
            self._appending.discard(change.rel)

    def _notice_lost(self) -> None:
        source = self.source
        if source is None or not source.lost:
            return
        reason, source.lost = source.lost, ""
        if reason.startswith("no watch"):  # a directory without a watch stays unwatched: for good
            source.close()
            self.source = None
        self._fall_back(reason)

    def _fall_back(self, reason: str) -> None:
        self.fallback = reason
        self._lost_gen += 1  # a rescan that began before this does not end the fallback
        if not self._fell_back:
            self._fell_back = True
            log.warning("output %s: %s: publishing by the quiet rule (files unchanged for %.0f s, in mtime "
                        "order) after a full rescan", self.uri, reason, QUIET_S)

    def _judge(self) -> None:
        """Snapshot each path's last new entry; an older new entry of the same path is superseded by it. A copy
        that the events show changed meanwhile is not the version its close left (LOST)."""
        latest = self.history.latest()
        for entry in self.history.entries:  # a copy that failed (a full disk, a chmod during it) is tried again
            if entry.state == LOST and entry.retry and latest.get(entry.rel) is entry \
                    and not self.history.changed_since(entry):
                entry.state, entry.retry = NEW, False  # (no event may ever come for it: R6)
        pending = [e for e in self.history.entries if e.state == NEW]
        if not pending:
            return
        held = self.writers.held() if self.writers is not None else None
        if self.writers is not None and held is None and self.writers.denied:
            log.warning("output %s: %s: a close is taken as whole without that check", self.uri,
                        self.writers.denied)
            self.writers = None
        self._note_appending(held)
        for entry in pending:
            if latest.get(entry.rel) is not entry:
                entry.state, entry.why = LOST, "a newer version followed"
            else:
                self._take(entry, held)
        if self.source is not None:  # what came while copying: a copy of a file changed since is not its close's
            for change in self.source.read(0):
                self.history.add(change)
        for entry in pending:
            if entry.state == READY and not entry.removal and self.history.changed_since(entry):
                _unlink(entry.snapshot)  # (a growing file's bytes after it may name closes not read yet: R4)
                entry.state, entry.snapshot, entry.why = LOST, None, "changed while it was copied"

    def _note_appending(self, held: Held | None) -> None:
        """Which files being written are held open in append mode only (they grow: rule 4); each file (its
        device and inode) is looked at once."""
        if held is None:
            return
        for rel in list(self.history.writing):
            key = file_key(self.local / rel)
            if key is None or self._classified.get(rel) == key:
                continue
            self._classified[rel] = key
            if key in held.appending:
                self._appending.add(rel)
            else:
                self._appending.discard(rel)

    def _classify_writing(self) -> None:
        """Files written since the last look whose kind (growing or not) is not known yet."""
        if self.writers is None:
            return
        with self._hist_lock:
            unknown = [rel for rel in self.history.writing
                       if self._classified.get(rel) != file_key(self.local / rel)]
        if unknown:
            self._note_appending(self.writers.held())

    def grows(self, rel: str) -> bool:
        """Rule 4: publishes as a prefix of itself, never holding the order back."""
        if EVENTS in os.path.basename(rel) or rel in self._appending:
            return True
        held = self._held.get(rel)
        if held is None or rel not in self._hashes:
            return False
        try:
            st = os.stat(self.local / rel)
        except OSError:
            return False
        return self._only_grows(rel, st)

    def _take(self, entry: Entry, held: Held | None) -> None:
        """The version this close left, copied now, or why not."""
        rel = entry.rel
        path = self.local / rel
        try:
            st = os.lstat(path)
        except OSError:
            entry.state, entry.why = LOST, "gone before it was copied"  # its removal follows in the history
            return
        if not stat_module.S_ISREG(st.st_mode) or rel in self._unreadable_now():
            entry.state = SAME  # not part of the output (rule 4)
            return
        if self.grows(rel):
            entry.state, entry.version = READY, Version.of(st)  # appended at its turn, as far as it was then
            return
        if held is not None and (st.st_dev, st.st_ino) in held.writing:
            entry.state, entry.why = LOST, "still held open for writing by a process of the task"
            return
        if self._held.get(rel) == Version.of(st):
            entry.state = SAME
            return
        try:
            entry.snapshot, entry.version = self._copy(rel)
        except PermissionError as exc:
            self._say_unreadable(rel, exc)
            entry.state = SAME
            return
        except FileNotFoundError:
            entry.state, entry.why, entry.retry = LOST, "gone or changed while it was copied", True
            return
        except OSError as exc:
            entry.state, entry.why, entry.retry = LOST, f"its snapshot could not be written: {exc.strerror or exc}", True
            if self._errors.get(rel) != entry.why:
                log.warning("output %s: %s: %s", self.uri, rel, entry.why)
            self._errors[rel] = entry.why
            return
        self._errors.pop(rel, None)
        entry.state = READY

    def _held_open(self) -> set[tuple[int, int]] | None:
        held = self.writers.held() if self.writers is not None else None
        return set(held.writing - held.appending) if held is not None else None

    def _tidy_tmp_dir(self) -> None:
        """Under the watcher's lock: its copy makes the directory and then a file in it (R3)."""
        with self._hist_lock:
            super()._tidy_tmp_dir()

    def _unreadable_now(self) -> set[str]:
        return self._unreadable

    def _copy(self, rel: str) -> tuple[Path, Version]:
        """A snapshot of the file as it is: a reflink where the filesystem has one (atomic against writes),
        else an in-kernel copy checked by fstat before and after."""
        with self._open_local(rel) as src:
            before = os.fstat(src.fileno())
            try:
                fd, name = tempfile.mkstemp(prefix=f".{os.path.basename(rel)}.tony-part-", dir=self._tmp_dir())
            except FileNotFoundError:  # its directory tidied away between the two (R3): made again
                fd, name = tempfile.mkstemp(prefix=f".{os.path.basename(rel)}.tony-part-", dir=self._tmp_dir())
            try:
                try:
                    fcntl.ioctl(fd, FICLONE, src.fileno())
                except OSError:
                    _copy_range(src.fileno(), fd, before.st_size)
                after = os.fstat(src.fileno())
                if (after.st_size, after.st_mtime_ns, after.st_ctime_ns) != (before.st_size, before.st_mtime_ns,
                                                                             before.st_ctime_ns):
                    raise _Changed()
            except _Changed:
                os.close(fd)
                _unlink(Path(name))
                raise FileNotFoundError(errno.ENOENT, "changed while it was copied", rel) from None
            except BaseException:
                os.close(fd)
                _unlink(Path(name))
                raise
            os.close(fd)
        return Path(name), Version.of(before)

    # --------------------------------------------------------------- publishing the history
    def publish_ready(self, before: float | None = None, background: bool = False) -> int:
        """The uploader's step: publish the history's prefix (rule 2) read before `before` (default: SETTLE_S
        ago, and nothing while the program is not running: the end decides then). Returns files published."""
        self._classify_writing()
        growing = self._growing_sizes()  # before the history is read: their bytes come after what it holds
        with self._hist_lock:
            if before is None:
                if not self.alive() or self.fallback:
                    return 0
                before = self.clock() - SETTLE_S
            read_up_to = self.history.seq
            unread = self.source.unread() if self.source is not None else 0  # closes the history lacks yet
            run = self.history.prefix(before, self.grows)
            last = removals_late(self.history.last_of_each(run))
        count = 0
        done = 0
        try:
            if any(e.removal for e in last):
                self._still_there()
            for entry in last:
                if background and self._stop.is_set():
                    return count
                count += self._publish_entry(entry)
                done += 1
        finally:
            with self._hist_lock:
                for entry in last[:done]:
                    _unlink(entry.snapshot)
                    entry.snapshot, entry.state = None, SAME
                if done == len(last):
                    for entry in self.history.take(len(run)):
                        _unlink(entry.snapshot)
            self._tidy_tmp_dir()
        with self._hist_lock:
            caught_up = not unread and not any(e.seq <= read_up_to for e in self.history.entries)
        if caught_up and growing:  # rule 4: a growing file's bytes never name what HDFS lacks
            sizes = self._remote_sizes() if any(rel in self._held for rel in growing) else {}
            for rel, size in growing.items():
                count += self._grow(rel, sizes, upto=size)
        return count

    def _growing_sizes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        with self._hist_lock:
            candidates = set(self.history.writing) | {rel for rel in self._held if EVENTS in rel}
        for rel in candidates:
            if not self.grows(rel):
                continue
            try:
                st = os.stat(self.local / rel)
            except OSError:
                continue
            if Version.of(st) != self._held.get(rel):
                out[rel] = st.st_size
        return out

    def _publish_entry(self, entry: Entry) -> int:
        rel = entry.rel
        if entry.removal:  # once published (SAME: a round cut after it), never again: a directory removed
            # again would take with it what was written into it afterwards and published in that round
            return 0 if entry.state == SAME else self._remove(rel, entry.change.is_dir)
        if entry.state == READY and entry.snapshot is None:  # a growing file's turn, as far as it was closed
            size = entry.version.size if isinstance(entry.version, Version) else None
            return self._grow(rel, self._remote_sizes() if rel in self._held else {}, upto=size)
        if entry.state != READY or entry.snapshot is None:
            return 0
        digest = hashlib.sha256()
        with entry.snapshot.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
        return self._publish(rel, entry.snapshot, entry.version, digest)  # type: ignore[arg-type]

    def _remove(self, rel: str, is_dir: bool) -> int:
        """A file (or a directory) the program removed leaves HDFS too, at its place in the history."""
        if is_dir:
            under = [held for held in self._own if held.startswith(rel + "/")]
            if under:
                self._fence()
                self.files.delete(f"{self.remote}/{rel}", recursive=True)
            for held in under:
                self._forget_held(held)
            return len(under)
        if rel not in self._own or (self.local / rel).exists():
            return 0  # never ours, or back again (its close follows in the history)
        self._fence()
        self.files.delete(f"{self.remote}/{rel}")
        self._forget_held(rel)
        self._unreadable.discard(rel)
        return 1

    # --------------------------------------------------------------- background
    def start(self, direction: str, interval: float = SYNC_INTERVAL_S, events: bool = True,
              writers: Callable[[], Iterable[int]] | None = None, alive: Callable[[], bool] | None = None) -> None:
        """Keep syncing in the background: 'push' (the chief), 'pull' (TensorBoard), 'both' (an evaluator).

        A writer follows the program's events (`events`; `writers` and `alive` as for `watch`): a watcher
        thread snapshots each close at once, an uploader publishes the history's prefix. Without events, or
        while the quiet rule stands in, rounds every `interval`."""
        pushing = direction in ("push", "both")
        if pushing and events and self.source is None and not self.fallback:
            self.watch(writers, alive)
        elif pushing and not events:
            self._fall_back("asked for the quiet rule")
        if pushing and self.source is not None:
            self._spawn(self._watcher, "mirror-watch")

        def step() -> None:
            if direction == "pull":
                self.pull(only_tensorboard=True)
            elif direction == "both":
                self.pull(events=False)
            if pushing:
                self._push_step(background=True)

        def loop() -> None:
            while not self._stop.wait(self._next_step_in(direction, interval)):
                try:
                    with self._lock:
                        if self._stop.is_set():
                            return
                        step()
                except WriterFenced as exc:
                    log.warning("no longer publishing to %s: %s", self.uri, exc)
                    return
                except OutputDirectoryGone as exc:
                    log.warning("%s", exc)
                    return
                except Exception as exc:  # a transient WebHDFS error: try again next round
                    log.warning("sync %s %s failed: %s", direction, self.uri, exc)

        self._spawn(loop, f"mirror-{direction}")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _next_step_in(self, direction: str, interval: float) -> float:
        if direction == "push" and self.source is not None and not self.fallback:
            return UPLOAD_POLL_S
        return next_round_in(self.waiting, interval)

    def _push_step(self, background: bool) -> int:
        """One step of the writing side: the history's prefix, or (the quiet rule standing in) a scan round;
        a scan round that took everything hands back to the events."""
        if self.source is not None and not self.fallback:
            return self.publish_ready(background=background)
        with self._hist_lock:  # everything before this rescan is the scan's to publish
            began = self._lost_gen
            for entry in self.history.take(len(self.history.entries)):
                _unlink(entry.snapshot)
            self.history.writing.clear()  # a lost close left its file "being written" for ever (R1)
        count = self.push(background=background)
        with self._hist_lock:
            if (self.source is not None and not self.waiting and not self._capped and not self.source.lost
                    and self._lost_gen == began):  # no events lost while the rescan ran (R2)
                log.info("output %s: publishing by the writer's events again", self.uri)
                self.fallback, self._fell_back = "", False
        return count

    def _watcher(self) -> None:
        while not self._stop.is_set() and self.source is not None:
            try:
                self.observe(WATCH_POLL_S)
            except Exception as exc:  # a watcher that dies would leave closes unsnapshotted: say so, fall back
                if not self._stop.is_set():  # (halted: its instance was closed under it)
                    self._fall_back(f"the event watcher failed: {exc}")
                return

    def halt(self) -> None:
        """Publish nothing more, now (the AM is gone: a newer attempt may be writing)."""
        self._halted.set()
        self._stop.set()
        source = self.source
        if source is not None:
            source.close()  # an inotify instance is a per-user resource (128 by default, a node's containers)
        with self._hist_lock:
            for entry in self.history.take(len(self.history.entries)):
                _unlink(entry.snapshot)

    def _join(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    def finish(self, cutoff: float = math.inf, ended_at: float | None = None) -> int:
        """Stop the background work and push once more: everything after a clean exit (`cutoff` math.inf),
        else what was closed (or, under the quiet rule, unchanged) since before `cutoff`. Given `ended_at`
        (when a failed or stopped program ended), the cutoff is `ended_at - settle_s`, with `settle_s` read
        after the last events are: a loss of events noticed only now makes it the quiet rule's (a cutoff
        computed before, with the events' shorter settle time, let the quiet rule take a torn file).

        An upload under way ends first (each WebHDFS request has a deadline). Raises, naming the file and
        the cause, when the output could not be published after FINAL_TRIES tries."""
        self._join()
        policy = retries.tries(FINAL_TRIES, FINAL_BACKOFF_S, _retried_at_the_end,
                               log=log, what=f"final push to {self.uri}")
        with self._lock:
            try:
                return policy(self._final, cutoff, ended_at)
            except WriterFenced as exc:
                log.warning("final push to %s skipped: %s", self.uri, exc)
                return 0
            finally:
                if self.source is not None:
                    self.source.close()
                with self._hist_lock:
                    for entry in self.history.take(len(self.history.entries)):
                        _unlink(entry.snapshot)
                self._tidy_tmp_dir()

    def _final(self, cutoff: float, ended_at: float | None = None) -> int:
        if self.source is not None and not self.fallback:
            self.observe(0)
        if ended_at is not None:
            cutoff = ended_at - self.settle_s
        if self.source is not None and not self.fallback:
            if cutoff == math.inf:
                return self._publish_everything()
            return self.publish_ready(before=cutoff)
        count = self.push_all(cutoff)  # no per-round cap at the end
        if cutoff == math.inf:
            self._raise_unpublished()
        return count

    def _publish_everything(self) -> int:
        """After a clean exit nothing writes any more: every file as it is, in the history's order (files it
        never saw first, by mtime), uploaded straight from the file; then what the program removed."""
        present = self._walk()
        with self._hist_lock:
            order = dict(self.history.touched)
        changed = [rel for rel, st in present.items() if self._held.get(rel) != Version.of(st)]
        changed.sort(key=lambda rel: (order.get(rel, 0), present[rel].st_mtime_ns, rel))
        count = 0
        for rel in changed:
            if rel in self._unreadable:
                continue
            try:
                if self.grows(rel):
                    count += self._grow(rel, self._remote_sizes() if rel in self._held else {})
                    continue
                with self._open_local(rel) as fh:
                    version = Version.of(os.fstat(fh.fileno()))
                    digest = hashlib.sha256()
                    count += self._publish_open(rel, fh, version, digest)
            except PermissionError as exc:
                self._say_unreadable(rel, exc)
            except FileNotFoundError:
                continue
            except (WriterFenced, OutputDirectoryGone):
                raise
            except Exception as exc:
                raise RuntimeError(f"{rel} could not be published: {' '.join(str(exc).split())[:200]}") from exc
        self._still_there()
        count += self._remove_deleted(present)
        return count

    def _raise_unpublished(self) -> None:
        errors = {rel: why for rel, why in self._errors.items() if (self.local / rel).exists()
                  and self._held.get(rel) != Version.of(os.stat(self.local / rel))}
        if errors:
            rel, why = sorted(errors.items())[0]
            raise RuntimeError(f"{rel} could not be published: {why}")

    def stop(self) -> None:
        """Stop the background rounds (a reader: nothing to publish)."""
        self._join()
        if self.source is not None:
            self.source.close()


class _Changed(Exception):
    """The file changed while it was copied."""


def _copy_range(src: int, dst: int, size: int) -> None:
    """An in-kernel copy (copy_file_range, a reflink on filesystems that do it that way), else read/write."""
    offset = 0
    try:
        while offset < size:
            sent = os.copy_file_range(src, dst, size - offset, offset, offset)
            if sent == 0:
                raise _Changed()  # shorter than it was: changed while copied
            offset += sent
        return
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
            raise
    while offset < size:
        chunk = os.pread(src, min(size - offset, 1 << 20), offset)
        if not chunk:
            raise _Changed()
        os.pwrite(dst, chunk, offset)
        offset += len(chunk)


def next_round_in(waiting: bool, interval: float) -> float:
    """Seconds to the next scan round: soon after a file's quiet time when one waited for it, else the
    interval less up to a fifth at random, so that rounds never lock in phase with a program's saves."""
    if waiting:
        return QUIET_S + QUIET_MARGIN_S
    return interval * random.uniform(0.8, 1.0)

