"""The AM's view of how far the training is: the `training` dict of the status and progress pages, the
metrics' series of `/training.json`, the TRAINING history events, and the bad reports counted.

One task's reports drive it (the chief's, else worker 0's, else the first task that reports): every
worker of a data-parallel job reports the same steps, and a mix of them would make the rate jitter.
Pure state: no HTTP, no YARN; `now` comes from the clock given, so the tests drive time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tony_airflow.core.history import events as ev
from tony_airflow.progress import COUNT_FIELDS, MAX_METRICS, REFUSAL_KINDS, BadReport, clean_report

MAX_POINTS = 500         # points kept per metric: older points thinned, the first and the last kept
# curves kept: a program whose metric names change (`loss_epoch_3`, one per file) added a curve per report,
# without bound, to the AM's memory and to every page it renders (a review: 2,000 reports, 64,000 curves)
MAX_SERIES = 2 * MAX_METRICS
EVENT_EVERY_S = 10.0     # at most one TRAINING history event this often (and the last before JOB_FINISHED)
SOURCES = ("report", "tensorboard")


def rank(task: str, first: str | None) -> int:
    """Which task's reports win: the chief's (PyTorch's master's: 0), worker 0's (1), the first to report (2),
    others (3)."""
    if task.startswith(("chief:", "master:")):
        return 0
    if task == "worker:0":
        return 1
    return 2 if task == first else 3


def percent_of(report: dict[str, Any]) -> float | None:
    """0-100 from the steps, else from the epochs; None when neither has a total."""
    for done, total in (("step", "total_steps"), ("epoch", "total_epochs")):
        if report.get(done) is not None and report.get(total):
            return round(max(0.0, min(100.0, 100.0 * report[done] / report[total])), 1)
    return None


def thin(points: list[list[float]]) -> list[list[float]]:
    """Every other point between the first and the last: a long run keeps its shape in MAX_POINTS."""
    return [points[0], *points[1:-1][1::2], points[-1]]


class TrainingStore:
    def __init__(self, listener: Callable[..., Any] | None = None, clock: Callable[[], float] = time.time):
        self.listener = listener
        self.clock = clock
        self.refused = {kind: 0 for kind in REFUSAL_KINDS}  # over the whole job, from every executor
        self.attempt = 0
        self._reset()

    def _reset(self) -> None:
        self.training: dict[str, Any] | None = None
        self.series: dict[str, list[list[float]]] = {}
        self._first_task: str | None = None
        self._start: tuple[float, float | None] | None = None  # (when, percent) of the driver's first report
        self._count = 0
        self._evented_at = 0.0
        self._evented: dict[str, Any] | None = None

    def new_attempt(self, attempt: int) -> None:
        """A new attempt starts over (its rate, its series); the history keeps the earlier ones' events."""
        self.flush_event()
        self.attempt = attempt
        self._reset()

    def count_refused(self, counts: dict[str, Any] | None) -> None:
        """An executor's new refusals since its last message (bad token, bad JSON, too large, flood)."""
        for kind, n in (counts or {}).items():
            if kind in self.refused and isinstance(n, int) and not isinstance(n, bool) and n > 0:
                self.refused[kind] += n

    def receive(self, task: str, attempt: int, report: object, source: str = "report") -> str | None:
        """Take one report of `task`; None, or why it was not taken (counted as bad_report when bad)."""
        if attempt != self.attempt:
            return f"attempt {attempt} is over; the current attempt is {self.attempt}"
        try:
            clean = clean_report(report)
        except BadReport as exc:
            self.refused["bad_report"] += 1
            return str(exc)
        if source not in SOURCES:
            source = "report"
        if self._first_task is None:
            self._first_task = task
        driver = self.training["task"] if self.training else None
        if driver is not None and driver != task:
            if rank(task, self._first_task) >= rank(driver, self._first_task):
                return None  # another task drives the numbers; this one's are not shown
            self.series, self._start = {}, None  # a better task took over: its own rate and curves
        now = self.clock()
        percent = percent_of(clean)
        if self._start is None or (percent is not None and self._start[1] is None):
            self._start = (now, percent)
        self.training = {"task": task, **{k: clean[k] for k in COUNT_FIELDS}, "percent": percent,
                         "eta_s": self._eta(now, percent), "metrics": clean["metrics"], "updated": round(now, 3),
                         "source": source}
        self._count += 1
        self._add_points(clean)
        if now - self._evented_at >= EVENT_EVERY_S:
            self._emit(now)
        return None

    def _eta(self, now: float, percent: float | None) -> float | None:
        """Seconds left at the rate since the driver's first report of this attempt."""
        if percent is None or self._start is None:
            return None
        if percent >= 100.0:
            return 0.0
        since, start_percent = self._start
        if start_percent is None:
            return None
        gained, elapsed = percent - start_percent, now - since
        if gained <= 0 or elapsed <= 0:
            return None
        return round(elapsed / gained * (100.0 - percent), 1)

    def _add_points(self, clean: dict[str, Any]) -> None:
        x = next((clean[k] for k in ("step", "epoch") if clean.get(k) is not None), self._count)
        for name, value in clean["metrics"].items():
            if name not in self.series and len(self.series) >= MAX_SERIES:
                continue  # the latest numbers still show it; no new curve
            points = self.series.setdefault(name, [])
            if points and points[-1][0] == x:
                points[-1] = [x, value]  # the same step again (an epoch's end after its last batch)
            else:
                points.append([x, value])
            if len(points) > MAX_POINTS:
                self.series[name] = thin(points)

    def _emit(self, now: float) -> None:
        if self.listener is not None and self.training is not None and self.training != self._evented:
            self.listener(ev.TRAINING, attempt=self.attempt, **self.training)
        self._evented, self._evented_at = self.training, now

    def flush_event(self) -> None:
        """The newest numbers into the history if the last event did not have them (before JOB_FINISHED)."""
        if self.training is not None and self.training != self._evented:
            self._emit(self.clock())

    def page(self) -> dict[str, Any]:
        """`/training.json`."""
        return {"training": self.training, "series": self.series}
