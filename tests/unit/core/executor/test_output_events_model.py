"""The output's commit protocol driven by the writer's kernel events, model-checked (issue #50).

A Hypothesis state machine plays programs that write as real ones do — each system call a step of its own:
open (in place, truncating, or a temporary name), write half, pause (any length of virtual time), write
the rest, close, rename into place, delete; TensorFlow-style saves (data, index, then `checkpoint` by
rename, the oldest dropped) in one step, as fast as a program saving every 0.4 s; files stamped with equal
mtimes; more files than every limit of the code (MAX_OPEN shrunk to 3 inside the model); events lost (the
kernel's queue overflowed: the quiet rule stands in, then a rescan); a local disk that fills during a
snapshot; pushes cut after any request; stops, clean or not, each followed by a new attempt that pulls and
resumes. The mirror reads the real kernel's inotify events of these real files; time is virtual (the
mirror's clock, and every write stamps its file's mtime with it).

Invariants, after every step:
- nothing open for writing, nothing half-written, is ever published: every file HDFS shows is a whole
  version a writer closed (a prefix of one, for a file that only grows);
- the `checkpoint` HDFS shows names a checkpoint whose files are all there and from one save;
- a checkpoint HDFS showed is never taken back;
- after a clean exit every file is in HDFS, or the final push failed naming it;
- a save closed more than SETTLE_S ago is in HDFS once the uploader ran uncut, no write is under way, no
  snapshot failed and the events were not lost (the aim "within its upload time + 1 s").

`TONY_MODEL_MIRROR=path/to/output_commit.py` runs the same programs against an older mirror (the quiet
rule's `push(cutoff)`), as the note of issue #50 reports for 905767c.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.unit.core.executor.memory_hdfs import LinkDown, MemoryHDFS
from tony_airflow.core.executor import output_commit, output_publisher

APP = "application_1700000000000_0002"
ROOT = "/out"
KEEP = 2
SIZE = 64  # every whole version has this length; a half-written one is its first half
EXAMPLES = int(os.environ.get("TONY_MODEL_EXAMPLES", "200"))
STEPS = int(os.environ.get("TONY_MODEL_STEPS", "40"))
POINTER = re.compile(rb'model_checkpoint_path: "ckpt-(\d+)"')
SLOW = ("model.h5", "big.bin")  # model.h5 rewritten in place; big.bin written under a temporary name, renamed


def _module():
    where = os.environ.get("TONY_MODEL_MIRROR")
    if not where:
        return output_commit
    if "events_mirror_under_test" not in sys.modules:
        spec = importlib.util.spec_from_file_location("events_mirror_under_test", where)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["events_mirror_under_test"] = module
        spec.loader.exec_module(module)
    return sys.modules["events_mirror_under_test"]


UNDER_TEST = _module()
EVENTS = hasattr(UNDER_TEST.Mirror, "observe")
FENCED = (output_commit.WriterFenced, UNDER_TEST.WriterFenced)
SETTLE_S = getattr(UNDER_TEST, "SETTLE_S", 1.0)
QUIET_S = UNDER_TEST.QUIET_S
AIM_S = 1.0  # the aim: a save is in HDFS within its upload time + 1 s (uploads take no time here)


class Disk:
    """The local disk: `full` makes the next snapshot fail as a full disk does."""
    full = False


class _FillingDisk:
    """`tempfile` for the mirror: a snapshot's file cannot be made while the disk is full (once)."""

    def mkstemp(self, *args, **kwargs):
        fd, name = tempfile.mkstemp(*args, **kwargs)
        if Disk.full:  # the copy's writes fail as on a full disk (/dev/full answers every write with ENOSPC)
            Disk.full = False
            os.close(fd)
            fd = os.open("/dev/full", os.O_WRONLY)
        return fd, name


class Cuttable:
    """One writer's connection to the shared HDFS, which a step can cut after N requests."""

    def __init__(self, store: MemoryHDFS) -> None:
        self.store, self.cut_after, self.sent = store, None, 0

    def __getattr__(self, op: str):
        call = getattr(self.store, op)

        def request(*args, **kwargs):
            if self.cut_after is not None and self.sent >= self.cut_after:
                raise LinkDown()
            self.sent += 1
            return call(*args, **kwargs)
        return request


def fh_data(fh) -> bytes:
    fh.flush()
    return Path(fh.name).read_bytes()


def _version(tag: str) -> bytes:
    return tag.encode().ljust(SIZE, b".")


@settings(max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
class OutputEventsModel(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="tony-events-model-"))
        self.store = MemoryHDFS()
        self.clock = [time.time() - 1e6]
        self.whole: dict[str, set[bytes]] = {}  # rel -> every version a writer closed
        self.attempt = 0
        self.open: dict[int, tuple[str, Path, object, bytes]] = {}  # writer -> (rel, path written, file, data)
        self.newest_published = -1
        self.saved: list[tuple[int, float]] = []  # (checkpoint number, when its pointer was renamed in)
        self.faults = False   # a snapshot failed or events were lost since the last clean publish
        self.exited_clean: str | None = None
        self._patches = [(output_publisher, "MAX_OPEN", output_publisher.MAX_OPEN),
                         (UNDER_TEST, "FINAL_BACKOFF_S", getattr(UNDER_TEST, "FINAL_BACKOFF_S", 0))]
        output_publisher.MAX_OPEN = 3
        UNDER_TEST.FINAL_BACKOFF_S = 0
        if hasattr(UNDER_TEST, "MAX_OPEN"):
            self._patches.append((UNDER_TEST, "MAX_OPEN", UNDER_TEST.MAX_OPEN))
            UNDER_TEST.MAX_OPEN = 3
        for module in {UNDER_TEST, output_publisher, output_commit}:
            if hasattr(module, "tempfile"):
                self._patches.append((module, "tempfile", module.tempfile))
                module.tempfile = _FillingDisk()
        self._new_attempt()

    def teardown(self) -> None:
        for _, _, fh, _ in self.open.values():
            fh.close()
        self.mirror_stop()
        for module, name, value in self._patches:
            setattr(module, name, value)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def now(self) -> float:
        return self.clock[0]

    def mirror_stop(self) -> None:
        source = getattr(self.mirror, "source", None)
        if source is not None:
            source.close()

    # ------------------------------------------------------------------ attempts
    def _new_attempt(self) -> None:
        Disk.full = False
        self.attempt += 1
        local = self.tmp / f"attempt-{self.attempt}"
        self.files = Cuttable(self.store)
        kwargs = {"clock": self.now} if EVENTS else {}
        mirror = UNDER_TEST.Mirror(f"hdfs://{ROOT}", local, files=self.files, writer=f"{APP}.a{self.attempt}.chief0",
                                   attempt=(APP, self.attempt), **kwargs)
        mirror.claim()
        mirror.pull(events=False)
        mirror.adopt()
        self.mirror = mirror
        self.local = local
        self.next_ckpt = self._restore() + 1
        self.saves = 0
        self.exited_clean = None
        if EVENTS:
            mirror.watch(writers=lambda: [os.getpid()])

    def _restore(self) -> int:
        pointer = self.local / "ckpt" / "checkpoint"
        if not pointer.exists():
            return -1
        n = int(POINTER.search(pointer.read_bytes()).group(1))
        data = (self.local / "ckpt" / f"ckpt-{n}.data").read_bytes()
        index = (self.local / "ckpt" / f"ckpt-{n}.index").read_bytes()
        assert data.split(b"|")[1] == index.split(b"|")[1], f"a restore from a mixed checkpoint: {data} {index}"
        return n

    # ------------------------------------------------------------------ the program's system calls
    def _stamp(self, path: Path) -> None:
        self.clock[0] += 0.001
        when = int(self.now() * 1e9)
        os.utime(path, ns=(when, when))

    def _whole(self, rel: str, data: bytes) -> None:
        self.whole.setdefault(rel, set()).add(data)

    def _write_file(self, rel: str, data: bytes) -> None:
        """A whole file by a temporary name and a rename (TensorFlow's way)."""
        path = self.local / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(data)
        self._stamp(tmp)
        self._whole(rel, data)
        os.replace(tmp, path)

    @rule()
    def save(self) -> None:
        """data, index, then the pointer by rename; the checkpoint KEEP saves back removed."""
        self.saves += 1
        n = self.next_ckpt
        tag = f"|a{self.attempt}s{self.saves}|"
        self._write_file(f"ckpt/ckpt-{n}.data", _version("data" + tag))
        self._write_file(f"ckpt/ckpt-{n}.index", _version("index" + tag))
        self._write_file("ckpt/checkpoint", b'model_checkpoint_path: "ckpt-%d"\n' % n)
        for old in (self.local / "ckpt").glob(f"ckpt-{n - KEEP}.*"):
            old.unlink()
        self.next_ckpt = n + 1
        self.saved.append((n, self.now()))

    @rule(writer=st.sampled_from([0, 1]), which=st.sampled_from(SLOW))
    def begin(self, writer: int, which: str) -> None:
        if writer in self.open or any(rel == which for rel, *_ in self.open.values()):
            return
        self.saves += 1
        data = _version(f"{which}|a{self.attempt}w{self.saves}|")
        path = self.local / which if which == "model.h5" else self.local / f".{which}.part"
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path, "wb")  # noqa: SIM115 - held open across steps, as a paused writer does
        self.open[writer] = (which, path, fh, data)
        self._stamp(path)

    @rule(writer=st.sampled_from([0, 1]), half=st.booleans())
    def write(self, writer: int, half: bool) -> None:
        if writer not in self.open:
            return
        rel, path, fh, data = self.open[writer]
        done = fh.tell()
        fh.write(data[done:SIZE // 2] if half else data[done:])
        fh.flush()
        self._stamp(path)

    @rule(writer=st.sampled_from([0, 1]))
    def close(self, writer: int) -> None:
        if writer not in self.open:
            return
        rel, path, fh, data = self.open.pop(writer)
        complete = fh.tell() == SIZE
        written = data[:fh.tell()]
        fh.close()
        if not complete and path.name.endswith(".part"):
            path.unlink(missing_ok=True)  # a save given up: its temporary file goes
            return
        self._whole(rel, written)  # closed by its writer: whole, even short (the program chose to stop there)
        self._stamp(path)
        if path.name.endswith(".part"):
            os.replace(path, self.local / rel)

    @rule(seconds=st.sampled_from([0.1, 0.4, 0.6, 1.1, 3.0]))
    def pause(self, seconds: float) -> None:
        """Time passes; the mirror's watcher, which waits on the queue, read what was there meanwhile."""
        if EVENTS:
            self.mirror.observe(0)
        self.clock[0] += seconds

    @rule()
    def equal_mtimes(self) -> None:
        """Coarse kernel clocks (or `cp -p`, `tar x`): every file of the directory with one mtime."""
        when = int(self.now() * 1e9)
        for path in self.local.rglob("*"):
            if path.is_file():
                os.utime(path, ns=(when, when))

    @rule()
    def many_files(self) -> None:
        """More files than MAX_OPEN, then `_SUCCESS`."""
        for n in range(5):
            self._write_file(f"preds/part-{n}", _version(f"part{n}|a{self.attempt}"))
        self._write_file("preds/_SUCCESS", b"")

    @rule()
    def start_over(self) -> None:
        """The program removes its checkpoint directory (`rm -r ckpt`: a trainer told to start over); its next
        save makes the directory again. HDFS may then lose the checkpoint: the program's own doing."""
        shutil.rmtree(self.local / "ckpt", ignore_errors=True)
        self.started_over = True
        self.saved = []

    @rule()
    def delete_model(self) -> None:
        if not any(rel == "model.h5" for rel, *_ in self.open.values()):
            (self.local / "model.h5").unlink(missing_ok=True)

    # ------------------------------------------------------------------ the mirror's steps
    @precondition(lambda self: EVENTS)
    @rule()
    def observe(self) -> None:
        self.mirror.observe(0)

    @rule(cut=st.none() | st.integers(0, 6))
    def publish(self, cut: int | None) -> None:
        self.files.cut_after = None if cut is None else self.files.sent + cut
        try:
            if EVENTS:
                self.mirror.observe(0)
                self.mirror._push_step(background=False)
            else:
                self.mirror.push(cutoff=self.now() - QUIET_S)
        except (LinkDown, *FENCED):
            return
        finally:
            self.files.cut_after = None
        if cut is None:
            self._saves_older_than_settle_are_in_hdfs()

    @precondition(lambda self: EVENTS)
    @rule()
    def events_lost(self) -> None:
        """The kernel's queue overflowed: what was queued is gone, and the mirror is told so."""
        source = self.mirror.source
        if source is None:
            return
        source.read(0)
        source.lost = "the kernel's event queue overflowed (the model)"
        self.faults = True

    @rule()
    def disk_fills(self) -> None:
        Disk.full = True
        self.faults = True

    @rule(clean=st.booleans(), cut=st.none() | st.integers(0, 6))
    def exit(self, clean: bool, cut: int | None) -> None:
        """The program ends (exit 0 only once nothing is open), the final push, then the next attempt."""
        clean = clean and not self.open
        # the quiet rule stands in also when the events were lost just now: the mirror notices it at its end
        fallback = not EVENTS or bool(self.mirror.fallback) or bool(getattr(self.mirror.source, "lost", ""))
        for _, path, fh, _ in self.open.values():
            if fallback:
                # The quiet rule's known limit (docs/submitting.md): a file a failing program left torn and
                # unchanged for QUIET_S before its end looks whole to it; the events' path never takes it.
                self._whole(str(path.relative_to(self.local)), fh_data(fh))
            fh.close()  # a failing program's files are closed by the kernel: torn, and not trusted
        self.open.clear()
        self.mirror.alive = lambda: False
        cutoff = float("inf") if clean else self.now() - getattr(self.mirror, "settle_s", QUIET_S)
        self.files.cut_after = None if cut is None else self.files.sent + cut
        done = False
        try:
            if not EVENTS:
                self.mirror.push(cutoff=cutoff)
            elif clean or "ended_at" not in inspect.signature(self.mirror.finish).parameters:
                self.mirror.finish(cutoff)  # (an older mirror computes nothing itself)
            else:
                self.mirror.finish(ended_at=self.now())  # as the executor does
            done = True
        except (LinkDown, *FENCED):
            pass
        except RuntimeError as exc:
            assert clean and "could not be published" in str(exc), exc  # the end names the file
        finally:
            self.files.cut_after = None
            Disk.full = False
        if done and clean:
            self._everything_is_in_hdfs()
        self.mirror_stop()
        self.faults = False
        self.saved = []
        self._new_attempt()

    # ------------------------------------------------------------------ the promises
    def _visible(self) -> dict[str, bytes]:
        return self.store.visible(ROOT)

    @invariant()
    def nothing_half_written_or_open_is_published(self) -> None:
        if not hasattr(self, "store"):
            return
        for rel, data in self._visible().items():
            assert data in self.whole.get(rel, set()), f"{rel}: {data[:40]!r} is no version a writer closed"

    @invariant()
    def the_checkpoint_is_whole_from_one_save_and_never_taken_back(self) -> None:
        if not hasattr(self, "store"):
            return
        seen = self._visible()
        pointer = seen.get("ckpt/checkpoint")
        started_over = getattr(self, "started_over", False)  # removed by the program: it may go back then
        if pointer is None:
            assert started_over or self.newest_published < 0, "the published checkpoint was taken back"
            return
        n = int(POINTER.search(pointer).group(1))
        data, index = seen.get(f"ckpt/ckpt-{n}.data"), seen.get(f"ckpt/ckpt-{n}.index")
        assert data is not None and index is not None, f"checkpoint names ckpt-{n}: {sorted(seen)}"
        assert data.split(b"|")[1] == index.split(b"|")[1], f"ckpt-{n} mixes saves: {data!r} {index!r}"
        assert started_over or n >= self.newest_published, \
            f"the checkpoint went back from {self.newest_published} to {n}"
        self.newest_published = n

    def _everything_is_in_hdfs(self) -> None:
        seen = self._visible()
        local = {str(p.relative_to(self.local)): p.read_bytes() for p in self.local.rglob("*")
                 if p.is_file() and not p.name.startswith(".")}
        assert local == {rel: seen.get(rel) for rel in local}, sorted(set(local) ^ set(seen))

    def _saves_older_than_settle_are_in_hdfs(self) -> None:
        if self.faults or self.open or getattr(self.mirror, "fallback", "") or not self.saved:
            return
        due = [n for n, at in self.saved if at <= self.now() - AIM_S]
        if not due:
            return
        pointer = self._visible().get("ckpt/checkpoint")
        assert pointer is not None and int(POINTER.search(pointer).group(1)) >= max(due), \
            f"ckpt-{max(due)} was saved over {AIM_S}s ago and HDFS shows {pointer!r}"


TestOutputEventsModel = OutputEventsModel.TestCase


@pytest.mark.skipif(not EVENTS, reason="the events' own path")
def test_the_model_publishes_a_save_and_holds_a_paused_writer_back() -> None:
    """Not vacuous: a save is published after SETTLE_S; a file paused half-written is not, nor what follows."""
    machine = OutputEventsModel()
    try:
        machine.start()
        machine.save()
        machine.pause(0.6)
        machine.publish(None)
        assert machine._visible().get("ckpt/checkpoint") == b'model_checkpoint_path: "ckpt-0"\n'
        machine.begin(0, "model.h5")
        machine.write(0, True)
        machine.pause(3.0)
        machine.publish(None)
        assert "model.h5" not in machine._visible()
        machine.write(0, False)
        machine.close(0)
        machine.pause(0.6)
        machine.publish(None)
        assert machine._visible()["model.h5"].startswith(b"model.h5|a1w")
    finally:
        machine.teardown()
