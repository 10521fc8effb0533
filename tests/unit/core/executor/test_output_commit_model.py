"""The output's commit protocol, model-checked: a Hypothesis state machine drives programs, their mirrors
and an HDFS with HDFS's rules (memory_hdfs.py) through random interleavings of writes and faults, and
checks the protocol's promises after every step.

Programs write as real ones do, into real local directories: TensorFlow-style saves (data, index, then
`checkpoint` replaced by rename, the oldest dropped: max_to_keep), Keras-style rewrites of a model in
place, event-file appends, deletions, a path that changes kind (file <-> directory), a file the executor
cannot read. Faults: a push cut after any request, a stop at any moment (the final push with its
cutoff), a new attempt (claim, pull, adopt) — also claiming in the middle of the old writer's round —,
the local directory removed under a live writer (YARN's clean-up of an ended container),
an older writer waking up, a reader's pull. Time is virtual: every write sets its file's mtime, and
every push is given its cutoff, so the quiet rule is exercised exactly.

Invariants:
- each file HDFS shows is one whole version some writer had (a prefix of one, for a file that only grows);
- the `checkpoint` HDFS shows names a checkpoint whose files are all there and come from one save;
- a retry resumes from a whole checkpoint (its pull restores one, or none);
- no rename by a writer after a newer writer's claim completed, and at most one APPEND or DELETE (the one
  request already past its fence check when the claim landed: HDFS has no conditional append or delete);
- a reader holds at most what HDFS holds plus one checkpoint;
- a checkpoint HDFS showed is never taken back: its pointer stays, naming it or a later one (also when
  YARN removed a live writer's local directory: a directory that is gone is not one the program emptied);
- after a stop whose final push went through, HDFS's checkpoint is never older than the newest one that
  was quiet for QUIET_S before the stop.

`pytest -m "not e2e"` runs a few hundred examples; `make soak` (TONY_MODEL_EXAMPLES) runs thousands.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tests.unit.core.executor.memory_hdfs import LinkDown, MemoryHDFS
from tony_airflow.core.executor import output_commit
from tony_airflow.core.executor.output_commit import Mirror, WriterFenced
from tony_airflow.yarn.hdfs import is_part

APP = "application_1700000000000_0001"
ROOT = "/out"
KEEP = 2  # TensorFlow's max_to_keep
EXAMPLES = int(os.environ.get("TONY_MODEL_EXAMPLES", "300"))
STEPS = int(os.environ.get("TONY_MODEL_STEPS", "40"))
POINTER = re.compile(rb'(?:model_checkpoint_path: ")?ckpt-(\d+)')
STYLES = ("ckpt", "pt")  # TensorFlow's checkpoint index; a hand-written pointer (`ckpt-N`, as PyTorch users write)
MUTATIONS = ("rename_over", "append", "delete")


class Store(MemoryHDFS):
    """The shared HDFS, which also records who changed what a reader sees, and when (its step)."""

    def __init__(self) -> None:
        super().__init__()
        self.changes: list[tuple[int, str, str, str]] = []  # (step, writer, op, path)
        self.claims: list[tuple[int, str]] = []             # (step the claim completed, writer)


class View:
    """One writer's connection to the store: every request goes through, and what it changed is recorded."""

    def __init__(self, store: Store, who: str, cut_after: int | None = None) -> None:
        self.store, self.who, self.cut_after = store, who, cut_after
        self.sent = 0

    def __getattr__(self, op: str):
        call = getattr(self.store, op)

        def request(*args, **kwargs):
            if self.cut_after is not None and self.sent >= self.cut_after:
                raise LinkDown()
            self.sent += 1
            out = call(*args, **kwargs)
            path = str(args[1] if op == "rename_over" else args[0]) if args else ""
            if op == "delete" and "/.tony-writer" in path:
                return out
            if op in MUTATIONS and not is_part(path):
                self.store.changes.append((self.store.steps, self.who, op, path))
            return out
        return request


def _module_under_test():
    """TONY_MODEL_MIRROR=path/to/module.py runs the model against another mirror (an older one, or one
    with a fix undone): its Mirror and its WriterFenced."""
    where = os.environ.get("TONY_MODEL_MIRROR")
    if not where:
        return output_commit
    import importlib.util
    import sys

    if "mirror_under_test" not in sys.modules:
        spec = importlib.util.spec_from_file_location("mirror_under_test", where)
        module = importlib.util.module_from_spec(spec)
        sys.modules["mirror_under_test"] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules["mirror_under_test"]


UNDER_TEST = _module_under_test()
FENCED = (WriterFenced, UNDER_TEST.WriterFenced)
GONE = tuple(m.OutputDirectoryGone for m in (output_commit, UNDER_TEST)
             if hasattr(m, "OutputDirectoryGone"))  # an older mirror has none


def _mirror_under_test() -> type[Mirror]:
    return UNDER_TEST.Mirror


class UnreadableMirror(_mirror_under_test()):  # type: ignore[misc]
    """The executor cannot read `*.lock` files (a root-owned 0600 file written in an image)."""

    def _open_local(self, rel: str):
        if rel.endswith(".lock"):
            raise PermissionError(13, "Permission denied", rel)
        return super()._open_local(rel)


class Program:
    """A training program writing into its attempt's local directory, with virtual time."""

    def __init__(self, local: Path, attempt: int, clock: list[float], history: dict[str, set[bytes]]) -> None:
        self.local, self.attempt, self.clock, self.history = local, attempt, clock, history
        self.saves = 0
        self.next_ckpt = 0

    def now(self) -> float:
        self.clock[0] += 0.003
        return self.clock[0]

    def _stamp(self, path: Path) -> None:
        when = int(self.now() * 1e9)
        os.utime(path, ns=(when, when))

    def _record(self, rel: str, data: bytes) -> None:
        self.history.setdefault(rel, set()).add(data)

    def write(self, rel: str, data: bytes, in_place: bool = False) -> None:
        path = self.local / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        self._record(rel, data)
        if in_place and path.is_file():
            with path.open("r+b") as fh:
                fh.truncate(0)
                fh.write(data)
        else:
            tmp = path.with_name(f".{path.name}.tmp{self.saves}")
            tmp.write_bytes(data)
            self._stamp(tmp)
            os.replace(tmp, path)
        self._stamp(path)

    def save(self, style: str = "ckpt") -> None:
        """A save: data, index, then the pointer `checkpoint` replaced by rename; the oldest dropped
        (TensorFlow's max_to_keep). `pt`: the pointer is hand-written (`ckpt-N`), not TensorFlow's format."""
        self.saves += 1
        n = self.next_ckpt
        tag = f"a{self.attempt}s{self.saves}".encode()
        self.write(f"{style}/ckpt-{n}.data", b"data:" + tag)
        self.write(f"{style}/ckpt-{n}.index", b"index:" + tag)
        self.write(f"{style}/checkpoint", b'model_checkpoint_path: "ckpt-%d"\n' % n if style == "ckpt" else
                   b"ckpt-%d\n" % n)
        for old in (self.local / style).glob(f"ckpt-{n - KEEP}.*"):
            old.unlink()
        self.next_ckpt = n + 1

    def restore(self) -> None:
        """What a retry does first: the checkpoint each pointer names, which must be whole."""
        for style in STYLES:
            pointer = self.local / style / "checkpoint"
            if not pointer.exists():
                continue
            n = int(POINTER.search(pointer.read_bytes()).group(1))
            data = (self.local / style / f"ckpt-{n}.data").read_bytes()
            index = (self.local / style / f"ckpt-{n}.index").read_bytes()
            assert data.split(b":")[1] == index.split(b":")[1], f"a restore from a mixed checkpoint: {data} {index}"
            self.next_ckpt = max(self.next_ckpt, n + 1)


@settings(max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
class OutputCommitModel(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="tony-model-"))
        self.store = Store()
        self.clock = [time.time() - 1e6]  # in the past: only the cutoffs given to pushes decide what is quiet
        self.history: dict[str, set[bytes]] = {}
        self.attempt = 0
        self.zombies: list[Mirror] = []
        self.reader: Mirror | None = None
        self.stopped_ok: tuple[float, list[tuple[float, int]]] | None = None
        self._new_attempt(None)

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ the writers
    def _new_attempt(self, claim_at: int | None) -> None:
        """A new attempt's chief: claim (perhaps in the middle of the old writer's round), pull, adopt, restore."""
        self.attempt += 1
        local = self.tmp / f"attempt-{self.attempt}"
        who = f"a{self.attempt}"
        mirror = UnreadableMirror(f"hdfs://{ROOT}", local, files=View(self.store, who),
                                  writer=f"{APP}.a{self.attempt}.chief0", attempt=(APP, self.attempt))

        def claim() -> None:
            mirror.claim()
            self.store.claims.append((self.store.steps, who))

        old = getattr(self, "mirror", None)
        if claim_at is not None and old is not None:
            self.store.cut_after = None
            fired = []

            def hook(op: str, path: str) -> None:
                if len(fired) == 0 and self.store.steps >= start + claim_at:
                    fired.append(op)
                    claim()
            start = self.store.steps
            self.store.before = hook
            try:
                old.push(cutoff=self.clock[0] - output_commit.QUIET_S)
            except FENCED:
                pass
            finally:
                self.store.before = None
            if not fired:
                claim()
        else:
            claim()
        if old is not None:
            self.zombies.append(old)
        mirror.pull(events=False)
        mirror.adopt()
        self.mirror = mirror
        self.program = Program(local, self.attempt, self.clock, self.history)
        self.program.restore()
        self.stopped_ok = None

    @rule(style=st.sampled_from(STYLES))
    def save(self, style: str) -> None:
        self.program.save(style)

    @rule(version=st.integers(0, 5))
    def rewrite_model_in_place(self, version: int) -> None:
        self.program.write("model.h5", b"model-v%d-a%d" % (version, self.attempt) * 50, in_place=True)

    @rule()
    def append_events(self) -> None:
        path = self.program.local / "tb" / "events.out.tfevents.1.host.1.v2"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as fh:
            fh.write(b"record;")
        self.history.setdefault("tb/events.out.tfevents.1.host.1.v2", set()).add(path.read_bytes())
        self.program._stamp(path)

    @rule()
    def append_log(self) -> None:
        path = self.program.local / "train.log"
        with path.open("ab") as fh:
            fh.write(b"step;")
        self.history.setdefault("train.log", set()).add(path.read_bytes())
        self.program._stamp(path)

    @rule()
    def delete_model(self) -> None:
        (self.program.local / "model.h5").unlink(missing_ok=True)

    @rule()
    def change_kind(self) -> None:
        """`scratch` is a file, then a directory holding `inner`, and back."""
        path = self.program.local / "scratch"
        if path.is_dir():
            shutil.rmtree(path)
            self.program.write("scratch", b"scratch-file-a%d" % self.attempt)
        else:
            path.unlink(missing_ok=True)
            self.program.write("scratch/inner", b"scratch-inner-a%d" % self.attempt)

    @rule()
    def unreadable_file(self) -> None:
        self.program.write("out.lock", b"lock")

    @rule(seconds=st.sampled_from([0.2, 0.6, 1.1, 3.0]))
    def time_passes(self, seconds: float) -> None:
        self.clock[0] += seconds

    @rule(cut=st.none() | st.integers(0, 12))
    def push(self, cut: int | None) -> None:
        self.mirror.files.cut_after = None if cut is None else self.mirror.files.sent + cut
        try:
            self.mirror.push(cutoff=self.clock[0] - output_commit.QUIET_S)
        except (LinkDown, *FENCED):
            pass
        finally:
            self.mirror.files.cut_after = None

    @rule(cut=st.none() | st.integers(0, 12), clean=st.booleans())
    def stop(self, cut: int | None, clean: bool) -> None:
        """The command ends (exit 0: everything; a stop or failure: what was quiet before it), then a new
        attempt starts, as the AM's retry does."""
        cutoff = float("inf") if clean else self.clock[0] - output_commit.QUIET_S
        self.mirror.files.cut_after = None if cut is None else self.mirror.files.sent + cut
        ok = False
        try:
            self.mirror.push(cutoff=cutoff)
            ok = True
        except (LinkDown, *FENCED):
            pass
        finally:
            self.mirror.files.cut_after = None
        if ok:
            self._check_stop(cutoff)
        self._new_attempt(None)

    @rule(clean=st.booleans())
    def container_directory_removed(self, clean: bool) -> None:
        """YARN ended the container and removed its directory while the executor still ran (the container's
        shell died at YARN's SIGTERM): a round of the loop, then the final push, over a directory that is
        gone; then the next attempt."""
        shutil.rmtree(self.program.local, ignore_errors=True)
        for cutoff in (self.clock[0] - output_commit.QUIET_S, float("inf") if clean else self.clock[0]):
            try:
                self.mirror.push(cutoff=cutoff)
            except (LinkDown, *FENCED, *GONE):
                pass
        self._new_attempt(None)

    @rule(at=st.integers(0, 10))
    def new_attempt_claims_during_a_round(self, at: int) -> None:
        """A lost executor's writer is still in a round when the next attempt claims the output."""
        self._new_attempt(at)

    @rule(which=st.integers(0, 5))
    def older_writer_wakes_up(self, which: int) -> None:
        if not self.zombies:
            return
        zombie = self.zombies[which % len(self.zombies)]
        try:
            zombie.push(cutoff=float("inf"))
        except (LinkDown, *FENCED):
            pass

    @rule()
    def reader_pulls(self) -> None:
        if self.reader is None:
            self.reader = _mirror_under_test()(f"hdfs://{ROOT}", self.tmp / "reader", files=View(self.store, "reader"),
                                 writer="reader", attempt=(APP, 0))
        self.reader.pull(events=False)
        self._reader_holds_what_hdfs_holds_and_at_most_one_checkpoint_more()
        Program(self.reader.local, 0, self.clock, {}).restore()  # whole checkpoints, as a retry's restore needs

    # ------------------------------------------------------------------ the promises
    def _visible(self) -> dict[str, bytes]:
        return self.store.visible(ROOT)

    @invariant()
    def every_published_file_is_a_whole_version_a_writer_had(self) -> None:
        if not hasattr(self, "store"):
            return
        for rel, data in self._visible().items():
            versions = self.history.get(rel, set())
            if rel.endswith(".v2") or rel == "train.log":
                assert any(v.startswith(data) for v in versions), f"{rel}: not a prefix of any version"
            else:
                assert data in versions, f"{rel}: {data[:40]!r} is no version a writer had"

    @invariant()
    def the_published_checkpoint_is_whole_and_from_one_save(self) -> None:
        if not hasattr(self, "store"):
            return
        seen = self._visible()
        for style in STYLES:
            pointer = seen.get(f"{style}/checkpoint")
            if pointer is None:
                continue
            n = int(POINTER.search(pointer).group(1))
            data, index = seen.get(f"{style}/ckpt-{n}.data"), seen.get(f"{style}/ckpt-{n}.index")
            assert data is not None and index is not None, f"{style}/checkpoint names ckpt-{n}: {sorted(seen)}"
            assert data.split(b":")[1] == index.split(b":")[1], f"{style}/ckpt-{n} mixes saves: {data!r} {index!r}"

    @invariant()
    def a_published_checkpoint_is_never_taken_back(self) -> None:
        """Programs never delete their pointer, and a retry resumes from the one HDFS holds: once HDFS
        showed `checkpoint` naming ckpt-N, it always shows one naming ckpt-N or a later one."""
        if not hasattr(self, "store"):
            return
        seen = self._visible()
        newest = self.__dict__.setdefault("newest_published", {})
        for style in STYLES:
            pointer = seen.get(f"{style}/checkpoint")
            if style in newest:
                assert pointer is not None, f"{style}/checkpoint (ckpt-{newest[style]}) was taken back from HDFS"
            if pointer is None:
                continue
            n = int(POINTER.search(pointer).group(1))
            assert n >= newest.get(style, n), f"{style}/checkpoint went back from ckpt-{newest[style]} to ckpt-{n}"
            newest[style] = n

    @invariant()
    def nothing_is_published_by_a_writer_after_a_newer_claim(self) -> None:
        if not hasattr(self, "store"):
            return
        order = [who for _, who in self.store.claims]
        late: dict[str, int] = {}
        for step, who, op, path in self.store.changes:
            if who not in order:
                continue
            newer = order[order.index(who) + 1:]
            done = [s for s, w in self.store.claims if w in newer]
            if not done or step <= min(done):
                continue
            assert op != "rename_over", f"{who} renamed {path} into place at step {step}, after a newer claim"
            late[who] = late.get(who, 0) + 1
            assert late[who] <= 1, f"{who}: {late[who]} requests after a newer claim (the last: {op} {path})"

    def _reader_holds_what_hdfs_holds_and_at_most_one_checkpoint_more(self) -> None:
        """Checked right after its pull: HDFS moves on without it meanwhile."""
        local = self.reader.local
        held = {str(p.relative_to(local)) for p in local.rglob("*") if p.is_file()}
        extra = {rel for rel in held - set(self._visible())}
        checkpoints = {re.sub(r"\.(data|index)$", "", rel) for rel in extra}
        assert all("/ckpt-" in rel for rel in extra) and len(checkpoints) <= len(STYLES), sorted(extra)

    def _check_stop(self, cutoff: float) -> None:
        """The checkpoint the program's pointer named at the stop, if it was quiet for QUIET_S then (an
        earlier pointer the program replaced before any push could take it is gone from the disk too)."""
        for style in STYLES:
            path = self.program.local / style / "checkpoint"
            if not path.exists() or path.stat().st_mtime > cutoff:
                continue
            named = int(POINTER.search(path.read_bytes()).group(1))
            pointer = self._visible().get(f"{style}/checkpoint")
            assert pointer is not None, f"a stop whose final push went through left no {style}/checkpoint in HDFS"
            assert int(POINTER.search(pointer).group(1)) >= named


TestOutputCommitModel = OutputCommitModel.TestCase


def test_the_model_runs_its_rules_against_the_real_mirror() -> None:
    """The state machine is not vacuous: one fixed run publishes a checkpoint and fences a zombie."""
    machine = OutputCommitModel()
    try:
        machine.start()
        machine.save("ckpt")
        machine.time_passes(3.0)
        machine.push(None)
        assert machine._visible().get("ckpt/checkpoint") == b'model_checkpoint_path: "ckpt-0"\n'
        machine.new_attempt_claims_during_a_round(0)
        machine.save("ckpt")
        machine.time_passes(3.0)
        with pytest.raises(WriterFenced):
            machine.zombies[0].push(cutoff=float("inf"))
        machine.push(None)
        assert machine._visible().get("ckpt/checkpoint") == b'model_checkpoint_path: "ckpt-1"\n'
        machine.the_published_checkpoint_is_whole_and_from_one_save()
    finally:
        machine.teardown()
