"""torchrun's rendezvous through the AM (issue 51): a `RendezvousHandler` registered as backend `tony`.

Runs inside the torchrun agent of an elastic job's container (the executor makes it discoverable: an entry
point of the group `torchrun.handlers`, core/executor/torchrun_plugin.py). Membership, rounds, ranks and the agents' key-value
space are the AM's (core/am/rendezvous.py), reached over the signed registry protocol: losing any one
container, rank 0's included, leaves the rendezvous to the others, who re-form their group. The workers'
own TCPStore is a fresh one in each round's rank-0 container (`use_agent_store` False; the round names rank
0's address and a port it found free), never carried over a rank change.

A spare's agent (core/executor/spare_command.py) is started before the spare has a place: its first
`next_rendezvous` waits for the place's environment (a file its executor writes once the output is staged),
puts it into `os.environ`, where torch's agent takes its workers' environment from when it starts them, and
joins as that worker.

Liveness: a thread heartbeats the AM every second; its answers say how many nodes wait for a new round,
which `num_nodes_waiting` hands to the agent (it restarts its workers when above 0, without spending a
restart). An AM that does not answer changes nothing: the workers train on.
"""

from __future__ import annotations

import base64
import datetime
import http.client
import json
import logging
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from torch.distributed import Store
from torch.distributed.elastic.rendezvous import (
    RendezvousClosedError,
    RendezvousConnectionError,
    RendezvousHandler,
    RendezvousInfo,
    RendezvousParameters,
    RendezvousStoreInfo,
    RendezvousTimeoutError,
)

from tony_airflow.core import protocol

log = logging.getLogger("tony.torchrun")
HEARTBEAT_S = 1.0
NEXT_WAIT_S = 5.0      # one long poll for the round
CALL_TIMEOUT_S = 30.0
ROUND_LINE = "tony rendezvous: round"
AM_AWAY_S = 60.0       # how long a call tries an AM that does not answer before giving up
PLACE_POLL_S = 0.05    # a spare's agent looks this often for its place's environment


class Refused(Exception):
    """The AM's 409: `closed` when the rendezvous is over (another attempt, closed), else the node must
    join again under a new name (it was dropped)."""

    def __init__(self, reason: str, closed: bool) -> None:
        super().__init__(reason)
        self.closed = closed


class AMClient:
    """Signed POSTs of rendezvous requests to the AM (core/protocol.py's signing)."""

    def __init__(self, address: str, secret: str, attempt: int) -> None:
        self.address, self.secret, self.attempt = address, secret, attempt

    def call(self, payload: dict[str, Any], away_s: float = AM_AWAY_S) -> dict[str, Any]:
        body = json.dumps({**payload, "attempt": self.attempt}).encode()
        host, port = self.address.rsplit(":", 1)
        deadline, pause = time.monotonic() + away_s, 0.2
        while True:
            headers = {**protocol.sign(self.secret, "POST", protocol.RENDEZVOUS, body),
                       "Content-Type": "application/json"}
            conn = http.client.HTTPConnection(host, int(port),
                                              timeout=CALL_TIMEOUT_S + float(payload.get("wait", 0)))
            sent = False
            try:
                conn.connect()
                sent = True
                conn.request("POST", protocol.RENDEZVOUS, body=body, headers=headers)
                resp = conn.getresponse()
                status, text = resp.status, resp.read().decode(errors="replace")
            except (OSError, http.client.HTTPException) as exc:
                if sent and not repeatable(payload):  # the AM may have applied it: a second one would count twice
                    raise RendezvousConnectionError(f"the AM at {self.address} did not answer: {exc}") from exc
                if time.monotonic() + pause > deadline:
                    raise RendezvousConnectionError(f"the AM at {self.address} did not answer: {exc}") from exc
                time.sleep(pause)
                pause = min(pause * 2, 5.0)
                continue
            finally:
                conn.close()
            answer = json.loads(text) if text else {}
            if status == 409:
                raise Refused(str(answer.get("error", "")), bool(answer.get("closed")))
            if status >= 400:
                raise RendezvousConnectionError(f"the AM refused a rendezvous request: HTTP {status}: {text[:300]}")
            return answer


def repeatable(payload: dict[str, Any]) -> bool:
    """Whether a request may be sent again after it may have reached the AM (a read that timed out): not a
    join (after a round formed, a second join breaks it: every agent restarts once more) nor a counter's add
    (the exit barrier would count one agent twice and wait out its timeout). A review found both resent."""
    return not (payload.get("op") == "join" or (payload.get("op") == "kv" and payload.get("kv") == "add"))


class RoundStore(Store):
    """torch's Store over the AM's key-value space of one round: what torchrun's agent uses it for (its
    workers' ranks, the exit barrier). Values are bytes; a key not set yet is waited for up to the store's
    timeout."""

    def __init__(self, client: AMClient, number: int, timeout: datetime.timedelta | None = None) -> None:
        super().__init__()  # the pybind trampoline
        self.client, self.number = client, number
        if timeout is not None:
            self.set_timeout(timeout)

    def _kv(self, kv: str, keys: list[str], values: list[bytes] = [], wait: float = 0.0,  # noqa: B006
            amount: int = 0) -> dict[str, Any]:
        return self.client.call({"op": "kv", "round": self.number, "kv": kv, "keys": keys, "amount": amount,
                                 "values": [base64.b64encode(v).decode() for v in values], "wait": wait})

    def _wait_for(self, keys: list[str], timeout: datetime.timedelta | None = None) -> list[bytes]:
        chosen: datetime.timedelta = timeout or getattr(self, "timeout", None) or datetime.timedelta(minutes=5)
        limit = chosen.total_seconds()
        deadline = time.monotonic() + (limit if limit > 0 else 3600.0)
        while True:
            left = deadline - time.monotonic()
            answer = self._kv("get", keys, wait=max(0.0, min(NEXT_WAIT_S, left)))
            if "values" in answer:
                return [base64.b64decode(v) for v in answer["values"]]
            if left <= 0:
                raise LookupError(f"keys {answer.get('missing')} not set within {limit:.0f}s (round {self.number})")

    def set(self, key: str, value: bytes | str) -> None:
        self._kv("set", [key], [_bytes(value)])

    def get(self, key: str) -> bytes:
        return self._wait_for([key])[0]

    def multi_get(self, keys: list[str]) -> list[bytes]:
        return self._wait_for(list(keys))

    def multi_set(self, keys: list[str], values: list[bytes | str]) -> None:
        self._kv("set", list(keys), [_bytes(v) for v in values])

    def add(self, key: str, amount: int) -> int:
        return int(self._kv("add", [key], amount=amount)["value"])

    def compare_set(self, key: str, expected: bytes | str, desired: bytes | str) -> bytes:
        return base64.b64decode(self._kv("compare_set", [key], [_bytes(expected), _bytes(desired)])["value"])

    def wait(self, keys: list[str], timeout: datetime.timedelta | None = None) -> None:
        self._wait_for(list(keys), timeout)

    def check(self, keys: list[str]) -> bool:
        return bool(self._kv("check", list(keys))["ok"])

    def delete_key(self, key: str) -> bool:
        return bool(self._kv("delete", [key])["ok"])

    def num_keys(self) -> int:
        return int(self._kv("count", [])["value"])


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


class TonyRendezvousHandler(RendezvousHandler):
    """One agent's side of the AM's rendezvous (core/am/rendezvous.py)."""

    def __init__(self, params: RendezvousParameters, client: AMClient | None = None) -> None:
        env = os.environ
        self.params = params
        self.place_file = env.get(protocol.SPARE_PLACE_ENV, "")  # a spare's agent, started before its place
        self.task = f"{env[protocol.ENV_TASK_TYPE]}:{env[protocol.ENV_TASK_INDEX]}"
        self.container = env.get("CONTAINER_ID", "")
        self.client = client or AMClient(env[protocol.ENV_AM_ADDRESS],
                                         Path(env[protocol.RENDEZVOUS_SECRET_ENV]).read_text().strip(),
                                         int(env[protocol.ENV_ATTEMPT]))
        self.addr = params.local_addr or socket.getfqdn()
        self.join_timeout = float(params.get("join_timeout", 600))
        self.generation = 0
        self.number = 0          # the round this agent's workers run in (0: none yet)
        self.waiting = 0         # the AM's last word: nodes waiting for a new round
        self.closed = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self.joined = False

    @property
    def name(self) -> str:
        return f"{self.task}@{self.container}#{os.getpid()}.{self.generation}"

    def get_backend(self) -> str:
        return protocol.RENDEZVOUS_BACKEND

    @property
    def use_agent_store(self) -> bool:
        return False  # the workers' store: a fresh TCPStore in each round's rank 0

    def take_place(self) -> None:
        """A spare's agent: wait (as long as the spare waits) for the place's environment, then take it as this
        process's own: its task's name in the rendezvous, and its workers' environment (torch's agent copies
        `os.environ` when it starts them)."""
        path = Path(self.place_file)
        while not path.exists():
            time.sleep(PLACE_POLL_S)
        env = json.loads(path.read_text())
        path.unlink(missing_ok=True)
        os.environ.update(env)
        os.environ.pop(protocol.SPARE_PLACE_ENV, None)
        self.place_file = ""
        self.task = f"{env[protocol.ENV_TASK_TYPE]}:{env[protocol.ENV_TASK_INDEX]}"
        print(f"tony rendezvous: placed as {self.task} at "
              f"{datetime.datetime.now(datetime.UTC).isoformat(timespec='milliseconds')}", file=sys.stderr, flush=True)

    def next_rendezvous(self) -> RendezvousInfo:
        if self.place_file:
            self.take_place()
        with self._lock:
            self.number, self.waiting = 0, 0
        deadline = time.monotonic() + self.join_timeout
        while True:
            try:
                self.joined = True  # from here on the AM may know this node: it is told when the agent leaves
                self.client.call({"op": "join", "node": self.name, "task": self.task, "container": self.container,
                                  "addr": self.addr, "port": free_port()})
                answer = {"state": "waiting"}
                while answer.get("state") != "ready":
                    if time.monotonic() > deadline:
                        raise RendezvousTimeoutError(f"no round formed within {self.join_timeout:.0f}s")
                    answer = self.client.call({"op": "next", "node": self.name, "wait": NEXT_WAIT_S})
                break
            except Refused as exc:
                if exc.closed:
                    self.closed = True
                    raise RendezvousClosedError(str(exc)) from None
                self.generation += 1  # dropped while it waited: joins again as a new node
                log.warning("rendezvous: %s; joining again as %s", exc, self.name)
        with self._lock:
            self.number, self.waiting = int(answer["round"]), 0
        if self._beat is None:
            self._beat = threading.Thread(target=self._heartbeats, name="tony-rdzv-heartbeat", daemon=True)
            self._beat.start()
        # in the task's output (torchrun's own logging may be quiet): which round, which rank, which agent
        formed = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
        print(f"{ROUND_LINE} {answer['round']}: rank {answer['rank']} of {answer['world_size']}, rank 0 at "
              f"{answer['master_addr']}:{answer['master_port']}, formed at {formed} (node {self.name})",
              file=sys.stderr, flush=True)
        return RendezvousInfo(RoundStore(self.client, self.number), int(answer["rank"]), int(answer["world_size"]),
                              RendezvousStoreInfo(str(answer["master_addr"]), int(answer["master_port"])))

    def _heartbeats(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            with self._lock:
                number = self.number
            if not number:
                continue  # in a rendezvous: its own polls are its liveness
            try:
                answer = self.client.call({"op": "heartbeat", "node": self.name, "round": number}, away_s=0)
            except Refused as exc:
                answer = {"waiting": 0 if exc.closed else 1, "closed": exc.closed}
            except RendezvousConnectionError:
                continue  # the AM away: nothing changes, the workers train on
            with self._lock:
                if self.number == number:  # not an answer about an older round
                    self.waiting = int(answer.get("waiting", 0))
                    self.closed = bool(answer.get("closed"))

    def is_closed(self) -> bool:
        return self.closed

    def set_closed(self) -> None:
        self.closed = True
        try:
            self.client.call({"op": "close"}, away_s=5.0)
        except (Refused, RendezvousConnectionError) as exc:
            log.warning("could not close the rendezvous: %s", exc)

    def num_nodes_waiting(self) -> int:
        with self._lock:
            return self.waiting

    def get_run_id(self) -> str:
        return self.params.run_id

    def shutdown(self) -> bool:
        self._stop.set()
        if not self.joined:  # a spare's agent stopped before its place: the AM never heard of it
            return True
        try:
            self.client.call({"op": "leave", "node": self.name}, away_s=5.0)
        except (Refused, RendezvousConnectionError):
            pass
        return True


def create_handler(params: RendezvousParameters) -> RendezvousHandler:
    return TonyRendezvousHandler(params)


def handler_creator() -> Any:
    """The `torchrun.handlers` entry point: torch calls it and registers what it returns as the creator."""
    return create_handler

