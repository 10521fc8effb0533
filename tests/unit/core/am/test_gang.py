"""The wait-die rule's decisions, the waiting line, and the registry and AM giving a gang back."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

import pytest

from tests.unit.core.support import SECRET, make_job
from tony_airflow.core.am import gang
from tony_airflow.core.am.gang import ASK, KEEP, RELEASE, GangView, Want
from tony_airflow.core.am.master import ApplicationMaster
from tony_airflow.core.am.registry import Registry
from tony_airflow.core.am.yarn_view import ClusterView
from tony_airflow.core.history import events as ev
from tony_airflow.core.presentation import progress_text
from tony_airflow.core.protocol import Progress
from tony_airflow.yarn.rest import ApplicationReport

OLD, ME, YOUNG = (GangView("application_1_0001", 1000, 2), GangView("application_1_0002", 2000, 2),
                  GangView("application_1_0003", 3000, 2))


def _step(gangs, held=4, wanted=6, stalled=gang.PATIENCE_S, released=False, backoff_over=True, me=ME):
    return gang.step(me, gangs, held=held, wanted=wanted, stalled_s=stalled, released=released,
                     backoff_over=backoff_over)


def test_a_younger_gang_holding_part_of_its_containers_releases_for_an_older_one_that_waits():
    assert _step([OLD, ME, YOUNG]) == (RELEASE, OLD)


@pytest.mark.parametrize("case", [
    dict(gangs=[ME, YOUNG]),                                        # the oldest waiting keeps what it holds
    dict(gangs=[GangView(OLD.app_id, 1000, 0), ME]),                # the older one has all it asked for
    dict(gangs=[OLD, ME], held=0),                                  # holds nothing: nothing to give back
    dict(gangs=[OLD, ME], held=6),                                  # whole: it runs
    dict(gangs=[OLD, ME], stalled=gang.PATIENCE_S - 1),             # still getting containers
    dict(gangs=[OLD, ME], me=None),                                 # the RM could not be read
])
def test_a_gang_keeps_what_it_holds(case):
    assert _step(**case) == (KEEP, None)


def test_a_released_gang_asks_again_only_once_no_older_gang_waits_and_its_back_off_is_over():
    assert _step([OLD, ME], released=True) == (KEEP, OLD)
    assert _step([ME], released=True, backoff_over=False) == (KEEP, None)
    assert _step([ME, YOUNG], released=True) == (ASK, None)
    assert _step([OLD], released=True, me=None) == (ASK, None)  # an unreadable RM: the back-off alone


def test_age_is_submission_time_then_the_rms_sequence_number():
    same = [GangView("application_1_0010", 5, 1), GangView("application_1_0009", 5, 1)]
    assert min(same, key=lambda g: g.age).app_id == "application_1_0009"
    assert gang.older_waiting(same[0], same) == same[1]


def test_the_rm_answer_counts_pending_containers_once_per_request():
    app = {"id": "application_1_0004", "startedTime": 77, "resourceRequests": [
        {"resourceName": "*", "numContainers": 2}, {"resourceName": "host1", "numContainers": 2},
        {"resourceName": "*", "numContainers": 1}]}
    assert GangView.from_rm(app) == GangView("application_1_0004", 77, 3, asks=(gang.Ask(),))
    assert GangView.from_rm({"id": "application_1_0005", "startedTime": 1}).pending == 0


def test_the_rm_answer_gives_each_gangs_queue_and_what_it_waits_for():
    gpu = {"resourceInformations": {"resourceInformation": [{"name": "memory-mb", "value": 2048},
                                                            {"name": "yarn.io/gpu", "value": 1}]}}
    app = {"id": "application_1_0004", "startedTime": 77, "queue": "ml", "resourceRequests": [
        {"resourceName": "*", "numContainers": 2, "nodeLabelExpression": "gpu",
         "capability": {"memory": 2048, "vCores": 2, **gpu}},
        {"resourceName": "*", "numContainers": 0, "capability": {"memory": 1, "vCores": 1}}]}
    view = GangView.from_rm(app)
    assert (view.queue, view.asks) == ("ml", (gang.Ask("gpu", 2048, 2, 1),))


def test_a_gang_gives_way_only_to_an_older_gang_that_could_use_what_it_holds():
    """Issue 51, item 3: not to one in another queue, in a partition it holds nothing of, or waiting for a
    container bigger than all it holds; what the RM does not say rules nothing out."""
    me = GangView("application_1_0002", 2, 2, queue="default", asks=(gang.Ask("", 1024, 1),))
    holding = gang.Holding(frozenset({""}), 4096, 4)

    def older(**kw) -> GangView:
        return GangView("application_1_0001", 1, 3, **{"queue": "default", "asks": (gang.Ask("", 1024, 1),), **kw})

    def action(other: GangView, released: bool = False) -> str:
        return gang.step(me, [other, me], held=4, wanted=6, stalled_s=gang.PATIENCE_S, released=released,
                         backoff_over=True, holding=holding)[0]

    assert action(older()) == RELEASE
    assert action(older(queue="other")) == KEEP and action(older(queue="other"), released=True) == ASK
    assert action(older(asks=(gang.Ask("nolabel", 1024, 1),))) == KEEP
    assert action(older(asks=(gang.Ask("", 8192, 1),))) == KEEP
    assert action(older(asks=(gang.Ask("", 1024, 1, 1),))) == KEEP  # it waits for GPUs this gang has none of
    assert action(older(asks=(gang.Ask("nolabel", 1024, 1), gang.Ask("", 512, 1)))) == RELEASE
    assert action(older(queue="", asks=())) == RELEASE


def test_the_back_off_is_random_grows_and_has_a_ceiling():
    rng = random.Random(1)
    first, later = [gang.backoff_s(1, rng) for _ in range(50)], [gang.backoff_s(20, rng) for _ in range(50)]
    assert all(gang.BACKOFF_BASE_S / 2 <= x <= gang.BACKOFF_BASE_S for x in first)
    assert all(gang.BACKOFF_CAP_S / 2 <= x <= gang.BACKOFF_CAP_S for x in later) and len(set(first)) > 1


WORKERS = [Want("worker", 2, 6, 1792, 1)]
NODE = {"state": "RUNNING", "nodeLabels": None, "availMemoryMB": 1024, "usedMemoryMB": 15360}


def _scheduler(queue: dict) -> dict:
    return {"scheduler": {"schedulerInfo": {"queueName": "root", "queues": {"queue": [queue]}}}}


def test_the_waiting_line_names_the_missing_containers_and_the_full_queue():
    queue = gang.queue_named(_scheduler({"queueName": "default", "queuePath": "root.default",
                                         "absoluteMaxCapacity": 100.0, "resourcesUsed": {"memory": 15360},
                                         "maxEffectiveCapacity": {"memory": 16384}}), "default")
    reasons = gang.waiting_reasons(WORKERS, queue=queue, nodes=[NODE], user="alice")
    assert gang.waiting_line(WORKERS, reasons) == (
        "waiting for 2 of 6 worker containers (1792 MiB, 1 vcore each): no node has 1792 MiB free (the most free "
        "on one: 1024 MiB); queue default is at its maximum capacity (100% of the cluster: 15360 of 16384 MiB used)")


def test_the_waiting_line_names_a_queue_at_its_maximum_below_the_cluster_and_the_user_limit():
    capped = {"queueName": "small", "absoluteMaxCapacity": 50.0, "resourcesUsed": {"memory": 7680},
              "maxEffectiveCapacity": {"memory": 8192}}
    assert gang.waiting_reasons(WORKERS, queue=capped) == [
        "queue small is at its maximum capacity (50% of the cluster: 7680 of 8192 MiB used)"]
    roomy = {**capped, "resourcesUsed": {"memory": 1024}}
    assert gang.waiting_reasons(WORKERS, queue=roomy) == []
    user = {**roomy, "users": {"user": [{"username": "bob", "resourcesUsed": {"memory": 7168},
                                         "userResourceLimit": {"memory": 8192}}]}}
    assert gang.waiting_reasons(WORKERS, queue=user, user="bob") == [
        "user bob is at its limit in queue small (7168 of 8192 MiB used)"]


def test_the_waiting_line_names_a_partition_without_nodes_and_a_request_no_node_can_hold():
    gpu = [Want("worker", 1, 1, 1024, 1, label="gpu")]
    assert gang.waiting_reasons(gpu, nodes=[NODE]) == ["no running node in label gpu"]
    huge = [Want("worker", 1, 1, 65536, 1)]
    assert gang.waiting_reasons(huge, nodes=[NODE]) == [
        "no node can ever hold one (the largest in the default partition has 16384 MiB)"]


def test_the_waiting_line_says_which_older_gang_it_gave_way_to():
    line = gang.waiting_line(WORKERS, gang.waiting_reasons(WORKERS, yielding_to=OLD))
    assert "released its containers for the older gang application_1_0001, which waits for 2" in line


def test_an_accepted_application_says_why_its_am_waits_in_one_line():
    diagnostics = ("[Fri Nov 27 05:01:02 +0000 2026] Application is added to the scheduler and is not yet "
                   "activated. Queue's AM resource limit exceeded.  Details : AM Partition = <DEFAULT_PARTITION>; "
                   "AM Resource Request = <memory:512, vCores:1>;")
    assert gang.am_waiting_line(diagnostics) == "waiting for its AM container: Queue's AM resource limit exceeded"
    report = ApplicationReport.from_json({"id": "application_1_0002", "state": "ACCEPTED", "finalStatus": "UNDEFINED",
                                          "diagnostics": diagnostics})
    assert progress_text(report.id, report, None).endswith("· waiting for its AM container: Queue's AM resource "
                                                           "limit exceeded")
    assert gang.am_waiting_line("") == ""


def test_the_progress_line_carries_the_waiting_line_until_the_gang_is_whole():
    report = ApplicationReport.from_json({"id": "application_1_0002", "state": "RUNNING", "finalStatus": "UNDEFINED"})
    waiting = Progress(attempt=1, total=6, allocated=4, waiting="waiting for 2 of 6 worker containers")
    assert progress_text(report.id, report, waiting) == (
        "application_1_0002 RUNNING · attempt 1/1 · allocated 4/6 · waiting for 2 of 6 worker containers")
    whole = Progress(attempt=1, total=6, allocated=6, waiting="stale")
    assert "stale" not in progress_text(report.id, report, whole)


# ------------------------------------------------------------------------------ the registry
def test_a_released_task_is_wanted_again_and_its_old_container_is_not_heard():
    async def scenario() -> None:
        reg = Registry(make_job("worker:2"), "application_1_0002")
        reg.new_attempt(1)
        assert reg.register("worker", 0, 1, "h1", 4000, container_id="c_old_0") is None
        reg.container_allocated(("worker", 1), "c_old_1")
        reg.release([("worker", 0), ("worker", 1)], {"c_old_1"})
        assert reg.counts()["allocated"] == 0 and reg.counts()["registered"] == 0
        assert "given back to YARN" in (reg.register("worker", 0, 1, "h1", 4001, container_id="c_old_0") or "")
        assert reg.heartbeat("worker", 1, 1, container_id="c_old_1") == "stop"
        reg.finished("worker", 0, 1, 143, container_id="c_old_0")
        assert not reg.tasks[("worker", 0)].done
        reg.ask_again([("worker", 0), ("worker", 1)])
        for i in range(2):  # the new containers form the gang
            assert reg.register("worker", i, 1, "h2", 5000 + i, container_id=f"c_new_{i}") is None
        assert reg.spec_published and reg.tasks[("worker", 0)].port == 5000
    asyncio.run(scenario())


def test_a_container_allocated_while_the_release_is_under_way_cannot_complete_the_gang():
    """The release is one step for the registry, before the AM's first kill (issue 51, item 2): a container
    YARN hands the gang meanwhile (its id unknown to the release) registers and is refused."""
    async def scenario() -> None:
        reg = Registry(make_job("worker:2"), "application_1_0002")
        reg.new_attempt(1)
        assert reg.register("worker", 0, 1, "h1", 4000, container_id="c_old_0") is None
        reg.release([("worker", 0), ("worker", 1)], {"c_old_0"})
        assert "being given back" in (reg.register("worker", 1, 1, "h1", 4001, container_id="c_late_1") or "")
        assert "given back" in (reg.register("worker", 0, 1, "h1", 4002, container_id="c_late_0") or "")
        assert not reg.spec_published
        assert reg.heartbeat("worker", 1, 1, container_id="c_late_1") == "stop"
        reg.finished("worker", 1, 1, 1, container_id="c_late_1")  # its exit, refused, is not the task's
        assert not reg.tasks[("worker", 1)].done
        reg.forget_containers({"c_late_0", "c_late_1"})
        reg.release([("worker", 0), ("worker", 1)], set())  # the assertion of a published spec never trips
    asyncio.run(scenario())


# ------------------------------------------------------------------------------ the AM
class GangApp:
    """skein's application client: containers that YARN allocates one by one, killed on request."""

    def __init__(self):
        self.state: dict[str, str] = {}
        self.yarn: dict[str, str] = {}
        self.added = 0
        self.killed: list[str] = []
        self.kv: dict[str, bytes] = {}

    def add_container(self, service, env=None):
        self.added += 1
        cid = f"{service}_{self.added}"
        self.state[cid] = "REQUESTED"
        return SimpleNamespace(id=cid)

    def allocate(self, cid: str) -> None:
        self.state[cid], self.yarn[cid] = "RUNNING", f"container_{cid}"

    def kill_container(self, cid):
        self.killed.append(cid)
        self.state[cid] = "KILLED"

    def get_containers(self, services=None, states=None):
        return [SimpleNamespace(id=c, state=s, yarn_container_id=self.yarn.get(c, ""), exit_message="",
                                yarn_node_http_address="h:8042") for c, s in self.state.items()]


class FixedView:
    def __init__(self, view: ClusterView):
        self.view = view

    def read(self, detail: bool = True) -> ClusterView:
        return self.view


def test_the_am_releases_its_part_of_the_gang_for_an_older_one_then_asks_again(monkeypatch):
    monkeypatch.setattr(gang, "backoff_s", lambda n, rng=None: 0.0)
    app = GangApp()
    view = ClusterView(me=ME, gangs=[OLD, ME])
    am = ApplicationMaster(make_job("worker:3"), SECRET, app=app, app_id=ME.app_id, host="h",
                           yarn=FixedView(view))  # type: ignore[arg-type]

    async def scenario() -> None:
        am.registry.new_attempt(2)
        am._gang.requested_at = 0.0
        await am._request_containers(2)
        first = list(am._container_of)
        app.allocate(first[0])
        app.allocate(first[1])
        await am._poll_containers()
        assert am.registry.counts()["allocated"] == 2
        for task in am.registry.tasks.values():  # ... and no more for longer than the patience
            task.allocated_at = task.allocated_at and task.allocated_at - gang.PATIENCE_S
        await am._watch_gang(2)  # held 2 of 3, stalled, the older gang waits: release
        assert sorted(app.killed) == sorted(first) and am._gang.released
        assert am.registry.counts()["allocated"] == 0 and not am._container_of
        assert "released its containers for the older gang application_1_0001" in am.registry.waiting
        await am._watch_gang(2)  # the older gang still waits: keep waiting, ask nothing
        assert app.added == 3
        view.gangs = [GangView(OLD.app_id, OLD.started_ms, 0), ME]
        await am._watch_gang(2)  # the older one has all it asked for: ask again
        assert app.added == 6 and not am._gang.released and len(am._container_of) == 3
    asyncio.run(scenario())
    kinds = [e["event"] for e in am.history.events]
    assert kinds.count(ev.GANG_RELEASED) == 1 and kinds.count(ev.GANG_REQUESTED) == 1
    released = next(e for e in am.history.events if e["event"] == ev.GANG_RELEASED)
    assert (released["held"], released["wanted"], released["older"]) == (2, 3, OLD.app_id)


def test_an_rm_that_cannot_be_read_is_not_asked_again_for_a_while():
    """A SPNEGO-only RM refuses an AM that holds only tokens: each look would hold the AM's loop."""
    from tony_airflow.core.am.yarn_view import AFTER_FAILURE_S, YarnView

    class Refusing:
        calls = 0

        def get(self, path, **params):
            Refusing.calls += 1
            raise RuntimeError("HTTP 401: Authentication required")

    now = [0.0]
    view = YarnView(Refusing(), "application_1_0002", clock=lambda: now[0])
    assert view.read().me is None and Refusing.calls == 1
    now[0] += AFTER_FAILURE_S - 1
    view.read()
    assert Refusing.calls == 1
    now[0] += 2
    view.read()
    assert Refusing.calls == 2


def test_registrations_while_the_am_kills_its_released_containers_never_start_the_gang(monkeypatch):
    """Issue 51, item 2, through the AM: between two awaited kills YARN allocates the gang's last container and
    all three executors register; the gang must not start (the AM failed the job on Registry.release's
    assertion, the spec already out), and the release goes on to its end."""
    monkeypatch.setattr(gang, "backoff_s", lambda n, rng=None: 0.0)
    app = GangApp()
    am = ApplicationMaster(make_job("worker:3"), SECRET, app=app, app_id=ME.app_id, host="h",
                           yarn=FixedView(ClusterView(me=ME, gangs=[OLD, ME])))  # type: ignore[arg-type]
    answers: list[str | None] = []

    def kill_then_register(cid):
        GangApp.kill_container(app, cid)
        if len(app.killed) == 1:  # meanwhile: the last container arrives and every executor registers
            last = next(c for c, s in app.state.items() if s == "REQUESTED")
            app.allocate(last)
            for c, (type_, index) in am._container_of.items():
                answers.append(am.registry.register(type_, index, 2, "h", 4000 + index,
                                                    container_id=app.yarn.get(c, "")))

    app.kill_container = kill_then_register  # type: ignore[method-assign]

    async def scenario() -> None:
        am.registry.new_attempt(2)
        am._gang.requested_at = 0.0
        await am._request_containers(2)
        first = list(am._container_of)
        app.allocate(first[0])
        app.allocate(first[1])
        await am._poll_containers()
        for task in am.registry.tasks.values():
            task.allocated_at = task.allocated_at and task.allocated_at - gang.PATIENCE_S
        await am._watch_gang(2)

    asyncio.run(scenario())
    assert len(answers) == 3 and all(answers), answers  # each refused
    assert not am.registry.spec_published and am._gang.released and len(app.killed) == 3
    assert all(am.registry.is_released(y) for y in app.yarn.values())
