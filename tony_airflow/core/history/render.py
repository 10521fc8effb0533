"""HTML for the history web UI and the AM's live status page: one set of jinja2 templates.

Where links point differs by who serves the page (the history server serves
logs itself; the live AM links the NodeManager), so the caller passes a
`Links`; the data is always a model.JobHistory.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jinja2
from markupsafe import Markup

from tony_airflow.core.history.model import JobHistory, TaskRun, when
from tony_airflow.core.job_usage import usage_line
from tony_airflow.core.presentation import training_line
from tony_airflow.core.svg_plot import metric_plot, number

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("tony_airflow.core.history", "templates"),
    autoescape=jinja2.select_autoescape(["html"]),
    trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def mib(kib: int | None) -> str:
    return f"{kib / 1024:.0f} MiB" if kib else ""


_ENV.filters.update(when=when, duration=duration, mib=mib, usage=usage_line)


@dataclass
class Links:
    """Where a page's links go; None hides a link."""

    jobs: str | None = None                                  # back to the jobs list
    job: Callable[[str], str] = lambda app_id: f"jobs/{app_id}"
    log: Callable[[TaskRun], str | None] = lambda run: None
    application: str | None = None                          # the YARN application page
    tensorboard: str | None = None
    events_json: str | None = None
    spec_json: str | None = None
    training_json: str | None = None                        # the AM's progress and every metric's points


MAX_PLOTS = 24  # a program may report many metrics; the page plots the first ones, training.json has all


def _of(value: Any, low: float | None = None, high: float | None = None) -> float | None:
    """A reported number as a float within [low, high], or None when it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    value = float(value)
    if low is not None:
        value = max(low, value)
    return value if high is None else min(high, value)


def _count(done: Any, total: Any) -> str:
    if done is None:
        return ""
    return number(done) if total is None else f"{number(done)}/{number(total)}"


def training_view(training: dict[str, Any] | None, series: dict[str, list[Any]] | None,
                  running: bool) -> dict[str, Any] | None:
    """What the job page's Training section shows, from the `training` dict of the status JSON (or the
    last TRAINING event) and each metric's (step, value) points. The data comes from the program, so
    every field may be missing or odd: the template gets only checked, ready-to-show values. The line is
    the one every front end shows (presentation.training_line); time left only while the job runs (a
    finished job's last estimate is no news)."""
    if not training and not series:
        return None
    training = training or {}
    reported = training.get("metrics")
    metrics: dict[Any, Any] = reported if isinstance(reported, dict) else {}
    plots = [Markup(metric_plot(str(name), points)) for name, points in list((series or {}).items())[:MAX_PLOTS]]
    percent = _of(training.get("percent"), 0.0, 100.0)
    shown = {**training, "percent": percent, "metrics": metrics,
             "eta_s": _of(training.get("eta_s"), low=0.0) if running else None}
    return {
        "line": training_line(shown),
        "percent": percent,
        "step": _count(training.get("step"), training.get("total_steps")) if training.get("epoch") is not None
        else "",  # the line names the epoch when there is one, else the step
        "task": str(training.get("task") or ""),
        "source": str(training.get("source") or ""),
        "updated": _of(training.get("updated")),
        "metrics": [(str(k), number(v)) for k, v in metrics.items()],
        "plots": plots,
        "more_plots": max(0, len(series or {}) - MAX_PLOTS),
    }


def render_jobs(jobs: list[JobHistory], links: Links, title: str = "tony-airflow history") -> str:
    return _ENV.get_template("jobs.html").render(jobs=jobs, links=links, title=title, live=False)


def render_job(job: JobHistory, links: Links, live: bool = False, extra: dict[str, Any] | None = None,
               training: dict[str, Any] | None = None, series: dict[str, list[Any]] | None = None) -> str:
    """The job page. `training` and `series` are the AM's live store (its /training.json); without them
    the page shows what the job's TRAINING events hold (the history's curves)."""
    if training is None and not series:  # the AM has nothing of this attempt yet, or this is the history
        training, series = job.training, job.training_series
    view = training_view(training, series, job.running)
    return _ENV.get_template("job.html").render(job=job, links=links, live=live, timeline=job.timeline(),
                                                training=view, title=f"{job.name or job.app_id} — tony-airflow",
                                                **(extra or {}))
