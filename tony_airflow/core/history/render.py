"""HTML for the history web UI and the AM's live status page: one set of jinja2 templates.

Where links point differs by who serves the page (the history server serves
logs itself; the live AM links the NodeManager), so the caller passes a
`Links`; the data is always a model.JobHistory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jinja2

from tony_airflow.core.history.model import JobHistory, TaskRun, when
from tony_airflow.core.job_usage import usage_line

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


def render_jobs(jobs: list[JobHistory], links: Links, title: str = "tony-airflow history") -> str:
    return _ENV.get_template("jobs.html").render(jobs=jobs, links=links, title=title, live=False)


def render_job(job: JobHistory, links: Links, live: bool = False, extra: dict[str, Any] | None = None) -> str:
    return _ENV.get_template("job.html").render(job=job, links=links, live=live, timeline=job.timeline(),
                                                title=f"{job.name or job.app_id} — tony-airflow", **(extra or {}))
