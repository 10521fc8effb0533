"""HDFS input and output for programs that only see a local filesystem.

TensorFlow 2.21 has no HDFS filesystem, so the executor stages: an `hdfs://`
input is copied to a local directory before the command starts; an `hdfs://`
output is mirrored — pulled once at start (so a later attempt resumes from the
checkpoints an earlier one wrote), then pushed every few seconds and once more
when the command ends by the task that owns the output (the chief), or pulled
every few seconds by readers (TensorBoard); an evaluator does both, for the
files it writes itself. The command sees local paths in DTF_INPUT_PATH /
DTF_OUTPUT_PATH and the original URIs in DTF_INPUT_URI / DTF_OUTPUT_URI.

What a reader of the HDFS output can see (the README's "What a job's output survives"):
- a file whole or not at all: it is uploaded under a temporary name beside it
  (`<name>.tony-part-<writer>-<random>`, skipped by every reader) and renamed into
  place with one NameNode operation (rename with OVERWRITE);
- a file as it was once the program had left it unchanged for QUIET_S, and not
  changed while it was uploaded: a file being rewritten in place waits;
- after a stop (the AM's, YARN's, a lost AM) or a failed exit, only files the
  program had left unchanged for QUIET_S before its end: what the end tore keeps
  its last published version;
- TensorBoard's event files grown by APPEND (a cut leaves a prefix);
- TensorFlow's `checkpoint` index only after every file of the checkpoint it names,
  which go first in a round (it waits for them when they are within QUIET_S), all
  opened before the first is uploaded (the next save may drop them meanwhile);
- files the program removed removed, except a checkpoint the published index names;
- one writer: the chief of the newest attempt claims the output (`.tony-writer`),
  and a writer of an older attempt or application stops publishing.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import random
import re
import threading
import time
from pathlib import Path
from typing import BinaryIO

from tony_airflow.yarn.hdfs import (
    OutputFiles,
    RemoteFile,
    WebHdfsFiles,
    hdfs_path,
    is_part,
    part_name,
    webhdfs,
)

log = logging.getLogger("tony.executor.staging")
SYNC_INTERVAL_S = 5.0
QUIET_S = 1.0          # a file left unchanged this long is taken to be whole
QUIET_MARGIN_S = 0.25  # a round for a file that waited for its quiet time comes this long after it
FINAL_TRIES = 3        # the final push, with FINAL_BACKOFF_S * try between tries
FINAL_BACKOFF_S = 2.0
JOIN_S = 120.0         # how long the final push waits for a round under way (each request has a deadline)
CHECKPOINT_INDEX = "checkpoint"  # TensorFlow's CheckpointState: names the latest checkpoint in its directory
WRITER_MARK = ".tony-writer"     # who publishes into the output now: "<application id> <attempt> <task>"
EVENTS = ".tfevents."            # TensorBoard's event files: they grow in place
_PATHS = re.compile(r'^(?:all_)?model_checkpoint_paths?:\s*"([^"]*)"', re.MULTILINE)
_LATEST = re.compile(r'^model_checkpoint_path:\s*"([^"]*)"', re.MULTILINE)
_SHARDS = re.compile(r"\.data-\d+-of-(\d+)$")

Key = tuple[int, int]  # a local file's (size, mtime_ns): the version HDFS holds


def is_hdfs(uri: str) -> bool:
    return uri.startswith("hdfs:")


class WriterFenced(RuntimeError):
    """Another attempt (or application) has claimed the output: this writer publishes nothing more."""


class Mirror:
    """A local directory kept in step with one HDFS directory."""

    def __init__(self, uri: str, local: Path, files: OutputFiles | None = None, writer: str = "",
                 attempt: tuple[str, int] = ("", 0)):
        self.uri = uri
        self.remote = hdfs_path(uri).rstrip("/") or "/"
        self.local = local.absolute()
        self.files: OutputFiles = files or WebHdfsFiles(webhdfs(uri=uri))
        self.writer = writer or "w"
        self.attempt = attempt                    # (application id, attempt number) of this writer
        self._held: dict[str, Key] = {}           # rel -> the local version HDFS holds (pushed or pulled)
        self._seen: dict[str, RemoteFile] = {}    # rel -> the remote version a pull copied
        self._own: set[str] = set()               # files this writer may replace and remove in HDFS
        self._indexes: dict[str, bytes] = {}      # rel -> the `checkpoint` index HDFS holds
        self._mark: bytes | None = None           # WRITER_MARK as this writer last saw or wrote it
        self._lock = threading.Lock()             # one round at a time: the loop's, the final push
        self._stop = threading.Event()
        self._halted = threading.Event()
        self._thread: threading.Thread | None = None
        self.waiting = False  # the last push left a file only because it had changed within QUIET_S

    # ------------------------------------------------------------------ reading
    def pull(self, while_written: bool = True, events: bool = True) -> int:
        """Copy remote files that are new or changed since the last pull. Returns how many.

        `while_written`: the directory may be written to right now (an output), so a file
        HDFS shows empty is not copied yet; an input is complete, and its empty files
        (e.g. `_SUCCESS`) are copied too. `events`: copy TensorBoard's event files (a
        task that only resumes from checkpoints does not need them).
        """
        self.local.mkdir(parents=True, exist_ok=True)
        listing = self.files.list(self.remote)
        count = 0
        indexes = []
        for remote_file, info in sorted(listing.items()):
            rel = remote_file[len(self.remote):].lstrip("/")
            name = os.path.basename(rel)
            if is_part(rel) or name == WRITER_MARK or rel in self._own:
                continue  # under way or left by a cut writer; this writer's own files
            if name == CHECKPOINT_INDEX:
                indexes.append((rel, info))
            elif (events or EVENTS not in name) and self._copy(rel, info, while_written):
                count += 1
        present = {str(p.relative_to(self.local)) for p in self.local.rglob("*") if p.is_file()}
        for rel, info in indexes:  # last, and only once the files they name are here
            if self._seen.get(rel) == info:
                continue
            data = self.files.read(f"{self.remote}/{rel}")
            if not _names_files_in(rel, data, present, self.local):
                continue  # its checkpoint's files come in a later round
            target = self.local / rel
            _write_whole(target, data)
            self._seen[rel] = info
            self._held[rel] = _key(target.stat())
            self._indexes[rel] = data
            count += 1
        return count

    def _copy(self, rel: str, info: RemoteFile, while_written: bool) -> bool:
        if self._seen.get(rel) == info or (info.size == 0 and while_written):
            return False
        target = self.local / rel
        local_size = target.stat().st_size if target.exists() else 0
        events = EVENTS in target.name
        if events and info.size < local_size:
            return False  # an event file only grows: a shorter one is not newer
        target.parent.mkdir(parents=True, exist_ok=True)
        if events and 0 < local_size < info.size:
            # TensorBoard keeps reading the file it opened: append the new tail in place.
            with target.open("ab") as fh:
                fh.write(self.files.read(f"{self.remote}/{rel}", start=local_size))
        else:
            tmp = target.with_name(f"{target.name}.tony-part-pull")
            self.files.download(f"{self.remote}/{rel}", str(tmp))
            os.replace(tmp, target)
        self._seen[rel] = info
        self._held[rel] = _key(target.stat())
        return True

    # ------------------------------------------------------------------ writing
    def claim(self) -> None:
        """Make this writer the output's only one: later pushes of an older writer stop (WriterFenced).
        Temporary files that cut writers left behind go."""
        app, attempt = self.attempt
        mark = f"{app} {attempt} {self.writer}\n".encode()
        self.files.mkdirs(self.remote)
        self._replace(f"{self.remote}/{WRITER_MARK}", mark)
        self._mark = mark
        mine = f".tony-part-{self.writer}"
        for path in self.files.list(self.remote):
            if is_part(path) and mine not in path:
                self.files.delete(path)

    def adopt(self) -> None:
        """The files HDFS holds now are this writer's to replace and remove (a chief resuming)."""
        self._own.update(self._held)

    def push(self, cutoff: float | None = None) -> int:
        """Publish local files that are new or changed since the last push. Returns how many.

        `cutoff`: only files unchanged since then are published (default: QUIET_S ago);
        math.inf publishes everything (the program exited 0: nothing writes any more).

        A later attempt restores from TensorFlow's `checkpoint` index, so an index reaches HDFS
        only after every file of the checkpoint it names. It is read before the walk: one read
        after would name a checkpoint saved during the push, whose files the walk did not see."""
        self._check_claim()
        in_round = cutoff is None
        cutoff = time.time() - QUIET_S if cutoff is None else cutoff
        self.waiting = False
        indexes = _read_indexes(self.local)
        named = {n for rel, (data, _) in indexes.items() for n in _named_paths(rel, data, self.local)}
        first: list[tuple[Path, str]] = []
        rest: list[tuple[Path, str]] = []
        for path in sorted(self.local.rglob("*")):
            rel = str(path.relative_to(self.local))
            (first if any(rel.startswith(n + ".") for n in named) else rest).append((path, rel))
        # The checkpoints the indexes name first, then the indexes, then the rest: TensorFlow drops a
        # checkpoint at its next save, which must not come while a large file is being uploaded.
        count = self._publish_files(first, cutoff, together=True)
        if in_round and self.waiting and self._settle(first):
            # The checkpoint a retry resumes from was saved less than QUIET_S ago: wait for it rather than
            # leave it behind a large upload, during which the next save would drop it.
            self.waiting = False
            count += self._publish_files(first, time.time() - QUIET_S, together=True)
        for rel, (data, key) in indexes.items():
            # TensorFlow replaces an index by rename and it was read once: whole, so no quiet time is needed
            if self._held.get(rel) == key or not _names_files_in(rel, data, self._held, self.local):
                continue  # unchanged, or its checkpoint's files come in a later round
            self._replace(f"{self.remote}/{rel}", data)
            self._held[rel], self._indexes[rel] = key, data
            self._own.add(rel)
            count += 1
        count += self._publish_files(rest, cutoff)
        return count + self._remove_deleted()

    def _settle(self, files: list[tuple[Path, str]]) -> bool:
        """Wait until the newest of `files` has been unchanged for QUIET_S; False if stopped meanwhile."""
        mtimes = []
        for path, _ in files:
            try:
                mtimes.append(path.stat().st_mtime)
            except FileNotFoundError:  # dropped meanwhile (TensorFlow's max_to_keep)
                continue
        delay = min(QUIET_S, max(mtimes) + QUIET_S - time.time()) if mtimes else 0.0
        return not self._stop.wait(max(0.0, delay) + 0.01)

    def _publish_files(self, files: list[tuple[Path, str]], cutoff: float, together: bool = False) -> int:
        """`together`: the files are one checkpoint, which the next save drops (max_to_keep) perhaps while
        its first file is uploaded; each is opened before the first upload, so a dropped one keeps its bytes."""
        count = 0
        remote_sizes: dict[str, RemoteFile] | None = None
        with contextlib.ExitStack() as stack:
            opened = _open_quiet(files, cutoff, stack) if together else {}
            for path, rel in files:
                name = path.name
                fh = opened.get(rel)
                if fh is None and not path.is_file() or _not_a_published_file(name):
                    continue
                try:
                    stat = os.fstat(fh.fileno()) if fh is not None else path.stat()
                except FileNotFoundError:  # written and deleted between the walk and now
                    continue
                if self._held.get(rel) == _key(stat) or rel in self._held and rel not in self._own:
                    continue  # HDFS has this version; or a file this writer pulled and does not own
                if EVENTS in name and rel in self._held:
                    if remote_sizes is None:
                        remote_sizes = self.files.list(self.remote)
                    count += self._grow(path, rel, remote_sizes.get(f"{self.remote}/{rel}"))
                elif EVENTS in name:  # it only grows: any prefix is valid, so it never waits for a quiet moment
                    count += self._publish(path, rel)
                elif stat.st_mtime <= cutoff:
                    count += self._publish(path, rel, _key(stat), fh)
                else:
                    self.waiting = True
        return count

    def _publish(self, path: Path, rel: str, key: Key | None = None, opened: BinaryIO | None = None) -> int:
        """Upload under a temporary name, then rename into place. With `key`: only that version, and only if
        it did not change while it was uploaded (a file rewritten in place). Without: the bytes the file has
        now, whatever the program appends meanwhile (an event file: any prefix of it is valid). `opened`:
        the file, opened earlier (it may be gone from its directory since)."""
        remote = f"{self.remote}/{rel}"
        part = part_name(remote, self.writer)
        self.files.mkdirs(os.path.dirname(remote))
        try:
            with contextlib.nullcontext(opened) if opened is not None else path.open("rb") as fh:
                now = _key(os.fstat(fh.fileno()))
                if key is not None and now != key:
                    return 0
                self.files.create(part, _Version(fh, key) if key is not None else fh.read(now[0]))
                changed = key is not None and _key(os.fstat(fh.fileno())) != key
            if self._halted.is_set() or changed:
                self.files.delete(part)  # rewritten while it was uploaded: a later round takes it
                return 0
            self.files.rename_over(part, remote)
        except (FileNotFoundError, FileChanged):  # the program removed (TF's max_to_keep) or rewrote it meanwhile
            _forget(self.files, part)
            return 0
        except BaseException:
            _forget(self.files, part)
            raise
        self._held[rel] = now
        self._own.add(rel)
        return 1

    def _grow(self, path: Path, rel: str, remote: RemoteFile | None) -> int:
        """An event file HDFS already has: append what it lacks (a cut append leaves a prefix)."""
        with path.open("rb") as fh:
            key = _key(os.fstat(fh.fileno()))
            have = remote.size if remote is not None else -1
            if not 0 <= have <= key[0]:  # gone from HDFS, or rewritten shorter: publish it again
                return self._publish(path, rel)
            fh.seek(have)
            tail = fh.read(key[0] - have)
        if tail and not self._halted.is_set():
            self.files.append(f"{self.remote}/{rel}", tail)
        self._held[rel] = key
        self._own.add(rel)
        return 1

    def _replace(self, remote: str, data: bytes) -> None:
        part = part_name(remote, self.writer)
        self.files.mkdirs(os.path.dirname(remote))
        try:
            self.files.create(part, data)
            if self._halted.is_set():
                raise WriterFenced("stopped")
            self.files.rename_over(part, remote)
        except BaseException:
            _forget(self.files, part)
            raise

    def _remove_deleted(self) -> int:
        """Files the program removed leave HDFS too, but never a checkpoint a published index names."""
        named = {p for rel, data in self._indexes.items() for p in _named_paths(rel, data, self.local)}
        removed = 0
        for rel in sorted(self._own):
            if (self.local / rel).exists() or any(rel == n or rel.startswith(n + ".") for n in named):
                continue
            self.files.delete(f"{self.remote}/{rel}")
            self._own.discard(rel)
            self._held.pop(rel, None)
            self._indexes.pop(rel, None)
            removed += 1
        return removed

    def _check_claim(self) -> None:
        """Fenced once the output's claim is newer than this writer: a later attempt of its application,
        or a later application (a duplicate submission writing the same output)."""
        if self._halted.is_set():
            raise WriterFenced("this writer was stopped")
        try:
            mark = self.files.read(f"{self.remote}/{WRITER_MARK}")
        except FileNotFoundError:
            return
        if mark == self._mark:
            return
        if _claim_order(mark) > _claim_order(f"{self.attempt[0]} {self.attempt[1]}".encode()):
            self._halted.set()
            raise WriterFenced(f"{self.uri} was claimed by {' '.join(mark.decode('utf-8', 'replace').split()[:3])}")
        self._mark = mark

    # --------------------------------------------------------------- background
    def start(self, direction: str, interval: float = SYNC_INTERVAL_S) -> None:
        """Keep syncing in the background: 'push' (the chief), 'pull' (TensorBoard), 'both' (an evaluator)."""
        def step() -> None:
            if direction in ("pull", "both"):
                self.pull(events=True)
            if direction in ("push", "both"):
                self.push()

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
        Raises when the output could not be published after FINAL_TRIES tries."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=JOIN_S)
        if not self._lock.acquire(timeout=JOIN_S):
            raise TimeoutError(f"a push to {self.uri} is still under way after {JOIN_S:.0f}s")
        try:
            for tries in range(1, FINAL_TRIES + 1):
                try:
                    return self.push(cutoff)
                except WriterFenced as exc:
                    log.warning("final push to %s skipped: %s", self.uri, exc)
                    return 0
                except Exception as exc:
                    if tries == FINAL_TRIES:
                        raise
                    log.warning("final push to %s failed (try %d/%d): %s", self.uri, tries, FINAL_TRIES, exc)
                    time.sleep(FINAL_BACKOFF_S * tries)
            return 0
        finally:
            self._lock.release()

    def stop(self) -> None:
        """Stop the background rounds (a reader: nothing to publish)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=JOIN_S)


class FileChanged(Exception):
    """The file being uploaded changed: its upload ends now (not an OSError, which HTTP clients wrap)."""


class _Version:
    """One version of an open file as an upload's body: its length announced in advance, and the upload
    ended as soon as the file changes. A file rewritten in place is truncated first; a body shorter than
    announced would leave the DataNode waiting for the rest until the read timeout."""

    def __init__(self, fh: BinaryIO, key: Key):
        self.fh, self.key, self.left = fh, key, key[0]

    def __len__(self) -> int:  # requests announces this as the Content-Length
        return self.key[0]

    def read(self, size: int | None = -1) -> bytes:
        if self.left <= 0:
            return b""
        size = self.left if size is None or size < 0 else min(size, self.left)
        data = self.fh.read(size)
        if len(data) < size or _key(os.fstat(self.fh.fileno())) != self.key:
            raise FileChanged(self.fh.name)
        self.left -= len(data)
        return data


def next_round_in(waiting: bool, interval: float) -> float:
    """Seconds to the next round: soon after a file's quiet time when one waited for it, else the interval
    less up to a fifth at random, so that rounds never lock in phase with a program's saves."""
    if waiting:
        return QUIET_S + QUIET_MARGIN_S
    return interval * random.uniform(0.8, 1.0)


def _not_a_published_file(name: str) -> bool:
    """An upload under way, the `checkpoint` index (published after the files it names) or the writer's mark."""
    return is_part(name) or name in (CHECKPOINT_INDEX, WRITER_MARK)


def _open_quiet(files: list[tuple[Path, str]], cutoff: float, stack: contextlib.ExitStack) -> dict[str, BinaryIO]:
    """rel -> an open handle, for each of `files` unchanged since `cutoff` (closed with `stack`)."""
    opened: dict[str, BinaryIO] = {}
    for path, rel in files:
        if _not_a_published_file(path.name) or EVENTS in path.name:
            continue
        try:
            if not path.is_file():  # a directory, or a pipe an open would block on
                continue
            fh = stack.enter_context(path.open("rb"))
        except FileNotFoundError:
            continue
        if os.fstat(fh.fileno()).st_mtime <= cutoff:
            opened[rel] = fh
    return opened


def _key(stat: os.stat_result) -> Key:
    return stat.st_size, stat.st_mtime_ns


def _claim_order(mark: bytes) -> tuple[int, int, int]:
    """`application_<cluster start>_<sequence> <attempt> …` -> a tuple that grows with later claims."""
    words = mark.decode("utf-8", "replace").split()
    app = words[0].split("_") if words else []
    try:
        return int(app[1]), int(app[2]), int(words[1])
    except (IndexError, ValueError):
        return 0, 0, 0


def _forget(files: OutputFiles, part: str) -> None:
    try:
        files.delete(part)
    except Exception:  # the link is down: the next claim removes it, and every reader skips it
        pass


def _write_whole(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tony-part-pull")
    tmp.write_bytes(data)
    os.replace(tmp, target)


def _read_indexes(local: Path) -> dict[str, tuple[bytes, Key]]:
    """Every `checkpoint` index under the directory: its bytes and the key before the read
    (TensorFlow replaces it by rename, so a read sees one whole version)."""
    indexes = {}
    for path in local.rglob(CHECKPOINT_INDEX):
        try:
            stat = path.stat()
            data = path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            continue
        indexes[str(path.relative_to(local))] = (data, _key(stat))
    return indexes


def _relative(index_rel: str, named: str, local: Path) -> str | None:
    """A path an index names, relative to the mirrored directory (None: outside it)."""
    if os.path.isabs(named):
        try:
            return str(Path(named).relative_to(local))
        except ValueError:
            return None
    return os.path.normpath(os.path.join(os.path.dirname(index_rel), named))


def _named_paths(index_rel: str, data: bytes, local: Path) -> set[str]:
    """Every checkpoint an index names (the latest and the ones kept beside it)."""
    text = data.decode("utf-8", "replace")
    return {r for m in _PATHS.finditer(text) if (r := _relative(index_rel, m.group(1), local)) is not None}


def _names_files_in(index_rel: str, data: bytes, present, local: Path | None = None) -> bool:
    """Whether the checkpoint an index names has its `.index` and every data shard among `present`."""
    match = _LATEST.search(data.decode("utf-8", "replace"))
    if match is None:
        return True  # not TensorFlow's index: nothing it depends on
    named = _relative(index_rel, match.group(1), local or Path("/"))
    if named is None:
        return True  # a checkpoint outside the mirrored directory: not ours to wait for
    shards = {rel: _SHARDS.search(rel) for rel in present if rel.startswith(named + ".data-")}
    wanted = {int(m.group(1)) for m in shards.values() if m}
    return f"{named}.index" in present and len(wanted) == 1 and len(shards) == wanted.pop()


def stage_input(uri: str, local: Path) -> str:
    """Copy an HDFS input locally; other inputs are passed through as they are."""
    if not is_hdfs(uri):
        return uri
    mirror = Mirror(uri, local)
    copied = mirror.pull(while_written=False)
    log.info("staged %d input file(s) from %s into %s", copied, uri, mirror.local)
    return str(mirror.local)
