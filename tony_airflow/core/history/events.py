"""The event log the AM writes while a job runs: JSON lines, flushed every second.

Every event is one object with `time` (seconds since the epoch) and `event`
(one of the names below) plus its fields. Events are kept in memory (the AM's
live status page renders them) and appended to the in-progress file of the
history store every FLUSH_S seconds, so an AM that is killed loses at most the
last second. Writing history never fails a job: a store that cannot be
reached is logged once and retried at the next flush.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import Any

from tony_airflow.core.history.store import HistoryStore

log = logging.getLogger("tony.history")

SCHEMA_VERSION = 1
FLUSH_S = 1.0

JOB_SUBMITTED = "JOB_SUBMITTED"
AM_STARTED = "AM_STARTED"
ATTEMPT_STARTED = "ATTEMPT_STARTED"
TASK_ALLOCATED = "TASK_ALLOCATED"
TASK_REGISTERED = "TASK_REGISTERED"
TASK_STARTED = "TASK_STARTED"
TASK_FINISHED = "TASK_FINISHED"
HOST_LOST = "HOST_LOST"  # a host of the attempt's tasks went away (YARN's verdict or an unanswering NodeManager)
AM_LOST = "AM_LOST"  # a new YARN application attempt found the AM before it gone (its host, its process)
PREEMPTED = "PREEMPTED"  # YARN preempted a task's container (the attempt does not count, within its bound)
ATTEMPT_ENDED = "ATTEMPT_ENDED"
JOB_FINISHED = "JOB_FINISHED"


class EventLog:
    def __init__(self, app_id: str, store: HistoryStore | None = None):
        self.app_id = app_id
        self.store = store
        self.events: list[dict[str, Any]] = []
        self._written = 0
        self._failing = False
        self._started = False
        self._lock = threading.Lock()  # the periodic flush may still be running when close() starts

    def emit(self, event: str, at: float | None = None, **fields: Any) -> dict[str, Any]:
        record = {"time": round(time.time() if at is None else at, 3), "event": event, **fields}
        self.events.append(record)
        return record

    # ------------------------------------------------------------ writing
    def start(self, spec_json: str) -> None:
        """Create the job's history directory (blocking; call from a thread)."""
        if self.store is None:
            return
        try:
            self.store.start_job(self.app_id, spec_json)
            self._started = True
            log.info("event log: %s", self.store.path(self.app_id, "events.jsonl.inprogress"))
        except Exception as exc:
            log.warning("job history disabled: cannot write to %s: %s", self.store.root, exc)

    def resume(self, spec_json: str) -> list[dict[str, Any]]:
        """A new AM attempt: go on with the log the lost AM wrote (blocking; call from a thread).
        Returns its events, which are kept as this log's first; [] when there was none to go on with."""
        if self.store is None:
            return []
        try:
            previous = self.store.resume_job(self.app_id)
        except Exception as exc:
            log.warning("job history: cannot read the lost AM's log: %s", exc)
            previous = None
        if previous is None:
            self.start(spec_json)
            return []
        with self._lock:
            self.events[:0] = previous
            self._written = len(previous)
            self._started = True
        log.info("event log: going on with %s (%d events)", self.store.path(self.app_id, "events.jsonl.inprogress"),
                 len(previous))
        return previous

    def flush(self) -> None:
        """Append what is not written yet (blocking; call from a thread)."""
        with self._lock:
            if not self._started:
                return
            pending = self.events[self._written:]
            if not pending:
                return
            if self.store is None:
                return
            try:
                self.store.append(self.app_id, [json.dumps(e, sort_keys=True, default=str) for e in pending])
                self._written += len(pending)
                self._failing = False
            except Exception as exc:
                if not self._failing:
                    log.warning("event log not written (will retry): %s", exc)
                self._failing = True

    def close(self) -> None:
        """Flush and rename the log to its finished name (blocking)."""
        if not self._started:
            return
        self.flush()
        with self._lock:
            if self._started and self._written == len(self.events) and self.store is not None:
                try:
                    self.store.finish_job(self.app_id)
                    self._started = False
                except Exception as exc:
                    log.warning("event log not closed: %s", exc)

    async def flush_forever(self, interval: float = FLUSH_S) -> None:
        while True:
            await asyncio.sleep(interval)
            await asyncio.to_thread(self.flush)
