"""Spares of an elastic job (`--elastic MIN:MAX --spares N`): worker containers that wait to take a lost worker's place.

A lost worker's replacement from YARN is stepping again 20-40 s after the kill (bench.torch_elastic): most of it
YARN allocating, the container starting, the executor starting. A spare has all of that behind it: it is asked
for at the attempt's start like a worker (the same resources, image and environment), its executor registers as
a spare (POST /v1/spare) and waits. When the AM replaces a lost worker (core/am/elastic.py) and a spare waits,
the spare is told the lost task's index, registers as that worker into the running attempt and runs its command;
the AM asks YARN for a new spare. A spare lost while it waits costs no attempt: it is asked for again, at most
`bound` times in all (the job's free-retry bound), then the job goes on with fewer. Pure: the AM and its registry
feed it what they see; table- and model-tested in tests/unit/core/am.
"""

from __future__ import annotations

from dataclasses import dataclass

WAIT, TAKE, STOP = "wait", "take", "stop"  # what a waiting spare's executor is told
FRESH_S = 30.0  # a spare not heard from for longer is not given a place (its long poll is at most 20 s)
# The new spare after a take is asked for this much later: its start (YARN's launch, its executor, its torchrun
# importing torch) took CPU from the group's processes starting again on the same cores (#54, measured: the new
# spare came up during those seconds in every run); by then the training steps again (the aim: 10 s).
AFTER_TAKE_S = 10.0


@dataclass
class Spare:
    id: str                           # "spare-3": its launch environment names it, its executor says it back
    asked_at: float
    container_id: str = ""            # skein's id (what the AM kills and polls)
    host: str = ""
    yarn_container_id: str = ""
    waiting_since: float | None = None  # its executor registered as a spare
    seen_at: float | None = None        # its executor's latest poll (a spare on a dead host stops polling)
    takes: tuple[str, int] | None = None  # the lost task whose place it was told to take
    took_at: float | None = None          # when


def waited_line(spare: Spare, now: float) -> str:
    """The history's and the progress line's word for a spare that is up and waiting."""
    return (f"{spare.id} waits on {spare.host or '?'} (container {spare.yarn_container_id or '?'}), "
            f"{now - spare.asked_at:.1f}s after it was asked for")


class Spares:
    """One attempt's spares: `wanted` kept waiting (or coming), a lost one asked for again up to `bound` times."""

    def __init__(self, wanted: int, bound: int) -> None:
        self.wanted = wanted
        self.bound = bound
        self.by_id: dict[str, Spare] = {}
        self.asked = 0  # in all, this attempt
        self.lost = 0   # lost while they waited (or came)
        self.took = 0   # places taken

    # ------------------------------------------------------------ the AM's side
    def to_ask(self, now: float | None = None) -> int:
        """How many new spares to ask YARN for now: the missing ones, while the losses stay within the bound; a
        spare that took a place counts AFTER_TAKE_S longer (from `now`)."""
        if self.lost > self.bound:
            return 0
        coming_or_waiting = sum(s.takes is None for s in self.by_id.values())
        just_took = sum(s.takes is not None and s.took_at is not None and now is not None
                        and now - s.took_at < AFTER_TAKE_S for s in self.by_id.values())
        return max(0, self.wanted - coming_or_waiting - just_took)

    def ask(self, now: float) -> str:
        """A new spare is asked for: its id (for its launch environment)."""
        self.asked += 1
        spare = Spare(f"spare-{self.asked}", now)
        self.by_id[spare.id] = spare
        return spare.id

    def launched(self, spare_id: str, container_id: str) -> None:
        """skein named its container."""
        self.by_id[spare_id].container_id = container_id

    def containers(self) -> dict[str, str]:
        """skein container id -> spare id, of the spares that have not taken a place (theirs is the task's then)."""
        return {s.container_id: s.id for s in self.by_id.values() if s.container_id and s.takes is None}

    def take(self, key: tuple[str, int], now: float | None = None, fresh_s: float = FRESH_S) -> Spare | None:
        """A lost worker's place: the spare waiting longest is told to take it (None: none fit). Never one not
        heard from for `fresh_s`: a host that died took its spares with it, and YARN says so (the worker's
        container lost, -100) only once the NodeManager expired, minutes later; by then its spares are silent."""
        ready = [s for s in self.by_id.values() if s.waiting_since is not None and s.takes is None
                 and (now is None or (s.seen_at is not None and now - s.seen_at <= fresh_s))]
        if not ready:
            return None
        spare = min(ready, key=lambda s: (s.waiting_since or 0.0, s.asked_at))
        spare.takes, spare.took_at = key, now
        self.took += 1
        return spare

    def not_started(self, spare_id: str) -> None:
        """Asking YARN for it failed: forgotten (asked again on a later turn; spares never fail a job)."""
        self.by_id.pop(spare_id, None)

    def gone(self, container_id: str) -> Spare | None:
        """A container ended: the spare it held, if it was one still waiting (or coming), now forgotten and
        counted as lost. One that took a place is its task's now (None)."""
        for spare in self.by_id.values():
            if spare.container_id == container_id and spare.takes is None:
                del self.by_id[spare.id]
                self.lost += 1
                return spare
        return None

    # ------------------------------------------------------- the executor's side
    def waits(self, spare_id: str, host: str, yarn_container_id: str, now: float) -> bool:
        """The spare's executor says it waits: True the first time (a known spare), False again or unknown."""
        spare = self.by_id.get(spare_id)
        if spare is None:
            return False
        spare.seen_at = now
        if spare.waiting_since is not None:
            return False
        spare.waiting_since, spare.host, spare.yarn_container_id = now, host, yarn_container_id
        return True

    def answer(self, spare_id: str) -> tuple[str, int | None]:
        """What the spare's executor is told: (TAKE, the index of the worker it becomes), (WAIT, None), or
        (STOP, None) for a spare the AM does not hold (lost, or of another attempt)."""
        spare = self.by_id.get(spare_id)
        if spare is None:
            return STOP, None
        if spare.takes is not None:
            return TAKE, spare.takes[1]
        return WAIT, None
