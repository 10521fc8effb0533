"""The rendezvous of an elastic PyTorch job's torchrun agents, kept by the AM (issue 51).

torchrun's c10d rendezvous lives in one training container: losing that container ended every agent's
rendezvous and restarted the whole attempt. Here the AM, which YARN restarts and which already keeps the
signed registry, holds membership, rounds, ranks and a small key-value space per round; each agent talks to it
through `core/executor/torchrun_rendezvous.py` (a `RendezvousHandler` registered with torchrun as `tony`).
No torch here: the keys and values are bytes.

A node is one torchrun agent: its task, its YARN container and its pid. A round forms from the nodes waiting
when MAX of them wait, or when at least MIN wait, every member of the last round still alive waits too, and
the wait list has not changed for `last_call_s`. Ranks: the chief's task first (global rank 0 is in the
container whose output is committed, core/executor/output_commit.py), then the last round's members in
their order, then newcomers by arrival. Rank 0's node names the address and port its worker's TCPStore
listens on (a fresh store every round: the torch store-sharing path kept a dead rank 0's address,
../shared/notes/elastic-rendezvous.md M1). A node is gone when its container ended or was given back (the
AM's word, from YARN) or when it was silent for `silent_s`; a member gone breaks the round: the others see
a node waiting and restart into a new one. Round numbers only grow, also across AMs (`first_round`). Pure:
`now` and the gone containers are passed in.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

LAST_CALL_S = 30.0  # torchrun's c10d default: a replacement on its way (about 10 s) joins the same round
SILENT_S = 15.0  # an agent heartbeats every second; its container's end usually tells first


@dataclass
class Node:
    name: str          # task id @ container id # pid: unique per agent
    task: str          # the task id (worker:1)
    container: str     # YARN's container id
    addr: str = ""     # where its rank-0 worker would listen
    port: int = 0
    seen: float = 0.0  # last word from it


@dataclass
class Round:
    number: int
    members: list[str]                          # node names by rank
    master: tuple[str, int]                     # rank 0's addr and port
    kv: dict[str, bytes] = field(default_factory=dict)


class RendezvousError(ValueError):
    """A request this rendezvous refuses (another run, a closed rendezvous): its text is the answer."""


class Rendezvous:
    """One training attempt's rendezvous (`run_id`: application and attempt, torchrun's --rdzv-id)."""

    def __init__(self, run_id: str, min_nodes: int, max_nodes: int, chief: str = "",
                 last_call_s: float = LAST_CALL_S, silent_s: float = SILENT_S, first_round: int = 1) -> None:
        self.run_id = run_id
        self.min_nodes, self.max_nodes = min_nodes, max_nodes
        self.chief = chief
        self.last_call_s, self.silent_s = last_call_s, silent_s
        self.next_number = first_round
        self.closed = False
        self.nodes: dict[str, Node] = {}
        self.waiting: list[str] = []        # node names in arrival order
        self.waiting_since = 0.0            # the wait list's last change
        self.round: Round | None = None
        self.broken = False                 # a member of the current round is gone
        self.gone: set[str] = set()         # node names never admitted again

    # ---------------------------------------------------------------- agents' calls
    def join(self, name: str, task: str, container: str, addr: str, port: int, now: float) -> None:
        """A node asks for the next round (its first, or again after its workers stopped)."""
        self._check_open(name)
        node = self.nodes.get(name) or Node(name, task, container)
        node.addr, node.port, node.seen = addr, port, now
        self.nodes[name] = node
        if self.round is not None and name in self.round.members:
            self.broken = True  # it left the round: the others restart into the next one
        if name not in self.waiting:
            self.waiting.append(name)
            self.waiting_since = now

    def next(self, name: str, now: float) -> dict:
        """Where a joined node stands: `{"state": "ready", round, rank, world_size, master_addr, master_port}`
        once a round with it formed, else `{"state": "waiting"}`."""
        self._check_open(name)
        node = self.nodes.get(name)
        if node is None:
            raise RendezvousError(f"node {name} has not joined")
        node.seen = now
        if self.round is not None and name in self.round.members and name not in self.waiting:
            return {"state": "ready", "round": self.round.number, "rank": self.round.members.index(name),
                    "world_size": len(self.round.members), "master_addr": self.round.master[0],
                    "master_port": self.round.master[1]}
        if name not in self.waiting:  # forgotten (silent too long) while it waited: it waits again
            self.waiting.append(name)
            self.waiting_since = now
        return {"state": "waiting"}

    def heartbeat(self, name: str, number: int, now: float) -> dict:
        """A member's liveness; the answer says how many nodes wait for a new round (torchrun's agents
        restart their workers when it is above 0: a node to admit, or a member gone)."""
        node = self.nodes.get(name)
        if node is not None and name not in self.gone:
            node.seen = now
        return {"waiting": self.num_nodes_waiting(name, number), "closed": self.closed}

    def num_nodes_waiting(self, name: str, number: int) -> int:
        current = self.round
        if current is None or current.number != number or name not in current.members or name in self.gone:
            return 1  # not a member of the current round (an older round, forgotten, another AM): restart
        if self.broken:
            return max(1, len(self.waiting))
        return len(self.waiting) if len(current.members) < self.max_nodes else 0

    def leave(self, name: str) -> None:
        """An agent that ends (its workers finished, or it gives up)."""
        self._forget(name)

    def close(self) -> None:
        self.closed = True

    # ---------------------------------------------------------------- the AM's clock
    def tick(self, now: float, gone_containers: set[str] | frozenset[str] = frozenset()) -> bool:
        """Drop the nodes whose container is gone or that were silent too long, then form a round if one is
        due. True when a round formed."""
        for name, node in list(self.nodes.items()):
            if node.container in gone_containers or now - node.seen > self.silent_s:
                self._forget(name)
        if self.closed or not self._due(now):
            return False
        previous = self.round.members if self.round is not None else []
        order = sorted(self.waiting, key=lambda n: (self.nodes[n].task != self.chief,
                                                    previous.index(n) if n in previous else len(previous),
                                                    self.waiting.index(n)))
        members = order[:self.max_nodes]
        first = self.nodes[members[0]]
        self.round = Round(self.next_number, members, (first.addr, first.port))
        self.next_number += 1
        self.waiting = [n for n in self.waiting if n not in members]
        self.waiting_since = now
        self.broken = False
        return True

    def _due(self, now: float) -> bool:
        if len(self.waiting) < max(1, self.min_nodes):
            return False
        if len(self.waiting) >= self.max_nodes:
            return True
        alive_members = [n for n in (self.round.members if self.round else []) if n in self.nodes]
        if any(n not in self.waiting for n in alive_members):
            return False  # a live member will join again (it restarts its workers): wait for it
        return now - self.waiting_since >= self.last_call_s

    def _forget(self, name: str) -> None:
        if name in self.nodes:
            del self.nodes[name]
        self.gone.add(name)
        if name in self.waiting:
            self.waiting.remove(name)
        if self.round is not None and name in self.round.members:
            self.broken = True

    def _check_open(self, name: str) -> None:
        if self.closed:
            raise RendezvousError("closed")
        if name in self.gone:
            raise RendezvousError(f"node {name} was dropped (silent for {self.silent_s:.0f}s or its container "
                                  f"ended); a new agent joins under a new name")

    # ---------------------------------------------------------------- the agents' store
    def _space(self, number: int) -> dict[str, bytes]:
        if self.round is None or self.round.number != number:
            raise RendezvousError(f"round {number} is not the current round")
        return self.round.kv

    def kv(self, number: int, op: str, keys: list[str], values: list[bytes], amount: int = 0) -> dict:
        """torch's Store operations on the round's space. `get`: the values, or `missing` when a key is not
        set yet (the agent asks again until its store's timeout)."""
        space = self._space(number)
        if op == "set":
            space.update(zip(keys, values, strict=True))
            return {}
        if op == "get":
            missing = [k for k in keys if k not in space]
            if missing:
                return {"missing": missing}
            return {"values": [_b64(space[k]) for k in keys]}
        if op == "add":
            total = int(space.get(keys[0], b"0")) + amount
            space[keys[0]] = str(total).encode()
            return {"value": total}
        if op == "compare_set":
            expected, desired = values
            current = space.get(keys[0])
            if (current is None and not expected) or current == expected:
                space[keys[0]] = desired
                return {"value": _b64(desired)}
            return {"value": _b64(current if current is not None else expected)}
        if op == "check":
            return {"ok": all(k in space for k in keys)}
        if op == "delete":
            return {"ok": space.pop(keys[0], None) is not None}
        if op == "count":
            return {"value": len(space)}
        raise RendezvousError(f"op: {op!r}; allowed: set, get, add, compare_set, check, delete, count")


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def unb64(value: str) -> bytes:
    return base64.b64decode(value.encode())
