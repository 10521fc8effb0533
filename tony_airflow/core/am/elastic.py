"""Elastic PyTorch jobs (`--elastic MIN:MAX`): which ended worker the AM replaces, and how it says so.

torchrun's agents re-form their group around a new node (the AM's rendezvous, core/am/rendezvous.py): so when a
worker's container is lost — killed, preempted, its host gone — the AM asks YARN for one replacement and
leaves every other container running, instead of failing the attempt. What is not replaced: a worker that
ended by itself (its exit code: the program's or torchrun's own failure), one killed for its memory, by
YARN (its diagnostics) or by its container engine (the executor's word, `memory_killed`: exit 137 alone
does not tell it from a kill; a replacement would meet the same limit), with torchrun's c10d rendezvous
(`TONY_ELASTIC_RENDEZVOUS=c10d`) the rank-0 container (the rendezvous' host: the attempt restarts as before),
and any loss past the job's free-retry bound. The master (when there is one) is not replaced either. Pure: the
AM feeds it what it has seen.
"""

from __future__ import annotations

from collections.abc import Mapping

from tony_airflow.core.am.policy import PREEMPTED_MARK, TaskView
from tony_airflow.core.protocol import elastic_rendezvous
from tony_airflow.core.spec import JobSpec

# how a container ends when it was lost rather than failed: SIGKILL, SIGTERM (by YARN, by hand), YARN's
# aborted (a lost node), preempted, killed by the RM or by the AM
LOST_EXIT_CODES = frozenset({137, 143, -9, -15, -100, -102, -105, -106})
MEMORY_MARK = "beyond physical memory limits"


def rank0(job: JobSpec) -> tuple[str, int]:
    """The container that hosts torchrun's c10d rendezvous (`TONY_ELASTIC_RENDEZVOUS=c10d`): the master, else
    worker 0. The AM's own rendezvous (core/am/rendezvous.py) has no such container."""
    return ("master", 0) if "master" in job.tasks else ("worker", 0)


def replaceable(job: JobSpec, task: TaskView, replaced_so_far: int) -> bool:
    """A lost worker of an elastic job, within the job's free-retry bound."""
    diagnostics = task.yarn_diagnostics or ""
    rank0_hosts_c10d = elastic_rendezvous(job.env) == "c10d" and (task.type, task.index) == rank0(job)
    return (bool(job.elastic_max) and task.type == "worker" and not rank0_hosts_c10d
            and task.done and not task.stop_requested and task.exit_code != 0
            and (task.exit_code in LOST_EXIT_CODES or PREEMPTED_MARK in diagnostics)
            and MEMORY_MARK not in diagnostics and not task.memory_killed
            and replaced_so_far < job.max_free_retries)


def lost_line(task_id: str, host: str, container: str, exit_code: int | None) -> str:
    return f"{task_id} lost on {host or '?'} (container {container or '?'}, exit code {exit_code})"


def replaced_line(lost: str, host: str, container: str, seconds: float, by_spare: bool = False) -> str:
    """What the history, the progress line and the AM's log say once the replacement (a spare: core/am/spares.py)
    runs."""
    by = "by spare on" if by_spare else "on"
    return f"{lost}; replaced {by} {host or '?'} (container {container or '?'}) after {seconds:.1f}s"


class Replacements:
    """One attempt's lost workers: those whose replacement was asked for and has not started yet (task id ->
    (what was lost, when)), and how many were replaced in all."""

    def __init__(self) -> None:
        self.pending: dict[str, tuple[str, float]] = {}
        self.by_spare: set[str] = set()  # pending task ids whose place a spare took (core/am/spares.py)
        self.count = 0

    def asked(self, task_id: str, lost: str, at: float) -> None:
        self.pending[task_id] = (lost, at)
        self.by_spare.discard(task_id)
        self.count += 1

    def spare_took(self, task_id: str) -> None:
        """The replacement asked for is a spare's (its line says so)."""
        self.by_spare.add(task_id)

    def waiting_since(self) -> dict[str, float]:
        """For the policy (policy.decide's `replacing`)."""
        return {task_id: at for task_id, (_, at) in self.pending.items()}

    def started(self, task_id: str, host: str, container: str, now: float) -> str:
        """The replacement of `task_id` runs: its line (elastic.replaced_line)."""
        lost, at = self.pending.pop(task_id)
        spare = task_id in self.by_spare
        self.by_spare.discard(task_id)
        return replaced_line(lost, host, container, now - at, by_spare=spare)

    def turn(self, job: JobSpec, tasks: Mapping[tuple[str, int], TaskView],
             now: float) -> tuple[list[tuple[str, str]], list[tuple[tuple[str, int], str]]]:
        """One look at the attempt's tasks: the replacements that started since the last look (task id, line), and
        the lost workers to replace now (key, lost line; counted as asked). A replacement that started and
        was lost again between two looks is both (the model-checked test found it); one lost before it registered
        is asked for again, its wait timed anew (issue 51: it was never asked again, and the attempt failed with
        "YARN allocated none" timed from the lost one's request)."""
        started: list[tuple[str, str]] = []
        lost: list[tuple[tuple[str, int], str]] = []
        for key, task in tasks.items():
            if task.id in self.pending:
                if task.started_at is None and not task.done:
                    continue  # still coming
                if task.started_at is None:  # lost before it registered: asked for again below, timed from now
                    del self.pending[task.id]
                    self.by_spare.discard(task.id)
                else:
                    started.append((task.id, self.started(task.id, task.host, task.yarn_container_id, now)))
            if replaceable(job, task, self.count):
                line = lost_line(task.id, task.host, task.yarn_container_id, task.exit_code)
                self.asked(task.id, line, now)
                lost.append((key, line))
        return started, lost
