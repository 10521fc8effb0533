"""The output's writer role in an elastic job (issue 51 item 5): the AM, not IS_CHIEF, says which container
writes; the container that became rank 0 after the writer's was lost takes the role when the AM's heartbeat
answer says so: it claims (fencing the lost writer, of the same attempt), takes what HDFS holds, pushes from
then on, and tells the AM. On MemoryHDFS (tests/unit/core/executor/memory_hdfs.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.unit.core.executor.memory_hdfs import MemoryHDFS
from tests.unit.core.executor.test_output_by_writer import Clock, _settle, _writer
from tests.unit.core.support import RecordingRegistry, make_job
from tony_airflow.core import protocol
from tony_airflow.core.executor import task as task_module
from tony_airflow.core.executor.output_commit import Mirror
from tony_airflow.core.executor.output_protocol import WriterFenced
from tony_airflow.core.executor.task import Executor, answer_writer
from tony_airflow.core.runtimes import TaskIdentity

APP = "application_1700000000000_0050"


def _executor(index: int, container: str, monkeypatch, registry: RecordingRegistry | None = None) -> Executor:
    monkeypatch.setenv("CONTAINER_ID", container)
    job = make_job("worker:2", output="hdfs:///out")
    return Executor(job, TaskIdentity(type="worker", index=index, attempt=1, app_id=APP), registry or RecordingRegistry(),
                    "h", local=True)


def _checkpoint(lost: Mirror, clock: Clock, epoch: int) -> None:
    tmp = lost.local / ".checkpoint.tmp"
    tmp.write_bytes(b"epoch %d" % epoch)
    os.replace(tmp, lost.local / "checkpoint.pt")
    assert _settle(lost, clock) >= 1


def test_the_new_rank_0_takes_the_role_fences_the_lost_writer_and_tells_the_am(tmp_path, monkeypatch):
    fs, clock = MemoryHDFS(), Clock()
    lost = _writer(tmp_path / "w0", fs, clock, task="worker0.000002")  # worker:0's container, the first writer
    _checkpoint(lost, clock, 7)
    registry = RecordingRegistry()
    survivor = _executor(1, "container_1700000000000_0050_01_000003", monkeypatch, registry)
    survivor.mirror = Mirror("hdfs:///out", tmp_path / "w1", files=fs, writer=f"{APP}.a1.worker1.000003",
                             attempt=(APP, 1), clock=clock)
    survivor.mirror.pull(events=False)  # as a worker beside the writer did at its start (epoch 0's checkpoint)
    started: list[str] = []
    monkeypatch.setattr(survivor.mirror, "start", lambda direction, **kw: started.append(direction))
    _checkpoint(lost, clock, 9)  # the writer's last save before its container was SIGKILLed

    assert answer_writer({"action": "run", "writer": "take", "round": 2}) == 2
    assert answer_writer({"action": "run"}) == 0
    survivor.take_writer_role(2)

    assert survivor.is_writer and started == ["push"]
    assert (tmp_path / "w1" / "checkpoint.pt").read_bytes() == b"epoch 9"  # HDFS's last whole checkpoint
    assert survivor.mirror.epoch > lost.epoch
    assert registry.sent == [(protocol.HEARTBEAT, {"type": "worker", "index": 1, "attempt": 1,
                                                   "container_id": "container_1700000000000_0050_01_000003",
                                                   "took_writer": 2})]
    # the lost writer, cut off but still running (the same attempt): fenced, HDFS keeps the survivor's
    (lost.local / "checkpoint.pt").write_bytes(b"epoch 10 from a writer cut off")
    with pytest.raises(WriterFenced, match="worker1.000003 of the same attempt"):
        lost._fence()
    assert fs.visible()["checkpoint.pt"] == b"epoch 9"
    # what the survivor saves now is published, and its end's push is its (push or is_writer)
    survivor.mirror.watch(writers=lambda: [os.getpid()])
    (survivor.mirror.local / "checkpoint.pt").write_bytes(b"epoch 10")
    _settle(survivor.mirror, clock)
    assert fs.visible()["checkpoint.pt"] == b"epoch 10"


def test_a_take_over_that_fails_is_not_told_to_the_am_and_is_tried_again(tmp_path, monkeypatch):
    fs = MemoryHDFS()
    registry = RecordingRegistry()
    survivor = _executor(1, "container_1700000000000_0050_01_000003", monkeypatch, registry)
    survivor.mirror = Mirror("hdfs:///out", tmp_path / "w1", files=fs, writer="w1", attempt=(APP, 1))

    def down() -> None:
        raise OSError(113, "No route to host")

    monkeypatch.setattr(survivor.mirror, "claim", down)
    survivor.take_writer_role(2)
    assert not survivor.is_writer and registry.sent == []
    monkeypatch.undo()
    monkeypatch.setenv("CONTAINER_ID", "container_1700000000000_0050_01_000003")
    monkeypatch.setattr(survivor.mirror, "start", lambda direction, **kw: None)
    survivor.take_writer_role(2)
    assert survivor.is_writer and registry.sent[-1][1]["took_writer"] == 2


@pytest.mark.parametrize("writer_by_am, claims", [(False, False), (True, True), (None, True)])
def test_stage_follows_the_ams_word_not_is_chief_for_an_elastic_job(writer_by_am, claims, tmp_path, monkeypatch):
    """worker:0 (IS_CHIEF true): a chief's replacement told it does not write takes no claim; without the AM's
    word (not elastic) IS_CHIEF decides as before."""
    fs = MemoryHDFS()
    other = Mirror("hdfs:///out", tmp_path / "other", files=fs, writer=f"{APP}.a1.worker1.000003", attempt=(APP, 1))
    other.claim()  # the survivor holds the role in this attempt
    executor = _executor(0, "container_1700000000000_0050_01_000009", monkeypatch)
    executor.writer_by_am = writer_by_am
    made: list[Mirror] = []

    def mirror(uri: str, local: Path, writer: str = "", attempt: tuple[str, int] = ("", 0)) -> Mirror:
        made.append(Mirror(uri, local, files=fs, writer=writer, attempt=attempt))
        monkeypatch.setattr(made[-1], "start", lambda direction, **kw: None)
        return made[-1]

    monkeypatch.setattr(task_module, "Mirror", mirror)
    monkeypatch.chdir(tmp_path)
    _, push = executor._stage({"IS_CHIEF": "true", "CLUSTER_SPEC": '{"worker": ["a:1", "b:2"]}'})
    assert push is claims and executor.is_writer is claims
    assert (made[0].epoch > other.epoch) is claims
    if writer_by_am is not None:  # its writer name holds its container: a claim fences another of the attempt
        assert made[0].writer.endswith(".worker0.000009")


def test_ordinary_heartbeats_never_say_the_role_was_taken(monkeypatch):
    """Only `take_writer_role` confirms a handover, tagged with its round: an ordinary heartbeat's word would
    end a handover back to a container that held the role before, before it took it again."""
    registry = RecordingRegistry()
    executor = _executor(0, A_CID, monkeypatch, registry)
    executor.is_writer = True
    executor.finished.set()
    executor.finished.clear()
    sent: list[dict] = []

    def call(method, path, payload=None, retries=5, timeout=None):
        sent.append(payload)
        executor.finished.set()
        return {"action": "run"}

    monkeypatch.setattr(registry, "call", call)
    executor._heartbeat_loop()
    assert sent and "writer" not in sent[0] and "took_writer" not in sent[0]


A_CID, B_CID = "container_1700000000000_0050_01_000002", "container_1700000000000_0050_01_000003"


def test_the_role_coming_back_to_a_container_that_held_it_is_taken_again(tmp_path, monkeypatch):
    """A wrote (epoch 1), its agent was dropped for silence, the role moved to B (epoch 2, newer checkpoints),
    B was lost: the AM gives A the role again. A claims anew (its old mirror would be fenced by B's mark),
    takes B's last checkpoint, and its saves are published."""
    fs, clock = MemoryHDFS(), Clock()
    registry = RecordingRegistry()
    a = _executor(0, A_CID, monkeypatch, registry)
    a.mirror = _writer(tmp_path / "a", fs, clock, task="worker0.000002")
    a.is_writer = True
    _checkpoint(a.mirror, clock, 5)
    b = _writer(tmp_path / "b", fs, clock, task="worker1.000003")
    _checkpoint(b, clock, 8)
    old = a.mirror
    monkeypatch.setattr(Mirror, "start", lambda self, direction, **kw: None)

    a.take_writer_role(4)

    assert registry.sent == [(protocol.HEARTBEAT, {"type": "worker", "index": 0, "attempt": 1,
                                                   "container_id": A_CID, "took_writer": 4})]
    assert a.mirror is not old and old.fenced and a.mirror.epoch > b.epoch
    assert (a.mirror.local / "checkpoint.pt").read_bytes() == b"epoch 8"  # what rank 0 resumes from
    a.mirror.watch(writers=lambda: [os.getpid()])
    tmp = a.mirror.local / ".t"
    tmp.write_bytes(b"epoch 9 from A")
    os.replace(tmp, a.mirror.local / "checkpoint.pt")
    _settle(a.mirror, clock)
    assert fs.visible()["checkpoint.pt"] == b"epoch 9 from A"
    a.take_writer_role(4)  # the AM asks again before it heard: the same handover is said again, not redone
    assert registry.sent[-1][1]["took_writer"] == 4 and a.mirror.epoch > b.epoch


@pytest.mark.parametrize("when", ["before", "after_claim", "finished"])
def test_a_take_racing_the_tasks_end_claims_nothing_and_starts_no_push(when, tmp_path, monkeypatch):
    fs = MemoryHDFS()
    registry = RecordingRegistry()
    survivor = _executor(1, B_CID, monkeypatch, registry)
    survivor.mirror = Mirror("hdfs:///out", tmp_path / "w1", files=fs, writer="w1", attempt=(APP, 1))
    started: list[str] = []
    monkeypatch.setattr(survivor.mirror, "start", lambda direction, **kw: started.append(direction))
    claimed: list[int] = []
    monkeypatch.setattr(survivor.mirror, "claim", lambda: claimed.append(1))
    if when == "before":
        survivor.stop_requested.set()
    elif when == "finished":
        survivor.finished.set()
    else:
        monkeypatch.setattr(survivor.mirror, "pull", lambda **kw: survivor.stop_requested.set() or 0)
    survivor.take_writer_role(2)
    assert started == [] and registry.sent == [] and not survivor.is_writer
    assert claimed == ([1] if when == "after_claim" else [])
