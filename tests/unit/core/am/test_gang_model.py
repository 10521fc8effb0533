"""The gangs' wait-die rule, model-checked: several gangs share a cluster that cannot hold them all; a
scheduler hands free containers to any gang that asks, in any order (a fair-ordered queue splits them,
a FIFO one serves the oldest: both are interleavings here), time passes, each gang's AM looks at the RM
at any moment and does what `gang.step` says, running gangs finish. Hypothesis plays random
interleavings of these steps.

Each gang's containers register with a real `Registry` as they are allocated (the gang runs once its spec
is published). A release is not one step: the AM kills its containers one `kill_container` at a time, and
meanwhile YARN may still allocate to the gang and those containers may register (`a_kill_completes` ends
one kill; the release ends after the last). The registry's part of a release is done before the first kill
(ApplicationMaster._release), so no registration in between can publish the spec of a gang being released.

Invariants:
- the cluster never hands out more than it has;
- a gang releases only for an older gang that waits, and only while it holds part of its gang;
- the oldest waiting gang never releases;
- from every state reached, the cluster with a fair scheduler (round robin over the gangs that ask)
  and AMs looking every few seconds runs every gang to its end: nobody deadlocks, nobody starves.

Some gangs may be ones the cluster can never serve (issue 51, item 3): in another queue, or asking for a
node label no node has; they wait for ever, and the others never give way to them: every other gang ends.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.unit.core.support import make_job
from tony_airflow.core.am import gang
from tony_airflow.core.am.registry import Registry

DRAIN_STEPS = 4000


@dataclass
class Gang:
    number: int        # its age: smaller is older (its application's submission)
    size: int
    elsewhere: str = ""  # "queue": in another queue; "label": asks for a node label no node has
    held: int = 0
    released: bool = False
    requested_at: float = 0.0
    last_alloc: float = 0.0
    retry_at: float = 0.0
    releases: int = 0
    running: bool = False
    done: bool = False
    reg: Registry | None = None
    containers: dict[int, str] = field(default_factory=dict)  # task index -> its YARN container
    killing: list[int] | None = None  # a release under way: the tasks whose kill is still to come
    older: gang.GangView | None = None

    def __post_init__(self) -> None:
        self.reg = Registry(make_job(f"worker:{self.size}"), f"application_1_{self.number:04d}")
        self.reg.new_attempt(1)

    @property
    def asks(self) -> bool:
        return not (self.released or self.running or self.done) and self.held < self.size

    @property
    def servable(self) -> bool:
        return not self.elsewhere

    def view(self) -> gang.GangView:
        pending = self.size - self.held if self.asks else 0
        label = "nolabel" if self.elsewhere == "label" else ""
        return gang.GangView(f"application_1_{self.number:04d}", 1000 + self.number, pending,
                             queue="other" if self.elsewhere == "queue" else "default",
                             asks=(gang.Ask(label, 1024, 1),) if pending else ())

    def holding(self, count: int) -> gang.Holding:
        return gang.Holding(frozenset({""}), 1024 * count, count)


class Cluster(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.capacity = 0
        self.gangs: list[Gang] = []
        self.now = 0.0
        self.rng = random.Random(0)
        self.serial = 0

    @initialize(capacity=st.integers(2, 12), sizes=st.lists(st.integers(1, 12), min_size=2, max_size=4),
                elsewhere=st.lists(st.sampled_from(["", "", "queue", "label"]), min_size=4, max_size=4))
    def submit(self, capacity: int, sizes: list[int], elsewhere: list[str]) -> None:
        self.capacity = capacity
        self.gangs = [Gang(i + 1, min(size, capacity), elsewhere[i])  # bigger: refused
                      for i, size in enumerate(sizes)]

    @property
    def free(self) -> int:
        return self.capacity - sum(g.held for g in self.gangs)

    # ------------------------------------------------------------------ the scheduler, time, the tasks
    @precondition(lambda self: self.free > 0 and any(g.asks and g.servable for g in self.gangs))
    @rule(pick=st.integers(0, 3))
    def allocate(self, pick: int) -> None:
        asking = [g for g in self.gangs if g.asks and g.servable]  # this cluster's queue and partition only
        self._allocate(asking[pick % len(asking)])

    def _allocate(self, g: Gang) -> None:
        """YARN hands the gang a container (also while its release is under way: its requests are withdrawn
        only by the kills); the container's executor registers at once."""
        index = min(i for i in range(g.size) if i not in g.containers)
        self.serial += 1
        cid = g.containers[index] = f"container_1_{g.number:04d}_01_{self.serial:06d}"
        g.held += 1
        g.last_alloc = self.now
        assert g.reg is not None
        g.reg.container_allocated(("worker", index), cid)
        g.reg.register("worker", index, 1, "h", 4000 + self.serial, container_id=cid)  # refused: it ends
        if g.reg.spec_published:
            assert g.killing is None, "a gang being released started its tasks"
            g.running = True

    @precondition(lambda self: any(g.killing is not None for g in self.gangs))
    @rule(pick=st.integers(0, 3))
    def a_kill_completes(self, pick: int) -> None:
        releasing = [g for g in self.gangs if g.killing is not None]
        self._kill_one(releasing[pick % len(releasing)])

    def _kill_one(self, g: Gang) -> None:
        """One of the AM's awaited kill_container calls returns; after the last, the release ends."""
        assert g.killing is not None and g.reg is not None
        if g.killing:
            index = g.killing.pop(0)
            if index in g.containers:
                g.held -= 1
                del g.containers[index]
            return
        g.reg.forget_containers(set(g.containers.values()))  # the ids of the containers killed
        g.containers.clear()
        g.held, g.killing, g.released, g.releases = 0, None, True, g.releases + 1
        g.retry_at = self.now + gang.backoff_s(g.releases, self.rng)

    @rule(seconds=st.sampled_from([0.5, 2.0, gang.WATCH_S, gang.PATIENCE_S, 40.0]))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @precondition(lambda self: any(g.running for g in self.gangs))
    @rule(pick=st.integers(0, 3))
    def a_gang_finishes(self, pick: int) -> None:
        running = [g for g in self.gangs if g.running]
        self._finish(running[pick % len(running)])

    @staticmethod
    def _finish(g: Gang) -> None:
        g.running, g.done, g.held = False, True, 0
        g.containers.clear()

    # ------------------------------------------------------------------------------- an AM looks
    @rule(pick=st.integers(0, 3))
    def an_am_looks(self, pick: int) -> None:
        live = [g for g in self.gangs if g.servable and not (g.done or g.running or g.killing is not None)]
        if live:
            self._look(live[pick % len(live)])

    def _look(self, g: Gang) -> None:
        views = [x.view() for x in self.gangs if not x.done]
        me = g.view()
        action, older = gang.step(me, views, held=g.held, wanted=g.size,
                                  stalled_s=self.now - max(g.last_alloc, g.requested_at), released=g.released,
                                  backoff_over=self.now >= g.retry_at,
                                  holding=g.holding(g.size if g.released else g.held))
        if action == gang.RELEASE:
            assert older is not None and older.age < me.age and older.pending > 0, (older, me)
            assert 0 < g.held < g.size
            waiting = [x for x in self.gangs if x.asks and x.servable]
            assert g is not min(waiting, key=lambda x: x.number), "the oldest waiting gang released"
            assert g.reg is not None  # ApplicationMaster._release: the registry's step, then the kills
            g.reg.release([("worker", i) for i in range(g.size)], set(g.containers.values()))
            g.killing, g.older = list(range(g.size)), older
        elif action == gang.ASK:
            assert g.released and g.reg is not None
            g.reg.ask_again([("worker", i) for i in range(g.size)])
            g.released, g.requested_at = False, self.now

    @invariant()
    def never_more_than_the_cluster_has(self) -> None:
        assert 0 <= self.free <= self.capacity

    def teardown(self) -> None:
        """From here, a fair scheduler and AMs that look every WATCH_S: every gang ends."""
        if not self.gangs:
            return
        turn = 0
        for _ in range(DRAIN_STEPS):
            if all(g.done for g in self.gangs if g.servable):
                return
            for g in [g for g in self.gangs if g.running]:
                self._finish(g)  # a gang that runs ends (its run time is not the rule's concern)
            for g in [g for g in self.gangs if g.killing is not None]:
                while g.killing is not None:
                    self._kill_one(g)
            asking = [g for g in self.gangs if g.asks and g.servable]
            while self.free > 0 and asking:  # round robin, one container each, as a fair queue does
                self._allocate(asking[turn % len(asking)])
                turn += 1
                asking = [g for g in self.gangs if g.asks and g.servable]
            self.now += gang.WATCH_S
            for g in self.gangs:
                if g.servable and not (g.done or g.running or g.killing is not None):
                    self._look(g)
        stuck = [(g.number, g.size, g.held, g.released) for g in self.gangs if g.servable and not g.done]
        raise AssertionError(f"deadlock or starvation: gangs {stuck} on a cluster of {self.capacity}")


Cluster.TestCase.settings = settings(max_examples=int(os.environ.get("TONY_GANG_EXAMPLES", "300")),
                                     stateful_step_count=40, deadline=None)
test_gangs_never_deadlock_nor_starve = Cluster.TestCase
