"""A task's own output (its command's stdout and stderr, interleaved as written), in pieces with offsets.

The executor tees the command's output into an `OutputLog` and a file in the
container's log directory (aggregated by YARN with the other logs); it ships
what is new to the AM, which keeps the last part of each task's output and
serves it by offset. A reader (`OutputCursor`) turns those pieces into whole
lines, and after the application ends reads the rest from the aggregated file,
so no line is lost when the AM goes away. Offsets count characters of one
attempt's output. Light on purpose: the executor imports it at start-up.
"""

from __future__ import annotations

import collections
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

AM_KEEP_CHARS = 128 * 1024        # what the AM holds per task (readers that fall behind skip, told so)
AM_TOTAL_KEEP_CHARS = 32 * 2**20  # ... and for all tasks together: the AM shares a 512 MiB container
AM_MIN_KEEP_CHARS = 8 * 1024      # ... but never less than this per task (a traceback's worth)
EXECUTOR_KEEP_CHARS = 256 * 1024  # what an executor holds that the AM has not taken yet
SHIP_CHARS = 64 * 1024            # at most this much per request to the AM
MAX_PARTIAL_CHARS = 16 * 1024     # a line longer than this is handed out in pieces (the held part travels
                                  # in an Airflow trigger's event)
OUTPUT_PATH = "/output.json"      # read-only, beside /status.json; through the tracking URL: pages/tony/output.json
FAILED_TASK = re.compile(r"(?P<task>[\w.-]+:\d+) exited with code -?\d+")
DIAG_ATTEMPT = re.compile(r"attempt (?P<n>\d+)/\d+:")


FOLLOWED_TYPES = ("chief", "master", "worker")  # whose output a reader gets when it names no task
OUTPUT_FILE = re.compile(r"tony-output-(?P<type>[\w.-]+?)-(?P<index>\d+)-a(?P<attempt>\d+)\.txt")


def default_task(types: Iterable[str]) -> str:
    """The task whose output is followed by default: the chief, else worker 0, else the first task.
    The AM answers a reader that names no task with it; a reader that never heard the AM finds it the
    same way among the files YARN aggregated."""
    types = list(types)
    for name in FOLLOWED_TYPES:
        if name in types:
            return f"{name}:0"
    return f"{types[0]}:0" if types else ""


def task_key(task: str) -> tuple[str, int]:
    """"worker:1" -> ("worker", 1)."""
    type_, _, index = task.rpartition(":")
    return type_, int(index)


def output_file_name(task_type: str, index: int, attempt: int) -> str:
    """The file in the container's log directory: one per task and attempt, so `yarn logs` finds it by name."""
    return f"tony-output-{task_type}-{index}-a{attempt}.txt"


class OutputLog:
    """Text with absolute offsets, of which only the last `keep` characters are held (thread-safe)."""

    def __init__(self, keep: int = AM_KEEP_CHARS):
        self.keep = keep
        self.start = 0        # offset of the first character still held
        self._text = ""
        self._lock = threading.Lock()

    @property
    def end(self) -> int:
        return self.start + len(self._text)

    def append(self, text: str) -> None:
        with self._lock:
            self._text += text
            if len(self._text) > self.keep:
                cut = len(self._text) - self.keep
                self._text = self._text[cut:]
                self.start += cut

    def write_at(self, offset: int, text: str) -> None:
        """A piece shipped from `offset`: what is already held is skipped, a gap (the sender dropped
        output it could not ship) is skipped over."""
        with self._lock:
            end = self.start + len(self._text)
            if offset > end:          # the sender dropped characters: readers are told they were skipped
                self._text, self.start = "", offset
                end = offset
            new = text[end - offset:] if offset < end else text
        if new:
            self.append(new)

    def read(self, offset: int, limit: int = SHIP_CHARS) -> tuple[int, str]:
        """(offset of the returned text, text) from `offset` on, or from the oldest held character."""
        with self._lock:
            begin = max(offset, self.start)
            rel = begin - self.start
            return begin, self._text[rel:rel + limit]


@dataclass
class OutputCursor:
    """Where a reader is in one task's output, and the partial line it holds back."""

    task: str                      # e.g. "worker:0"
    attempt: int = 0
    offset: int = 0
    container_id: str = ""         # YARN's id of the container that wrote it (to read the aggregated file)
    partial: str = ""
    finished: bool = False         # the task ended and the AM holds all of its output
    lines: int = 0                 # lines handed out so far
    skipped: int = 0               # characters the reader never saw (it fell too far behind)
    _pending: list[str] = field(default_factory=list)
    _end_seen: int = 0             # how far the current attempt's output went, as the AM last said

    def take(self, answer: dict) -> list[str]:
        """The whole lines in one answer of the AM's /output.json."""
        out: list[str] = []
        attempt = int(answer.get("attempt") or 0)
        if attempt and attempt != self.attempt:
            if self.attempt:  # a new attempt: its output starts from 0
                out += self.flush()
                if not self.finished:  # the AM holds only the newest attempt: say what this reader missed
                    missed = f" ({self._end_seen - self.offset} characters or more)" if self._end_seen > self.offset \
                        else ""
                    out.append(f"[the end of attempt {self.attempt}'s output{missed} was not read before attempt "
                               f"{attempt} began: `tony logs` has it]")
                out.append(f"--- attempt {attempt} ---")
            self.attempt, self.offset, self.partial, self.finished = attempt, 0, "", False
            self._end_seen = 0
        self.container_id = answer.get("container_id") or self.container_id
        begin = int(answer.get("offset", self.offset))
        if begin > self.offset:
            out += self.flush()
            out.append(f"[{begin - self.offset} characters of output skipped]")
            self.skipped += begin - self.offset
            self.offset = begin
        text = answer.get("text") or ""
        out += self._feed(text)
        self.offset = begin + len(text)
        self._end_seen = max(self._end_seen, int(answer.get("end", self.offset)))
        self.finished = bool(answer.get("finished")) and self.offset >= int(answer.get("end", self.offset))
        return out

    def rest(self, text: str) -> list[str]:
        """The lines of `text`, the attempt's output from this cursor's offset on (read from the aggregated
        file), and the last partial."""
        out = self._feed(text) if text else []
        self.offset += len(text)
        return out + self.flush()

    def flush(self) -> list[str]:
        """The partial line held back, as a line (the output ended without a newline)."""
        if not self.partial:
            return []
        line, self.partial = self.partial.removesuffix("\r"), ""
        self.lines += 1
        return [line]

    def _feed(self, text: str) -> list[str]:
        self.partial += text
        whole: list[str] = []
        if "\n" in self.partial or "\r" in self.partial:
            # A trailing "\r" may be the first half of a "\r\n" cut between two pieces: held back with
            # its line until the next piece tells (else that line would be followed by a blank one).
            body, held = (self.partial[:-1], "\r") if self.partial.endswith("\r") else (self.partial, "")
            *whole, last = re.split(r"\r?\n|\r", body)
            self.partial = last + held
        while len(self.partial) > MAX_PARTIAL_CHARS:  # a line without end: handed out in pieces
            whole.append(self.partial[:MAX_PARTIAL_CHARS])
            self.partial = self.partial[MAX_PARTIAL_CHARS:]
        self.lines += len(whole)
        return whole


def failed_task(diagnostics: str) -> tuple[str, int] | None:
    """Which task made the job fail (its id, the attempt), from the AM's diagnostics."""
    chunks = [c for c in re.split(r"(?=attempt \d+/\d+:)", diagnostics or "") if FAILED_TASK.search(c)]
    if not chunks:
        return None
    last = chunks[-1]
    attempt = DIAG_ATTEMPT.search(last)
    return FAILED_TASK.search(last).group("task"), int(attempt.group("n")) if attempt else 1  # type: ignore[union-attr]


class AggregatedFile:
    """One file's content taken from the lines of `yarn logs` (LogsCLI) as they come: of its last copy,
    only what follows its first `skip` characters, or only its last `tail` lines. What is held is what is
    kept: a task's output of gigabytes is never loaded whole."""

    def __init__(self, file_name: str, skip: int = 0, tail: int | None = None):
        self.file_name, self.skip, self.tail = file_name, skip, tail
        self._found = False
        self._state = "seek"      # seek -> header -> body -> seek
        self._length: int | None = None
        self._taken = 0           # bytes of the body read (LogLength counts bytes)
        self._chars = 0           # characters of the body read (offsets count characters)
        self._kept: collections.deque[str] = collections.deque(maxlen=None if tail is None else tail + 1)

    def feed(self, line: str) -> None:
        if line == f"LogType:{self.file_name}\n":  # a (later) copy of the file: it is the one taken
            self._found, self._state, self._length, self._taken, self._chars = True, "header", None, 0, 0
            self._kept.clear()
        elif self._state == "header":
            if line.startswith("LogLength:") and line[10:].strip().isdigit():
                self._length = int(line[10:])
            elif line == "LogContents:\n":
                self._state = "body" if self._length != 0 else "seek"
        elif self._state == "body":
            if self._length is None:
                if line.startswith(f"End of LogType:{self.file_name}"):
                    self._state = "seek"
                    return
                self._take(line)
                return
            data = line.encode()
            left = self._length - self._taken
            if len(data) >= left:
                self._take(data[:left].decode(errors="replace"))
                self._state = "seek"
            else:
                self._take(line)
            self._taken += min(len(data), left)

    def _take(self, piece: str) -> None:
        if self._chars + len(piece) > self.skip:
            self._kept.append(piece[max(0, self.skip - self._chars):])
        self._chars += len(piece)

    def text(self) -> str | None:
        """The content kept (from `skip` on, or the last `tail` lines), or None if the file was not there."""
        if not self._found:
            return None
        text = "".join(self._kept)
        return text if self.tail is None else "".join(text.splitlines(keepends=True)[-self.tail:])


def output_files_pattern(task: str = "") -> str:
    """`yarn logs -log_files_pattern` for every attempt's output file of `task` (of every task when '')."""
    if not task:
        return r"tony-output-.*\.txt"
    type_, index = task_key(task)
    return rf"tony-output-{re.escape(type_)}-{index}-a\d+\.txt"


class AggregatedOutputs:
    """Every attempt's output file of one task, taken from the lines of `yarn logs` as they come (the last
    copy of each). With no task named, the task a reader follows by default (`default_task` over the
    types whose files appear: only files of index 0 are held, and only of the best type so far). `skip`:
    characters of an attempt already read."""

    def __init__(self, task: str = "", skip: dict[int, int] | None = None):
        self.task, self.skip = task, skip or {}
        self._files: dict[tuple[str, int, int], AggregatedFile] = {}
        self._current: AggregatedFile | None = None

    def feed(self, line: str) -> None:
        current = self._current
        if line.startswith("LogType:") and (current is None or current._state != "body"):
            self._current = current = self._file_of(line[8:].rstrip("\n"))
        if current is not None:
            current.feed(line)

    def _file_of(self, name: str) -> AggregatedFile | None:
        found = OUTPUT_FILE.fullmatch(name)
        if found is None:
            return None
        type_, index, attempt = found["type"], int(found["index"]), int(found["attempt"])
        if self.task:
            if (type_, index) != task_key(self.task):
                return None
        else:
            if index != 0:
                return None
            best = default_task(sorted({t for t, _, _ in self._files} | {type_})).split(":")[0]
            if best != type_:
                return None
            self._files = {k: f for k, f in self._files.items() if k[0] == best}
        key = (type_, index, attempt)
        if key not in self._files:
            self._files[key] = AggregatedFile(name, skip=self.skip.get(attempt, 0) if self.task else 0)
        return self._files[key]

    def found(self) -> tuple[str, list[tuple[int, str]]] | None:
        """(the task, [(attempt, its text)] by attempt), or None if no file of it was there."""
        texts = {k: f.text() for k, f in self._files.items()}
        attempts = sorted((k[2], t) for k, t in texts.items() if t is not None)
        if not attempts:
            return None
        type_, index, _ = next(iter(self._files))
        return f"{type_}:{index}", attempts


def aggregated_text(lines: Iterable[str], file_name: str, skip: int = 0, tail: int | None = None) -> str | None:
    """One file's content in the output of `yarn logs`, read line by line (AggregatedFile)."""
    found = AggregatedFile(file_name, skip, tail)
    for line in lines:
        found.feed(line)
    return found.text()
