"""Where a trivial job's seconds go, phase by phase (issue #54 item 1): from the clocks that saw each step.

One run of `ytf-submit` is cut at the moments three witnesses recorded, all on this one machine's clock:
- the bench: when it started the client (t0) and when the client exited (t0 + wall);
- the ResourceManager's application report: `startedTime` (the submission accepted), `launchTime` (the AM's
  container launched), `finishedTime` (the AM unregistered);
- the job's own event log (core/history/events.py): when the client built the submission (JOB_SUBMITTED),
  when our Python AM began (AM_STARTED: after skein's Java AM started and ran it), the tasks' containers
  allocated, the executors registered, the workers' ends, the AM's verdict (JOB_FINISHED);
- each task's stamp: when the user's command began (the latest of them).

Each phase is the time between two of these moments; they add up to the client's wall time. Pure: the bench
hands it what it read, and the unit tests hand it what they make up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# (phase, what it holds), in order; the keys of `phases()`
PHASES: tuple[tuple[str, str], ...] = (
    ("client start", "the client's Python start, reading the configuration, staging files in HDFS"),
    ("submission", "the submission built -> the ResourceManager has accepted it"),
    ("AM scheduled", "accepted -> the AM's container launched by its NodeManager"),
    ("AM start", "skein's Java AM starts, then starts our Python AM"),
    ("containers", "our AM asks for the tasks' containers -> the last is allocated"),
    ("executors", "the last container allocated -> the last executor registered its port"),
    ("command start", "the cluster spec published -> the last task's command began"),
    ("command", "the user's command runs -> the last worker's end is seen by the AM"),
    ("end of job", "the last worker ended -> the AM's verdict (the ps stopped)"),
    ("unregistration", "the AM's verdict -> the ResourceManager's finishedTime"),
    ("client end", "finishedTime -> the client has exited"),
)


class TimelineError(ValueError):
    """A run whose witnesses do not hold a moment a phase needs."""


def _latest(events: Iterable[Mapping[str, Any]], name: str, **where: Any) -> float:
    times = [float(e["time"]) for e in events
             if e.get("event") == name and all(str(e.get(k, "")).startswith(v) for k, v in where.items())]
    if not times:
        raise TimelineError(f"no {name} event" + (f" for {where}" if where else ""))
    return max(times)


def phases(t0: float, wall: float, command_started: float, app: Mapping[str, Any],
           events: list[Mapping[str, Any]]) -> dict[str, float]:
    """Seconds per phase of one run. `app` is the RM's application JSON (milliseconds), `events` the job's
    event log (first AM attempt), `command_started` the latest task stamp (seconds since the epoch)."""
    try:
        accepted, launched, finished = (float(app[k]) / 1000.0 for k in ("startedTime", "launchTime",
                                                                          "finishedTime"))
    except (KeyError, TypeError, ValueError) as exc:
        raise TimelineError(f"the RM's report lacks {exc}") from exc
    moments = [
        t0,
        _latest(events, "JOB_SUBMITTED"),
        accepted,
        launched,
        _latest(events, "AM_STARTED"),
        _latest(events, "TASK_ALLOCATED"),
        _latest(events, "TASK_REGISTERED"),
        command_started,
        _latest(events, "TASK_FINISHED", task="worker"),
        _latest(events, "JOB_FINISHED"),
        finished,
        t0 + wall,
    ]
    return {name: moments[i + 1] - moments[i] for i, (name, _) in enumerate(PHASES)}
