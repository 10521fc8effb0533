"""torchrun's handler for the AM's rendezvous (issue 51) against the AM's real server: agents form a round,
their store works as torch's agent uses it, a lost container (rank 0's) makes the survivor see a node
waiting and the next round forms with the replacement, the survivor rank 0 (the output's writer role moved
to its container: the round waits until its executor, told by a held heartbeat's answer, took it; the
chief's replacement is told it does not write); a closed rendezvous
and another attempt are refused; torchrun finds the backend through the executor's plugin directory."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.unit.core.support import SECRET, make_job
from tony_airflow.core import protocol
from tony_airflow.core.am import server
from tony_airflow.core.am.registry import Registry
from tony_airflow.core.executor.task import RegistryClient, torchrun_plugin_env
from tony_airflow.core.history import events as ev

pytest.importorskip("torch")
from torch.distributed.elastic.rendezvous import (  # noqa: E402
    RendezvousClosedError,
    RendezvousParameters,
)

from tony_airflow.core.executor import torchrun_rendezvous as tr  # noqa: E402


class AM:
    """The AM's server on a port of its own, in a thread with its own event loop."""

    def __init__(self, job_req: str = "worker:2", elastic: str = "2:2") -> None:
        self.events: list[tuple[str, dict]] = []
        self.reg = Registry(make_job(job_req, framework="pytorch", elastic=elastic, output="hdfs:///out"), "app_1",
                            listener=lambda name, **fields: self.events.append((name, fields)))
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def begin() -> None:
            self.reg.new_attempt(1)
            self.runner, self.port = await server.start(server.build_app(self.reg, SECRET), "127.0.0.1", 0)
            self.ready.set()

        self.loop.run_until_complete(begin())
        self.loop.run_forever()

    def call(self, fn):
        """Run fn() on the AM's loop (the registry is the loop's)."""
        done: list = []
        event = threading.Event()

        def go() -> None:
            done.append(fn())
            event.set()

        self.loop.call_soon_threadsafe(go)
        assert event.wait(10)
        return done[0]

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def _handler(am: AM, task: tuple[str, int], container: str, monkeypatch, attempt: int = 1) -> tr.TonyRendezvousHandler:
    monkeypatch.setenv(protocol.ENV_TASK_TYPE, task[0])
    monkeypatch.setenv(protocol.ENV_TASK_INDEX, str(task[1]))
    monkeypatch.setenv("CONTAINER_ID", container)
    params = RendezvousParameters(backend="tony", endpoint="", run_id="app_1-1", min_nodes=2, max_nodes=2,
                                  local_addr=f"host-{task[1]}")
    return tr.TonyRendezvousHandler(params, tr.AMClient(f"127.0.0.1:{am.port}", SECRET, attempt))


@pytest.fixture
def am():
    running = AM()
    yield running
    running.stop()


def _register(am: AM, index: int, container: str) -> None:
    assert am.call(lambda: am.reg.register("worker", index, 1, f"host-{index}", 4000 + index,
                                           container_id=container)) is None


def test_agents_form_a_round_use_its_store_and_reform_it_after_rank_0s_container_is_lost(am, monkeypatch):
    _register(am, 0, "c0")
    _register(am, 1, "c1")
    chief = _handler(am, ("worker", 0), "c0", monkeypatch)
    other = _handler(am, ("worker", 1), "c1", monkeypatch)
    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda h: h.next_rendezvous(), [chief, other])
    assert (first.rank, first.world_size, second.rank, second.world_size) == (0, 2, 1, 2)
    assert first.bootstrap_store_info.master_addr == second.bootstrap_store_info.master_addr == "host-0"
    assert first.bootstrap_store_info.master_port == second.bootstrap_store_info.master_port > 0
    assert chief.use_agent_store is False and chief.get_backend() == "tony" and chief.get_run_id() == "app_1-1"

    # the store as torch's agent uses it: ranks (set, multi_get, multi_set, get) and the exit barrier
    a, b = first.store, second.store
    a.set("torchelastic/role_info/0", b"zero")
    b.set("torchelastic/role_info/1", "one")
    assert a.multi_get(["torchelastic/role_info/0", "torchelastic/role_info/1"]) == [b"zero", b"one"]
    a.multi_set(["k/0", "k/1"], [b"x", "y"])
    assert b.get("k/1") == b"y"
    assert a.add("n", 1) == 1 and b.add("n", 2) == 3
    assert a.compare_set("c", b"", b"v1") == b"v1" and b.compare_set("c", b"no", b"v2") == b"v1"
    assert a.check(["k/0", "n"]) and not a.check(["absent"])
    assert a.delete_key("k/0") and not a.delete_key("k/0")
    assert a.num_keys() == 5
    later = threading.Timer(0.5, lambda: b.set("late", b"1"))
    later.start()
    assert a.get("late") == b"1"  # a key not set yet is waited for
    with pytest.raises(LookupError):
        a.wait(["never"], datetime.timedelta(seconds=0.5))

    # rank 0's container is lost: the survivor's agent sees a node waiting (torchrun restarts its workers)
    am.call(lambda: am.reg.container_gone(("worker", 0), "Container killed. Exit code: 137"))
    deadline = time.monotonic() + 10
    while other.num_nodes_waiting() == 0:
        assert time.monotonic() < deadline, "the survivor never heard of the lost node"
        time.sleep(0.2)
    # ... and joins again; the replacement of worker 0 registers (it is told it does not write) and joins; the
    # new round has the survivor as rank 0: the writer role moves to its container, and the round waits for it
    am.call(lambda: am.reg.replace(("worker", 0)))
    client = RegistryClient(f"127.0.0.1:{am.port}", SECRET)
    registered = client.call("POST", protocol.REGISTER, {"type": "worker", "index": 0, "attempt": 1, "host": "host-0",
                                                         "port": 4010, "container_id": "c2"})
    assert registered["writer"] is False
    replacement = _handler(am, ("worker", 0), "c2", monkeypatch)
    ident = {"type": "worker", "index": 1, "attempt": 1, "container_id": "c1"}
    with ThreadPoolExecutor(2) as pool:
        rounds = [pool.submit(h.next_rendezvous) for h in (other, replacement)]
        for _ in range(20):  # held heartbeats (5 s each), answered at once when the role moves
            answer = client.call("POST", protocol.HEARTBEAT, {**ident, "wait": 5.0})
            if answer.get("writer") == "take":
                break
        assert answer == {"action": "run", "writer": "take", "round": 2}  # the handover it answers: round 2's
        time.sleep(1.0)
        assert not any(r.done() for r in rounds)  # nobody trains before the new writer took the role
        # an ordinary heartbeat, or one that answers another handover, ends nothing
        assert client.call("POST", protocol.HEARTBEAT, {**ident, "took_writer": 1})["writer"] == "take"
        assert client.call("POST", protocol.HEARTBEAT, {**ident, "took_writer": 2}) == {"action": "run"}
        again, new = (r.result(30) for r in rounds)
    assert (again.rank, new.rank, again.world_size) == (0, 1, 2)
    assert again.bootstrap_store_info.master_addr == "host-1" and other.num_nodes_waiting() == 0
    moved = [e for e in am.events if e[0] == ev.WRITER_MOVED]
    assert [e[1]["line"] for e in moved] == ["WRITER_MOVED: from worker:0 (container c0) to worker:1 (container c1), "
                                             "round 2"]
    assert am.reg.rendezvous is not None and am.reg.rendezvous.round is not None
    assert am.reg.rendezvous.round.number == 2
    with pytest.raises(LookupError):  # the old round's space is not the new round's
        again.store.wait(["torchelastic/role_info/0"], datetime.timedelta(seconds=0.3))
    for handler in (other, replacement, chief):
        assert handler.shutdown()


def test_a_closed_rendezvous_and_an_older_attempt_are_refused(am, monkeypatch):
    old = _handler(am, ("worker", 1), "c1", monkeypatch, attempt=0)
    with pytest.raises(RendezvousClosedError):
        old.next_rendezvous()
    assert old.is_closed()
    closing = _handler(am, ("worker", 0), "c0", monkeypatch)
    closing.set_closed()
    with pytest.raises(RendezvousClosedError):
        _handler(am, ("worker", 1), "c1", monkeypatch).next_rendezvous()


def test_an_unsigned_rendezvous_request_is_refused(am):
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"http://127.0.0.1:{am.port}{protocol.RENDEZVOUS}", method="POST",
                                     data=json.dumps({"op": "close", "attempt": 1}).encode())
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 401
    assert am.reg.rendezvous is not None and not am.reg.rendezvous.closed


def test_torchrun_finds_the_backend_through_the_plugin_directory(tmp_path: Path):
    """What the executor gives an elastic command: the `torchrun.handlers` entry point torch's registry loads
    (`_register_out_of_tree_handlers`), naming the handler in the package beside it (not importing torch here:
    the e2e test runs torchrun with it)."""
    env = torchrun_plugin_env({}, tmp_path)
    assert env[protocol.RENDEZVOUS_SECRET_ENV] == str(tmp_path / protocol.SECRET_FILE)
    code = ("import importlib.metadata as m, importlib.util as u;"
            "ep = m.entry_points(group='torchrun.handlers')['tony'];"
            "print(ep.value, u.find_spec(ep.module).origin)")
    found = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path[:0] = {env['PYTHONPATH']!r}.split(':');"
                            + code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    value, origin = found.stdout.split()
    assert value == "tony_airflow.core.executor.torchrun_rendezvous:handler_creator", found.stderr[-2000:]
    assert origin.startswith(str(tmp_path / ".tony-torchrun" / "tony_airflow")), origin
    assert tr.handler_creator() is tr.create_handler


@pytest.mark.parametrize("payload, resent", [({"op": "join", "node": "n"}, False),
                                             ({"op": "kv", "kv": "add", "keys": ["k"], "amount": 1}, False),
                                             ({"op": "heartbeat", "node": "n"}, True)])
def test_a_request_that_may_have_reached_the_am_is_sent_again_only_when_repeating_it_is_harmless(payload, resent):
    """A review: a join or an add whose answer was lost (the AM applied it) was sent again: a round broken
    once more, an exit barrier counting one agent twice. Those now fail the call; the rest are sent again."""
    import socket

    from torch.distributed.elastic.rendezvous import RendezvousConnectionError

    from tony_airflow.core.executor.torchrun_rendezvous import AMClient

    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:  # reads each request and hangs up without an answer
        listener.settimeout(5)
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            received.append(conn.recv(65536))
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    client = AMClient(f"127.0.0.1:{listener.getsockname()[1]}", SECRET, 1)
    with pytest.raises(RendezvousConnectionError):
        client.call(payload, away_s=1.0)
    listener.close()
    assert (len(received) > 1) is resent, len(received)


def test_the_handler_s_modules_load_in_an_image_s_older_python():
    """A review: the handler runs in the image's Python (torch >= 2.4 runs on 3.8+), and protocol.py needed
    3.11's StrEnum: on 3.10 torchrun said `rendezvous backend 'tony' is not registered`. The modules it loads
    parse as 3.8 and load without StrEnum."""
    import ast

    import tony_airflow
    from tony_airflow.core.executor import torchrun_rendezvous

    for module in (tony_airflow, protocol, torchrun_rendezvous):
        ast.parse(Path(module.__file__).read_text(), feature_version=(3, 8))
    code = ("import enum, runpy; del enum.StrEnum; "
            f"ns = runpy.run_path({protocol.__file__!r}); print(ns['TaskStatus'].RUNNING == 'RUNNING')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True", done.stderr[-2000:]


def test_a_spare_s_agent_waits_for_its_place_then_joins_as_that_worker_with_the_place_s_environment(
        am, monkeypatch, tmp_path):
    """Issue 54: the spare's torchrun starts before its place (core/executor/spare_command.py); its first round
    waits for the place's environment, which becomes the agent's own (its workers are started with it)."""
    _register(am, 0, "c0")
    _register(am, 1, "c1")  # the spare's container, registered as worker:1 once told its place
    place = tmp_path / "place.json"
    monkeypatch.setenv(protocol.SPARE_PLACE_ENV, str(place))
    monkeypatch.setenv("CLUSTER_SPEC", "{}")  # restored after the test, as the place's values are
    monkeypatch.setenv("DTF_OUTPUT_PATH", "")
    spare = _handler(am, ("worker", 0), "c1", monkeypatch)  # a spare's launch environment says worker 0
    monkeypatch.delenv(protocol.SPARE_PLACE_ENV)
    chief = _handler(am, ("worker", 0), "c0", monkeypatch)
    with ThreadPoolExecutor(2) as pool:
        placed, other = pool.submit(spare.next_rendezvous), pool.submit(chief.next_rendezvous)
        time.sleep(1.0)
        assert not placed.done() and not other.done()  # the spare has not joined: no round of 2
        rdzv = am.reg.rendezvous
        assert rdzv is not None and rdzv.waiting == [chief.name], rdzv.waiting
        monkeypatch.setenv(protocol.SPARE_PLACE_ENV, str(place))  # (its own process's: popped when it takes it)
        place.write_text(json.dumps({protocol.ENV_TASK_TYPE: "worker", protocol.ENV_TASK_INDEX: "1",
                                     "CLUSTER_SPEC": '{"worker": ["host-0:1", "host-1:2"]}',
                                     "DTF_OUTPUT_PATH": "/work/tony-output"}))
        info, first = placed.result(20), other.result(20)
    assert (first.rank, info.rank, info.world_size) == (0, 1, 2)
    assert spare.task == "worker:1" and spare.name.startswith("worker:1@c1#")
    assert os.environ["CLUSTER_SPEC"] == '{"worker": ["host-0:1", "host-1:2"]}'  # what its workers will get
    assert os.environ["DTF_OUTPUT_PATH"] == "/work/tony-output" and os.environ[protocol.ENV_TASK_INDEX] == "1"
    assert protocol.SPARE_PLACE_ENV not in os.environ and not place.exists()
    for handler in (spare, chief):
        assert handler.shutdown()


def test_a_spare_s_agent_stopped_before_its_place_says_nothing_to_the_am(monkeypatch, tmp_path):
    class NoAM:
        def call(self, payload, away_s=0):
            raise AssertionError(f"the AM was called: {payload}")

    monkeypatch.setenv(protocol.ENV_TASK_TYPE, "worker")
    monkeypatch.setenv(protocol.ENV_TASK_INDEX, "0")
    monkeypatch.setenv(protocol.SPARE_PLACE_ENV, str(tmp_path / "never.json"))
    params = RendezvousParameters(backend="tony", endpoint="", run_id="app_1-1", min_nodes=2, max_nodes=2)
    handler = tr.TonyRendezvousHandler(params, NoAM())  # type: ignore[arg-type]
    assert handler.shutdown() is True
