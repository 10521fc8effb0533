"""The HDFS output mirror: what a reader of the output can see, whatever cuts a push short.

`MemoryHDFS` does what WebHDFS does, step by step: a CREATE empties the file at once and
its data arrives in 4 MiB pieces, each visible to readers; an APPEND likewise; a RENAME
with OVERWRITE is one step. It can lose its link after any step (`cut_after`), which is
what a stopped, killed, preempted or lost chief does to a push under way.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
import time
from pathlib import Path

import pytest

from tony_airflow.core.executor import staging
from tony_airflow.core.executor.staging import WRITER_MARK, Mirror, WriterFenced
from tony_airflow.yarn.hdfs import RemoteFile, is_part

PIECE = 4 << 20  # WebHDFS's DataNode writes show up in pieces of this size (fsspec's block)
APP = "application_1700000000000_0007"


class LinkDown(OSError):
    def __init__(self) -> None:
        super().__init__(113, "No route to host")


class MemoryHDFS:
    """OutputFiles in memory, with WebHDFS's visible effects one step at a time."""

    def __init__(self, cut_after: int | None = None) -> None:
        self.files: dict[str, bytes] = {}
        self.mtimes: dict[str, int] = {}
        self.steps = 0
        self.cut_after = cut_after
        self.clock = 0
        self.ops: list[str] = []

    def copy(self, cut_after: int | None = None) -> MemoryHDFS:
        other = MemoryHDFS(cut_after)
        other.files, other.mtimes, other.clock = dict(self.files), dict(self.mtimes), self.clock
        return other

    def _step(self, op: str) -> None:
        if self.cut_after is not None and self.steps >= self.cut_after:
            raise LinkDown()
        self.steps += 1
        self.ops.append(op)

    def _write(self, path: str, data: bytes) -> None:
        self.files[path] = data
        self.clock += 1
        self.mtimes[path] = self.clock

    def list(self, root: str) -> dict[str, RemoteFile]:
        self._step("list")
        return {p: RemoteFile(len(b), self.mtimes[p]) for p, b in self.files.items() if p.startswith(root + "/")}

    def read(self, path: str, start: int = 0) -> bytes:
        self._step("read")
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path][start:]

    def download(self, path: str, local: str) -> None:
        Path(local).write_bytes(self.read(path))

    def create(self, path: str, data) -> None:
        payload = data if isinstance(data, bytes) else data.read()
        self._step("create")
        self._write(path, b"")
        for i in range(0, len(payload), PIECE):
            self._step("piece")
            self._write(path, self.files[path] + payload[i:i + PIECE])

    def append(self, path: str, data: bytes) -> None:
        self._step("append")
        for i in range(0, len(data), PIECE):
            self._step("piece")
            self._write(path, self.files[path] + data[i:i + PIECE])

    def rename_over(self, source: str, destination: str) -> None:
        self._step("rename")
        self.files[destination] = self.files.pop(source)
        self.mtimes[destination] = self.mtimes.pop(source)

    def delete(self, path: str) -> None:
        self._step("delete")
        self.files.pop(path, None)
        self.mtimes.pop(path, None)

    def mkdirs(self, path: str) -> None:
        self._step("mkdirs")

    def visible(self, root: str = "/out") -> dict[str, bytes]:
        """What a reader takes: every file but those under a temporary name."""
        return {p[len(root) + 1:]: b for p, b in self.files.items() if p.startswith(root + "/") and not is_part(p)}


def _old(path: Path, seconds: float = 10.0) -> None:
    """The program left the file alone for a while (it is whole)."""
    when = time.time() - seconds
    os.utime(path, (when, when))


def _write(path: Path, data: bytes, age: float = 10.0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    _old(path, age)


def _model(version: int, size: int = 9 << 20) -> bytes:
    """A model file whose last 32 bytes are the digest of the rest: a torn copy is told at once."""
    body = bytes([version]) * (size - 32)
    return body + hashlib.sha256(body).digest()


def _whole_model(data: bytes) -> bool:
    return len(data) > 32 and hashlib.sha256(data[:-32]).digest() == data[-32:]


def _mirror(local: Path, fs: MemoryHDFS, attempt: int = 1, app: str = APP, task: str = "chief0") -> Mirror:
    return Mirror("hdfs:///out", local, files=fs, writer=f"{app}.a{attempt}.{task}", attempt=(app, attempt))


def _attempt_one(tmp_path: Path) -> tuple[Path, MemoryHDFS, Mirror]:
    """An attempt whose first push published model v1, checkpoint 1 and the start of an event file;
    then the program rewrote the model in place, saved checkpoint 2, dropped checkpoint 1 and logged more."""
    out = tmp_path / "chief"
    fs = MemoryHDFS()
    _write(out / "model.bin", _model(1))
    _write(out / "backup" / "ckpt-1.index", b"i1")
    _write(out / "backup" / "ckpt-1.data-00000-of-00001", b"d1" * 1000)
    _write(out / "backup" / "checkpoint", b'model_checkpoint_path: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-1"\n')
    _write(out / "tb" / "events.out.tfevents.1.h.1.v2", b"record-1;")
    mirror = _mirror(out, fs)
    mirror.claim()
    mirror.push()
    assert fs.visible()["backup/checkpoint"].startswith(b'model_checkpoint_path: "ckpt-1"')
    _write(out / "model.bin", _model(2))
    _write(out / "backup" / "ckpt-2.index", b"i2")
    _write(out / "backup" / "ckpt-2.data-00000-of-00001", b"d2" * 1000)
    _write(out / "backup" / "checkpoint", b'model_checkpoint_path: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-2"\n')
    (out / "backup" / "ckpt-1.index").unlink()
    (out / "backup" / "ckpt-1.data-00000-of-00001").unlink()
    _write(out / "tb" / "events.out.tfevents.1.h.1.v2", b"record-1;record-2;")
    return out, fs, mirror


def _assert_readers_take_only_whole_files(fs: MemoryHDFS, local: Path) -> None:
    seen = fs.visible()
    assert _whole_model(seen["model.bin"]), f"torn model.bin ({len(seen['model.bin'])} bytes)"
    index = seen["backup/checkpoint"].decode()
    named = index.split('"')[1]
    assert {f"backup/{named}.index", f"backup/{named}.data-00000-of-00001"} <= set(seen), (index, sorted(seen))
    assert seen[f"backup/{named}.data-00000-of-00001"] == (b"d1" if named == "ckpt-1" else b"d2") * 1000
    events = seen["tb/events.out.tfevents.1.h.1.v2"]
    assert events.startswith(b"record-1;") and b"record-1;record-2;".startswith(events), events
    reader = _mirror(local, fs.copy(), task="tensorboard0")
    reader.pull()
    got = {str(p.relative_to(local)): p.read_bytes() for p in local.rglob("*") if p.is_file()}
    assert got == {rel: data for rel, data in seen.items() if rel != WRITER_MARK}, sorted(got)


def test_a_push_cut_after_any_step_leaves_hdfs_only_whole_files_and_the_next_push_completes_it(tmp_path):
    out, fs, first = _attempt_one(tmp_path)
    whole = fs.copy()
    reference = _mirror(out, whole)
    reference._held, reference._own, reference._indexes = dict(first._held), set(first._own), dict(first._indexes)
    reference._mark = first._mark
    reference.push()
    steps = whole.steps
    assert steps > 10, whole.ops
    for cut in range(steps + 1):
        cut_fs = fs.copy(cut_after=cut)
        writer = _mirror(out, cut_fs)
        writer._held, writer._own, writer._indexes = dict(first._held), set(first._own), dict(first._indexes)
        writer._mark = first._mark
        try:
            writer.push()
        except LinkDown:
            pass
        _assert_readers_take_only_whole_files(cut_fs, tmp_path / f"reader-{cut}")
        cut_fs.cut_after = None  # the link is back: the next round finishes what this one began
        writer.push()
        seen = cut_fs.visible()
        assert seen["model.bin"] == _model(2)
        assert seen["backup/checkpoint"].startswith(b'model_checkpoint_path: "ckpt-2"')
        assert not any("ckpt-1" in rel for rel in seen), sorted(seen)  # removed by the program, then in HDFS
        assert seen["tb/events.out.tfevents.1.h.1.v2"] == b"record-1;record-2;"


def test_a_retry_resumes_from_whole_files_after_a_push_cut_at_any_step(tmp_path):
    out, fs, first = _attempt_one(tmp_path)
    for cut in range(0, 40, 3):
        cut_fs = fs.copy(cut_after=cut)
        writer = _mirror(out, cut_fs)
        writer._held, writer._own, writer._indexes = dict(first._held), set(first._own), dict(first._indexes)
        try:
            writer.push()
        except LinkDown:
            pass
        cut_fs.cut_after = None
        retry = _mirror(tmp_path / f"attempt-2-{cut}", cut_fs, attempt=2)
        retry.claim()
        retry.pull(events=False)
        restored = retry.local
        assert _whole_model((restored / "model.bin").read_bytes())
        named = (restored / "backup" / "checkpoint").read_text().split('"')[1]
        assert (restored / "backup" / f"{named}.index").exists()
        assert not any(is_part(p.name) for p in restored.rglob("*"))
        assert not (restored / "tb").exists()  # event files are TensorBoard's, not needed to resume
        assert not any(is_part(p) for p in cut_fs.files), "the new writer removes what a cut writer left"


def test_a_file_rewritten_while_it_is_uploaded_is_not_published(tmp_path):
    out = tmp_path / "chief"
    _write(out / "model.bin", _model(1))

    class RewritingHDFS(MemoryHDFS):
        def create(self, path, data):
            if path.startswith("/out/model.bin"):
                half = data.read(PIECE)
                (out / "model.bin").write_bytes(_model(2)[:PIECE])  # the program rewrites it in place
                data = half + data.read()
            super().create(path, data)

    fs = RewritingHDFS()
    mirror = _mirror(out, fs)
    assert mirror.push() == 0
    assert "model.bin" not in fs.visible() and not fs.files


def test_a_file_changed_within_the_quiet_time_waits(tmp_path):
    out = tmp_path / "chief"
    _write(out / "model.bin", _model(1), age=0)
    fs = MemoryHDFS()
    mirror = _mirror(out, fs)
    assert mirror.push() == 0 and not fs.visible()
    _old(out / "model.bin")
    assert mirror.push() == 1 and fs.visible()["model.bin"] == _model(1)


def test_after_a_stop_only_files_unchanged_before_it_are_published(tmp_path):
    out = tmp_path / "chief"
    _write(out / "done.json", b"{}", age=30)
    _write(out / "model.bin", _model(2)[: 3 * PIECE], age=0.2)  # being rewritten when the stop came
    fs = MemoryHDFS()
    fs._write("/out/model.bin", _model(1))
    mirror = _mirror(out, fs)
    mirror.finish(cutoff=time.time() - 1 - staging.QUIET_S)
    assert fs.visible() == {"done.json": b"{}", "model.bin": _model(1)}
    assert mirror.finish(cutoff=math.inf) == 1  # an exit 0: everything is whole
    assert fs.visible()["model.bin"] == _model(2)[: 3 * PIECE]


def test_a_writer_of_an_older_attempt_publishes_nothing_once_a_newer_one_claimed_the_output(tmp_path):
    out = tmp_path / "chief"
    _write(out / "model.bin", _model(1))
    fs = MemoryHDFS()
    old = _mirror(out, fs, attempt=1)
    old.claim()
    new = _mirror(tmp_path / "new", fs, attempt=2)
    new.claim()
    with pytest.raises(WriterFenced, match="a2"):
        old.push()
    assert "model.bin" not in fs.visible()
    assert old.finish() == 0  # the final push of a fenced writer is skipped, not an error
    later_app = "application_1700000000000_0012"
    dup = _mirror(tmp_path / "dup", fs, app=later_app)
    dup.claim()
    with pytest.raises(WriterFenced):
        new.push()
    assert fs.visible()[WRITER_MARK].startswith(later_app.encode())


def test_an_evaluator_pulls_the_chiefs_files_and_publishes_only_its_own(tmp_path):
    fs = MemoryHDFS()
    fs._write("/out/backup/ckpt-1.index", b"i")
    fs._write("/out/backup/ckpt-1.data-00000-of-00001", b"d")
    fs._write("/out/backup/checkpoint", b'model_checkpoint_path: "ckpt-1"\n')
    evaluator = _mirror(tmp_path / "ev", fs, task="evaluator0")
    evaluator.pull()
    assert (tmp_path / "ev" / "backup" / "checkpoint").exists()
    _write(tmp_path / "ev" / "eval" / "metrics.json", b'{"accuracy": 0.9}')
    assert evaluator.push() == 1
    assert fs.visible()["eval/metrics.json"] == b'{"accuracy": 0.9}'
    assert evaluator.pull() == 0  # its own file is not copied back
    (tmp_path / "ev" / "backup" / "ckpt-1.index").unlink()
    evaluator.push()
    assert "backup/ckpt-1.index" in fs.visible()  # the chief's files are not the evaluator's to remove


def test_a_checkpoint_the_published_index_names_is_kept_until_a_newer_index_is_published(tmp_path):
    out = tmp_path / "chief"
    _write(out / "ckpt-1.index", b"i1")
    _write(out / "ckpt-1.data-00000-of-00001", b"d1")
    _write(out / "checkpoint", b'model_checkpoint_path: "ckpt-1"\n')
    fs = MemoryHDFS()
    mirror = _mirror(out, fs)
    mirror.push()
    _write(out / "ckpt-2.index", b"i2", age=0)  # the new checkpoint is too new to publish this round
    _write(out / "ckpt-2.data-00000-of-00001", b"d2", age=0)
    _write(out / "checkpoint", b'model_checkpoint_path: "ckpt-2"\n', age=0)
    (out / "ckpt-1.index").unlink()
    (out / "ckpt-1.data-00000-of-00001").unlink()
    mirror.push(cutoff=time.time() - staging.QUIET_S)  # a push that does not wait for the new one
    assert {"ckpt-1.index", "ckpt-1.data-00000-of-00001", "checkpoint"} <= set(fs.visible())
    for name in ("ckpt-2.index", "ckpt-2.data-00000-of-00001", "checkpoint"):
        _old(out / name)
    mirror.push()
    assert set(fs.visible()) == {"ckpt-2.index", "ckpt-2.data-00000-of-00001", "checkpoint"}


def test_an_event_file_grows_by_append_and_a_cut_append_is_completed(tmp_path):
    out = tmp_path / "chief"
    events = out / "events.out.tfevents.1.h.1.v2"
    _write(events, b"a" * 10)
    fs = MemoryHDFS()
    mirror = _mirror(out, fs)
    mirror.push()
    _write(events, b"a" * 10 + b"b" * (PIECE + 5))
    fs.cut_after = fs.steps + 4  # read the claim, list, the append and its first piece; the second is lost
    with pytest.raises(LinkDown):
        mirror.push()
    assert fs.visible()["events.out.tfevents.1.h.1.v2"] == b"a" * 10 + b"b" * PIECE
    fs.cut_after = None
    mirror._held.pop("events.out.tfevents.1.h.1.v2")  # as after a cut: the next round looks again
    mirror._held["events.out.tfevents.1.h.1.v2"] = (10, 0)
    mirror.push()
    assert fs.visible()["events.out.tfevents.1.h.1.v2"] == b"a" * 10 + b"b" * (PIECE + 5)
    assert "create" not in fs.ops[-3:]  # grown in place, not uploaded again


def test_an_event_file_being_pulled_grows_in_place(tmp_path):
    fs = MemoryHDFS()
    name = "/out/tb/events.out.tfevents.1.host.1.v2"
    fs._write(name, b"version-record")
    mirror = _mirror(tmp_path / "tb", fs, task="tensorboard0")
    mirror.pull()
    local = tmp_path / "tb" / "tb" / "events.out.tfevents.1.host.1.v2"
    inode = os.stat(local).st_ino
    fs._write(name, b"version-record+hparams-summary")
    mirror.pull()
    assert local.read_bytes() == b"version-record+hparams-summary"
    assert os.stat(local).st_ino == inode  # grown in place: TensorBoard's open file sees the new records


def test_an_input_is_complete_so_its_empty_files_are_staged(tmp_path):
    fs = MemoryHDFS()
    fs._write("/in/_SUCCESS", b"")
    fs._write("/in/part-0", b"data")
    assert Mirror("hdfs:///in", tmp_path / "in", files=fs).pull(while_written=False) == 2
    assert (tmp_path / "in" / "_SUCCESS").exists()


def test_a_reader_takes_an_index_only_after_the_files_it_names_and_never_a_temporary_file(tmp_path):
    fs = MemoryHDFS()
    fs._write("/out/backup/checkpoint.tony-part-x-1", b'model_checkpoint_path: "ckpt-9"\n')
    fs._write("/out/backup/checkpoint", b'model_checkpoint_path: "ckpt-8"\n')
    mirror = _mirror(tmp_path / "m", fs, task="tensorboard0")
    assert mirror.pull() == 0  # ckpt-8's files are not there: the index waits
    fs._write("/out/backup/ckpt-8.index", b"i")
    fs._write("/out/backup/ckpt-8.data-00000-of-00001", b"d")
    assert mirror.pull() == 3
    assert not any(is_part(p.name) for p in (tmp_path / "m").rglob("*"))


def test_a_reader_compares_versions_not_only_sizes(tmp_path):
    fs = MemoryHDFS()
    fs._write("/out/model.bin", b"v1")
    mirror = _mirror(tmp_path / "m", fs, task="tensorboard0")
    mirror.pull()
    fs._write("/out/model.bin", b"v2")  # same size, a new version
    assert mirror.pull() == 1 and (tmp_path / "m" / "model.bin").read_bytes() == b"v2"


def test_the_final_push_waits_for_a_round_under_way_and_reports_a_failure(tmp_path, monkeypatch):
    monkeypatch.setattr(staging, "FINAL_BACKOFF_S", 0.0)
    out = tmp_path / "chief"
    _write(out / "model.bin", _model(1))
    fs = MemoryHDFS(cut_after=0)
    mirror = _mirror(out, fs)
    with pytest.raises(LinkDown):
        mirror.finish()
    assert fs.steps == 0  # every try was cut before its first step: FINAL_TRIES tries, then the error

    held = threading.Event()
    fs = MemoryHDFS()
    mirror = _mirror(out, fs)

    def slow_round() -> None:
        with mirror._lock:
            held.set()
            time.sleep(0.3)
            fs.files["/out/round"] = b"1"

    thread = threading.Thread(target=slow_round)
    thread.start()
    held.wait()
    mirror.finish()
    thread.join()
    assert fs.ops and fs.ops[0] == "read"  # the final push began after the round ended (one writer at a time)


def test_every_webhdfs_request_has_a_deadline(monkeypatch):
    """A DataNode that accepts a connection and never answers cannot hang a push for ever."""
    import socket

    import requests

    from tony_airflow.yarn import hdfs

    monkeypatch.setattr(hdfs, "WEBHDFS_TIMEOUT_S", (1.0, 0.5))
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        fs = hdfs._webhdfs_class()(host="127.0.0.1", port=port, user="u", use_listings_cache=False,
                                   skip_instance_cache=True)
        with pytest.raises(requests.exceptions.RequestException, match="timed out"):
            fs.session.get(f"http://127.0.0.1:{port}/webhdfs/v1/?op=LISTSTATUS")
    finally:
        server.close()


class SavingDuringLargeUpload(MemoryHDFS):
    """BackupAndRestore saves checkpoint 2 and drops checkpoint 1 while `a-large-file.bin` is uploaded."""

    def __init__(self, backup: Path) -> None:
        super().__init__()
        self.backup = backup

    def create(self, path, data):
        if "a-large-file.bin" in path and (self.backup / "ckpt-1.index").exists():
            _next_save(self.backup)
        super().create(path, data)


def _next_save(backup: Path) -> None:
    """BackupAndRestore's next save: checkpoint 2 written and named, checkpoint 1 dropped (max_to_keep=1)."""
    _write(backup / "ckpt-2.index", b"i2", age=0)
    _write(backup / "ckpt-2.data-00000-of-00001", b"d2", age=0)
    _write(backup / "checkpoint", b'model_checkpoint_path: "ckpt-2"\n', age=0)
    (backup / "ckpt-1.index").unlink()
    (backup / "ckpt-1.data-00000-of-00001").unlink()


def test_a_checkpoint_reaches_hdfs_before_a_large_file_and_before_the_next_save_drops_it(tmp_path):
    """Seen on the 3-host cluster: BackupAndRestore saves every few seconds and drops the previous
    checkpoint; a round that uploaded a 32 MiB file first found the named checkpoint gone, and the
    `checkpoint` index never reached HDFS while the job ran."""
    out = tmp_path / "chief"
    backup = out / "backup" / "chief"
    _write(out / "a-large-file.bin", _model(1))  # sorts before backup/
    _write(backup / "ckpt-1.index", b"i1")
    _write(backup / "ckpt-1.data-00000-of-00001", b"d1")
    _write(backup / "checkpoint", b'model_checkpoint_path: "ckpt-1"\n', age=0.2)  # just replaced by rename

    fs = SavingDuringLargeUpload(backup)
    _mirror(out, fs).push()
    seen = fs.visible()
    assert seen.get("backup/chief/checkpoint") == b'model_checkpoint_path: "ckpt-1"\n', sorted(seen)
    assert {"backup/chief/ckpt-1.index", "backup/chief/ckpt-1.data-00000-of-00001"} <= set(seen)


def test_a_file_waiting_for_its_quiet_time_gets_a_round_soon_not_a_whole_interval_later(tmp_path):
    """Seen on the 3-host cluster: a training saving every 2.6 s and rounds every 5.2 s (5 s + the push)
    locked in phase, every round began within the second after a save, and the checkpoint never left."""
    out = tmp_path / "chief"
    _write(out / "ckpt-1.index", b"i1", age=0.3)
    mirror = _mirror(out, MemoryHDFS())
    mirror.push()
    assert mirror.waiting  # a file was left only for its quiet time
    assert staging.next_round_in(mirror.waiting, 5.0) == staging.QUIET_S + staging.QUIET_MARGIN_S
    _old(out / "ckpt-1.index")
    mirror.push()
    assert not mirror.waiting
    delays = {staging.next_round_in(False, 5.0) for _ in range(50)}
    assert all(4.0 <= d <= 5.0 for d in delays) and len(delays) > 1  # jittered: no lock with a training's period


def test_an_event_file_written_every_moment_is_published_at_once_as_a_prefix(tmp_path):
    """Found by the TensorBoard e2e test: a training appending to its event file every 1.4 s never left it
    quiet for a second, so it never reached HDFS while it ran. Any prefix of an event file is valid."""
    out = tmp_path / "chief"
    events = out / "tb" / "events.out.tfevents.1.h.1.v2"
    _write(events, b"record-1;", age=0)

    class GrowingHDFS(MemoryHDFS):
        def create(self, path, data):
            super().create(path, data)
            with events.open("ab") as fh:  # the program appends while the first copy is uploaded
                fh.write(b"record-2;")

    fs = GrowingHDFS()
    mirror = _mirror(out, fs)
    assert mirror.push() == 1
    assert fs.visible()["tb/events.out.tfevents.1.h.1.v2"] == b"record-1;"
    mirror.push()
    assert fs.visible()["tb/events.out.tfevents.1.h.1.v2"] == b"record-1;record-2;"


def test_a_checkpoint_saved_just_before_a_round_is_published_in_that_round_before_a_large_file(tmp_path):
    """CI's 3-host run: a 32 MiB file took each round's time after a checkpoint still inside its quiet
    time was left for later, the next save replaced it meanwhile, and the training ended with no
    checkpoint ever in HDFS. A checkpoint is what a retry resumes from: the round waits for it (it is
    at most QUIET_S away) and publishes it before anything else."""
    out = tmp_path / "chief"
    backup = out / "backup" / "chief"
    _write(out / "a-large-file.bin", _model(1))
    _write(backup / "ckpt-1.index", b"i1", age=0.4)
    _write(backup / "ckpt-1.data-00000-of-00001", b"d1", age=0.4)
    _write(backup / "checkpoint", b'model_checkpoint_path: "ckpt-1"\n', age=0.4)

    fs = SavingDuringLargeUpload(backup)
    mirror = _mirror(out, fs)
    mirror.push()
    seen = fs.visible()
    assert seen.get("backup/chief/checkpoint") == b'model_checkpoint_path: "ckpt-1"\n', sorted(seen)
    assert {"backup/chief/ckpt-1.index", "backup/chief/ckpt-1.data-00000-of-00001"} <= set(seen)
    assert "a-large-file.bin" in seen


def test_a_final_push_after_a_stop_never_waits_for_a_checkpoint_that_was_not_quiet_before_it(tmp_path,
                                                                                           monkeypatch):
    out = tmp_path / "chief"
    _write(out / "ckpt-1.index", b"i1", age=0.2)
    _write(out / "ckpt-1.data-00000-of-00001", b"d1", age=0.2)
    _write(out / "checkpoint", b'model_checkpoint_path: "ckpt-1"\n', age=0.2)
    waits: list[int] = []
    monkeypatch.setattr(Mirror, "_settle", lambda self, files: waits.append(len(files)) or True)
    fs = MemoryHDFS()
    assert _mirror(out, fs).finish(cutoff=time.time() - 0.5) == 0
    assert not fs.visible() and waits == []  # torn by the stop, perhaps: never published, never waited for


def test_a_file_truncated_while_it_is_uploaded_ends_its_upload_at_once_and_the_round_goes_on(tmp_path):
    """Found on the 3-host cluster: a 32 MiB file rewritten in place ("wb" truncates it) while it was
    streamed to a DataNode. The request had announced the file's length, the body ended early, the
    DataNode waited for the rest, and the round hung for the 60 s read timeout while the training
    saved and dropped every checkpoint. Like a DataNode, this fake waits for the announced length."""
    from requests.utils import super_len

    out = tmp_path / "chief"
    _write(out / "model.bin", _model(1))
    _write(out / "zz-done.json", b"{}")

    class DataNodeHDFS(MemoryHDFS):
        def create(self, path, data):
            if path.startswith("/out/model.bin"):
                announced = super_len(data)
                body = data.read(PIECE)
                (out / "model.bin").write_bytes(_model(2)[:PIECE])  # the program rewrites it in place
                body += data.read()
                if len(body) < announced:
                    raise TimeoutError(f"Read timed out: the DataNode waited for {announced - len(body)} bytes")
                data = body
            super().create(path, data)

    fs = DataNodeHDFS()
    mirror = _mirror(out, fs)
    assert mirror.push() == 1
    assert fs.visible() == {"zz-done.json": b"{}"} and not [p for p in fs.files if is_part(p)]


def test_a_checkpoint_dropped_by_the_next_save_while_its_first_file_is_uploaded_still_reaches_hdfs(tmp_path):
    """CI's 3-host run (1 s epochs): BackupAndRestore saved, slept a second and saved again, dropping the
    checkpoint before; a round uploaded the named checkpoint's data file, the next save dropped its
    `.index` meanwhile, the `checkpoint` index never reached HDFS and the job ended with none there.
    Every file of the named checkpoint is opened before the first upload: a dropped file keeps its bytes."""
    out = tmp_path / "chief"
    backup = out / "backup" / "chief"
    _write(backup / "ckpt-1.index", b"i1")
    _write(backup / "ckpt-1.data-00000-of-00001", b"d1")
    _write(backup / "checkpoint", b'model_checkpoint_path: "ckpt-1"\n')

    class SavingDuringCheckpointUpload(MemoryHDFS):
        def create(self, path, data):
            if "ckpt-1.data" in path and (backup / "ckpt-1.index").exists():  # the next save, meanwhile
                _next_save(backup)
            super().create(path, data)

    fs = SavingDuringCheckpointUpload()
    mirror = _mirror(out, fs)
    mirror.push()
    seen = fs.visible()
    assert seen.get("backup/chief/checkpoint") == b'model_checkpoint_path: "ckpt-1"\n', sorted(seen)
    assert seen["backup/chief/ckpt-1.index"] == b"i1" and seen["backup/chief/ckpt-1.data-00000-of-00001"] == b"d1"
    _old(backup / "ckpt-2.index")
    _old(backup / "ckpt-2.data-00000-of-00001")
    mirror.push()  # the next round: checkpoint 2 replaces checkpoint 1, which goes
    seen = fs.visible()
    assert seen.get("backup/chief/checkpoint") == b'model_checkpoint_path: "ckpt-2"\n', sorted(seen)
    assert not [rel for rel in seen if "ckpt-1" in rel], sorted(seen)
