"""Spares of an elastic job (`--spares N`, core/am/spares.py): kept, told a lost worker's place, lost and asked
again; the registry's long poll; the AM's turn; the executor's wait; the history's line."""

from __future__ import annotations

import asyncio
import itertools
from types import SimpleNamespace

from tony_airflow.core import protocol
from tony_airflow.core.am import elastic, spares
from tony_airflow.core.am.master import ApplicationMaster
from tony_airflow.core.am.registry import Registry
from tony_airflow.core.executor.spare import wait_for_place
from tony_airflow.core.history import events as ev
from tony_airflow.core.history.events import EventLog
from tony_airflow.core.history.model import JobHistory
from tony_airflow.core.spec import build_job_spec

JOB = build_job_spec({"cluster_requirement": "worker:3", "command": "torchrun t.py", "framework": "pytorch",
                      "elastic": "1:3", "spares": 1, "max_free_retries": 2}, check_paths=False)


def test_spares_are_kept_told_one_place_the_longest_waiting_first_and_a_lost_one_is_asked_again_within_the_bound():
    kept = spares.Spares(wanted=2, bound=1)
    assert kept.to_ask() == 2
    first, second = kept.ask(1.0), kept.ask(1.0)
    kept.launched(first, "worker_1")
    kept.launched(second, "worker_2")
    assert kept.to_ask() == 0
    assert kept.take(("worker", 1)) is None  # none waits yet: the old path (YARN) replaces
    assert kept.waits(second, "h2", "c2", 5.0) and kept.waits(first, "h1", "c1", 6.0)
    assert not kept.waits(first, "h1", "c1", 7.0) and not kept.waits("spare-9", "h", "c", 7.0)
    assert kept.answer(first) == (spares.WAIT, None)
    taken = kept.take(("worker", 1))
    assert taken is not None and taken.id == second  # waiting longest
    assert kept.answer(second) == (spares.TAKE, 1)
    assert kept.containers() == {"worker_1": first}  # the one that took a place is its task's container now
    assert kept.gone("worker_2") is None and kept.lost == 0
    assert kept.to_ask() == 1  # a new spare after a place was taken
    assert kept.gone("worker_1") is not None and kept.answer(first) == (spares.STOP, None)
    assert kept.to_ask() == 2 and kept.lost == 1
    third = kept.ask(9.0)
    kept.launched(third, "worker_3")
    assert kept.gone("worker_3") is not None and kept.lost == 2
    assert kept.to_ask() == 0  # past the bound: the job goes on with fewer spares


def test_a_waiting_spare_is_told_its_place_at_once_and_the_end_of_the_attempt_stops_the_others():
    events: list[tuple[str, dict]] = []
    reg = Registry(JOB, "application_1_0001", listener=lambda name, **f: events.append((name, f)))
    reg.new_attempt(1)
    assert reg.spares is not None and reg.spares.to_ask() == 1
    spare_id = reg.spares.ask(0.0)
    reg.spares.launched(spare_id, "worker_9")
    for i in range(3):
        assert reg.register("worker", i, 1, f"h{i}", 4000 + i, container_id=f"c{i}") is None

    async def scenario() -> tuple:
        idle = await reg.wait_spare(spare_id, 1, "hs", "c9", 0.01)
        waiting = asyncio.ensure_future(reg.wait_spare(spare_id, 1, "hs", "c9", 5.0))
        await asyncio.sleep(0.01)
        reg.container_gone(("worker", 1), "Container killed. Exit code: 137")
        reg.replace(("worker", 1))
        taken = reg.take_spare(("worker", 1))
        told = await asyncio.wait_for(waiting, 1.0)
        other = await reg.wait_spare("spare-7", 1, "hx", "cx", 0.01)
        old = await reg.wait_spare(spare_id, 0, "hs", "c9", 0.01)
        # the spare registers as worker:1 into the running attempt and starts at once
        assert reg.register("worker", 1, 1, "hs", 4100, container_id="c9") is None
        assert reg.tasks[("worker", 1)].started_at is not None
        reg.end_attempt()
        over = await reg.wait_spare(spare_id, 1, "hs", "c9", 0.01)
        return idle, taken, told, other, old, over

    idle, taken, told, other, old, over = asyncio.run(scenario())
    assert idle == (spares.WAIT, None)
    assert taken is not None and reg.tasks[("worker", 1)].container_id == "worker_9"
    assert told == (spares.TAKE, 1)
    assert other == (spares.STOP, None) and old == (spares.STOP, None) and over == (spares.STOP, None)
    assert [f["spare"] for name, f in events if name == ev.SPARE_WAITING] == [spare_id]  # said once


class FakeApp:
    """skein's ApplicationClient as far as the AM's spares use it."""

    def __init__(self) -> None:
        self.added: list[tuple[str, dict]] = []
        self.serial = itertools.count(10)

    def add_container(self, service: str, env: dict) -> SimpleNamespace:
        self.added.append((service, env))
        return SimpleNamespace(id=f"{service}_{next(self.serial)}")


def test_the_am_gives_a_lost_workers_place_to_the_waiting_spare_and_asks_yarn_for_a_new_spare_not_a_worker():
    app = FakeApp()
    master = ApplicationMaster(JOB, "s" * 64, app, "application_1_0001", "h", EventLog("application_1_0001"))
    master.address = "am:1"
    reg = master.registry
    reg.new_attempt(1)

    async def scenario() -> None:
        await master._ask_spares(1)
        for i in range(3):
            reg.tasks[("worker", i)].container_id = f"worker_{i}"
            master._container_of[f"worker_{i}"] = ("worker", i)
            assert reg.register("worker", i, 1, f"h{i}", 4000 + i, container_id=f"c{i}") is None
        assert reg.spares is not None
        spare_id, = reg.spares.by_id
        await reg.wait_spare(spare_id, 1, "hs", "c_spare", 0.0)
        reg.container_gone(("worker", 2), "Container killed. Exit code: 137")
        await master._replace_lost_workers(1)
        assert reg.register("worker", 2, 1, "hs", 4200, container_id="c_spare") is None
        await master._replace_lost_workers(1)
        assert len(app.added) == 1  # the new spare: once the group had time to step again
        took = reg.spares.by_id[spare_id]
        assert took.took_at is not None
        took.took_at -= spares.AFTER_TAKE_S
        await master._ask_spares(1)

    asyncio.run(scenario())
    assert [(service, env[protocol.ENV_SPARE]) for service, env in app.added] == [("worker", "spare-1"),
                                                                                 ("worker", "spare-2")]
    assert app.added[0][1][protocol.ENV_TASK_TYPE] == "worker"
    assert master._container_of["worker_10"] == ("worker", 2)  # the spare's container is worker:2's now
    replaced = [e["line"] for e in master.history.events if e["event"] == ev.WORKER_REPLACED]
    assert len(replaced) == 1 and "; replaced by spare on hs (container c_spare) after" in replaced[0]
    assert reg.notice.startswith("worker:2 lost on h2") and "replaced by spare on hs" in reg.notice
    job = JobHistory.from_events("application_1_0001", list(master.history.events), {}, complete=False)
    assert job.attempts[-1].replaced == replaced  # the lost line's "a replacement was asked for" is replaced


def test_the_spares_executor_waits_then_becomes_the_worker_it_is_told_or_ends_without_a_command():
    class Client:
        def __init__(self, answers: list) -> None:
            self.answers = answers
            self.asked: list[dict] = []

        def call(self, method, path, payload=None, retries=5, timeout=None):
            self.asked.append(payload)
            answer = self.answers.pop(0)
            if isinstance(answer, BaseException):
                raise answer
            return answer

    env = {protocol.ENV_SPARE: "spare-2", protocol.ENV_ATTEMPT: "3", "CONTAINER_ID": "c7"}
    client = Client([{"state": "wait"}, OSError("reset"), {"state": "take", "index": 4}])
    assert wait_for_place(client, env, "hs", 60.0, pause=lambda s: None) == 4
    assert client.asked[0] == {"spare": "spare-2", "attempt": 3, "host": "hs", "container_id": "c7"}
    assert wait_for_place(Client([{"state": "stop", "index": None}]), env, "hs", 60.0) is None
    clock = itertools.count(0.0, 100.0)
    silent = Client([OSError("refused")] * 3)
    assert wait_for_place(silent, env, "hs", 60.0, clock=lambda: next(clock), pause=lambda s: None) is None


def test_a_spares_replaced_line_says_so():
    tracker = elastic.Replacements()
    tracker.asked("worker:1", "worker:1 lost on h2 (container c2, exit code 137)", 100.0)
    tracker.spare_took("worker:1")
    assert tracker.started("worker:1", "h3", "c9", 103.25) == (
        "worker:1 lost on h2 (container c2, exit code 137); replaced by spare on h3 (container c9) after 3.2s")


def test_spares_of_a_spread_worker_type_are_refused_in_one_line():
    import pytest

    from tony_airflow.errors import UsageError

    with pytest.raises(UsageError, match=r"^spares: 1 — a spread worker's spare would have no host of its own; "
                                         r"allowed: 0 with --spread worker$"):
        build_job_spec({"cluster_requirement": "worker:2", "command": "x", "framework": "pytorch", "elastic": "1:2",
                        "spares": 1, "spread": "worker"}, check_paths=False)


def test_a_spare_that_ends_when_told_to_stop_at_the_attempts_end_is_not_lost():
    master = ApplicationMaster(JOB, "s" * 64, FakeApp(), "application_1_0001", "h", EventLog("application_1_0001"))
    reg = master.registry
    reg.new_attempt(1)
    assert reg.spares is not None
    spare_id = reg.spares.ask(0.0)
    reg.spares.launched(spare_id, "worker_5")
    ended = SimpleNamespace(id="worker_5", yarn_container_id="c5", exit_message="", state="SUCCEEDED")
    reg.end_attempt()
    master._spare_gone(ended)
    assert reg.spares.lost == 0 and not [e for e in master.history.events if e["event"] == ev.SPARE_LOST]
    reg.new_attempt(2)
    assert reg.spares is not None
    spare_id = reg.spares.ask(0.0)
    reg.spares.launched(spare_id, "worker_6")
    master._spare_gone(SimpleNamespace(id="worker_6", yarn_container_id="c6", exit_message="Exit code: 137",
                                       state="FAILED"))
    assert reg.spares.lost == 1 and reg.spares.to_ask() == 1
    assert [e["line"] for e in master.history.events if e["event"] == ev.SPARE_LOST] == [
        "spare-1 lost on ? (container c6): Exit code: 137"]


def test_a_spare_not_heard_from_lately_is_not_given_a_place():
    """Review finding: a host that died took its spare with it, and YARN tells the worker's loss only once the
    NodeManager expired; a place given to that spare would wait for a registration that never comes."""
    kept = spares.Spares(2, bound=2)
    a, b = kept.ask(0.0), kept.ask(0.0)
    assert kept.waits(a, "h1", "c1", now=10.0) and kept.waits(b, "h2", "c2", now=11.0)
    kept.waits(b, "h2", "c2", now=100.0)  # b polls on; a went silent at 10 s
    taken = kept.take(("worker", 1), now=100.0 + spares.FRESH_S - 1)
    assert taken is not None and taken.id == b
    assert kept.take(("worker", 2), now=100.0 + spares.FRESH_S - 1) is None  # a: silent for 90 s


def test_a_spare_that_cannot_be_asked_for_never_fails_the_job_and_is_asked_again_later():
    class FailingApp(FakeApp):
        def add_container(self, service: str, env: dict) -> SimpleNamespace:
            raise RuntimeError("skein: the AM is busy")

    master = ApplicationMaster(JOB, "s" * 64, FailingApp(), "application_1_0001", "h", EventLog("application_1_0001"))
    master.address = "am:1"
    master.registry.new_attempt(1)
    asyncio.run(master._ask_spares(1))
    assert master.registry.spares is not None and master.registry.spares.by_id == {}
    assert master.registry.spares.to_ask() == 1 and master._spares_retry_at > 0
    asyncio.run(master._ask_spares(1))  # within SPARE_RETRY_S: not asked again yet
    assert master.registry.spares.asked == 1


def test_waiting_spares_are_told_to_stop_when_the_am_s_server_closes():
    reg = Registry(JOB, "application_1_0001")
    reg.new_attempt(1)
    assert reg.spares is not None
    spare_id = reg.spares.ask(0.0)

    async def scenario() -> tuple[str, int | None]:
        waiting = asyncio.ensure_future(reg.wait_spare(spare_id, 1, "h", "c", 600.0))
        await asyncio.sleep(0.05)
        reg.answer_held()
        return await asyncio.wait_for(waiting, 30)

    assert asyncio.run(scenario()) == (spares.STOP, None)


def test_spares_of_workers_with_per_task_sizes_are_refused_in_one_line():
    import pytest

    from tony_airflow.errors import UsageError

    with pytest.raises(UsageError, match=r"^spares: 1 — a spare has the worker type's one size"):
        build_job_spec({"cluster_requirement": "worker:2", "command": "x", "framework": "pytorch", "elastic": "1:2",
                        "spares": 1, "task_memory": "worker[1]:4096"}, check_paths=False)


def test_a_spare_whose_long_poll_ran_out_unanswered_is_not_counted_as_heard_from(monkeypatch):
    """Found by a reviewer's script: the end of the AM's own 20 s wait refreshed the spare's `seen_at`, so a
    spare whose host died mid-poll looked fresh FRESH_S after that wait, not after its last request."""
    from tony_airflow.core.am import registry as registry_module

    now = [1000.0]
    monkeypatch.setattr(registry_module.time, "time", lambda: now[0])
    reg = Registry(JOB, "application_1_0001")
    reg.new_attempt(1)
    assert reg.spares is not None
    spare_id = reg.spares.ask(now[0])
    heard = now[0]

    async def poll_that_runs_out() -> tuple[str, int | None]:
        waiting = asyncio.ensure_future(reg.wait_spare(spare_id, 1, "hs", "c9", 0.2))
        await asyncio.sleep(0.05)
        now[0] += 20.0  # the host died; the wait runs out with no one at the other end
        return await waiting

    assert asyncio.run(poll_that_runs_out()) == (spares.WAIT, None)
    assert reg.spares.by_id[spare_id].seen_at == heard
    now[0] = heard + spares.FRESH_S + 15
    assert reg.spares.take(("worker", 1), now[0]) is None


def test_the_new_spare_is_asked_for_once_the_group_had_time_to_step_again():
    """#54, measured: the new spare's start (YARN's launch, its executor, its torchrun importing torch) fell into
    the seconds the group's processes start again on the same cores; it is asked for AFTER_TAKE_S after a take."""
    kept = spares.Spares(wanted=1, bound=1)
    first = kept.ask(1.0)
    kept.launched(first, "worker_1")
    assert kept.waits(first, "h1", "c1", 2.0)
    assert kept.take(("worker", 1), now=10.0) is not None
    assert kept.to_ask(10.0 + spares.AFTER_TAKE_S - 0.1) == 0
    assert kept.to_ask(10.0 + spares.AFTER_TAKE_S) == 1
    assert kept.to_ask() == 1  # without a time (a lost spare's turn): at once
    assert spares.AFTER_TAKE_S == 10.0
