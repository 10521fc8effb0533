"""Model-checked: an elastic job's worker replacement (core/am/elastic.py, Registry.replace) under any
interleaving of lost containers (a replacement's too, before it registers), the AM's turns, replacements
registering, late messages from lost containers and tasks ending. Invariants: a lost worker (also a lost
replacement) is asked for again at the AM's next turn; a lost container's messages never change a task; the
published spec names each task's live container; the attempt never fails for a replaced worker; it succeeds
exactly when every task that is not waiting for its replacement ended with 0. `TONY_ELASTIC_EXAMPLES` sets
the examples (`make soak`)."""

from __future__ import annotations

import os

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tony_airflow.core.am import elastic, policy
from tony_airflow.core.am.registry import Registry
from tony_airflow.core.spec import build_job_spec

JOB = build_job_spec({"cluster_requirement": "master:1,worker:3", "command": "torchrun t.py",
                      "framework": "pytorch", "elastic": "1:3", "max_free_retries": 4, "timeouts": {"allocation": 0}})
WORKERS = [1, 2]  # worker 0 and the master are never replaced (the rank-0 container is the master here)


class ElasticReplacement(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.reg = Registry(JOB, "application_1_0001")
        self.reg.new_attempt(1)
        self.serial = 1
        self.live: dict[tuple[str, int], str] = {}      # the container each task runs in now
        self.address: dict[tuple[str, int], str] = {}   # ... and its address
        self.lost: list[tuple[tuple[str, int], str]] = []  # containers gone, with their task
        self.waiting: dict[tuple[str, int], str] = {}   # replacements asked for, not registered yet
        self.pending = elastic.Replacements()
        for key in JOB.task_ids():
            self._start(key)

    def _container(self) -> str:
        self.serial += 1
        return f"container_1_0001_01_{self.serial:06d}"

    def _start(self, key: tuple[str, int]) -> None:
        cid = self._container()
        port = 4000 + self.serial
        assert self.reg.register(key[0], key[1], 1, "h", port, container_id=cid) is None
        self.live[key], self.address[key] = cid, f"h:{port}"

    @rule(index=st.sampled_from(WORKERS))
    def lose_a_worker(self, index: int) -> None:
        key = ("worker", index)
        task = self.reg.tasks[key]
        if task.done or key in self.waiting or task.registered_at is None:
            return
        if len(self.lost) >= JOB.max_free_retries:  # past the bound a loss fails the attempt (test_elastic.py)
            return
        self.lost.append((key, self.live[key]))
        self.reg.container_gone(key, "Container killed. Exit code: 137")

    @precondition(lambda self: bool(self.waiting))
    @rule(data=st.data())
    def a_replacement_is_lost_before_it_registers(self, data) -> None:
        """YARN reports the replacement's container ended (its host lost, killed) before its executor
        registered: the AM's container poll, without an exit report (ApplicationMaster._poll_containers)."""
        if len(self.lost) >= JOB.max_free_retries:
            return
        key = data.draw(st.sampled_from(sorted(self.waiting)))
        cid = self.waiting.pop(key)
        self.reg.container_allocated(key, cid)
        self.reg.container_gone(key, f"container {cid} KILLED: Container released on a *lost* node. Exit code: -100")
        self.lost.append((key, cid))
        self.live[key] = cid

    @rule()
    def am_turn(self) -> None:
        """One turn of the attempt's loop: what ApplicationMaster._replace_lost_workers does (without skein),
        then the policy's verdict. It never fails the attempt for a replaced worker, and succeeds exactly when
        every task not waiting for its replacement ended with 0."""
        self._replace()
        for task_id in self.pending.pending:  # a replacement is wanted: never a lost one left waiting
            type_, index = task_id.split(":")
            assert not self.reg.tasks[(type_, int(index))].done, f"{task_id}'s lost replacement never asked again"
        outcome = policy.decide(JOB, self.reg.tasks.values(), 0.0, 0.0, 1.0,
                                replacing=self.pending.waiting_since())
        counted = [t for t in self.reg.tasks.values() if t.id not in self.pending.pending]
        if outcome is None:
            assert not all(t.done and t.exit_code == 0 for t in counted)
            return
        assert outcome.ok, outcome.reason
        assert all(t.done and t.exit_code == 0 for t in counted)

    def _replace(self) -> None:
        _, lost = self.pending.turn(JOB, self.reg.tasks, 0.0)
        for key, _line in lost:
            self.reg.replace(key)
            self.waiting[key] = self._container()

    @precondition(lambda self: bool(self.waiting))
    @rule(data=st.data())
    def a_replacement_registers(self, data) -> None:
        key = data.draw(st.sampled_from(sorted(self.waiting)))
        cid = self.waiting.pop(key)
        port = 5000 + self.serial
        assert self.reg.register(key[0], key[1], 1, "h2", port, container_id=cid) is None
        self.live[key], self.address[key] = cid, f"h2:{port}"

    @precondition(lambda self: bool(self.lost))
    @rule(data=st.data(), what=st.sampled_from(["finished", "heartbeat", "register"]))
    def a_lost_container_speaks_late(self, data, what: str) -> None:
        (type_, index), cid = data.draw(st.sampled_from(self.lost))
        before = self.reg.tasks[(type_, index)]
        state = (before.status, before.exit_code, before.host, before.port, before.yarn_container_id)
        if what == "finished":
            self.reg.finished(type_, index, 1, 1, "late", container_id=cid)
        elif what == "heartbeat":  # "stop" once replaced; before the AM's turn the container's task is over anyway
            answer = self.reg.heartbeat(type_, index, 1, container_id=cid)
            assert answer == "stop" or not self.reg.is_released(cid)
        else:
            assert self.reg.register(type_, index, 1, "h", 1, container_id=cid) is not None
        after = self.reg.tasks[(type_, index)]
        assert after is before and state == (after.status, after.exit_code, after.host, after.port,
                                             after.yarn_container_id)

    @rule(key=st.sampled_from(JOB.task_ids()))
    def a_task_ends_well(self, key: tuple[str, int]) -> None:
        task = self.reg.tasks[key]
        if task.started_at is not None and not task.done:
            self.reg.finished(key[0], key[1], 1, 0, container_id=self.live[key])

    @invariant()
    def lost_containers_are_released(self) -> None:
        replaced = {cid for key, cid in self.lost if self.live[key] != cid or key in self.waiting}
        assert all(self.reg.is_released(cid) for cid in replaced)

    @invariant()
    def the_spec_names_each_tasks_live_container(self) -> None:
        hosts = self.reg._spec["hosts"] if self.reg._spec else {}
        for (type_, index), address in self.address.items():
            if self.reg.tasks[(type_, index)].registered_at is not None:
                assert hosts[type_][index] == address

ElasticReplacement.TestCase.settings = settings(
    max_examples=int(os.environ.get("TONY_ELASTIC_EXAMPLES", "200")), stateful_step_count=30, deadline=None)
TestElasticReplacement = ElasticReplacement.TestCase


SPARE_JOB = build_job_spec({"cluster_requirement": "master:1,worker:3", "command": "torchrun t.py",
                            "framework": "pytorch", "elastic": "1:3", "spares": 1, "max_free_retries": 4,
                            "timeouts": {"allocation": 0}})


class ElasticReplacementWithSpares(ElasticReplacement):
    """The same, with `--spares 1` (core/am/spares.py): spares are asked for, come up and wait, are lost while
    they wait, take a lost worker's place (then register as it, or are lost before: asked for again). More
    invariants: never more spares kept than wanted, and after each AM turn exactly as many as wanted while the
    losses stay in the bound; a spare is told one place, the one it takes; a lost spare is told to stop; a place
    a spare took says so in its replaced line."""

    def __init__(self) -> None:
        super().__init__()
        self.reg.job = SPARE_JOB
        self.reg.new_attempt(1)  # the attempt again, now with its spares
        self.live, self.address, self.lost, self.waiting = {}, {}, [], {}
        self.pending = elastic.Replacements()
        for key in JOB.task_ids():
            self._start(key)
        self.gone_spares: list[str] = []
        self.spare_containers: set[str] = set()  # YARN's ids of the spares' containers
        self._ask_spares()

    def _ask_spares(self) -> None:
        spares = self.reg.spares
        assert spares is not None
        for _ in range(spares.to_ask()):
            spare_id = spares.ask(0.0)
            spares.launched(spare_id, f"worker_{spare_id}")

    def _replace(self) -> None:
        started, lost = self.pending.turn(JOB, self.reg.tasks, 0.0)
        for task_id, line in started:  # a place a spare took says so, and only such a place
            type_, index = task_id.split(":")
            by_spare = self.reg.tasks[(type_, int(index))].yarn_container_id in self.spare_containers
            assert ("replaced by spare on" in line) == by_spare, line
        for key, _line in lost:
            self.reg.replace(key)
            spare = self.reg.take_spare(key)
            if spare is None:
                self.waiting[key] = self._container()
                continue
            self.pending.spare_took(f"{key[0]}:{key[1]}")
            assert self.reg.spares is not None and self.reg.spares.answer(spare.id) == ("take", key[1])
            assert self.reg.tasks[key].container_id == spare.container_id
            self.waiting[key] = spare.yarn_container_id
        self._ask_spares()
        spares = self.reg.spares
        assert spares is not None
        kept = sum(s.takes is None for s in spares.by_id.values())
        assert kept == spares.wanted or spares.lost > spares.bound

    @rule(data=st.data())
    def a_spare_comes_up_and_waits(self, data) -> None:
        spares = self.reg.spares
        assert spares is not None
        coming = sorted(s.id for s in spares.by_id.values() if s.waiting_since is None)
        if not coming:
            return
        spare_id = data.draw(st.sampled_from(coming))
        container = self._container()
        self.spare_containers.add(container)
        assert spares.waits(spare_id, "hs", container, 0.0)
        assert not spares.waits(spare_id, "hs", "again", 0.0)  # said once
        assert spares.answer(spare_id) == ("wait", None)

    @rule(data=st.data())
    def a_spare_is_lost_while_it_waits(self, data) -> None:
        spares = self.reg.spares
        assert spares is not None
        kept = sorted(spares.containers())
        if not kept:
            return
        container = data.draw(st.sampled_from(kept))
        spare = spares.gone(container)
        assert spare is not None and spares.answer(spare.id) == ("stop", None)
        self.gone_spares.append(spare.id)

    @invariant()
    def spares_are_kept_and_told_one_place_each(self) -> None:
        spares = self.reg.spares
        assert spares is not None
        assert sum(s.takes is None for s in spares.by_id.values()) <= spares.wanted
        assert all(spares.answer(s) == ("stop", None) for s in self.gone_spares)
        taken = [s.takes for s in spares.by_id.values() if s.takes is not None]
        assert len(taken) == spares.took
        assert all(spares.gone(s.container_id) is None for s in spares.by_id.values() if s.takes is not None)


ElasticReplacementWithSpares.TestCase.settings = settings(
    max_examples=int(os.environ.get("TONY_ELASTIC_EXAMPLES", "200")), stateful_step_count=30, deadline=None)
TestElasticReplacementWithSpares = ElasticReplacementWithSpares.TestCase
