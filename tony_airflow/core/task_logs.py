"""A job's task output as `tony logs APP` shows it: each task's own output file, taken from the output of
`yarn logs` (LogsCLI), in task order, attempt by attempt, each line labelled with its task.

`yarn logs` prints every file of every container in the order of the containers' ids, with directory
listings and launch scripts between them (the two-worker tour job: 713 lines around ~40 of training).
The executor tees a task's stdout and stderr into `tony-output-<type>-<index>-a<attempt>.txt`
(core/output.py), so these files are the tasks' output whole. They are spooled to disk while the stream
comes, since a task may print gigabytes, then handed back sorted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

OUTPUT_FILE = re.compile(r"tony-output-(?P<type>[a-z][a-z0-9_]*)-(?P<index>\d+)-a(?P<attempt>\d+)\.txt")
OUTPUT_FILES_PATTERN = r"tony-output-.*\.txt"  # for `yarn logs -log_files_pattern`
# the order a reader expects: who decides first, sidecars last; other types by name between
TYPE_ORDER = ("chief", "master", "worker", "evaluator", "ps")
LAST_TYPES = ("tensorboard",)


@dataclass(frozen=True)
class TaskOutput:
    """One task's output in one attempt, spooled into `path`."""

    type: str
    index: int
    attempt: int
    path: Path

    @property
    def task(self) -> str:
        return f"{self.type}:{self.index}"

    def sort_key(self) -> tuple[int, int, str, int]:
        rank = (TYPE_ORDER.index(self.type) if self.type in TYPE_ORDER else
                len(TYPE_ORDER) + 1 if self.type in LAST_TYPES else len(TYPE_ORDER))
        return self.attempt, rank, self.type, self.index

    def labelled_lines(self) -> Iterator[str]:
        """`[worker:0] <line>` for each line of the output, read as it is needed."""
        with self.path.open(encoding="utf-8", errors="replace", newline="") as lines:
            for line in lines:
                yield f"[{self.task}] {line.rstrip(chr(10)).rstrip(chr(13))}"


def spool(lines: Iterable[str], directory: Path) -> list[TaskOutput]:
    """The task output files in the lines of `yarn logs`, each written to `directory`, sorted by attempt, then
    task type (chief, master, worker, evaluator, ps, others by name, tensorboard), then index. A file that
    appears twice (the NodeManager's copy and the aggregated one) is taken from its last copy."""
    found: dict[str, TaskOutput] = {}
    out = None
    state, length, taken = "seek", None, 0
    try:
        for line in lines:
            if state != "body" and line.startswith("LogType:"):  # inside a body it is the task's own text
                match = OUTPUT_FILE.fullmatch(line[len("LogType:"):].strip())
                if match:
                    if out is not None:
                        out.close()
                    name = match.group(0)
                    path = directory / name
                    found[name] = TaskOutput(match["type"], int(match["index"]), int(match["attempt"]), path)
                    out = path.open("wb")
                    state, length, taken = "header", None, 0
                    continue
            if state == "header":
                if line.startswith("LogLength:") and line[10:].strip().isdigit():
                    length = int(line[10:])
                elif line.rstrip("\n") == "LogContents:":
                    state = "body" if length != 0 else "seek"
            elif state == "body" and out is not None:
                data = line.encode()
                if length is None:  # no length given: the body ends at its End-of line
                    if line.startswith("End of LogType:"):
                        state = "seek"
                    else:
                        out.write(data)
                    continue
                left = length - taken
                out.write(data[:left])
                taken += min(len(data), left)
                if taken >= length:
                    state = "seek"
    finally:
        if out is not None:
            out.close()
    return sorted(found.values(), key=TaskOutput.sort_key)


def labelled(outputs: Iterable[TaskOutput]) -> Iterator[str]:
    """The lines `tony logs APP` prints: `==> attempt N <==` before each attempt's tasks, then theirs."""
    attempt = None
    for output in outputs:
        if output.attempt != attempt:
            attempt = output.attempt
            yield f"==> attempt {attempt} <=="
        yield from output.labelled_lines()
