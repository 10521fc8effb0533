"""A job as its events tell it: attempts, the task table of each, the first failure.

Built from the same events whether they come from a finished log, an
in-progress one, or the AM's memory (its live status page), so every view
shows the same thing.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tony_airflow.core.history import events as ev
from tony_airflow.core.protocol import TaskStatus
from tony_airflow.yarn.rest import TERMINAL_STATES, FinalStatus

RUNNING = "RUNNING"  # a job whose end is not known yet
TERMINAL = (FinalStatus.SUCCEEDED, FinalStatus.FAILED, FinalStatus.KILLED)


@dataclass
class TaskRun:
    """One task in one attempt."""

    task: str
    attempt: int
    status: str = TaskStatus.REQUESTED
    host: str = ""
    port: int = 0
    container_id: str = ""
    node_http: str = ""
    exit_code: int | None = None
    allocated_at: float | None = None
    registered_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    duration_s: float | None = None
    peak_rss_kib: int = 0
    gpu_util_max: float | None = None
    stderr_tail: str = ""
    reason: str = ""

    @property
    def type(self) -> str:
        return self.task.split(":")[0]

    @property
    def index(self) -> int:
        return int(self.task.split(":")[1])

    def banner(self) -> str:
        """One line that heads this run's logs."""
        exit_text = "" if self.exit_code is None else f", exit code {self.exit_code}"
        return f"{self.task} attempt {self.attempt} · {self.container_id} on {self.host or '?'}{exit_text}"


@dataclass
class Attempt:
    number: int
    started_at: float
    ended_at: float | None = None
    ok: bool | None = None            # None while it runs
    reason: str = ""
    first_failure: str = ""           # the task that failed first, e.g. "worker:1"
    first_failure_exit: int | None = None
    tasks: dict[str, TaskRun] = field(default_factory=dict)
    lost_hosts: list[str] = field(default_factory=list)  # "198.18.0.3 (worker:1)", one per HOST_LOST
    preempted: list[str] = field(default_factory=list)   # "worker:1 on 127.0.0.1", one per PREEMPTED
    replaced: list[str] = field(default_factory=list)    # elastic: "worker:1 lost on …; replaced on …", per loss
    writer_moves: list[str] = field(default_factory=list)  # elastic: "WRITER_MOVED: from worker:0 (…) to worker:1 …"
    gang: list[str] = field(default_factory=list)        # its waits and wait-die releases (GANG_* events)
    cause: str = ""                   # what YARN did that ended it ("preemption", "lost host")
    counted: bool = True              # against --max-attempts (docs/submitting.md, "Attempts")

    def failed_first(self) -> TaskRun | None:
        return self.tasks.get(self.first_failure) if self.first_failure else None


@dataclass
class JobHistory:
    app_id: str
    name: str = ""
    user: str = ""
    queue: str = ""
    tags: list[str] = field(default_factory=list)
    submitted_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    status: str = RUNNING
    diagnostics: str = ""
    max_attempts: int = 1
    attempts: list[Attempt] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    spec: dict[str, Any] | None = None
    complete: bool = True             # the AM closed the log
    incomplete_reason: str = ""
    stopped_by: str = ""              # the AM closed the log because it was signalled: YARN has the last word
    usage: dict[str, Any] | None = None  # core/job_usage.py, once YARN's sums are known (the job ended)
    am_attempts: int = 0              # YARN application attempts whose AM started
    am_lost: list[str] = field(default_factory=list)  # "AM attempt 1 lost on host 198.18.0.3", one per AM_LOST
    tokens: list[str] = field(default_factory=list)  # until when the job's delegation tokens last, one per TOKENS
    tokens_obtained: int = 0          # new HDFS tokens the AM got from the job's keytab (TOKEN_OBTAINED)
    training: dict[str, Any] | None = None  # the last TRAINING event's fields: step, percent, eta_s, metrics, ...
    training_attempt: int = 0         # the attempt whose curves `training_series` holds (a retry starts them anew)
    training_series: dict[str, list[tuple[Any, Any]]] = field(default_factory=dict)  # metric -> [(step, value)]

    @classmethod
    def from_events(cls, app_id: str, events: Iterable[dict[str, Any]], spec: dict[str, Any] | None = None,
                    complete: bool = True) -> JobHistory:
        job = cls(app_id=app_id, spec=spec, complete=complete)
        for event in events:
            job.events.append(event)
            job._apply(event)
        if not complete and job.status == RUNNING:
            job.incomplete_reason = "the event log is still open: the job is running or its AM was lost"
        return job

    def _apply(self, e: dict[str, Any]) -> None:
        kind, at = e["event"], e["time"]
        if kind == ev.JOB_SUBMITTED:
            self.submitted_at = at
            self.name, self.user, self.queue = e.get("name", ""), e.get("user", ""), e.get("queue", "")
            self.tags, self.max_attempts = list(e.get("tags") or []), int(e.get("max_attempts") or 1)
        elif kind == ev.AM_STARTED:
            self.started_at = self.started_at or at
            self.am_attempts += 1
        elif kind == ev.AM_LOST:
            stopped = " (stopped by SIGTERM: its node went away; the job went on)" if e.get("resumed") else ""
            self.am_lost.append(f"AM attempt {e.get('am_attempt', '?')} lost on host {e.get('host') or '?'}{stopped}")
            if e.get("resumed"):  # the lost AM's JOB_FINISHED KILLED was its node's doing: the job goes on
                self.status, self.finished_at, self.diagnostics, self.stopped_by = RUNNING, None, "", ""
        elif kind == ev.TOKENS:
            until = _utc(e.get("renewable_until"))
            then = ("new ones come from the job's keytab before then" if e.get("keytab") else
                    "a job still running then loses HDFS (its output mirror, its history)")
            self.tokens.append(f"{e.get('kind') or 'HDFS_DELEGATION_TOKEN'}: renewed by YARN until {until} (its "
                               f"maximum lifetime); {then}")
        elif kind == ev.TOKEN_OBTAINED:
            self.tokens_obtained += 1
            line = (f"{self.tokens_obtained} new {e.get('kind') or 'HDFS_DELEGATION_TOKEN'}(s) from the keytab, "
                    f"the last at {_utc(e['time'])}, good until {_utc(e.get('expires'))} unless renewed")
            if self.tokens and self.tokens[-1].startswith(f"{self.tokens_obtained - 1} new "):
                self.tokens[-1] = line
            else:
                self.tokens.append(line)
        elif kind == ev.TOKEN_RENEWAL_FAILED:
            self.tokens.append(f"new HDFS tokens from the keytab fail since {_utc(e['time'])} (tried again less "
                               f"and less often; the job goes on with the tokens it has): {e.get('reason', '')}")
        elif kind == ev.ATTEMPT_STARTED:
            attempt = Attempt(int(e["attempt"]), at)
            attempt.tasks = {t: TaskRun(t, attempt.number) for t in e.get("tasks", [])}
            self.attempts.append(attempt)
        elif kind == ev.ATTEMPT_ENDED:
            attempt = self._attempt(e)
            attempt.ended_at, attempt.ok, attempt.reason = at, bool(e.get("ok")), e.get("reason", "")
            attempt.first_failure = e.get("first_failure") or ""
            attempt.first_failure_exit = e.get("first_failure_exit")
            attempt.cause, attempt.counted = e.get("cause") or "", bool(e.get("counted", True))
        elif kind == ev.HOST_LOST:
            self._attempt(e).lost_hosts.append(f"{e.get('host', '?')} ({', '.join(e.get('tasks') or [])})")
        elif kind == ev.PREEMPTED:
            self._attempt(e).preempted.append(f"{e.get('task', '?')} on {e.get('host') or '?'}")
        elif kind == ev.GANG_WAITING:
            self._attempt(e).gang.append(str(e.get("reason") or "waiting"))
        elif kind == ev.GANG_RELEASED:
            self._attempt(e).gang.append(f"released its {e.get('held', '?')} of {e.get('wanted', '?')} containers "
                                         f"for the older gang {e.get('older') or '?'} (wait-die)")
        elif kind == ev.WORKER_LOST:
            self._attempt(e).replaced.append(f"{e.get('line') or e.get('task', '?')}; a replacement was asked for")
        elif kind == ev.WORKER_REPLACED:
            replaced = self._attempt(e).replaced
            line = str(e.get("line") or "")
            lost = line.split("; replaced ", 1)[0]  # "; replaced on …" or a spare's "; replaced by spare on …"
            pending = [i for i, x in enumerate(replaced) if x.startswith(lost + ";")]
            if pending:
                replaced[pending[-1]] = line
            else:
                replaced.append(line)
        elif kind == ev.WRITER_MOVED:  # the output's writer went with rank 0 to a survivor (core/am/rendezvous.py)
            self._attempt(e).writer_moves.append(str(e.get("line") or f"WRITER_MOVED: to {e.get('task', '?')}"))
        elif kind == ev.SPARE_LOST:  # a spare lost while it waited (core/am/spares.py): asked for again
            self._attempt(e).replaced.append(f"{e.get('line') or e.get('spare', '?')}; a new spare was asked for")
        elif kind == ev.GANG_REQUESTED:
            self._attempt(e).gang.append(f"asked again for its {e.get('containers', '?')} containers")
        elif kind == ev.TRAINING:
            self._apply_training(e)
        elif kind == ev.JOB_FINISHED:
            self.finished_at, self.status, self.diagnostics = at, e["status"], e.get("diagnostics", "")
            self.stopped_by = e.get("stopped_by", "")
        elif kind.startswith("TASK_"):
            self._apply_task(kind, at, e)

    def _apply_training(self, e: dict[str, Any]) -> None:
        """The latest report, and one point per metric at its step (else its epoch, else its order): the
        curves the job's page plots. They are the latest attempt's: a retried attempt counts its steps
        again, and one line through both would zigzag."""
        self.training = {k: v for k, v in e.items() if k not in ("event", "time")}
        attempt = int(e.get("attempt") or (self.attempts[-1].number if self.attempts else 1))
        if attempt != self.training_attempt:
            self.training_attempt, self.training_series = attempt, {}
        x = e.get("step")
        if x is None:
            x = e.get("epoch")
        if x is None:
            x = max((len(s) for s in self.training_series.values()), default=0)
        metrics = e.get("metrics")
        for name, value in (metrics.items() if isinstance(metrics, dict) else ()):
            self.training_series.setdefault(str(name), []).append((x, value))

    def _attempt(self, e: dict[str, Any]) -> Attempt:
        number = int(e.get("attempt") or 1)
        for attempt in self.attempts:
            if attempt.number == number:
                return attempt
        attempt = Attempt(number, e["time"])  # a log that lost its ATTEMPT_STARTED line
        self.attempts.append(attempt)
        return attempt

    def _apply_task(self, kind: str, at: float, e: dict[str, Any]) -> None:
        attempt = self._attempt(e)
        run = attempt.tasks.setdefault(e["task"], TaskRun(e["task"], attempt.number))
        run.container_id = e.get("container_id") or run.container_id
        if kind == ev.TASK_ALLOCATED:
            run.allocated_at, run.status = at, TaskStatus.ALLOCATED
            run.node_http = e.get("node_http") or run.node_http
        elif kind == ev.TASK_REGISTERED:
            run.registered_at, run.status = at, TaskStatus.REGISTERED
            run.host, run.port = e.get("host", ""), int(e.get("port") or 0)
        elif kind == ev.TASK_STARTED:
            run.started_at, run.status = at, TaskStatus.RUNNING
        elif kind == ev.TASK_FINISHED:
            run.finished_at, run.status, run.exit_code = at, e.get("status", "FINISHED"), e.get("exit_code")
            run.host = e.get("host") or run.host
            run.duration_s = e.get("duration_s")
            run.peak_rss_kib = int(e.get("peak_rss_kib") or 0)
            run.gpu_util_max = e.get("gpu_util_max")
            run.stderr_tail, run.reason = e.get("stderr_tail", ""), e.get("reason", "")

    # ------------------------------------------------------------ views
    @property
    def running(self) -> bool:
        return self.status == RUNNING

    @property
    def log_incomplete(self) -> bool:
        """The AM never closed the log, and not because the user killed the job (a kill ends an AM before it
        can: what it wrote is all there is to say)."""
        return not self.complete and not self.running and self.status != "KILLED"

    @property
    def start(self) -> float | None:
        return self.submitted_at or self.started_at or (self.events[0]["time"] if self.events else None)

    @property
    def end(self) -> float | None:
        return self.finished_at

    def runs_of(self, task: str) -> list[TaskRun]:
        """The task's run in each attempt, oldest first."""
        return [a.tasks[task] for a in self.attempts if task in a.tasks]

    def duration_s(self, now: float | None = None) -> float | None:
        if self.start is None:
            return None
        end = self.end if self.end is not None else (time.time() if now is None else now)
        return max(end - self.start, 0.0)

    @property
    def needs_yarn(self) -> bool:
        """Whether YARN's report decides the status: an open log, or one closed by a signalled AM."""
        return (not self.complete and self.running) or bool(self.stopped_by)

    def reconcile(self, rm_state: str, rm_final_status: str, rm_diagnostics: str = "") -> None:
        """YARN's word on an application whose AM could not say how it ended: an open log (the AM died
        before closing it) or a log closed on SIGTERM (killed, or its node went away: YARN knows which).
        Tasks the log left running are marked LOST."""
        if not self.needs_yarn or rm_state not in TERMINAL_STATES:
            return
        final = rm_final_status if rm_final_status in TERMINAL else rm_state
        if self.stopped_by and self.complete:
            if final != self.status:
                self.incomplete_reason = (f"the AM was stopped ({self.stopped_by}) and wrote {self.status}; "
                                          f"YARN's final status is {final}")
                self.diagnostics = rm_diagnostics.strip() or self.diagnostics
        else:
            self.diagnostics = self.diagnostics or rm_diagnostics.strip()
            self.finished_at = self.events[-1]["time"] if self.events else None
            self.incomplete_reason = (
                "the application was killed before its AM closed the event log (YARN ends an AM 250 ms after "
                "its SIGTERM); the events below are what it wrote before" if final == "KILLED" else
                "the AM ended without closing the event log; the events below are what it wrote before")
        self.status = final
        for attempt in self.attempts:
            for run in attempt.tasks.values():
                if run.finished_at is None:
                    run.status, run.reason = TaskStatus.LOST, run.reason or "the AM ended before this task reported"

    def summary(self, now: float | None = None) -> dict[str, Any]:
        duration = self.duration_s(now)
        return {"app_id": self.app_id, "name": self.name, "user": self.user, "status": self.status,
                "start": self.start, "duration_s": None if duration is None else round(duration, 1),
                "attempts": len(self.attempts), "max_attempts": self.max_attempts, "complete": self.complete}

    def timeline(self, now: float | None = None) -> list[dict[str, Any]]:
        """Bars for every task of every attempt, as percentages of the job's span."""
        t0 = self.start
        span = self.duration_s(now)
        if t0 is None or not span:
            return []
        end_default = t0 + span

        def pct(t: float) -> float:
            return round(100.0 * (t - t0) / span, 2)

        rows: list[dict[str, Any]] = []
        if self.started_at is not None:  # the AM: queued at YARN until it starts, then alive to the end
            rows.append({"attempt": "", "task": "AM", "status": self.status, "bars": [
                {"kind": "starting", "left": 0.0, "width": max(pct(self.started_at), 0.3)},
                {"kind": "running", "left": pct(self.started_at),
                 "width": max(100.0 - pct(self.started_at), 0.3)}]})
        for attempt in self.attempts:
            for run in attempt.tasks.values():
                begin = run.allocated_at or attempt.started_at
                started = run.started_at or run.registered_at
                end = run.finished_at or attempt.ended_at or end_default
                if started is not None:
                    bars = [{"kind": "starting", "left": pct(begin), "width": max(pct(started) - pct(begin), 0.3)},
                            {"kind": "running", "left": pct(started), "width": max(pct(end) - pct(started), 0.3)}]
                else:
                    bars = [{"kind": "starting", "left": pct(begin), "width": max(pct(end) - pct(begin), 0.3)}]
                rows.append({"attempt": attempt.number, "task": run.task, "status": run.status, "bars": bars})
        return rows


def when(ts: float | None) -> str:
    """A time of the history as its pages and reports show it (UTC)."""
    if ts is None:
        return ""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _utc(seconds: Any) -> str:
    return f"{when(float(seconds or 0))} UTC"
