"""Following a task's output from outside the cluster: the command line, the Airflow operator and trigger.

While the application runs, the lines come from the AM through the tracking
URL (`<tracking>/pages/tony/output.json`, the RM's proxy, with its
authentication); once it has ended, whatever was not read yet comes from the
file YARN aggregated (`yarn logs`), so no line is lost when the AM goes away.
The same cursor serves the blocking and the asynchronous reader: only the
transport differs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx

from tony_airflow.core.output import (
    OUTPUT_PATH,
    AggregatedOutputs,
    OutputCursor,
    aggregated_text,
    failed_task,
    output_file_name,
    output_files_pattern,
    task_key,
)
from tony_airflow.core.protocol import am_page_url, is_proxied

# (application id, container id or None, file name pattern) -> the lines of `yarn logs` (yarn/logs.py log_lines)
ReadLines = Callable[[str, "str | None", str], Iterable[str]]
AGGREGATION_WAIT_S = 20.0   # YARN uploads a finished application's logs within seconds; wait at most this
FOLLOW_TIMEOUT_S = 5.0
MAX_ROUNDS = 8              # pieces read per poll before giving the caller its lines


def output_url(tracking_url: str, task: str, attempt: int, offset: int) -> str:
    query = urlencode({"task": task, "attempt": attempt, "offset": offset} if task else
                      {"attempt": attempt, "offset": offset})
    return f"{am_page_url(tracking_url, OUTPUT_PATH)}?{query}"


@dataclass
class FollowState:
    """What a follower carries from one reader to the next (the trigger's event, the operator's resume)."""

    task: str = ""                 # empty: the AM's choice (the chief, else worker 0)
    attempt: int = 0
    offset: int = 0
    container_id: str = ""
    partial: str = ""
    finished: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> FollowState:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in (data or {}).items() if k in known})


@dataclass
class OutputFollower:
    """One task's output as prefixed lines; `max_lines` caps what one poll hands out (the rest is skipped,
    and said so) so a chatty job cannot flood the reader's log."""

    state: FollowState = field(default_factory=FollowState)
    max_lines: int | None = None
    requests: int = 0

    def __post_init__(self) -> None:
        s = self.state
        self.cursor = OutputCursor(task=s.task, attempt=s.attempt, offset=s.offset, container_id=s.container_id,
                                   partial=s.partial, finished=s.finished)

    def snapshot(self) -> FollowState:
        c = self.cursor
        return FollowState(c.task, c.attempt, c.offset, c.container_id, c.partial, c.finished)

    def _prefix(self, lines: list[str]) -> list[str]:
        if self.max_lines is not None and len(lines) > self.max_lines:
            dropped = len(lines) - self.max_lines
            lines = [f"[{dropped} lines not shown]"] + lines[-self.max_lines:]
        task = self.cursor.task
        return [f"[{task}] {line}" for line in lines] if task else lines

    def _take(self, answer: dict[str, Any]) -> tuple[list[str], bool]:
        """The answer's lines, and whether there is more to read right away."""
        self.cursor.task = answer.get("task") or self.cursor.task
        lines = self.cursor.take(answer)
        more = bool(answer.get("text")) and self.cursor.offset < int(answer.get("end", 0))
        return lines, more

    def url(self, tracking_url: str) -> str:
        return output_url(tracking_url, self.cursor.task, self.cursor.attempt, self.cursor.offset)

    def poll(self, tracking_url: str, get: Callable[[str], httpx.Response]) -> list[str]:
        """New whole lines from the AM (blocking); none while there is nothing to read or the AM is not up."""
        lines: list[str] = []
        for _ in range(MAX_ROUNDS if is_proxied(tracking_url) else 0):
            try:
                resp: httpx.Response | None = get(self.url(tracking_url))
            except httpx.HTTPError:
                resp = None
            if not self._step(self._answer_of(resp), lines):
                break
        return self._prefix(lines)

    async def poll_async(self, tracking_url: str, http: httpx.AsyncClient) -> list[str]:
        """`poll`, for Airflow's triggerer."""
        lines: list[str] = []
        for _ in range(MAX_ROUNDS if is_proxied(tracking_url) else 0):
            try:
                resp: httpx.Response | None = await http.get(self.url(tracking_url), timeout=FOLLOW_TIMEOUT_S)
            except httpx.HTTPError:
                resp = None
            if not self._step(self._answer_of(resp), lines):
                break
        return self._prefix(lines)

    def _answer_of(self, resp: httpx.Response | None) -> dict[str, Any] | None:
        self.requests += 1
        try:
            return _answer(resp) if resp is not None else None
        except ValueError:  # not JSON: a proxy's or the RM's own page
            return None

    def _step(self, answer: dict[str, Any] | None, lines: list[str]) -> bool:
        """Take one answer's lines; whether there is more to read at once."""
        if answer is None:
            return False
        new, more = self._take(answer)
        lines += new
        return more

    def finish(self, app_id: str, read_lines: ReadLines, wait: float = AGGREGATION_WAIT_S) -> list[str]:
        """The application has ended: the lines not read yet, from the files YARN aggregated — the rest of the
        attempt followed and every later attempt. A follower that knows no attempt (the job printed and
        ended between two polls, or before the AM's page answered at all) reads its task's output whole,
        the task being the AM's choice when it was never told (issue #51: a short job showed no line)."""
        c = self.cursor
        if c.finished and c.attempt and c.task:
            return self._prefix(c.flush())
        found = read_outputs(app_id, c.task, {c.attempt: c.offset} if c.attempt else {}, read_lines, wait)
        if found is None:
            whose = f"the rest of {c.task}'s output" if c.task else "the output"
            return self._prefix(c.flush() + [f"({whose} is in `yarn logs -applicationId {app_id}`)"])
        c.task = c.task or found[0]
        out: list[str] = []
        for attempt, text in found[1]:
            if attempt < c.attempt:
                continue
            if attempt > c.attempt:
                if c.attempt:
                    out += c.flush() + [f"--- attempt {attempt} ---"]
                c.attempt, c.offset, c.partial = attempt, 0, ""
            out += c.rest(text)
        c.finished = True
        return self._prefix(out)


def _answer(resp: httpx.Response) -> dict[str, Any] | None:
    if resp.status_code != 200 or "json" not in resp.headers.get("content-type", ""):
        return None  # the AM is not up yet, or already gone
    answer = resp.json()
    return answer if isinstance(answer, dict) and "offset" in answer else None


def read_aggregated(app_id: str, task: str, attempt: int, container_id: str, read_lines: ReadLines,
                    wait: float = AGGREGATION_WAIT_S, skip: int = 0, tail: int | None = None) -> str | None:
    """One task attempt's output after its first `skip` characters (or its last `tail` lines), from the file
    YARN aggregated, read as `yarn logs` writes it (None if it did not appear in `wait` s)."""
    name = output_file_name(*task_key(task), attempt)
    deadline = time.monotonic() + wait
    while True:
        text = aggregated_text(read_lines(app_id, container_id or None, name.replace(".", r"\.")), name, skip, tail)
        if text is not None or time.monotonic() >= deadline:
            return text
        time.sleep(2.0)


def read_outputs(app_id: str, task: str, skip: dict[int, int], read_lines: ReadLines,
                 wait: float = AGGREGATION_WAIT_S) -> tuple[str, list[tuple[int, str]]] | None:
    """Every attempt's output of `task` (the default task when ''), after the first `skip[attempt]`
    characters, from the files YARN aggregated (None if none appeared in `wait` s)."""
    deadline = time.monotonic() + wait
    while True:
        outputs = AggregatedOutputs(task, skip)
        for line in read_lines(app_id, None, output_files_pattern(task)):
            outputs.feed(line)
        found = outputs.found()
        if found is not None or time.monotonic() >= deadline:
            return found
        time.sleep(2.0)


def failing_task_tail(app_id: str, diagnostics: str, read_lines: ReadLines,
                      lines: int, wait: float = AGGREGATION_WAIT_S) -> list[str]:
    """The last `lines` lines of the task that made the job fail, prefixed with its id ([] if none is named)."""
    failed = failed_task(diagnostics)
    if failed is None or lines <= 0:
        return []
    task, attempt = failed
    text = read_aggregated(app_id, task, attempt, "", read_lines, wait, tail=lines)
    if not text:
        return []
    return [f"[{task}] {line}" for line in text.splitlines()[-lines:]]


class LiveOutput:
    """A follower bound to a blocking HTTP client and a sink: what `ytf-submit` and the operator use.

    Call it with each application report while waiting; `finish` once the
    application has ended. `emit` gets prefixed lines.
    """

    def __init__(self, emit: Callable[[str], None], auth: httpx.Auth | None = None, conf_dir: str | None = None,
                 max_lines: int | None = None, state: FollowState | None = None,
                 read_lines: ReadLines | None = None):
        self.emit = emit
        self.follower = OutputFollower(state or FollowState(), max_lines)
        self._http = httpx.Client(auth=auth, timeout=FOLLOW_TIMEOUT_S, follow_redirects=True)
        self._conf_dir = conf_dir
        self._read_lines = read_lines

    def read_lines(self, app_id: str, container_id: str | None, pattern: str) -> Iterable[str]:
        if self._read_lines is not None:
            return self._read_lines(app_id, container_id, pattern)
        from tony_airflow.yarn.logs import log_lines
        return log_lines(app_id, container_id, pattern, timeout=60, conf_dir=self._conf_dir)

    def __call__(self, report: Any) -> None:
        if report.is_terminal:
            return
        for line in self.follower.poll(report.tracking_url, self._http.get):
            self.emit(line)

    def finish(self, app_id: str, final_status: str = "", diagnostics: str = "", tail_lines: int = 0) -> None:
        """The lines not read yet; on failure, the last `tail_lines` lines of the task that failed
        (unless that is the task followed, whose lines were all shown)."""
        try:
            for line in self.follower.finish(app_id, self.read_lines):
                self.emit(line)
            failed = failed_task(diagnostics) if final_status not in ("", "SUCCEEDED") else None
            if failed is not None and tail_lines > 0 and failed[0] != self.follower.cursor.task:
                self.emit(f"last lines of {failed[0]}, which failed:")
                for line in failing_task_tail(app_id, diagnostics, self.read_lines, tail_lines):
                    self.emit(line)
        except Exception as exc:  # the end of the output is a courtesy: it never changes how the job ended
            self.emit(f"(the rest of the output could not be read: {' '.join(str(exc).split())[:200]}; "
                      f"`yarn logs -applicationId {app_id}` has it)")
        finally:
            self._http.close()
