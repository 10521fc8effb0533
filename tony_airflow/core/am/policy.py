"""The lifecycle policy: from the tasks' states and the time, the outcome of an attempt.

Pure: no YARN, no HTTP, no clock of its own (`now` is given), so every outcome
is table-tested in tests/unit and the AM only feeds it what it has seen.

- Tracked types decide: any non-zero exit fails the attempt, all exits 0 succeed it.
- Untracked types (ps) that end while tracked tasks still run fail it, but only
  after `settle_seconds`: reports that arrive together (a ps and the workers
  ending in the same second) are judged together, not in arrival order.
- Sidecars (tensorboard) never decide.
- A tracked task killed by a signal (exit 128+N) waits up to YARN_REASON_WAIT_S
  for YARN's own reason (e.g. "running beyond physical memory limits").
- Allocation, registration, heartbeat and application timeouts each fail it
  with their own reason; an allocation timeout says why the gang waited (core/am/gang.py).
- Attempts: a failure that is the job's own (a task's exit, a timeout) counts
  against `max_attempts`; one YARN caused (a preempted container, a lost host:
  `Outcome.cause`) is retried without counting, up to `max_free_retries` such
  retries per job, and counts like any other past that (docs/submitting.md, "Attempts").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from tony_airflow.core.spec import JobSpec

YARN_REASON_WAIT_S = 5.0
PREEMPTED_MARK = "Container preempted by scheduler"  # YARN's SchedulerUtils.PREEMPTED_CONTAINER (exit -102)
KILLED_BY_SIGNAL = frozenset({-100, 137, 143})  # SIGKILL, SIGTERM, YARN's "aborted"


class TaskView(Protocol):
    """What the policy reads of a task (core.am.registry.TaskState)."""

    type: str
    index: int
    role: str
    host: str
    exit_code: int | None
    stderr_tail: str
    yarn_container_id: str
    yarn_diagnostics: str
    memory_killed: bool
    stop_requested: bool
    allocated_at: float | None
    registered_at: float | None
    started_at: float | None
    finished_at: float | None
    last_heartbeat: float | None

    @property
    def id(self) -> str: ...

    @property
    def done(self) -> bool: ...


@dataclass
class Outcome:
    ok: bool
    reason: str = ""
    task: TaskView | None = None  # the task that failed first, when one did
    cause: str = ""  # what YARN did that ended the attempt ("preemption", "lost host"); "" = the job's own


def preempted(tasks: Iterable[TaskView]) -> list[TaskView]:
    """The tasks whose containers YARN preempted, by YARN's own words for it."""
    return [t for t in tasks if PREEMPTED_MARK in (t.yarn_diagnostics or "")]


def is_free(outcome: Outcome, job: JobSpec, free_used: int) -> bool:
    """Whether this failed attempt is one YARN caused and free retries are left: it does not count."""
    return bool(outcome.cause) and free_used < job.max_free_retries


def silent(tasks: Iterable[TaskView], now: float, heartbeat_interval: float) -> list[TaskView]:
    """Running tasks whose executor missed a heartbeat: one arrives every interval (each a long poll the AM holds
    that long), so a task quiet for 1.5 of them (at least 1.5 s) may be gone. The AM then asks YARN about its
    containers at once and often, not every STEADY_POLL_S: a SIGKILLed worker's container ended within a second
    in YARN's view and was replaced 2 s later than it could be, on average (issue 54's spares, measured)."""
    quiet = max(1.5, 1.5 * heartbeat_interval)
    return [t for t in tasks if not t.done and t.started_at is not None and t.last_heartbeat is not None
            and now - t.last_heartbeat > quiet]


def settle_seconds(job: JobSpec) -> float:
    """How long an early untracked exit waits for the tracked tasks' reports of the same moment."""
    return max(1.0, 2 * job.heartbeat_interval)


def decide(job: JobSpec, tasks: Iterable[TaskView], attempt_start: float, app_start: float,
           now: float, requested_at: float | None = None, waiting: str = "",
           replacing: Mapping[str, float] | None = None) -> Outcome | None:
    """The attempt's outcome, or None while it is still undecided.

    `requested_at`: when the gang last asked for its containers (after a wait-die release, core/am/gang.py):
    the registration timeout counts from it, the allocation timeout from the attempt's start.
    `waiting`: why the gang waits, in one line: an allocation timeout says it.
    `replacing`: an elastic job's lost workers whose replacements have not started yet (task id -> when they
    were asked for, core/am/elastic.py): the others decide without them; fewer than MIN running workers for
    longer than the allocation timeout fails the attempt."""
    replacing = replacing or {}
    t = [x for x in tasks if x.id not in replacing]
    if replacing:
        running = sum(1 for x in t if x.type == "worker" and not x.done)
        since = now - min(replacing.values())
        if running < job.elastic_min and job.timeouts.allocation and since > job.timeouts.allocation:
            return Outcome(False, f"elastic: {running} of at least {job.elastic_min} workers ran for "
                                  f"{since:.0f}s (the allocation timeout) while {', '.join(sorted(replacing))} "
                                  f"waited for a replacement container; " + (waiting or "YARN allocated none"))
    finished = sorted((x for x in t if x.finished_at is not None), key=lambda x: x.finished_at or 0.0)
    for task in finished:
        if task.role == "tracked" and task.exit_code != 0:
            if _awaits_yarn_reason(task, now):
                return None
            return Outcome(False, failure_line(task), task)
    tracked = [x for x in t if x.role == "tracked"]
    if tracked and all(x.done and x.exit_code == 0 for x in tracked):
        return Outcome(True)
    for task in finished:
        if task.role == "untracked" and now - (task.finished_at or now) >= settle_seconds(job):
            return Outcome(False, f"{task.id} exited early with code {task.exit_code} "
                                  f"while tracked tasks were still running{_tail(task)}", task)
    timeouts = job.timeouts
    if timeouts.application and now - app_start > timeouts.application:
        return Outcome(False, f"application timeout: still running after {timeouts.application:.0f}s")
    since = now - attempt_start
    missing = [x for x in t if x.allocated_at is None]
    if timeouts.allocation and missing and since > timeouts.allocation:
        x = missing[0]
        spec = job.tasks[x.type]
        return Outcome(False, f"allocation timeout: YARN did not allocate {len(missing)} container(s) within "
                              f"{timeouts.allocation:.0f}s, e.g. {x.id} ({spec.memory_of(x.index)} MiB, "
                              f"{spec.vcores_of(x.index)} vcores, {spec.gpus} GPUs"
                              f"{', label ' + spec.node_label if spec.node_label else ''}); "
                              + (waiting or "the cluster lacks the free resources or the queue/label"))
    unregistered = [x for x in t if x.registered_at is None]
    since_request = now - (requested_at or attempt_start)
    if timeouts.registration and unregistered and not missing and since_request > timeouts.registration:
        return Outcome(False, f"registration timeout: {', '.join(x.id for x in unregistered[:5])} did not "
                              f"register within {timeouts.registration:.0f}s")
    if timeouts.heartbeat:
        for x in t:  # a sidecar (TensorBoard) never decides, not even by going silent
            if (x.role != "sidecar" and not x.done and x.last_heartbeat is not None
                    and now - x.last_heartbeat > timeouts.heartbeat):
                return Outcome(False, f"heartbeat timeout: {x.id} sent no heartbeat for "
                                      f"{timeouts.heartbeat:.0f}s (hung or lost)", x)
    return None


def retry(outcome: Outcome, attempt: int, job: JobSpec, app_start: float, now: float, free_used: int = 0) -> bool:
    """After an attempt: start the whole cluster again? Only after a failure, while attempts are
    left and the application timeout has not fired (another attempt could not finish in time).
    `free_used`: earlier attempts that did not count (is_free); this one may be another."""
    allowed = job.max_attempts + free_used + (1 if is_free(outcome, job, free_used) else 0)
    if outcome.ok or attempt >= allowed:
        return False
    return not (job.timeouts.application and now - app_start > job.timeouts.application)


def _awaits_yarn_reason(task: TaskView, now: float) -> bool:
    """A task killed by a signal it was not asked to take: YARN may say why (memory limits)."""
    return (task.exit_code in KILLED_BY_SIGNAL and not task.stop_requested and not task.yarn_diagnostics
            and not task.memory_killed and now - (task.finished_at or now) < YARN_REASON_WAIT_S)


def _tail(task: TaskView) -> str:
    tail = " ".join(task.stderr_tail.strip().splitlines()[-5:])[-600:]
    return f"; stderr: {tail}" if tail else ""


# YARN's words when a container went over its memory: "running beyond physical memory limits" (Hadoop 2 and 3.3),
# "running 1.6G beyond the 'PHYSICAL' memory limit" (3.4), and the virtual-memory check's own
OVER_MEMORY = re.compile(r"beyond .*memory limit|physical memory used", re.IGNORECASE)


def failure_line(task: TaskView) -> str:
    where = f" on {task.host}" if task.host else ""
    yarn = f"; YARN: {' '.join(task.yarn_diagnostics.split())[:600]}" if task.yarn_diagnostics else ""
    if OVER_MEMORY.search(task.yarn_diagnostics or ""):  # what to do about it, beside YARN's numbers
        yarn += f"; give {task.type} more memory: -m {task.type}:<MiB> (task_memory)"
    return f"{task.id} exited with code {task.exit_code}{where} (container {task.yarn_container_id}){yarn}{_tail(task)}"


def diagnostics(ok: bool, attempt: int, max_attempts: int, failures: list[str]) -> str:
    """The YARN diagnostics of the whole job: what happened, first; earlier attempts after it.

    `failures` holds one "attempt N/M: reason" line per failed attempt.
    """
    if ok:
        text = f"tony-airflow: SUCCEEDED on attempt {attempt}/{max_attempts}: all tracked tasks exited 0"
        if failures:
            earlier = "; ".join(f"attempt {f.split('/', 1)[0].split()[-1]} failed: {f.split(': ', 1)[1]}"
                                for f in failures)
            text += f" (after {earlier})"
        return text
    if not failures:
        return "tony-airflow: FAILED"
    if len(failures) == 1:
        return f"tony-airflow: FAILED: {failures[0]}"
    return f"tony-airflow: FAILED: {failures[0].split(': ', 1)[1]} | " + " | ".join(failures)
