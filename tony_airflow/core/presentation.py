"""How a job is told to a person: the failure line, the progress line, the URLs.

Every front end (the command line, the Airflow operator and sensor, Azkaban and
Oozie) says these the same way, so they live in the core, not in one front end.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from typing import Any

from tony_airflow.core.am.gang import am_waiting_line
from tony_airflow.core.protocol import Progress
from tony_airflow.yarn.rest import ApplicationReport


def tensorboard_url(tracking_url: str) -> str:
    """TensorBoard is a page of the AM's web UI, behind the ResourceManager's proxy."""
    return tracking_url.rstrip("/") + "/pages/tensorboard/"


def failure_line(app_id: str, final_status: str, diagnostics: str) -> str:
    """The one line every front end ends a failed job with: id, final status, YARN's diagnostics."""
    return f"{app_id} {final_status}: {(diagnostics or '').strip()}"


TRAINING_LINE_EVERY_S = 5.0  # a plain (not a terminal's) progress line that only the training changed: this often


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def _value(number: float) -> str:
    return f"{number:.3g}" if abs(number) < 1000 else f"{number:.0f}"


def training_line(training: dict[str, Any] | None) -> str:
    """How far the training is, in one line every front end shows the same way:
    `epoch 3/10 · 31% · ~2 min left · loss 0.214` (parts the report lacks are left out; '' for None).
    `training` is the AM's dict (core/am/training.py; the `training` key of its status and progress pages)."""
    if not isinstance(training, dict):
        return ""
    parts = []
    for name, total in (("epoch", "total_epochs"), ("step", "total_steps")):
        if training.get(name) is not None:
            parts.append(f"{name} {training[name]}/{training[total]}" if training.get(total)
                         else f"{name} {training[name]}")
            break
    if training.get("percent") is not None:
        parts.append(f"{float(training['percent']):.0f}%")
    eta = training.get("eta_s")
    if eta is not None and (training.get("percent") or 0) < 100:
        parts.append(f"~{_duration(float(eta))} left")
    metrics = training.get("metrics") or {}
    if isinstance(metrics, dict) and metrics:
        name = "loss" if "loss" in metrics else sorted(metrics)[0]
        try:
            parts.append(f"{name} {_value(float(metrics[name]))}")
        except (TypeError, ValueError):
            pass
    return " · ".join(parts)


def progress_text(app_id: str, report: ApplicationReport, progress: Progress | None) -> str:
    """One line of where a job is: state, attempt, and the phase of the gang start."""
    text = f"{app_id} {report.state}"
    if report.is_terminal:
        text += f" {report.final_status}"
    elif progress is not None and progress.total:
        phase = ("finished" if progress.finished == progress.total else
                 "running" if progress.spec_published else
                 f"registered {progress.registered}/{progress.total}" if progress.allocated == progress.total
                 else f"allocated {progress.allocated}/{progress.total}")
        text += f" · attempt {progress.attempt}/{progress.max_attempts} · {phase}"
        if progress.waiting and not progress.spec_published and progress.allocated < progress.total:
            text += f" · {progress.waiting}"
        if progress.notice and progress.spec_published:
            text += f" · {progress.notice}"
        training = training_line(progress.training) if progress.spec_published else ""
        if training and progress.finished < progress.total:
            text += f" · {training}"
    elif report.state == "ACCEPTED" and am_waiting_line(report.diagnostics):
        text += f" · {am_waiting_line(report.diagnostics)}"
    return text


class ProgressPrinter:
    """One live line on a terminal; plain lines, on changes only, otherwise.

    It never says the end: the caller does, once, after the failing task's last lines (a final
    `FINISHED FAILED` here came before them, and then the caller's line said it again). Lines printed while
    the live line is up go above it (`above`), never glued onto it."""

    def __init__(self, app_id: str, stream=sys.stderr, tensorboard: bool = False, out=None):
        self.app_id = app_id
        self.tensorboard = tensorboard
        self.stream = stream
        self.out = out  # where the URLs go (default stdout; Oozie keeps stdout for its key=value lines)
        self.live = stream.isatty()
        self._last = ""
        self._shown = False  # the live line is on the screen
        self._tracking_shown = False
        self._without_training = ""  # the last line shown, less its training part
        self._shown_at = 0.0

    def __call__(self, report: ApplicationReport, progress: Progress | None) -> None:
        if report.tracking_url and not self._tracking_shown:
            self._tracking_shown = True
            self.above(f"Tracking URL: {report.tracking_url}", self.out or sys.stdout)
            if self.tensorboard:
                self.above(f"TensorBoard: {tensorboard_url(report.tracking_url)}", self.out or sys.stdout)
        if report.is_terminal:
            self.clear()
            return
        if progress is None and self._last.endswith(" · finished"):
            return  # every task ended and the AM is unregistering: YARN's RUNNING is no news
        text = progress_text(self.app_id, report, progress)
        if text == self._last:
            return
        bare = progress_text(self.app_id, report, replace(progress, training=None)) if progress else text
        if (not self.live and bare == self._without_training and text != bare and self._last != bare
                and time.monotonic() - self._shown_at < TRAINING_LINE_EVERY_S):
            return  # only the training's numbers changed: a log gets them every TRAINING_LINE_EVERY_S
        self._last, self._without_training, self._shown_at = text, bare, time.monotonic()
        if self.live:
            self.stream.write("\r\033[K" + text)
            self._shown = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def clear(self) -> None:
        """Take the live line off the screen (it is not drawn again)."""
        if self._shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._shown = False
        self._last = ""

    def above(self, line: str, out=None) -> None:
        """Print `line` to `out` (default: the progress stream) above the live line, which is drawn again
        below it."""
        target = out or self.stream
        if self._shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
        print(line, file=target, flush=True)
        if self._shown:
            self.stream.write(self._last)
            self.stream.flush()
