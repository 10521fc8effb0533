"""What is whole, and what HDFS may show: the writer's history of closes, renames and removals.

Every change the kernel reported (`output_events.py`) becomes an entry in the order it was queued. A closed
file gets its snapshot at once (`output_commit.py`); an entry is READY (its snapshot is the version the
close left, or it is a removal), SAME (the version HDFS holds already) or LOST (not whole: still held open
for writing by another process, changed while it was copied, or it could not be copied — say why).

`prefix` is the protocol's rule 2 on this history: the longest run of entries from the oldest such that
every path's last entry in the run is READY or SAME, and no file was being written at the run's end (a
write with no close yet: a file open for writing stops the prefix, however long its writer pauses; a file
that only grows does not). HDFS then shows each path at its last version in the run: the files closed
before a pointer always reach HDFS before it, and a newer version of a file replaces an older one not yet
uploaded, together with what was closed before it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tony_airflow.core.executor.output_events import CLOSED, FOUND, MODIFIED, REMOVED, Change

NEW = "new"      # not judged yet
READY = "ready"  # its snapshot is the version the close left (or a removal, or a growing file's turn)
SAME = "same"    # the version HDFS holds already (or not part of the output)
LOST = "lost"    # not whole: held open for writing, changed while copied, not copied (`why`)


@dataclass
class Entry:
    """One change of the history, and what became of its version."""
    seq: int
    change: Change
    state: str = NEW
    snapshot: Path | None = None
    version: object = None     # the version the snapshot holds (output_protocol.Version)
    digest: object = None      # its sha256 (tells a later append)
    why: str = ""              # LOST: the reason, for the log and the end's error
    retry: bool = False        # LOST for a copy that failed: tried again while nothing newer came

    @property
    def rel(self) -> str:
        return self.change.rel

    @property
    def removal(self) -> bool:
        return self.change.kind == REMOVED


@dataclass
class History:
    """The entries not yet published, in queue order, and who is being written now."""
    entries: list[Entry] = field(default_factory=list)
    seq: int = 0
    touched: dict[str, int] = field(default_factory=dict)   # rel -> seq of its last change of any kind
    writing: dict[str, int] = field(default_factory=dict)   # rel -> seq of its last write with no close after it

    def add(self, change: Change) -> Entry | None:
        """Record a change; an entry for a close, a found file or a removal (a write is only noted)."""
        self.seq += 1
        self.touched[change.rel] = self.seq
        if change.kind == MODIFIED:
            self.writing[change.rel] = self.seq
            return None
        self.writing.pop(change.rel, None)
        if change.is_dir:  # a directory removed: its files go with it
            for rel in [r for r in self.writing if r.startswith(change.rel + "/")]:
                self.writing.pop(rel)
        entry = Entry(self.seq, change)
        if change.kind == REMOVED:
            entry.state = READY
        self.entries.append(entry)
        return entry

    def latest(self) -> dict[str, Entry]:
        """rel -> its last entry (entries a newer one supersedes need no snapshot)."""
        out: dict[str, Entry] = {}
        for entry in self.entries:
            out[entry.rel] = entry
        return out

    def changed_since(self, entry: Entry) -> bool:
        """The file changed after this entry's close (written, closed again, removed): a copy taken now may not
        be the version that close left."""
        return self.touched.get(entry.rel, 0) > entry.seq

    def prefix(self, before: float, grows: Callable[[str], bool]) -> list[Entry]:
        """The entries HDFS may show now (see the module's docstring), oldest first: only those read before
        `before` (the end's rule: what a dying program's last moments closed is not trusted)."""
        stops = sorted(seq for rel, seq in self.writing.items() if not grows(rel))
        stop_at = stops[0] if stops else None
        lost: set[str] = set()   # paths whose last entry so far is LOST
        best = 0
        for n, entry in enumerate(self.entries, 1):
            if entry.change.at > before or (stop_at is not None and entry.seq > stop_at):
                break
            if entry.state == NEW:
                break  # not judged yet
            if entry.removal and entry.change.is_dir:
                lost = {rel for rel in lost if not rel.startswith(entry.rel + "/")}
            if entry.state == LOST and not grows(entry.rel):
                lost.add(entry.rel)
            else:
                lost.discard(entry.rel)
            if not lost:
                best = n
        return self.entries[:best]

    def take(self, count: int) -> list[Entry]:
        """The first `count` entries leave the history (published, or superseded within them)."""
        taken, self.entries = self.entries[:count], self.entries[count:]
        return taken

    def last_of_each(self, entries: list[Entry]) -> list[Entry]:
        """Each path's last entry among `entries`, in the order of those last entries."""
        last: dict[str, Entry] = {}
        for entry in entries:
            last.pop(entry.rel, None)
            last[entry.rel] = entry
        return sorted(last.values(), key=lambda e: e.seq)


def removals_late(entries: list[Entry]) -> list[Entry]:
    """`entries` in order, each removal moved after the writes that follow it, except a write at or under the
    removed path (which must come after its removal).

    Publishing each path's last entry in order skips the versions between: a removal of an old checkpoint
    (which the program made once its pointer named a newer one) would otherwise reach HDFS before that
    newer pointer, and a push cut in between left HDFS a pointer naming a file already gone (the output
    model found it). A removal published late leaves, at worst, an old whole file a while longer."""
    out: list[Entry] = []
    waiting: list[Entry] = []
    for entry in entries:
        if not entry.removal:
            due = [r for r in waiting if entry.rel == r.rel or entry.rel.startswith(r.rel + "/")]
            if due:
                out.extend(due)
                waiting = [r for r in waiting if r not in due]
            out.append(entry)
        else:
            waiting.append(entry)
    return out + waiting


def is_file_entry(entry: Entry) -> bool:
    return entry.change.kind in (CLOSED, FOUND)
