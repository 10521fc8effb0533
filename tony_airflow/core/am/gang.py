"""Gangs that never deadlock on a plain YARN queue, and the one line that says why a gang waits.

YARN has no gang scheduling: two jobs that each hold part of their containers and wait for the rest can
wait for each other forever (a fair-ordered queue hands each a share). The rule here is the databases'
wait-die, over what the ResourceManager's REST answer shows of the cluster's gangs (tony-airflow's tag):

- a gang's age is its application's submission (RM `startedTime`, then its id): it never changes, so a
  gang that gives way is never starved: it only becomes older than everything submitted after it;
- the oldest gang still waiting for containers keeps what it holds and waits;
- a younger gang that holds part of its containers, has got none for `PATIENCE_S`, while an older gang
  that could use them waits for containers (the same queue, a partition and a size it holds: `could_use`;
  a gang nothing could serve is no reason to give way), releases everything it holds and withdraws its
  requests (no task has started: the cluster spec is published only when the whole gang registered); it
  asks again once no older gang waits and its back-off (random, growing with each release) is over.

Releases are not failed attempts: they cost no retry. A gang that holds nothing, or everything, or is
the oldest waiting, never releases, so on a FIFO queue (the oldest is served first) nothing changes.

Pure: the AM (core/am/master.py) reads the RM and feeds these functions (table-tested in tests/unit).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tony_airflow.yarn.scheduler_info import find_queue, scheduler_info

PATIENCE_S = 10.0               # no new container for this long, while an older gang waits: release
BACKOFF_BASE_S = 2.0            # the first back-off after a release is 1–2 s; it doubles per release...
BACKOFF_CAP_S = 30.0            # ... up to this
WATCH_S = 5.0                   # how often a waiting AM reads the ResourceManager


@dataclass(frozen=True)
class Ask:
    """One of a gang's pending requests: in which partition (node label, "" the default) and how big."""

    label: str = ""
    memory_mb: int = 0
    vcores: int = 0
    gpus: int = 0


@dataclass(frozen=True)
class Holding:
    """What a gang would give back (or, released, take again): its partitions and its resources in all."""

    labels: frozenset[str]
    memory_mb: int
    vcores: int
    gpus: int = 0


@dataclass(frozen=True)
class GangView:
    """What the rule reads of one application in the RM's answer."""

    app_id: str
    started_ms: int
    pending: int = 0  # containers it asks for and does not hold yet (its resourceRequests)
    queue: str = ""   # its leaf queue ("" : not known)
    asks: tuple[Ask, ...] = ()  # its pending requests, one per size and partition (() : not known)

    @property
    def age(self) -> tuple[int, int, str]:
        """Sorts oldest first: submission time, then the RM's application sequence number."""
        number = self.app_id.rsplit("_", 1)[-1]
        return self.started_ms, int(number) if number.isdigit() else 0, self.app_id

    @classmethod
    def from_rm(cls, app: Mapping[str, Any]) -> GangView:
        requests = [r for r in app.get("resourceRequests") or []
                    if r.get("resourceName", "*") == "*"]  # YARN repeats a request per rack/host: count "*"
        pending = sum(int(r.get("numContainers") or 0) for r in requests)
        asks = tuple(dict.fromkeys(_ask(r) for r in requests if int(r.get("numContainers") or 0) > 0))
        return cls(str(app.get("id", "")), int(app.get("startedTime") or 0), pending,
                   queue=str(app.get("queue") or ""), asks=asks)


def _ask(request: Mapping[str, Any]) -> Ask:
    """An RM ResourceRequestInfo: its partition and its container's size (memory, vCores, yarn.io/gpu)."""
    capability = request.get("capability") or {}
    infos = ((capability.get("resourceInformations") or {}).get("resourceInformation") or [])
    gpus = sum(int(i.get("value") or 0) for i in infos if i.get("name") == "yarn.io/gpu")
    label = request.get("nodeLabelExpression") or ""
    return Ask(label.strip(), int(capability.get("memory") or capability.get("memorySize") or 0),
               int(capability.get("vCores") or capability.get("virtualCores") or 0), gpus)


def could_use(older: GangView, me: GangView, holding: Holding | None) -> bool:
    """Whether what `me` gives back (`holding`; released: what it would take again) could serve `older`:
    the same queue, and a container `older` waits for in a partition `me` holds and no bigger than all it
    holds. Yielding to any older gang (issue 51) released a gang for one in another queue, or asking for a
    node label no node has, and kept it released until its allocation timeout: it FAILED. What the RM
    does not say (no queue, no requests; `holding` None) does not rule a gang out."""
    if older.queue and me.queue and older.queue != me.queue:
        return False
    if not older.asks or holding is None:
        return True
    return any(a.label in holding.labels and a.memory_mb <= holding.memory_mb and a.vcores <= holding.vcores
               and a.gpus <= holding.gpus for a in older.asks)


def older_waiting(me: GangView, gangs: Iterable[GangView], holding: Holding | None = None) -> GangView | None:
    """The oldest gang older than `me` that still waits for containers and could use what `me` holds, if any."""
    waiting = [g for g in gangs if g.app_id != me.app_id and g.pending > 0 and g.age < me.age
               and could_use(g, me, holding)]
    return min(waiting, key=lambda g: g.age, default=None)


KEEP = "keep"        # hold what it has and wait
RELEASE = "release"  # give everything back for an older gang
ASK = "ask"          # a released gang asks again


def step(me: GangView | None, gangs: Iterable[GangView], *, held: int, wanted: int, stalled_s: float,
         released: bool, backoff_over: bool, holding: Holding | None = None) -> tuple[str, GangView | None]:
    """The wait-die rule for one look at the RM: what the gang does now, and the older gang in its way.

    KEEP: hold what it has and wait (or, released, keep waiting); RELEASE: give everything back for the
    older gang returned; ASK: a released gang asks for its containers again. Only an older gang that could
    use what this one holds (`could_use`) counts. `me` None (the RM could not
    be read, or does not list this gang yet): a holding gang keeps, a released one asks after its back-off.
    """
    older = older_waiting(me, gangs, holding) if me is not None else None
    if released:
        return (ASK, None) if older is None and backoff_over else (KEEP, older)
    if me is None or held <= 0 or held >= wanted or stalled_s < PATIENCE_S:
        return KEEP, None
    return (RELEASE, older) if older is not None else (KEEP, None)


def backoff_s(releases: int, rng: random.Random | None = None) -> float:
    """The wait after the n-th release (1-based) before asking again: random, so two gangs released
    together do not ask again together, and growing, so a crowded queue is asked less often."""
    ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** max(0, releases - 1))
    return (rng or random).uniform(ceiling / 2, ceiling)


# ------------------------------------------------------------------------------- why it waits
@dataclass(frozen=True)
class Want:
    """Containers of one task type the gang still waits for, and the size of each."""

    type: str
    missing: int
    total: int
    memory_mb: int
    vcores: int
    label: str = ""


def queue_named(answer: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """The gang's queue in the RM's scheduler answer."""
    try:
        return find_queue(scheduler_info(dict(answer)), name)
    except (KeyError, TypeError):
        return None


def _node_room(nodes: Iterable[Mapping[str, Any]], label: str) -> tuple[int, int, int]:
    """(running nodes of the partition, largest free memory on one, largest total memory on one)."""
    running = [n for n in nodes if n.get("state") == "RUNNING"
               and (label in (n.get("nodeLabels") or []) if label else not n.get("nodeLabels"))]
    free = max((int(n.get("availMemoryMB") or 0) for n in running), default=0)
    total = max((int(n.get("availMemoryMB") or 0) + int(n.get("usedMemoryMB") or 0) for n in running), default=0)
    return len(running), free, total


def _memory(resource: object) -> int:
    return int((resource or {}).get("memory") or 0) if isinstance(resource, Mapping) else 0


def _queue_reason(queue: Mapping[str, Any] | None, user: str, memory_mb: int) -> str:
    """The queue's (or its user's) limit that leaves no room for one more container of `memory_mb`."""
    if not queue:
        return ""
    name = queue.get("queueName", "?")
    for entry in ((queue.get("users") or {}).get("user") or []):
        if entry.get("username") != user:
            continue
        got, limit = _memory(entry.get("resourcesUsed")), _memory(entry.get("userResourceLimit"))
        if limit and got + memory_mb > limit:
            return f"user {user} is at its limit in queue {name} ({got} of {limit} MiB used)"
    used, ceiling = _memory(queue.get("resourcesUsed")), _memory(queue.get("maxEffectiveCapacity"))
    percent = float(queue.get("absoluteMaxCapacity") or 100)
    if ceiling and used + memory_mb > ceiling:
        return (f"queue {name} is at its maximum capacity ({percent:.0f}% of the cluster: "
                f"{used} of {ceiling} MiB used)")
    return ""


def waiting_reasons(wants: list[Want], *, queue: Mapping[str, Any] | None = None,
                    nodes: Sequence[Mapping[str, Any]] | None = None, user: str = "",
                    yielding_to: GangView | None = None) -> list[str]:
    """What YARN says is in the way of the first missing containers (none when it says nothing)."""
    wants = [w for w in wants if w.missing > 0]
    if not wants:
        return []
    first = wants[0]
    reasons: list[str] = []
    if yielding_to is not None:
        reasons.append(f"released its containers for the older gang {yielding_to.app_id}, which waits for "
                       f"{yielding_to.pending} (wait-die: asks again once no older gang waits)")
    if nodes is not None:
        count, free, largest = _node_room(nodes, first.label)
        where = f"label {first.label}" if first.label else "the default partition"
        if not count:
            reasons.append(f"no running node in {where}")
        elif largest < first.memory_mb:
            reasons.append(f"no node can ever hold one (the largest in {where} has {largest} MiB)")
        elif free < first.memory_mb:
            reasons.append(f"no node has {first.memory_mb} MiB free (the most free on one: {free} MiB)")
    queue_text = _queue_reason(queue, user, first.memory_mb)
    if queue_text:
        reasons.append(queue_text)
    return reasons


def waiting_line(wants: list[Want], reasons: list[str]) -> str:
    """One line: which containers the gang waits for (counted now), and what is in the way."""
    wants = [w for w in wants if w.missing > 0]
    if not wants:
        return ""
    first = wants[0]
    what = "; ".join(f"{w.missing} of {w.total} {w.type} container{'s' if w.total > 1 else ''}" for w in wants)
    size = f" ({first.memory_mb} MiB, {first.vcores} vcore{'s' if first.vcores > 1 else ''} each)"
    return f"waiting for {what}{size}" + (": " + "; ".join(reasons) if reasons else "")


# The CapacityScheduler's words for an application it accepted and has not started (its AM waits):
# "[<date>] Application is added to the scheduler and is not yet activated. Queue's AM resource limit
# exceeded.  Details : AM Partition = ...". The date and the details are not for one line.
_STAMP = re.compile(r"^\s*\[[^\]]*\]\s*")


def am_waiting_line(diagnostics: str) -> str:
    """The RM's reason an accepted application's AM has not started, in one line ('' if it gives none)."""
    text = " ".join(_STAMP.sub("", diagnostics or "").split())
    if not text:
        return ""
    text = text.replace("Application is added to the scheduler and is not yet activated. ", "")
    text = text.split(" Details :", 1)[0].rstrip(". ")
    return f"waiting for its AM container: {text}"
