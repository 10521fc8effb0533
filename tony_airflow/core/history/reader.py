"""Loading job histories from the store, checked against YARN when a log is still open."""

from __future__ import annotations

import logging
from typing import Any

from tony_airflow.core.history.model import JobHistory
from tony_airflow.core.history.store import HistoryStore, JobFiles
from tony_airflow.core.job_usage import job_usage, peaks_of

log = logging.getLogger("tony.history")


def load(store: HistoryStore, files: JobFiles, rm: Any = None, with_spec: bool = False) -> JobHistory:
    """One job. A log whose AM could not say how the job ended (still open, or closed on SIGTERM)
    is reconciled with the ResourceManager (`rm`, optional): YARN's final status wins."""
    spec = store.spec(files.app_id) if with_spec else None
    job = JobHistory.from_events(files.app_id, store.events(files), spec, complete=files.complete)
    if (job.needs_yarn or not job.running) and rm is not None:
        try:
            report = rm.application(files.app_id)
        except Exception as exc:  # the history is still worth showing without YARN's word
            log.debug("no report for %s: %s", files.app_id, exc)
        else:
            job.reconcile(report.state, report.final_status, report.diagnostics)
            if report.is_terminal:  # YARN's resource-seconds are final once the application has ended
                job.usage = job_usage(report, peaks_of(job))
    return job


def load_by_id(store: HistoryStore, app_id: str, rm: Any = None, with_spec: bool = True) -> JobHistory | None:
    files = store.find(app_id)
    return None if files is None else load(store, files, rm, with_spec)


class JobCache:
    """Finished logs never change: parse each once (the history server lists often)."""

    def __init__(self, store: HistoryStore, rm: Any = None):
        self.store = store
        self.rm = rm
        self._done: dict[str, JobHistory] = {}

    def jobs(self) -> list[JobHistory]:
        found = []
        for files in self.store.jobs():
            job = self._done.get(files.app_id) if files.complete else None
            if job is None:
                job = load(self.store, files, self.rm)
                if files.complete and not job.stopped_by:  # a signalled AM's log waits for YARN's word
                    self._done[files.app_id] = job
            found.append(job)
        known = {j.app_id for j in found}
        for app_id in [a for a in self._done if a not in known]:  # purged
            del self._done[app_id]
        return found
