"""The training's numbers in Airflow: which progress lines go into the task's log (a worker's wait and the
triggerer's alike), and what the task hands on at the end (XCom `training`, OpenLineage, the asset event).

A task log keeps every line, unlike a terminal's one live line: a change of the job's state or phase goes
in at once, a change of the training's numbers alone at most every TRAINING_LINE_EVERY_S (the same rule as
`ytf-submit`'s log). The last numbers seen are kept: a job's history has the final ones (the AM's last
TRAINING event), and what was seen is the fallback when the history cannot be read.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tony_airflow.core.presentation import TRAINING_LINE_EVERY_S, progress_text
from tony_airflow.core.protocol import Progress
from tony_airflow.yarn.rest import ApplicationReport

TRAINING_KEY = "training"  # XCom and trigger event: the final numbers with the application id


class ProgressLines:
    """The progress lines worth a task log line, and the newest training numbers seen."""

    def __init__(self) -> None:
        self._text = ""
        self._bare = ""  # the last line logged, less its training part
        self._at = float("-inf")
        self.training: dict[str, Any] | None = None

    def line(self, app_id: str, report: ApplicationReport, progress: Progress | None, now: float) -> str | None:
        """The line to log for this look at the job, or None (nothing new, or only numbers too soon)."""
        if progress is not None and isinstance(progress.training, dict):
            self.training = progress.training
        text = progress_text(app_id, report, progress)
        if not text or text == self._text:
            return None
        bare = progress_text(app_id, report, replace(progress, training=None)) if progress is not None else text
        if bare == self._bare and now - self._at < TRAINING_LINE_EVERY_S:
            return None
        self._text, self._bare, self._at = text, bare, now
        return text
