"""A host lost under an attempt: named first in the reason, and left to YARN's verdict before a retry."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from tests.unit.core.support import SECRET, make_job
from tony_airflow.core.am import hosts
from tony_airflow.core.am.master import ApplicationMaster
from tony_airflow.core.am.policy import Outcome
from tony_airflow.core.history import events as ev
from tony_airflow.core.history.model import JobHistory
from tony_airflow.yarn.hadoop_conf import write_site

LOST = "Container released on a *lost* node"


@dataclass
class Task:
    type: str
    index: int
    host: str = "198.18.0.3"
    node_http: str = "198.18.0.3:8042"
    yarn_diagnostics: str = ""
    registered_at: float | None = 1.0
    done: bool = False

    @property
    def id(self) -> str:
        return f"{self.type}:{self.index}"


def test_a_running_task_whose_nodemanager_does_not_answer_is_on_a_lost_host():
    tasks = [Task("worker", 0, "198.18.0.2", "198.18.0.2:8042", done=True), Task("worker", 1),
             Task("ps", 0)]
    probed = []
    lost = hosts.find_lost(tasks, probe=lambda http: probed.append(http) or False)
    assert probed == ["198.18.0.3:8042"]  # once per NodeManager of a running task
    assert [(h.host, h.tasks, h.by_yarn) for h in lost] == [("198.18.0.3", ["ps:0", "worker:1"], False)]
    assert lost[0].describe() == ("host 198.18.0.3 lost (its NodeManager 198.18.0.3:8042 does not answer; "
                                  "tasks there: ps:0, worker:1)")


def test_a_task_on_a_host_that_answers_is_not_lost_and_one_never_registered_is_not_asked():
    assert hosts.find_lost([Task("worker", 1)], probe=lambda http: True) == []
    assert hosts.find_lost([Task("worker", 1, registered_at=None)], probe=lambda http: False) == []


def test_yarns_lost_node_report_needs_no_probe_and_groups_the_hosts_tasks():
    tasks = [Task("ps", 0, yarn_diagnostics=LOST, done=True), Task("worker", 1)]
    lost = hosts.find_lost(tasks, probe=lambda http: (_ for _ in ()).throw(AssertionError(http)))
    assert [(h.host, h.tasks, h.by_yarn) for h in lost] == [("198.18.0.3", ["ps:0", "worker:1"], True)]
    assert lost[0].describe().startswith("host 198.18.0.3 lost (YARN declared its NodeManager lost;")


def test_the_probe_of_a_closed_port_is_quick_and_false():
    started = time.monotonic()
    assert hosts.answers("127.0.0.1:1") is False
    assert hosts.answers("not-an-address") is False
    assert time.monotonic() - started < hosts.PROBE_TIMEOUT_S


def test_the_liveness_expiry_comes_from_the_containers_yarn_site(tmp_path):
    write_site(tmp_path / "yarn-site.xml", {"yarn.nm.liveness-monitor.expiry-interval-ms": 10000})
    assert hosts.liveness_expiry_s(str(tmp_path)) == 10.0
    assert hosts.liveness_expiry_s(str(tmp_path / "missing")) == hosts.DEFAULT_EXPIRY_S
    assert hosts.liveness_expiry_s("") == hosts.DEFAULT_EXPIRY_S


# ------------------------------------------------------------------------------------- in the AM
class FakeApp:
    """skein's application client as the AM sees it: containers, and YARN's verdict arriving later."""

    def __init__(self, verdict_after_polls: int):
        self.polls = 0
        self.verdict_after = verdict_after_polls
        self.killed: list[str] = []
        self.killed_at_poll: dict[str, int] = {}

    def get_containers(self, services=None, states=None):
        self.polls += 1
        lost = self.polls > self.verdict_after
        containers = [SimpleNamespace(id="worker_0", state="KILLED" if "worker_0" in self.killed else "RUNNING",
                                yarn_container_id="c_2", yarn_node_http_address="198.18.0.2:8042", exit_message=""),
                SimpleNamespace(id="worker_1", state="KILLED" if "worker_1" in self.killed else
                                "FAILED" if lost else "RUNNING", yarn_container_id="c_3",
                                yarn_node_http_address="198.18.0.3:8042", exit_message=LOST if lost else "")]
        # skein lists only live containers unless asked for every state
        return containers if states else [c for c in containers if c.state == "RUNNING"]

    def kill_container(self, cid):
        self.killed.append(cid)
        self.killed_at_poll[cid] = self.polls


def _am(app: FakeApp) -> ApplicationMaster:
    am = ApplicationMaster(make_job("worker:2", stop_grace=0.5), SECRET, app=app, app_id="application_1_0001",
                           host="198.18.0.2")
    am.registry.new_attempt(1)
    am._container_of = {"worker_0": ("worker", 0), "worker_1": ("worker", 1)}
    for cid, key, http in (("c_2", ("worker", 0), "198.18.0.2:8042"), ("c_3", ("worker", 1), "198.18.0.3:8042")):
        am.registry.container_allocated(key, cid, http)
        am.registry.tasks[key].registered_at = time.time() - 30
    return am


def test_before_a_retry_the_lost_hosts_containers_wait_for_yarns_verdict(monkeypatch):
    monkeypatch.setattr(hosts, "answers", lambda http, timeout=0: http != "198.18.0.3:8042")
    monkeypatch.setattr(hosts, "liveness_expiry_s", lambda conf_dir=None: 5.0)
    app = FakeApp(verdict_after_polls=2)
    am = _am(app)
    am.registry.container_gone(("worker", 0), "container c_2 FAILED: exit 1")  # the survivor failed first
    outcome, lost = asyncio.run(am._blame_lost_hosts(1, Outcome(False, "worker:0 exited with code 1")))
    assert outcome.reason == ("host 198.18.0.3 lost (its NodeManager 198.18.0.3:8042 does not answer; tasks there: "
                              "worker:1); the attempt ended with: worker:0 exited with code 1")
    asyncio.run(am._stop_remaining(lost, await_verdict=True))
    # killing worker_1 before YARN's verdict would free its host for the next attempt's containers
    assert app.killed_at_poll["worker_1"] > app.verdict_after
    assert LOST in am.registry.tasks[("worker", 1)].yarn_diagnostics
    history = JobHistory.from_events("application_1_0001", am.history.events)
    assert [e["host"] for e in am.history.events if e["event"] == ev.HOST_LOST] == ["198.18.0.3"]
    assert history.attempts[0].lost_hosts == ["198.18.0.3 (worker:1)"]


def test_without_a_retry_nothing_waits_for_the_verdict(monkeypatch):
    monkeypatch.setattr(hosts, "answers", lambda http, timeout=0: http != "198.18.0.3:8042")
    app = FakeApp(verdict_after_polls=10_000)
    am = _am(app)
    am.registry.container_gone(("worker", 0), "container c_2 FAILED: exit 1")
    _, lost = asyncio.run(am._blame_lost_hosts(1, Outcome(False, "worker:0 exited with code 1")))
    asyncio.run(am._stop_remaining(lost, await_verdict=False))
    assert sorted(app.killed) == ["worker_0", "worker_1"] and app.polls < 10


def test_the_nodemanagers_are_probed_at_once_not_one_after_another():
    """Issue #30 item 13: a 3 s probe per NodeManager, one at a time, delayed a 50-host job's verdict by minutes."""
    import threading

    tasks = [Task("worker", i, node_http=f"198.18.0.{i + 2}:8042", host=f"198.18.0.{i + 2}") for i in range(6)]
    inside, most, lock = [0], [0], threading.Lock()
    everyone = threading.Barrier(6, timeout=5)

    def probe(http: str) -> bool:
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        everyone.wait()  # returns only once every probe is under way at the same time
        with lock:
            inside[0] -= 1
        return http != "198.18.0.3:8042"

    lost = hosts.find_lost(tasks, probe=probe)
    assert most[0] == 6
    assert [h.host for h in lost] == ["198.18.0.3"]


def test_containers_that_ended_without_a_report_cost_one_wait_together(monkeypatch):
    """Issue #30 item 13: each such container cost a 0.5 s sleep, one after another (a lost 20-task host: 10 s)."""
    import asyncio
    from types import SimpleNamespace

    from tests.unit.core.support import SECRET, make_job
    from tony_airflow.core.am import master as master_module
    from tony_airflow.core.am.master import ApplicationMaster

    job = make_job("worker:6")
    containers = [SimpleNamespace(id=f"worker_{i}", state="FAILED", yarn_container_id=f"container_1_0001_01_{i + 2:06d}",
                                  exit_message="Container released on a *lost* node", yarn_node_http_address="h:8042")
                  for i in range(6)]
    app = SimpleNamespace(get_containers=lambda *a, **k: containers)
    am = ApplicationMaster(job, SECRET, app, "application_1_0001", "h")
    am.registry.new_attempt(1)
    am._container_of = {c.id: ("worker", i) for i, c in enumerate(containers)}
    waits = []
    real_sleep = asyncio.sleep

    async def counting_sleep(seconds, *args):
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(master_module.asyncio, "sleep", counting_sleep)
    asyncio.run(am._poll_containers())
    assert all(t.done for t in am.registry.tasks.values())
    assert len(waits) == 1, waits


def test_the_stop_ends_when_the_tasks_report_not_a_tick_later(monkeypatch):
    """#54: the end of every job waited a whole TICK_S after the last task stopped; a report now ends the wait.
    TICK_S is made 600 s here: a wait that is not woken by the reports would outlast the test's 30 s."""
    from tony_airflow.core.am import master as master_module

    monkeypatch.setattr(master_module, "TICK_S", 600.0)
    app = FakeApp(verdict_after_polls=10_000)
    am = _am(app)

    async def scenario() -> None:
        stopping = asyncio.ensure_future(am._stop_remaining())
        await asyncio.sleep(0.05)
        for index in (0, 1):  # the executors heard 'stop' and report their ends
            am.registry.finished("worker", index, 1, 143)
        await asyncio.wait_for(stopping, 30)

    asyncio.run(scenario())
    assert all(t.done for t in am.registry.tasks.values())


def _am_with_a_killed_worker(heard_ago: float, exit_message: str) -> tuple[ApplicationMaster, Any]:
    """An AM whose worker:1 runs and was last heard from `heard_ago` s ago, and whose container YARN says ended."""
    container = SimpleNamespace(id="worker_1", state="KILLED", yarn_container_id="container_1_0001_01_000003",
                                exit_message=exit_message, yarn_node_http_address="h:8042")
    app = SimpleNamespace(get_containers=lambda *a, **k: [container])
    am = ApplicationMaster(make_job("worker:2"), SECRET, app, "application_1_0001", "h")
    am.registry.new_attempt(1)
    am._container_of = {container.id: ("worker", 1)}
    task = am.registry.tasks[("worker", 1)]
    task.started_at, task.last_heartbeat = time.time() - 60, time.time() - heard_ago
    return am, task


@pytest.mark.parametrize("heard_ago, waits", [(5.0, []), (0.2, [0.5])])
def test_a_container_whose_executor_went_quiet_before_it_ended_is_not_waited_for(monkeypatch, heard_ago, waits):
    """#54: the 0.5 s wait for the executors' own exit reports is for executors that may still send one; one
    quiet for more than 1.5 heartbeats before YARN said its container ended was killed with it."""
    from tony_airflow.core.am import master as master_module

    am, task = _am_with_a_killed_worker(heard_ago, "Container killed. Exit code: 137")
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def counting_sleep(seconds, *args):
        slept.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(master_module.asyncio, "sleep", counting_sleep)
    asyncio.run(am._poll_containers())
    assert task.done and slept == waits


@pytest.mark.parametrize("heard_ago", [0.2, 1.6])
def test_an_exit_report_just_after_yarn_said_killed_still_tells_why(heard_ago):
    """A reviewer's script: YARN's word on a killed container (SIGTERM, SIGKILL 250 ms later) came first and the
    executor, quiet for more than 1.5 heartbeats, was not waited for; its own report a moment later was
    dropped, and with it the command's stderr tail (and a memory kill). The ending stands, the details count."""
    am, task = _am_with_a_killed_worker(heard_ago, "Container killed on request. Exit code: 143")

    async def scenario():
        asyncio.get_running_loop().call_later(0.1, lambda: am.registry.finished(
            "worker", 1, 1, 143, "RuntimeError: the real reason", memory_killed=True))
        await am._poll_containers()
        await asyncio.sleep(0.2)

    asyncio.run(scenario())
    assert task.done and task.exit_code == 143
    assert "the real reason" in task.stderr_tail and task.memory_killed


def test_a_late_report_from_another_container_fills_in_nothing():
    """A reviewer's script: the late report's details went to the task whatever container sent them."""
    am, task = _am_with_a_killed_worker(1.6, "Container killed on request. Exit code: 143")
    asyncio.run(am._poll_containers())
    assert task.done
    am.registry.finished("worker", 1, 1, 143, "from another container", container_id="container_1_0001_01_000099")
    assert task.stderr_tail == ""
    am.registry.finished("worker", 1, 1, 143, "its own", container_id="container_1_0001_01_000003")
    assert task.stderr_tail == "its own"
