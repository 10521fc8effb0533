"""Defects a review of the event-driven mirror found (issue #50), each reproduced here first: an overflow
while the quiet rule stood in, a stale "being written" mark after one, the snapshot directory removed under
the watcher, a growing file's turn and a held-open log running ahead of closes not read yet, the output
directory removed and made again, a copy that failed once, an evaluator's pull seen as its own write, a
file appended to and then rewritten in place."""

from __future__ import annotations

import os
import shutil

from tests.unit.core.executor.memory_hdfs import MemoryHDFS
from tests.unit.core.executor.test_output_by_writer import APP, Clock, _settle, _tf_save, _writer
from tony_airflow.core.executor import output_commit, output_protocol
from tony_airflow.core.executor.output_commit import SETTLE_S, Mirror


def _overflow(mirror):
    mirror.source.read(0)  # the queue's events are dropped
    mirror.source.lost = "the kernel's event queue overflowed (a test)"


def _old(path, clock):
    os.utime(path, (clock.now - 5, clock.now - 5))


def test_R1_stale_writing_after_overflow_stalls_forever(tmp_path):
    fs, clock = MemoryHDFS(), Clock()
    mirror = _writer(tmp_path / "out", fs, clock)
    fh = (mirror.local / "a.bin").open("wb")
    fh.write(b"aaaa")
    fh.flush()
    mirror.observe(0)  # MODIFY a.bin: writing
    fh.close()  # its CLOSE_WRITE ...
    _overflow(mirror)  # ... lost in an overflow
    mirror.observe(0)
    assert mirror.fallback
    _old(mirror.local / "a.bin", clock)
    mirror._push_step(background=False)  # rescan took everything -> back to events
    assert not mirror.fallback and fs.visible()["a.bin"] == b"aaaa"
    for n in range(3):
        _tf_save(mirror.local, n)
        _settle(mirror, clock)
        clock.passes(2)
        _settle(mirror, clock)
    (lambda *a: None)("writing:", mirror.history.writing, "visible:", sorted(fs.visible()))
    assert "ckpt/checkpoint" in fs.visible(), "no save published after the overflow"


def test_R2_overflow_during_scan_round_is_forgotten(tmp_path):
    fs, clock = MemoryHDFS(), Clock()
    mirror = _writer(tmp_path / "out", fs, clock)
    (mirror.local / "x").write_bytes(b"x")
    _overflow(mirror)
    mirror.observe(0)
    _old(mirror.local / "x", clock)
    real_push = mirror.push

    def push(*a, **k):
        n = real_push(*a, **k)
        # while the round uploaded: a save whose data closes are lost in a 2nd overflow, then its pointer
        (mirror.local / "ckpt-7.data").write_bytes(b"data-7")
        _overflow(mirror)
        mirror.observe(0)
        (mirror.local / "checkpoint").write_bytes(b"ckpt-7")
        mirror.observe(0)
        return n

    mirror.push = push
    mirror._push_step(background=False)
    (lambda *a: None)("fallback after the round:", repr(mirror.fallback))
    clock.passes(1)
    mirror._push_step(background=False)
    vis = fs.visible()
    (lambda *a: None)(sorted(vis))
    assert not ("checkpoint" in vis and "ckpt-7.data" not in vis), "pointer published without its data"


def test_R3_snapshot_dir_removed_between_mkdir_and_mkstemp(tmp_path):
    fs, clock = MemoryHDFS(), Clock()
    mirror = _writer(tmp_path / "out", fs, clock)
    real = mirror._tmp_dir
    hit = {"n": 0}

    def tmp_dir():
        d = real()
        if hit["n"] == 0:
            hit["n"] += 1
            mirror._tidy_tmp_dir()  # the uploader's finally, between the watcher's mkdir and mkstemp
        return d

    mirror._tmp_dir = tmp_dir
    (mirror.local / "ckpt-1.data").write_bytes(b"1")
    mirror.observe(0)
    (lambda *a: None)([(e.rel, e.state, e.why) for e in mirror.history.entries])
    for n in range(2, 5):
        (mirror.local / f"ckpt-{n}.data").write_bytes(b"%d" % n)
        _settle(mirror, clock)
    (lambda *a: None)(sorted(fs.visible()))
    assert "ckpt-4.data" in fs.visible(), "every later save held back"


def test_R4_growing_files_turn_appends_past_the_prefix(tmp_path):
    fs, clock = MemoryHDFS(), Clock()
    mirror = _writer(tmp_path / "out", fs, clock)
    man = mirror.local / "manifest.txt"

    def append(line):
        with man.open("a") as f:
            f.write(line)

    append("start\n")
    _settle(mirror, clock)
    (mirror.local / "c1").write_bytes(b"c1")
    append("c1\n")
    mirror.observe(0)  # [c1, manifest] judged
    (mirror.local / "c2").write_bytes(b"c2")
    append("c2\n")  # not read yet
    clock.passes(SETTLE_S + 0.01)
    mirror.publish_ready()
    vis = fs.visible()
    (lambda *a: None)(vis)
    assert not (b"c2" in vis.get("manifest.txt", b"") and "c2" not in vis), "manifest names c2, HDFS lacks it"


def test_R5_root_removed_and_recreated_stops_everything_silently(tmp_path):
    fs, clock = MemoryHDFS(), Clock()
    mirror = _writer(tmp_path / "out", fs, clock)
    shutil.rmtree(mirror.local)
    mirror.local.mkdir()
    mirror.observe(0)
    assert mirror.fallback  # the quiet rule stands in, with a rescan, rather than nothing at all
    _tf_save(mirror.local, 1)
    for _ in range(3):
        _settle(mirror, clock)
        clock.passes(2)
        mirror._push_step(background=False)
    assert "ckpt/checkpoint" in fs.visible(), "nothing published after the root was recreated"


def test_R6_ctime_change_during_copy_blocks_forever(tmp_path, monkeypatch):
    fs, clock = MemoryHDFS(), Clock()
    mirror = _writer(tmp_path / "out", fs, clock)
    real = output_commit._copy_range

    def copy_range(src, dst, size):
        real(src, dst, size)
        os.chmod(mirror.local / "cfg.json", 0o640)  # the program's chmod right after its close

    monkeypatch.setattr(output_commit, "_copy_range", copy_range)
    (mirror.local / "cfg.json").write_bytes(b"{}")
    mirror.observe(0)
    monkeypatch.setattr(output_commit, "_copy_range", real)
    (lambda *a: None)([(e.rel, e.state, e.why) for e in mirror.history.entries])
    _tf_save(mirror.local, 1)
    for _ in range(3):
        _settle(mirror, clock)
    (lambda *a: None)(sorted(fs.visible()))
    assert "ckpt/checkpoint" in fs.visible()


def test_R7_growing_log_goes_out_before_unread_closes(tmp_path):
    fs, clock = MemoryHDFS(), Clock()
    mirror = _writer(tmp_path / "out", fs, clock)
    log = open(mirror.local / "train.log", "a")
    try:
        log.write("start\n")
        log.flush()
        _settle(mirror, clock)
        (mirror.local / "ckpt-5").write_bytes(b"5")  # closed; the watcher has not read it yet
        log.write("saved ckpt-5\n")
        log.flush()
        clock.passes(1)
        mirror.publish_ready()
        vis = fs.visible()
        (lambda *a: None)(vis)
        assert not (b"ckpt-5" in vis.get("train.log", b"") and "ckpt-5" not in vis)
    finally:
        log.close()


def test_R9_evaluator_republishes_a_file_it_pulled(tmp_path, monkeypatch):
    fs, clock = MemoryHDFS(), Clock()
    chief = _writer(tmp_path / "chief", fs, clock)
    (chief.local / "checkpoint").write_bytes(b"v5")
    _settle(chief, clock)
    ev = Mirror("hdfs:///out", tmp_path / "ev", files=fs, writer=f"{APP}.a1.evaluator0", attempt=(APP, 1), clock=clock)
    ev.join()
    ev.pull(events=False)
    assert ev.watch(writers=lambda: [os.getpid()])
    (chief.local / "checkpoint").write_bytes(b"v6!")
    _settle(chief, clock)
    real = os.replace

    def replace(a, b):
        real(a, b)
        ev.observe(0)  # the watcher thread runs between the rename and `_held[rel] = ...`

    monkeypatch.setattr(output_protocol.os, "replace", replace)
    ev.pull(events=False)  # the evaluator's loop: pull ...
    monkeypatch.setattr(output_protocol.os, "replace", real)
    (chief.local / "checkpoint").write_bytes(b"v7!!")
    _settle(chief, clock)
    clock.passes(1)
    ev.publish_ready()  # ... then push
    (lambda *a: None)(fs.visible(), ev._own)
    assert fs.visible()["checkpoint"] == b"v7!!", "the evaluator put an old pulled version over the chief's"


def test_R11_a_file_once_appended_then_rewritten_in_place_is_spliced(tmp_path):
    fs, clock = MemoryHDFS(), Clock()
    mirror = _writer(tmp_path / "out", fs, clock)
    path = mirror.local / "metrics.csv"
    with path.open("a") as fh:
        fh.write("epoch,loss\n1,0.9\n")
        fh.flush()
        _settle(mirror, clock)
    _settle(mirror, clock)
    (lambda *a: None)("after append:", fs.visible())
    path.write_text("EPOCH,LOSS,ACC\n1,0.5,0.7\n2,0.4,0.8\n")  # rewritten in place (O_TRUNC, same inode)
    _settle(mirror, clock)
    clock.passes(1)
    _settle(mirror, clock)
    (lambda *a: None)("after rewrite:", fs.visible())
    assert fs.visible()["metrics.csv"] == path.read_bytes()
