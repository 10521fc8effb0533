"""The AM's copy of each task's live output (shipped by the executors), served by offset.

Only the last AM_KEEP_CHARS characters of a task's current attempt are held, and
fewer when the job has many tasks (AM_TOTAL_KEEP_CHARS for all of them): the AM's
memory stays bounded whatever the job prints, and a reader that falls behind is
told how much it skipped (the aggregated file has it all).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tony_airflow.core import protocol
from tony_airflow.core.output import (
    AM_KEEP_CHARS,
    AM_MIN_KEEP_CHARS,
    AM_TOTAL_KEEP_CHARS,
    SHIP_CHARS,
    OutputLog,
    default_task,
)

__all__ = ["Outputs", "TaskOutput", "default_task", "keep_per_task"]


def keep_per_task(tasks: int) -> int:
    """Characters held per task: AM_KEEP_CHARS, less when AM_TOTAL_KEEP_CHARS is shared by many."""
    return max(AM_MIN_KEEP_CHARS, min(AM_KEEP_CHARS, AM_TOTAL_KEEP_CHARS // max(1, tasks)))


@dataclass
class TaskOutput:
    attempt: int
    container_id: str = ""
    log: OutputLog = field(default_factory=lambda: OutputLog(AM_KEEP_CHARS))


class Outputs:
    """task id -> the output of its latest attempt."""

    def __init__(self, task_ids: Iterable[str]):
        self.task_ids = list(task_ids)
        self.default = default_task(t.split(":")[0] for t in self.task_ids)
        self.keep = keep_per_task(len(self.task_ids))
        self._by_task: dict[str, TaskOutput] = {}

    def receive(self, msg: protocol.Output, current_attempt: int) -> str | None:
        """None when taken, else why not (an older attempt, an unknown task)."""
        task = f"{msg.type}:{msg.index}"
        if task not in self.task_ids:
            return f"no task {task} in this job"
        if msg.attempt != current_attempt:
            return f"attempt {msg.attempt} is over; the current attempt is {current_attempt}"
        if msg.offset < 0:
            return "offset must be 0 or more"
        held = self._by_task.get(task)
        if held is None or held.attempt != msg.attempt:
            held = self._by_task[task] = TaskOutput(msg.attempt, log=OutputLog(self.keep))
        held.container_id = msg.container_id or held.container_id
        held.log.write_at(msg.offset, msg.text)
        return None

    def answer(self, task: str | None, attempt: int, offset: int, finished: bool, limit: int = SHIP_CHARS) -> dict:
        """From `offset` of `attempt`'s output (from 0 if a newer attempt is held). `finished`: the task
        has ended (its executor ships the rest before it reports the end)."""
        task = task or self.default
        held = self._by_task.get(task)
        if held is not None and held.attempt != attempt:
            offset = 0
        if held is None:
            return {"task": task, "attempt": 0, "container_id": "", "offset": offset, "end": offset,
                    "text": "", "finished": finished}
        begin, text = held.log.read(offset, limit)
        return {"task": task, "attempt": held.attempt, "container_id": held.container_id, "offset": begin,
                "end": held.log.end, "text": text, "finished": finished}
