"""The rendezvous of an elastic PyTorch job's torchrun agents, kept by the AM (issue 51).

torchrun's c10d rendezvous lives in one training container: losing that container ended every agent's
rendezvous and restarted the whole attempt. Here the AM, which YARN restarts and which already keeps the
signed registry, holds membership, rounds, ranks and a small key-value space per round; each agent talks to it
through `core/executor/torchrun_rendezvous.py` (a `RendezvousHandler` registered with torchrun as `tony`).
No torch here: the keys and values are bytes.

A node is one torchrun agent: its task, its YARN container and its pid. A round forms from the nodes waiting
when MAX of them wait, or when at least MIN wait, every member of the last round still alive waits too, and
the wait list has not changed for `last_call_s`. Ranks: the node in the container that holds the output's
writer role first (global rank 0 is the one whose saves are committed, core/executor/output_commit.py;
at first the chief's container), then the last round's members in their order, then newcomers by arrival.
The role moves only when its container is gone (no live node of it): the round's rank 0, the first
survivor, takes it, and never gives it back while it lives. Its executor must then claim the output and
take what HDFS holds before anyone trains (`handover`): every member's `next()` waits until it says it
took the role (`took`), and `handover_overdue` says when it has not within `handover_s`.
Rank 0's node names the address and port its worker's TCPStore
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
HANDOVER_S = 300.0  # a new writer claims and pulls the last checkpoint (size-bound: a few GB over WebHDFS)


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


@dataclass(frozen=True)
class WriterMove:
    """The output's writer role went from a gone container to the rank 0 of round `number`."""
    from_task: str
    from_container: str
    to_task: str
    to_container: str
    number: int

    def line(self) -> str:
        was = f"{self.from_task} (container {self.from_container})" if self.from_container else "nobody"
        return (f"WRITER_MOVED: from {was} to {self.to_task} (container {self.to_container}), "
                f"round {self.number}")


class RendezvousError(ValueError):
    """A request this rendezvous refuses (another run, a closed rendezvous): its text is the answer."""


class Rendezvous:
    """One training attempt's rendezvous (`run_id`: application and attempt, torchrun's --rdzv-id)."""

    def __init__(self, run_id: str, min_nodes: int, max_nodes: int, chief: str = "",
                 last_call_s: float = LAST_CALL_S, silent_s: float = SILENT_S, first_round: int = 1,
                 handover: bool = True, handover_s: float = HANDOVER_S) -> None:
        """`handover`: a new writer must say it took the role before its round runs (the job has an HDFS
        output to claim); without one the role moves with rank 0 at once."""
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
        self.handover, self.handover_s = handover, handover_s
        self.writer = ""                    # the container that holds the output's writer role ("": none yet)
        self.writer_task = ""
        self.taking = False                 # the role moved: its new holder has not said it took it
        self.taking_since = 0.0
        self.taking_round = 0               # the round the role moved in: the tag its new holder's word carries
        self.moves: list[WriterMove] = []   # moves the AM has not said yet (`drain_moves`)
        self.writer_joined = False          # a node of the writer's container joined (its agent runs)
        self._gone: frozenset[str] = frozenset()  # the containers YARN says are gone (the last tick's)

    # ---------------------------------------------------------------- the writer role
    def writer_of(self, task: str, container: str) -> bool:
        """At a task's registration: whether its container holds the writer role (it claims the output at its
        start). The chief's first container takes it while nobody holds it; a chief's replacement (or a spare
        in its place) does not while the role is elsewhere."""
        if not self.writer and task == self.chief and container:
            self.writer, self.writer_task = container, task
        return bool(container) and container == self.writer

    def released(self, containers: set[str] | frozenset[str]) -> None:
        """The gang gave these containers back before its spec (wait-die, core/am/gang.py): when the writer's is
        one of them and no round formed yet, nobody holds the role (the chief's next container takes it at its
        registration, and claims). After a round the role moves with the next one, as for any loss."""
        if self.round is None and self.writer and self.writer in containers:
            self.writer = self.writer_task = ""
            self.writer_joined = self.taking = False

    def took(self, container: str, number: int) -> bool:
        """The writer's executor claimed the output and took what HDFS held for the handover of round
        `number` (the tag the AM's 'take' carried): its round may run. True when this ended a handover. A word
        of another handover is not this one's (the role may come back to a container that held it before)."""
        if self.taking and container and container == self.writer and number == self.taking_round:
            self.taking = False
            return True
        return False

    def must_take(self, container: str) -> bool:
        """Whether this container's executor must take the writer role now (the AM's heartbeat answer)."""
        return self.taking and bool(container) and container == self.writer

    def handover_overdue(self, now: float) -> str:
        """'' or the one line that fails the attempt: the live new writer did not take the role within
        `handover_s` (a writer gone meanwhile is no one's fault: the next round moves the role again)."""
        if not self.taking or now - self.taking_since <= self.handover_s or not self._writer_alive():
            return ""
        return (f"{self.writer_task} (container {self.writer}) did not take the output's writer role within "
                f"{self.handover_s:.0f}s of becoming rank 0: the next attempt resumes from the output in HDFS")

    def drain_moves(self) -> list[WriterMove]:
        moves, self.moves = self.moves, []
        return moves

    def _writer_alive(self) -> bool:
        return any(node.container == self.writer for node in self.nodes.values())

    # ---------------------------------------------------------------- agents' calls
    def join(self, name: str, task: str, container: str, addr: str, port: int, now: float) -> None:
        """A node asks for the next round (its first, or again after its workers stopped)."""
        self._check_open(name)
        node = self.nodes.get(name) or Node(name, task, container)
        node.addr, node.port, node.seen = addr, port, now
        self.writer_joined = self.writer_joined or (bool(container) and container == self.writer)
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
            if self.taking and not self.broken:  # its rank 0 has not taken the role yet: nobody trains (nor saves)
                return {"state": "waiting", "handover": self.writer_task}
            if self.taking:  # a member gone before the handover ended (the new writer's too, maybe): this round
                # never runs, its members wait for the next one (which moves the role again if it must)
                self.waiting.append(name)
                self.waiting_since = now
                return {"state": "waiting"}
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
        self._gone = frozenset(gone_containers)
        for name, node in list(self.nodes.items()):
            if node.container in gone_containers or now - node.seen > self.silent_s:
                self._forget(name)
        if self.closed or not self._due(now):
            return False
        previous = self.round.members if self.round is not None else []
        order = sorted(self.waiting, key=lambda n: (not self.writer or self.nodes[n].container != self.writer,
                                                    previous.index(n) if n in previous else len(previous),
                                                    self.waiting.index(n)))
        members = order[:self.max_nodes]
        first = self.nodes[members[0]]
        self.round = Round(self.next_number, members, (first.addr, first.port))
        if first.container != self.writer:  # its container is gone (_due waits for a live one): the role moves
            self.moves.append(WriterMove(self.writer_task, self.writer, first.task, first.container, self.next_number))
            self.writer, self.writer_task = first.container, first.task
            self.taking, self.taking_since, self.taking_round = self.handover, now, self.next_number
            self.writer_joined = True
        self.next_number += 1
        self.waiting = [n for n in self.waiting if n not in members]
        self.waiting_since = now
        self.broken = False
        return True

    def _due(self, now: float) -> bool:
        if len(self.waiting) < max(1, self.min_nodes):
            return False
        if any(node.container == self.writer and name not in self.waiting for name, node in self.nodes.items()):
            return False  # the writer's container lives: its node joins again (or is dropped when silent)
        if self.writer and not self.writer_joined and self.writer not in self._gone:
            return False  # the writer registered and its agent is starting (staging its input): not gone
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
