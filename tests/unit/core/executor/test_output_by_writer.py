"""Issue #50: the output published by what its writer did (kernel events), and the defects a read of the
quiet-rule mirror found (items 2-9 of the issue), each a test that failed on 905767c.

These run the mirror synchronously (`observe`: the watcher's step; `publish_ready`: the uploader's) with a
virtual clock, on real files whose events come from the real kernel.
"""

from __future__ import annotations

import errno
import math
import os
import threading
import time
from pathlib import Path

import pytest

from tests.unit.core.executor.memory_hdfs import MemoryHDFS
from tony_airflow.core.executor import output_publisher
from tony_airflow.core.executor.output_commit import SETTLE_S, Mirror
from tony_airflow.core.executor.output_events import EventSource, Writers

APP = "application_1700000000000_0050"


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def passes(self, seconds: float) -> None:
        self.now += seconds


def _writer(local: Path, fs: MemoryHDFS, clock: Clock, attempt: int = 1, task: str = "chief0") -> Mirror:
    mirror = Mirror("hdfs:///out", local, files=fs, writer=f"{APP}.a{attempt}.{task}", attempt=(APP, attempt),
                    clock=clock)
    mirror.claim()
    mirror.pull(events=False)
    mirror.adopt()
    assert mirror.watch(writers=lambda: [os.getpid()])
    return mirror


def _settle(mirror: Mirror, clock: Clock) -> int:
    """The watcher reads, time passes, the uploader publishes."""
    mirror.observe(0)
    clock.passes(SETTLE_S + 0.01)
    return mirror.publish_ready()


def _tf_save(out: Path, n: int) -> None:
    (out / "ckpt").mkdir(parents=True, exist_ok=True)
    (out / "ckpt" / f"ckpt-{n}.data").write_bytes(b"data-%d" % n)
    (out / "ckpt" / f"ckpt-{n}.index").write_bytes(b"index-%d" % n)
    tmp = out / "ckpt" / ".checkpoint.tmp"
    tmp.write_bytes(b'model_checkpoint_path: "ckpt-%d"\n' % n)
    os.replace(tmp, out / "ckpt" / "checkpoint")


def test_item1_a_program_saving_every_04_s_has_each_save_in_hdfs_within_settle(tmp_path):
    """Saves closer together than the quiet rule's second: each reaches HDFS SETTLE_S after its close."""
    fs, clock = MemoryHDFS(), Clock()
    (tmp_path / "out" / "ckpt").mkdir(parents=True)
    mirror = _writer(tmp_path / "out", fs, clock)
    for n in range(5):
        _tf_save(mirror.local, n)
        mirror.observe(0)
        clock.passes(0.4)
        mirror.publish_ready()
        if n:  # the save before this one: closed 0.8 s ago
            assert fs.visible().get("ckpt/checkpoint") >= b'model_checkpoint_path: "ckpt-%d"\n' % (n - 1)
    clock.passes(SETTLE_S - 0.4 + 0.01)
    mirror.publish_ready()
    assert fs.visible().get("ckpt/checkpoint") == b'model_checkpoint_path: "ckpt-4"\n'
    assert fs.visible()["ckpt/ckpt-4.index"] == b"index-4"


def test_item1_a_model_rewritten_in_place_every_second_reaches_hdfs(tmp_path):
    fs, clock = MemoryHDFS(), Clock()
    mirror = _writer(tmp_path / "out", fs, clock)
    model = mirror.local / "model.h5"
    for n in range(3):
        with model.open("wb") as fh:
            fh.write(bytes([n]) * (1 << 20))
        _settle(mirror, clock)
        assert fs.visible()["model.h5"] == bytes([n]) * (1 << 20)


def test_item2_a_writer_paused_mid_file_is_never_published_and_holds_later_closes_back(tmp_path):
    fs, clock = MemoryHDFS(), Clock()
    mirror = _writer(tmp_path / "out", fs, clock)
    with (mirror.local / "model.h5").open("wb") as fh:
        fh.write(b"half")
        fh.flush()
        mirror.observe(0)
        (mirror.local / "after.txt").write_bytes(b"closed while the model was being written")
        clock.passes(3.0)
        _settle(mirror, clock)
        assert fs.visible() == {}
        fh.write(b" and the rest")
    _settle(mirror, clock)
    assert fs.visible() == {"model.h5": b"half and the rest", "after.txt": b"closed while the model was being written"}


def test_item2_a_file_another_process_holds_open_for_writing_is_not_whole_at_one_close(tmp_path):
    fs, clock = MemoryHDFS(), Clock()
    mirror = _writer(tmp_path / "out", fs, clock)
    path = mirror.local / "shared.bin"
    keeper = open(path, "wb")  # noqa: SIM115 - a second writer (a forked DataLoader worker's open file)
    try:
        path.open("ab").close()
        assert _settle(mirror, clock) == 0 and "shared.bin" not in fs.visible()
    finally:
        keeper.write(b"whole")
        keeper.close()
    _settle(mirror, clock)
    assert fs.visible()["shared.bin"] == b"whole"


def test_item3_order_is_the_events_not_mtimes_or_names(tmp_path):
    """A pointer and its files with one mtime (a coarse kernel clock): the pointer still goes last."""
    fs, clock = MemoryHDFS(), Clock()
    (tmp_path / "out" / "ckpt").mkdir(parents=True)
    mirror = _writer(tmp_path / "out", fs, clock)
    _tf_save(mirror.local, 0)
    same = time.time_ns()
    for path in (mirror.local / "ckpt").iterdir():
        os.utime(path, ns=(same, same))
    mirror.observe(0)
    clock.passes(SETTLE_S + 0.01)
    seen: list[str] = []
    original = fs.rename_over

    def rename_over(src, dst):
        seen.append(dst.rsplit("/", 1)[1])
        return original(src, dst)
    fs.rename_over = rename_over
    mirror.publish_ready()
    assert seen == ["ckpt-0.data", "ckpt-0.index", "checkpoint"]


def test_item4_the_final_push_has_no_cap_and_publishes_deletions(tmp_path, monkeypatch):
    monkeypatch.setattr(output_publisher, "MAX_OPEN", 3)
    fs, clock = MemoryHDFS(), Clock()
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_bytes(b"old")
    mirror = _writer(out, fs, clock)
    _settle(mirror, clock)
    mirror.source.close()  # the events were lost for good: the final push is a scan
    mirror.source = None
    (out / "old.txt").unlink()
    for n in range(7):
        (out / f"part-{n}").write_bytes(b"%d" % n)
    (out / "_SUCCESS").write_bytes(b"")
    mirror.finish(math.inf)
    assert set(fs.visible()) == {f"part-{n}" for n in range(7)} | {"_SUCCESS"}


def test_item5_a_snapshot_that_cannot_be_written_fails_the_final_push_naming_the_file(tmp_path, monkeypatch):
    """Under the quiet rule (no events) a full disk during a round's snapshot is said and, after a clean
    exit whose push could not take the file, fails the task naming it."""
    fs, clock = MemoryHDFS(), Clock()
    out = tmp_path / "out"
    mirror = Mirror("hdfs:///out", out, files=fs, writer=f"{APP}.a1.chief0", attempt=(APP, 1), clock=clock)
    mirror.claim()
    out.mkdir()
    (out / "model.bin").write_bytes(b"x" * 100)
    real = os.fdopen

    def full(fd, *args, **kwargs):
        fh = real(fd, *args, **kwargs)
        if "w" in (args[0] if args else kwargs.get("mode", "r")):
            def write(_data):
                raise OSError(errno.ENOSPC, "No space left on device")
            fh.write = write
        return fh
    monkeypatch.setattr(output_publisher.os, "fdopen", full)
    clock.passes(5)
    mirror.push()
    assert "model.bin" not in fs.visible()
    monkeypatch.setattr(output_publisher, "FINAL_TRIES", 1, raising=False)
    with pytest.raises(RuntimeError, match="model.bin could not be published: its snapshot could not be written"):
        mirror._raise_unpublished()


def test_item6_an_evaluator_keeps_the_result_it_pulled_and_rewrote(tmp_path):
    fs = MemoryHDFS()
    fs._write("/out/metrics.json", b'{"attempt": 1}')
    fs._write("/out/.tony-writer-0000000001", f"{APP} 2 chief\n".encode())
    evaluator = Mirror("hdfs:///out", tmp_path / "ev", files=fs, writer=f"{APP}.a2.evaluator0", attempt=(APP, 2))
    evaluator.join()
    evaluator.pull(events=False)
    (evaluator.local / "metrics.json").write_bytes(b'{"attempt": 2}')
    assert evaluator.push(cutoff=math.inf) == 1
    evaluator.pull(events=False)
    assert (evaluator.local / "metrics.json").read_bytes() == b'{"attempt": 2}'
    evaluator.push(cutoff=math.inf)
    assert fs.visible()["metrics.json"] == b'{"attempt": 2}'


def test_item7_an_evaluator_reading_its_chiefs_new_mark_at_0_bytes_is_not_fenced(tmp_path):
    fs = MemoryHDFS()
    fs._write("/out/.tony-writer-0000000001", f"{APP} 1 chief\n".encode())
    evaluator = Mirror("hdfs:///out", tmp_path / "ev", files=fs, writer=f"{APP}.a1.evaluator0", attempt=(APP, 1))
    evaluator.join()
    fs._write("/out/.tony-writer-0000000002", b"")  # the chief's new claim: created, its bytes not there yet
    later = threading.Timer(0.2, lambda: fs._write("/out/.tony-writer-0000000002", f"{APP} 1 chief\n".encode()))
    later.start()
    (evaluator.local).mkdir(parents=True, exist_ok=True)
    (evaluator.local / "eval.json").write_bytes(b"{}")
    assert evaluator.push(cutoff=math.inf) == 1
    later.join()


def test_item8_a_growing_file_is_not_appended_past_a_cut_prefix(tmp_path):
    """An append-only manifest names ckpt-1 after ckpt-1 closed; while the prefix is held back before ckpt-1
    (a file being written), the manifest's new line does not go out either."""
    fs, clock = MemoryHDFS(), Clock()
    mirror = _writer(tmp_path / "out", fs, clock)
    manifest = open(mirror.local / "manifest.log", "a")  # noqa: SIM115 - held open for the run, as a log is
    try:
        manifest.write("start\n")
        manifest.flush()
        _settle(mirror, clock)
        assert fs.visible().get("manifest.log") == b"start\n"
        with (mirror.local / "other.bin").open("wb") as fh:
            fh.write(b"half")  # a file being written stops the prefix
            fh.flush()
            mirror.observe(0)
            (mirror.local / "ckpt-1.data").write_bytes(b"ckpt-1")
            manifest.write("ckpt-1\n")
            manifest.flush()
            _settle(mirror, clock)
            assert fs.visible() == {"manifest.log": b"start\n"}
            fh.write(b" and whole")
        _settle(mirror, clock)
        assert fs.visible() == {"manifest.log": b"start\nckpt-1\n", "ckpt-1.data": b"ckpt-1",
                                "other.bin": b"half and whole"}
    finally:
        manifest.close()


def test_item9_empty_files_are_pulled_and_a_once_unreadable_file_is_deleted(tmp_path):
    fs = MemoryHDFS()
    fs._write("/out/_SUCCESS", b"")
    fs._write("/out/done.flag", b"")
    reader = Mirror("hdfs:///out", tmp_path / "r", files=fs, writer="r", attempt=(APP, 2))
    assert reader.pull(events=False) == 2
    assert (reader.local / "_SUCCESS").exists()

    writer = Mirror("hdfs:///out2", tmp_path / "w", files=fs, writer=f"{APP}.a1.chief0", attempt=(APP, 1))
    writer.claim()
    writer.local.mkdir()
    (writer.local / "x.lock").write_bytes(b"lock")
    writer.push(cutoff=math.inf)
    writer._say_unreadable("x.lock", PermissionError(13, "Permission denied"))
    (writer.local / "x.lock").unlink()
    writer.push(cutoff=math.inf)
    assert "x.lock" not in fs.visible("/out2")


def test_events_lost_fall_back_to_the_quiet_rule_said_once_then_return(tmp_path, caplog):
    fs, clock = MemoryHDFS(), Clock()
    mirror = _writer(tmp_path / "out", fs, clock)
    (mirror.local / "a.txt").write_bytes(b"a")
    mirror.source.read(0)  # the queue's events are gone...
    mirror.source.lost = "the kernel's event queue overflowed (a test)"
    mirror.observe(0)  # ...and the mirror is told
    assert mirror.fallback and "overflowed" in caplog.text
    assert mirror.settle_s == output_publisher.QUIET_S
    os.utime(mirror.local / "a.txt", (clock.now - 5, clock.now - 5))
    mirror._push_step(background=False)  # a rescan under the quiet rule, which took everything
    assert fs.visible()["a.txt"] == b"a" and not mirror.fallback
    (mirror.local / "b.txt").write_bytes(b"b")
    _settle(mirror, clock)
    assert fs.visible()["b.txt"] == b"b"


def test_a_real_overflow_of_the_kernels_queue_is_noticed(tmp_path):
    """More events than /proc/sys/fs/inotify/max_queued_events (16384 by default) while nobody reads."""
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if limit > 20000:
        pytest.skip(f"max_queued_events is {limit} here")
    source = EventSource(tmp_path)
    source.open()
    try:
        for n in range(limit // 2 + 10):
            path = tmp_path / f"f{n % 50}"
            path.write_bytes(b"x")  # CLOSE_WRITE + MODIFY (+ CREATE the first time)
        source.read(0)
        assert "overflowed" in source.lost
    finally:
        source.close()


def test_a_directory_made_and_filled_before_its_watch_lands_is_found(tmp_path):
    source = EventSource(tmp_path)
    source.open()
    try:
        (tmp_path / "a" / "b").mkdir(parents=True)
        (tmp_path / "a" / "b" / "c.txt").write_bytes(b"c")
        kinds = {(c.kind, c.rel) for c in source.read(0)}
        assert ("found", "a/b/c.txt") in kinds or ("closed", "a/b/c.txt") in kinds
    finally:
        source.close()


def test_writers_are_read_from_proc(tmp_path):
    path = tmp_path / "f"
    with path.open("wb"), (tmp_path / "log").open("a"):
        held = Writers(lambda: [os.getpid()]).held()
        assert held is not None
        st, log_st = os.stat(path), os.stat(tmp_path / "log")
        assert (st.st_dev, st.st_ino) in held.writing and (st.st_dev, st.st_ino) not in held.appending
        assert (log_st.st_dev, log_st.st_ino) in held.appending


def test_files_written_into_a_new_directory_before_its_watch_keep_their_creation_order_on_a_clock_tie(tmp_path):
    """No event orders them; on equal mtimes the inodes (given out in creation order), not the names."""
    fs, clock = MemoryHDFS(), Clock()
    mirror = _writer(tmp_path / "out", fs, clock)
    _tf_save(mirror.local, 0)  # ckpt/ made and filled before the watcher read its creation
    same = time.time_ns()
    for path in (mirror.local / "ckpt").iterdir():
        os.utime(path, ns=(same, same))
    mirror.observe(0)
    inodes = sorted((p.stat().st_ino, p.name) for p in (mirror.local / "ckpt").iterdir())
    assert [e.rel.split("/")[1] for e in mirror.history.entries] == [name for _, name in inodes]


def test_a_worker_waiting_for_its_chiefs_claim_lists_only_the_top_of_the_output(tmp_path):
    """Issue #51 item 14: a worker waits (up to 120 s, a look every 0.25 s) for its attempt's claim. It listed
    the whole output recursively each time — one LISTSTATUS per directory of a deep output, from every
    worker — and now lists the output's top, where the marks are: one LISTSTATUS a look."""
    fs = MemoryHDFS()
    for d in range(40):
        fs._write(f"/out/ckpt/shard-{d}/part-0", b"x")
    worker = Mirror("hdfs:///out", tmp_path / "w", files=fs, writer=f"{APP}.a2.worker0", attempt=(APP, 2))
    fs.ops.clear()
    assert worker.claim_time(wait_s=0.3, poll_s=0.05) is None
    assert fs.ops and set(fs.ops) == {"entries"}  # never a recursive `list`
    fs._write("/out/.tony-writer-0000000003", f"{APP} 2 chief\n".encode())
    fs.ops.clear()
    assert worker.claim_time(wait_s=5, poll_s=0.05) is not None
    assert fs.ops.count("entries") == 1


def test_item8_under_the_quiet_rule_too_a_growing_file_goes_out_only_as_far_as_the_round_saw(tmp_path):
    """A save closed and named in the manifest while a round uploads: the round appends the manifest only up to
    the size it walked, never the line naming the save it did not take."""
    out = tmp_path / "out"

    class ProgramWritesDuringTheUpload(MemoryHDFS):
        def create(self, path, data):
            super().create(path, data)
            if "ckpt-1.data" in path and not (out / "ckpt-2.data").exists():
                (out / "ckpt-2.data").write_bytes(b"ckpt-2")
                with (out / "manifest.log").open("ab") as fh:
                    fh.write(b"ckpt-2\n")

    fs = ProgramWritesDuringTheUpload()
    writer = Mirror("hdfs:///out", out, files=fs, writer=f"{APP}.a1.chief0", attempt=(APP, 1))
    writer.claim()
    out.mkdir()
    (out / "manifest.log").write_bytes(b"start\n")
    writer.push(cutoff=math.inf)
    (out / "ckpt-1.data").write_bytes(b"ckpt-1")
    with (out / "manifest.log").open("ab") as fh:
        fh.write(b"ckpt-1\n")
    for name in ("ckpt-1.data", "manifest.log"):
        os.utime(out / name, (time.time() - 10, time.time() - 10))
    writer.push()
    seen = fs.visible()
    named = [line for line in seen["manifest.log"].decode().split() if line.startswith("ckpt-")]
    assert all(f"{name}.data" in seen for name in named), (seen["manifest.log"], sorted(seen))


def _tf_save_keeping(out: Path, n: int, keep: int = 2) -> None:
    """TensorFlow's CheckpointManager: the new save, the pointer, then the save `keep` back removed."""
    _tf_save(out, n)
    if n >= keep:
        for suffix in ("data", "index"):
            (out / "ckpt" / f"ckpt-{n - keep}.{suffix}").unlink()


def test_a_push_cut_midway_never_leaves_a_pointer_naming_a_removed_checkpoint(tmp_path):
    """Found by the output model under load: each path's last entry published in the history's order sent the
    removal of ckpt-0 (made once the pointer named ckpt-2) before the newest pointer; a link cut between them
    left HDFS a pointer naming ckpt-0 without its data. Removals now go after the writes that follow them."""
    fs, clock = MemoryHDFS(), Clock()
    (tmp_path / "out" / "ckpt").mkdir(parents=True)
    mirror = _writer(tmp_path / "out", fs, clock)
    _tf_save_keeping(mirror.local, 0)
    _settle(mirror, clock)
    for n in range(1, 5):
        _tf_save_keeping(mirror.local, n)
    mirror.observe(0)
    clock.passes(SETTLE_S + 0.01)
    original, sent = fs.delete, []

    def delete(path, recursive=False):
        sent.append(path)
        raise OSError(113, "No route to host")  # the link is cut at the first removal
    fs.delete = delete
    with pytest.raises(OSError):
        mirror.publish_ready()
    fs.delete = original
    seen = fs.visible()
    pointer = seen["ckpt/checkpoint"].decode()
    named = pointer.split('"')[1]
    assert f"ckpt/{named}.data" in seen and f"ckpt/{named}.index" in seen, (pointer, sorted(seen))
    assert named == "ckpt-4" and sent  # every write went first; the removals come last


def test_events_lost_just_before_a_failed_end_are_judged_by_the_quiet_rule_s_time(tmp_path):
    """Found by the output model: a cutoff computed before the mirror noticed the loss used the events' short
    settle time, and the quiet rule then took a file the failed program had left open and unchanged for less
    than QUIET_S. Given the end's time, the mirror computes the cutoff after reading the last events."""
    from tony_airflow.core.executor.output_commit import QUIET_S

    fs, clock = MemoryHDFS(), Clock()
    mirror = _writer(tmp_path / "out", fs, clock)
    torn = (mirror.local / "model.h5").open("wb")  # opened, nothing written yet: the program then fails
    mirror.observe(0)
    clock.passes((SETTLE_S + QUIET_S) / 2)  # longer than the events' settle time, shorter than the quiet rule's
    mirror.source.read(0)
    mirror.source.lost = "the kernel's event queue overflowed (the test)"
    torn.close()
    mirror.alive = lambda: False
    mirror.finish(ended_at=clock.now)
    assert "model.h5" not in fs.visible()


def test_a_removed_directory_goes_before_what_is_written_under_it_again():
    from tony_airflow.core.executor.output_events import CLOSED, REMOVED, Change
    from tony_airflow.core.executor.output_history import Entry, removals_late

    def entry(seq: int, kind: str, rel: str, is_dir: bool = False) -> Entry:
        return Entry(seq, Change(kind, rel, 0.0, is_dir))

    order = removals_late([entry(1, REMOVED, "ckpt-0.data"), entry(2, REMOVED, "run", is_dir=True),
                           entry(3, CLOSED, "run/model.bin"), entry(4, CLOSED, "checkpoint")])
    assert [e.seq for e in order] == [2, 3, 4, 1]


def test_a_directory_removal_already_published_is_not_replayed_after_a_cut_push(tmp_path):
    """Found by a reviewer's script: `rm -r ckpt` then a save of ckpt-2 into it, the push cut at the pointer;
    the retry ran the published removal again (recursive) and deleted ckpt-2.data, which HDFS had and the
    retry skipped as published, leaving the pointer naming an absent file."""
    import shutil

    from tests.unit.core.executor.memory_hdfs import LinkDown

    fs, clock = MemoryHDFS(), Clock()
    (tmp_path / "out" / "ckpt").mkdir(parents=True)
    mirror = _writer(tmp_path / "out", fs, clock)
    _tf_save(mirror.local, 1)
    _settle(mirror, clock)
    shutil.rmtree(mirror.local / "ckpt")
    _tf_save(mirror.local, 2)
    mirror.observe(0)
    clock.passes(SETTLE_S + 0.01)

    def cut_at_the_pointer(op, path):
        if path.endswith("/ckpt/checkpoint") or "checkpoint.tony-part" in path:
            raise LinkDown()
    fs.before = cut_at_the_pointer
    with pytest.raises(OSError):
        mirror.publish_ready()
    fs.before = None
    mirror.publish_ready()
    seen = fs.visible()
    assert seen.get("ckpt/checkpoint") == b'model_checkpoint_path: "ckpt-2"\n'
    assert seen.get("ckpt/ckpt-2.data") == b"data-2" and seen.get("ckpt/ckpt-2.index") == b"index-2", sorted(seen)
