"""The output's writer role in the AM's torchrun rendezvous (core/am/rendezvous.py, issue 51 item 5): rank 0 is
always the writer's container; the role moves only when that container is gone, to the first survivor, and
its round waits until the new writer's executor has taken it. Pure: `now` is passed in."""

from __future__ import annotations

from tests.unit.core.support import make_job
from tony_airflow.core.am.registry import Registry
from tony_airflow.core.am.rendezvous import Rendezvous

LAST_CALL, SILENT, HANDOVER = 1.0, 3.0, 10.0


def rendezvous(min_nodes: int = 1, max_nodes: int = 2, handover: bool = True) -> Rendezvous:
    return Rendezvous("app-1", min_nodes, max_nodes, chief="worker:0", last_call_s=LAST_CALL, silent_s=SILENT,
                      handover=handover, handover_s=HANDOVER)


def join(r: Rendezvous, task: str, container: str, now: float, pid: int = 1) -> str:
    name = f"{task}@{container}#{pid}.0"
    r.join(name, task, container, f"h-{container}", pid, now)
    return name


def writer_lost_survivor_waits(r: Rendezvous) -> str:
    """worker:0 (container c0, the writer) and worker:1 (c1) form round 1; c0 is gone at 0.5 s and worker:1's
    agent joins again: the name it joined under."""
    r.writer_of("worker:0", "c0")
    join(r, "worker:0", "c0", 0.0)
    join(r, "worker:1", "c1", 0.0)
    r.tick(0.0)
    r.tick(0.5, {"c0"})
    return join(r, "worker:1", "c1", 0.5)


def test_the_chiefs_first_container_holds_the_role_and_its_replacement_does_not_while_the_role_is_elsewhere():
    r = rendezvous()
    assert r.writer_of("worker:1", "c1") is False
    assert r.writer_of("worker:0", "c0") is True
    assert r.writer_of("worker:0", "c0") is True  # asked again (a registration's retry): the same answer
    assert r.writer_of("worker:0", "c9") is False  # a second container of the chief's task while c0 holds it


def test_rank_0_is_the_writers_container_whichever_came_first():
    r = rendezvous(2, 2)
    r.writer_of("worker:0", "c0")
    b = join(r, "worker:1", "c1", 0.0)
    a = join(r, "worker:0", "c0", 0.1)
    assert r.tick(0.1)
    assert r.round is not None and r.round.members == [a, b]
    assert r.next(a, 0.2)["state"] == "ready" and r.next(a, 0.2)["rank"] == 0
    assert r.moves == [] and not r.taking


def test_when_the_writers_container_is_gone_the_first_survivor_is_rank_0_and_its_round_waits_for_the_handover():
    r = rendezvous(1, 2)
    r.writer_of("worker:0", "c0")
    a, b = join(r, "worker:0", "c0", 0.0), join(r, "worker:1", "c1", 0.0)
    assert r.tick(0.0) and r.round is not None and r.round.members == [a, b]
    # worker 0's container SIGKILLed: YARN tells the AM; worker 1's agent restarts into a new round
    r.tick(1.0, {"c0"})
    b2 = join(r, "worker:1", "c1", 1.0)
    assert r.tick(2.5, {"c0"})  # MIN 1: the survivor alone after the last call
    assert r.round.members == [b2] and r.round.number == 2
    assert [m.line() for m in r.drain_moves()] == [
        "WRITER_MOVED: from worker:0 (container c0) to worker:1 (container c1), round 2"]
    assert r.writer == "c1" and r.must_take("c1") and not r.must_take("c0")
    assert r.next(b2, 2.6)["state"] == "waiting"  # nobody trains before the new writer took the role
    assert r.took("c0", 2) is False and r.next(b2, 2.7)["state"] == "waiting"
    assert r.took("c1", 1) is False  # a word of another handover (an earlier one of this container's)
    assert r.took("c1", 2) is True
    answer = r.next(b2, 2.8)
    assert answer["state"] == "ready" and answer["rank"] == 0
    # worker 0's replacement registers: it does not claim, and it joins behind the writer
    assert r.writer_of("worker:0", "c5") is False
    r.heartbeat(b2, 2, 3.0)
    c = join(r, "worker:0", "c5", 3.0)
    assert r.heartbeat(b2, 2, 3.1)["waiting"] == 1
    b3 = join(r, "worker:1", "c1", 3.2)
    assert r.tick(3.2, {"c0"}) and r.round.members == [b3, c]  # MAX waited: the writer stays rank 0
    assert r.drain_moves() == [] and r.writer == "c1"
    assert r.next(c, 3.3)["rank"] == 1


def test_the_role_never_moves_while_the_writers_container_lives_a_round_waits_for_it():
    r = rendezvous(1, 3)
    r.writer_of("worker:0", "c0")
    a, b, c = (join(r, f"worker:{i}", f"c{i}", 0.0) for i in range(3))
    assert r.tick(0.0) and r.round.members == [a, b, c]
    r.leave(b)  # worker:1's agent ends: the others restart into a new round
    b2, c2 = join(r, "worker:1", "c1", 1.0, pid=2), join(r, "worker:2", "c2", 1.0)
    for now in (2.0, 3.5, 5.0):  # the writer's agent lives (it heartbeats): no round without it
        r.heartbeat(a, 1, now)
        r.next(b2, now), r.next(c2, now)
        assert not r.tick(now)
    a2 = join(r, "worker:0", "c0", 5.1)
    assert r.tick(5.1) and r.round.members[0] == a2 and r.drain_moves() == []
    assert {b2, c2} <= set(r.round.members)


def test_a_silent_writer_is_dropped_then_the_role_moves():
    r = rendezvous(1, 2)
    r.writer_of("worker:0", "c0")
    a, _ = join(r, "worker:0", "c0", 0.0), join(r, "worker:1", "c1", 0.0)
    assert r.tick(0.0)
    b2 = join(r, "worker:1", "c1", 1.0)
    r.heartbeat(a, 1, 1.0)
    assert not r.tick(3.5)  # worker:0's agent may still answer
    r.next(b2, 3.5)
    assert r.tick(4.5)      # silent 3.5 s > 3 s: dropped, and the survivor's round forms
    assert r.round.members == [b2] and r.writer == "c1" and r.taking


def test_a_handover_not_taken_in_time_is_overdue_unless_the_new_writer_is_gone_too():
    r = rendezvous(1, 2)
    b2 = writer_lost_survivor_waits(r)
    assert r.tick(2.0, {"c0"}) and r.taking
    assert r.handover_overdue(2.0 + HANDOVER - 0.1) == ""
    r.next(b2, 11.9)
    line = r.handover_overdue(2.0 + HANDOVER + 0.1)
    assert line.startswith("worker:1 (container c1) did not take the output's writer role within 10s"), line
    r.tick(12.5, {"c0", "c1"})  # the new writer's container gone too: the next round moves the role again
    assert r.handover_overdue(20.0) == ""


def test_without_an_output_to_take_the_role_moves_with_rank_0_at_once():
    r = rendezvous(1, 2, handover=False)
    b2 = writer_lost_survivor_waits(r)
    assert r.tick(2.0, {"c0"}) and r.writer == "c1" and not r.taking
    assert r.next(b2, 2.1)["state"] == "ready"
    assert len(r.drain_moves()) == 1


def test_the_am_fails_the_attempt_in_one_line_when_the_new_writer_never_takes_the_role():
    from types import SimpleNamespace

    from tony_airflow.core.am.master import ApplicationMaster

    r = rendezvous(1, 2)
    b2 = writer_lost_survivor_waits(r)
    assert r.tick(2.0, {"c0"}) and r.taking
    r.taking_since -= 2 * HANDOVER  # the AM's clock is time.monotonic(): the handover began long ago
    r.next(b2, r.taking_since + 2 * HANDOVER)  # its agent lives (it polls)
    r.nodes[b2].seen = 1e18
    outcome = ApplicationMaster._decide(SimpleNamespace(registry=SimpleNamespace(rendezvous=r)), 0.0)  # type: ignore[arg-type]
    assert outcome is not None and not outcome.ok
    assert outcome.reason.startswith("worker:1 (container c1) did not take the output's writer role within 10s")


def test_tony_history_show_says_the_writer_moved():
    from tony_airflow.core.history import events as ev
    from tony_airflow.core.history.model import JobHistory
    from tony_airflow.core.history.text import job_report

    line = "WRITER_MOVED: from worker:0 (container c0) to worker:1 (container c1), round 2"
    job = JobHistory.from_events("a", [{"time": 1, "event": ev.ATTEMPT_STARTED, "attempt": 1, "tasks": []},
                                       {"time": 2, "event": ev.WRITER_MOVED, "attempt": 1, "task": "worker:1",
                                        "line": line}])
    assert job.attempts[0].writer_moves == [line]
    assert line in job_report(job).splitlines()


def test_a_writer_whose_agent_has_not_started_yet_is_waited_for_until_its_container_is_gone():
    """MIN 1: worker:1's agent alone for longer than the last call while the chief's container registered and
    stages its input: no round without it (the role would move from a live container)."""
    r = rendezvous(1, 2)
    r.writer_of("worker:0", "c0")
    b = join(r, "worker:1", "c1", 0.0)
    for now in (1.0, 2.0, 2.5):
        r.next(b, now)
        assert not r.tick(now)
    a = join(r, "worker:0", "c0", 2.6)
    assert r.tick(2.6) and r.round.members == [a, b] and r.drain_moves() == []

    r = rendezvous(1, 2)
    r.writer_of("worker:0", "c0")
    b = join(r, "worker:1", "c1", 0.0)
    r.next(b, 2.0)
    assert r.tick(2.0, {"c0"})  # its container ended before its agent joined: the role moves
    assert r.round.members == [b] and r.writer == "c1" and r.taking


def test_the_new_writer_lost_before_it_took_the_role_the_others_wait_again_and_the_role_moves_on():
    """A second loss during a handover (review of #51 item 5): the others were answered 'waiting' for the
    handover; they must be put back on the wait list so the next round forms and moves the role again."""
    r = rendezvous(2, 3)
    r.writer_of("worker:0", "c0")
    for i in range(3):
        join(r, f"worker:{i}", f"c{i}", 0.0)
    assert r.tick(0.0)
    r.tick(1.0, {"c0"})  # the writer's container lost: B and C restart into a new round
    b2, c2 = join(r, "worker:1", "c1", 1.0), join(r, "worker:2", "c2", 1.0)
    assert r.tick(2.5, {"c0"}) and r.round is not None and r.round.members == [b2, c2]
    assert r.taking and r.writer == "c1"
    assert r.next(c2, 2.6)["state"] == "waiting"
    r.tick(3.0, {"c0", "c1"})  # the new writer lost before its executor took the role
    assert r.broken
    a3, b3 = join(r, "worker:0", "c5", 4.0), join(r, "worker:1", "c6", 4.0)
    for k in range(40):  # C's agent keeps polling next(), as do the replacements; the AM ticks
        now = 4.5 + k * 0.5
        for name in (c2, a3, b3):
            r.next(name, now)
        r.tick(now, {"c0", "c1"})
    assert r.round.members[0] == c2 and r.writer == "c2" and r.must_take("c2")
    assert set(r.round.members) == {c2, a3, b3}
    assert [m.line() for m in r.drain_moves()][-1].startswith("WRITER_MOVED: from worker:1 (container c1) to "
                                                              "worker:2 (container c2)")


def test_with_2_2_the_new_writer_lost_before_it_took_the_role_the_survivor_takes_it_next():
    r = rendezvous(2, 2)
    r.writer_of("worker:0", "c0")
    join(r, "worker:0", "c0", 0.0)
    join(r, "worker:1", "c1", 0.0)
    assert r.tick(0.0)
    r.tick(1.0, {"c0"})
    b2 = join(r, "worker:1", "c1", 1.0, 2)
    a2 = join(r, "worker:0", "c5", 1.5)  # worker:0's replacement
    assert r.tick(1.5, {"c0"}) and r.round is not None and r.round.members == [b2, a2] and r.taking
    r.tick(2.0, {"c0", "c1"})  # B lost before taking
    b3 = join(r, "worker:1", "c6", 3.0)
    for k in range(40):
        now = 3.5 + k * 0.5
        r.next(a2, now)
        r.next(b3, now)
        r.tick(now, {"c0", "c1"})
    assert r.writer == "c5" and r.round.members == [a2, b3] and r.must_take("c5")


def test_after_a_gang_release_the_chiefs_next_container_holds_the_role():
    """Wait-die gives the gang's containers back after the chief's first one registered (it was told it writes):
    the role goes with it; the chief's next container is told it writes (it claims at its start) and the first
    round moves nothing."""
    events: list[tuple[str, dict]] = []
    reg = Registry(make_job("worker:2", framework="pytorch", elastic="2:2", output="hdfs:///out"), "app_1",
                   listener=lambda name, **f: events.append((name, f)))
    reg.new_attempt(1)
    reg.container_allocated(("worker", 0), "c0")
    assert reg.register("worker", 0, 1, "h0", 4000, "c0") is None
    assert reg.writer_of("worker", 0, "c0") is True
    reg.release([("worker", 0), ("worker", 1)], {"c0"})
    reg.ask_again([("worker", 0), ("worker", 1)])
    reg.container_allocated(("worker", 0), "c7")
    reg.container_allocated(("worker", 1), "c8")
    assert reg.register("worker", 1, 1, "h1", 4001, "c8") is None
    assert reg.register("worker", 0, 1, "h0", 4002, "c7") is None
    assert reg.writer_of("worker", 1, "c8") is False
    assert reg.writer_of("worker", 0, "c7") is True
    r = reg.rendezvous
    assert r is not None
    r.join("worker:1@c8#1.0", "worker:1", "c8", "h1", 1, 0.0)
    r.join("worker:0@c7#1.0", "worker:0", "c7", "h0", 1, 0.1)
    reg.rendezvous_tick(0.2)
    assert r.round is not None and r.round.members[0] == "worker:0@c7#1.0" and not r.taking
    assert [name for name, _ in events if name == "WRITER_MOVED"] == []


def test_a_writer_released_before_any_round_leaves_the_role_vacant_but_not_after_one():
    r = rendezvous(1, 2)
    r.writer_of("worker:0", "c0")
    r.released({"c0"})
    assert r.writer == "" and r.writer_of("worker:0", "c1") is True
    a = join(r, "worker:0", "c1", 0.0)
    assert r.tick(1.5) and r.round is not None and r.round.members == [a]
    r.released({"c1"})  # a round ran: the role moves with the next round (a handover), as for any loss
    assert r.writer == "c1"


def test_the_role_coming_back_to_a_container_that_held_it_waits_for_that_handovers_word():
    """A (the first writer) dropped for silence while its container lived, the role moved to B, A's agent
    joined again under a new name, B lost: the role comes back to A, which must take it anew (B published
    newer checkpoints under a newer epoch): only A's word tagged with this handover's round ends it."""
    r = rendezvous(1, 2)
    r.writer_of("worker:0", "cA")
    join(r, "worker:0", "cA", 0.0)
    join(r, "worker:1", "cB", 0.0)
    assert r.tick(0.0)
    b1 = join(r, "worker:1", "cB", 1.0, 2)  # A's agent hangs (silent); B joins again
    r.next(b1, 3.9)
    assert r.tick(4.5) and r.writer == "cB" and r.taking and r.taking_round == 2
    assert r.took("cB", 2)
    a1 = join(r, "worker:0", "cA", 5.0, 3)  # A's agent wakes: joins again as a new node
    join(r, "worker:1", "cB", 5.0, 2)
    assert r.tick(5.0) and r.round is not None and r.round.members == [b1, a1] and not r.taking
    r.tick(6.0, {"cB"})  # B lost
    a2 = join(r, "worker:0", "cA", 6.0, 3)
    assert r.tick(7.5, {"cB"}) and r.round.members == [a2]
    assert r.writer == "cA" and r.must_take("cA") and r.taking_round == 4
    assert not r.took("cA", 0) and not r.took("cA", 2)
    assert r.next(a2, 7.6)["state"] == "waiting"
    assert r.took("cA", 4) and r.next(a2, 7.7)["state"] == "ready"


def test_a_heartbeat_of_the_writer_ends_no_handover_without_its_tag():
    reg = Registry(make_job("worker:2", framework="pytorch", elastic="1:2", output="hdfs:///out"), "app_1")
    reg.new_attempt(1)
    for i in (0, 1):
        reg.container_allocated(("worker", i), f"c{i}")
        reg.register("worker", i, 1, f"h{i}", 4000 + i, f"c{i}")
    r = reg.rendezvous
    assert r is not None
    r.last_call_s = LAST_CALL
    join(r, "worker:0", "c0", 0.0)
    join(r, "worker:1", "c1", 0.0)
    reg.rendezvous_tick(0.0)
    r.tick(1.0, {"c0"})
    join(r, "worker:1", "c1", 1.0)
    assert r.tick(2.5, {"c0"}) and reg.writer_handover("c1") == 2 and reg.writer_handover("c0") == 0
    reg.heartbeat("worker", 1, 1, None, "c1")
    reg.heartbeat("worker", 1, 1, None, "c1", took_writer=1)
    assert r.taking
    reg.heartbeat("worker", 1, 1, None, "c1", took_writer=2)
    assert not r.taking and reg.writer_handover("c1") == 0
