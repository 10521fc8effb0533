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
RESUME_WAIT_S = 120.0  # how long a new AM tries to read the lost AM's log (a NameNode failover takes less)
MARK_WAIT_S = 30.0     # how long an attempt's durable mark is tried before the attempt starts without it

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
GANG_WAITING = "GANG_WAITING"      # containers are missing: why, in one line (core/am/gang.py)
GANG_RELEASED = "GANG_RELEASED"    # wait-die: the gang gave its containers back for an older gang
GANG_REQUESTED = "GANG_REQUESTED"  # ... and asked for them again
ATTEMPT_ENDED = "ATTEMPT_ENDED"
WORKER_LOST = "WORKER_LOST"          # an elastic job's worker container was lost; one replacement was asked for
WORKER_REPLACED = "WORKER_REPLACED"  # ... and it runs: the others kept theirs (core/am/elastic.py)
WRITER_MOVED = "WRITER_MOVED"        # the output's writer role went to the new rank 0 (core/am/rendezvous.py)
SPARE_REQUESTED = "SPARE_REQUESTED"  # an elastic job's spare container was asked for (core/am/spares.py)
SPARE_WAITING = "SPARE_WAITING"      # ... its executor is up and waits for a lost worker's place
SPARE_LOST = "SPARE_LOST"            # ... its container ended while it waited (asked for again within the bound)
TOKEN_OBTAINED = "TOKEN_OBTAINED"  # a new HDFS delegation token from the job's keytab (core/am/token_renewal.py)
TOKEN_RENEWAL_FAILED = "TOKEN_RENEWAL_FAILED"  # new HDFS tokens from the keytab fail (said once per run of failures)
TOKENS = "TOKENS"  # the job's HDFS delegation token: YARN renews it only up to its max lifetime (the job's HDFS ends then)
TRAINING = "TRAINING"  # how far the training is (core/am/training.py): at most every 10 s, and the last
JOB_FINISHED = "JOB_FINISHED"


class HistoryUnreadable(RuntimeError):
    """The lost AM's log exists but could not be read: the new AM must not guess how the job went."""


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

    def resume(self, spec_json: str, wait_s: float = RESUME_WAIT_S) -> list[dict[str, Any]]:
        """A new AM attempt: go on with the log the lost AM wrote (blocking; call from a thread).
        Returns its events, which are kept as this log's first; [] when there was none to go on with.

        A read that fails is tried again for `wait_s` (a NameNode failing over), and then raises
        HistoryUnreadable: a new log is started only when there is none, never over one that could
        not be read (it would lose how the job went, and the new AM would run it again from attempt 1)."""
        if self.store is None:
            return []
        from tony_airflow.yarn.failover import within

        store = self.store
        try:
            previous = within(wait_s, lambda: store.resume_job(self.app_id), lambda exc: log.warning(
                "job history: cannot read the lost AM's log (will retry): %s", exc))
        except Exception as exc:
            raise HistoryUnreadable(f"the job's history could not be read for {wait_s:.0f}s, so a new AM "
                                    f"cannot tell how far the lost one got: {exc}") from None
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

    def mark_attempt(self, attempt: int, wait_s: float = MARK_WAIT_S) -> None:
        """Record durably that `attempt` begins, before it does (blocking; call from a thread)."""
        if self.store is None or not self._started:
            return
        from tony_airflow.yarn.failover import within

        store = self.store
        try:
            within(wait_s, lambda: store.mark_attempt(self.app_id, attempt))
        except Exception as exc:
            log.warning("attempt %d is not marked in the history (a new AM may reuse its number): %s", attempt, exc)

    def marked_attempts(self, wait_s: float = RESUME_WAIT_S) -> list[int]:
        """The attempts the lost AM marked as begun (blocking; call from a thread). Read as `resume` reads
        the log: a listing that fails is tried again for `wait_s`, then raises HistoryUnreadable. Never
        "none" for a listing that failed: the new AM would reuse the number (and the output's writer mark)
        of an attempt the lost AM had begun."""
        if self.store is None:
            return []
        from tony_airflow.yarn.failover import within

        store = self.store
        try:
            return within(wait_s, lambda: store.marked_attempts(self.app_id), lambda exc: log.warning(
                "job history: cannot list the attempts' marks (will retry): %s", exc))
        except Exception as exc:
            raise HistoryUnreadable(f"the job's attempts' marks could not be listed for {wait_s:.0f}s, so a new "
                                    f"AM cannot tell which attempt numbers the lost one used: {exc}") from None

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
