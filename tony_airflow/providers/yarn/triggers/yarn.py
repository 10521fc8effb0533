"""`YarnApplicationTrigger`: waits in Airflow's triggerer for a YARN application to end.

It polls the ResourceManager REST API asynchronously, so one triggerer can
watch many training jobs without holding a worker slot each. The triggers of
one triggerer that watch the same ResourceManager with the same credentials and
interval share one poll per interval through Airflow's own shared streams
(`shared_stream_key`, `open_shared_stream`, `filter_shared_stream`; the poll is
triggers/rm_rounds.py); each trigger keeps its own error budget and `on_kill`.
While the application runs it logs the AM's progress line on each change, as the
operator does in a worker (the gang's phase, an elastic job's lost and replaced
worker, how far the training is: one request to the AM's page per round; the
training's numbers alone at most every few seconds, providers/yarn/training.py); with `stream_logs` it writes
the chief's new output lines into the task's log while the task is deferred.
It carries the resolved ResourceManager addresses (not a connection id), so it
needs no connection lookup in the triggerer.
Every outcome, including "the RM did not answer", is an event; the operator
or sensor decides what it means. An event within DEFER_SETTLE_S of the
deferral is told when that time has passed (a race in Airflow's scheduler).

It is a `BaseEventTrigger` because Airflow offers shared streams to those only;
Airflow's triggerer then counts it among its "watchers" in its status line.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Hashable
from typing import Any

import httpx
from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from tony_airflow.core.am.gang import am_waiting_line
from tony_airflow.core.output_follow import FOLLOW_TIMEOUT_S, FollowState, OutputFollower
from tony_airflow.core.protocol import APP_TAG, Progress, progress_page, progress_url
from tony_airflow.providers.yarn.connection import YarnSettings, http_auth
from tony_airflow.providers.yarn.training import TRAINING_KEY, ProgressLines
from tony_airflow.providers.yarn.triggers.rm_rounds import Round, rounds
from tony_airflow.yarn.rest import ApplicationReport, AsyncResourceManagerClient

MAX_CONSECUTIVE_ERRORS = 3  # RM errors (answers) tolerated in a row before the trigger gives up with an error event
# How long rounds in which no RM answered as the active one (all down, or an HA election) are ridden out:
# Hadoop's clients wait yarn.resourcemanager.connect.max-wait.ms (15 min) for an RM, so does the trigger.
RM_PATIENCE_S = 900.0
# How long after deferring an end is held back. Airflow 3.3's scheduler fails a deferred task whose trigger fired
# before it processed the executor's report of the deferring process ("state mismatch": the try goes up for retry
# with no history, apache/airflow#67287 and #72716); that report came 5.3 s after a deferral in a CI run.
DEFER_SETTLE_S = 10.0


class NoActiveResourceManager(ConnectionError):
    """A round in which no ResourceManager answered as the active one."""


def event_payload(report: ApplicationReport) -> dict[str, Any]:
    """The event of a terminal application: `status` is success, failed or killed."""
    status = ("success" if report.final_status == "SUCCEEDED"
              else "killed" if "KILLED" in (report.state, report.final_status) else "failed")
    return {"status": status, "application_id": report.id, "state": report.state,
            "final_status": report.final_status, "diagnostics": report.diagnostics,
            "tracking_url": report.tracking_url}


class YarnApplicationTrigger(BaseEventTrigger):
    """Fires once, when `application_id` is FINISHED, FAILED or KILLED (or cannot be watched)."""

    def __init__(self, application_id: str, rm_addresses: list[str], user: str | None = None,
                 auth: str = "simple", poll_interval: float = 5.0, kill_on_task_kill: bool = True,
                 principal: str | None = None, keytab: str | None = None, stream_logs: bool = False,
                 log_tail_lines: int = 100, follow: dict[str, Any] | None = None,
                 seen_state: list[str] | None = None, rm_patience_s: float = RM_PATIENCE_S,
                 not_before: float | None = None) -> None:
        super().__init__()
        self.application_id = application_id
        self.rm_addresses = list(rm_addresses)
        self.user = user
        self.auth = auth
        # Kerberos: the keytab's path (not its content) travels to the triggerer, which reads it there
        self.principal = principal
        self.keytab = keytab
        self.poll_interval = float(poll_interval)
        self.kill_on_task_kill = kill_on_task_kill
        # the chief's output into the task log while deferred; `follow` is where a previous reader stopped
        self.stream_logs = stream_logs
        self.log_tail_lines = int(log_tail_lines)
        self.follow = dict(follow or {})
        # [state, final status] the task logged before deferring: the trigger logs only the changes after it
        self.seen_state = list(seen_state) if seen_state else None
        self.rm_patience_s = float(rm_patience_s)
        # epoch seconds before which an end is not told (DEFER_SETTLE_S after the deferral); None: at once
        self.not_before = None if not_before is None else float(not_before)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}", {
            "application_id": self.application_id, "rm_addresses": self.rm_addresses, "user": self.user,
            "auth": self.auth, "poll_interval": self.poll_interval, "kill_on_task_kill": self.kill_on_task_kill,
            "principal": self.principal, "keytab": self.keytab, "stream_logs": self.stream_logs,
            "log_tail_lines": self.log_tail_lines, "follow": self.follow, "seen_state": self.seen_state,
            "rm_patience_s": self.rm_patience_s, "not_before": self.not_before,
        })

    @classmethod
    def for_settings(cls, settings: YarnSettings, application_id: str, poll_interval: float,
                     kill_on_task_kill: bool = True, stream_logs: bool = False,
                     log_tail_lines: int = 100, seen_state: list[str] | None = None) -> YarnApplicationTrigger:
        """The trigger for one application of a resolved `yarn` connection, made as the task defers."""
        return cls(application_id, settings.rm_addresses, user=settings.user, auth=settings.auth,
                   poll_interval=poll_interval, kill_on_task_kill=kill_on_task_kill,
                   principal=settings.principal, keytab=settings.keytab, stream_logs=stream_logs,
                   log_tail_lines=log_tail_lines, seen_state=seen_state, not_before=time.time() + DEFER_SETTLE_S)

    def _client(self) -> AsyncResourceManagerClient:
        auth = http_auth(YarnSettings(rm_addresses=self.rm_addresses, auth=self.auth, principal=self.principal,
                                      keytab=self.keytab))
        return AsyncResourceManagerClient(self.rm_addresses, user=self.user, auth=auth)

    def shared_stream_key(self) -> Hashable:
        """Triggers with equal keys share one ResourceManager poll: the same RM, credentials and interval
        (a 60 s trigger never lives on a 1 s trigger's rounds, nor spends its errors)."""
        return ("tony-airflow:rm-rounds", tuple(self.rm_addresses), self.user, self.auth, self.principal,
                self.keytab, self.poll_interval)

    @classmethod
    async def open_shared_stream(cls, kwargs: dict[str, Any]) -> AsyncGenerator[Round, None]:
        """The group's poll (Airflow calls it once per group, with one member's kwargs; only the key's
        fields are used)."""
        trigger = cls(**kwargs)
        async with contextlib.aclosing(rounds(trigger._client(), trigger.poll_interval, tags=[APP_TAG],
                                              user=trigger.user)) as stream:
            async for found in stream:
                yield found

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Standalone (a triggerer that does not share streams, tests): a poll of its own. A client that
        cannot be made (Kerberos without its package) is the filter's error event, before any poll."""
        own = type(self).open_shared_stream(self.serialize()[1])
        async with contextlib.aclosing(own) as stream, \
                contextlib.aclosing(self.filter_shared_stream(stream)) as events:
            async for event in events:
                yield event
                return

    async def filter_shared_stream(self, shared_stream: AsyncIterator[Any]) -> AsyncGenerator[TriggerEvent, None]:
        """This trigger's application in each round: its state changes logged, the chief's output streamed,
        one event when it has ended, or when the RM has not answered for MAX_CONSECUTIVE_ERRORS rounds."""
        seen: tuple[str, ...] | None = tuple(self.seen_state) if self.seen_state else None
        errors, silent_since = 0, None
        try:
            client = self._client()
        except Exception as exc:  # e.g. Kerberos asked but its package is missing
            await self._settled()
            yield TriggerEvent({"status": "error", "application_id": self.application_id, "message": str(exc)})
            return
        follower = OutputFollower(FollowState.from_dict(self.follow), self.log_tail_lines) if self.stream_logs else None
        lines = ProgressLines()
        async with httpx.AsyncClient(auth=client.auth, timeout=FOLLOW_TIMEOUT_S, follow_redirects=True) as http:
            async for found in shared_stream:
                try:
                    report = await self._report_in(found, client)
                except Exception as exc:
                    if _unanswered(exc):  # a failover: wait for the new active RM, as Hadoop's clients do
                        silent_since = found.at if silent_since is None else silent_since
                        if found.at - silent_since < self.rm_patience_s:
                            self.log.warning("%s: no active ResourceManager for %.0f s (waiting up to %.0f s): %s",
                                             self.application_id, found.at - silent_since, self.rm_patience_s, exc)
                            continue
                    errors += 1
                    self.log.warning("%s: ResourceManager error %d/%d: %s", self.application_id, errors,
                                     MAX_CONSECUTIVE_ERRORS, exc)
                    if errors >= MAX_CONSECUTIVE_ERRORS:
                        await self._settled()
                        yield TriggerEvent({"status": "error", "application_id": self.application_id,
                                            "message": f"cannot watch {self.application_id}: {exc}"})
                        return
                    continue
                errors, silent_since = 0, None
                waiting = am_waiting_line(report.diagnostics) if report.state == "ACCEPTED" else ""
                if (report.state, report.final_status, waiting) != seen:
                    seen = (report.state, report.final_status, waiting)
                    self.log.info("%s %s %s%s", self.application_id, report.state, report.final_status,
                                  f" · {waiting}" if waiting else "")
                if report.state == "RUNNING":
                    progress = await _am_progress(report.tracking_url, http)
                    text = lines.line(report.id, report, progress, found.at) if progress is not None else None
                    if text:  # the gang's phase, and how far the training is (percent, time left, loss)
                        self.log.info("%s", text)
                if follower is not None and not report.is_terminal:
                    for line in await follower.poll_async(report.tracking_url, http):
                        self.log.info("%s", line)
                if report.is_terminal:
                    await self._settled()
                    payload = event_payload(report)
                    if follower is not None:  # the operator reads the rest from the aggregated logs
                        payload["follow"] = follower.snapshot().to_dict()
                    if lines.training is not None:  # the numbers last seen (the history has the final ones)
                        payload[TRAINING_KEY] = lines.training
                    yield TriggerEvent(payload)
                    return

    async def _settled(self) -> None:
        """Every event waits until the deferral has settled (DEFER_SETTLE_S; a race in Airflow's scheduler)."""
        if self.not_before is not None:
            await asyncio.sleep(max(0.0, self.not_before - time.time()))

    async def _report_in(self, found: Round, client: AsyncResourceManagerClient) -> ApplicationReport:
        """This application's report from the round, else asked for (not this project's, or ended long ago)."""
        if found.error:
            raise NoActiveResourceManager(found.error) if found.unanswered else ConnectionError(found.error)
        report = found.reports.get(self.application_id)
        return report if report is not None else await client.application(self.application_id)

    async def on_kill(self) -> None:
        """The user killed the deferred task (mark failed, clear): stop the application with it."""
        if not self.kill_on_task_kill:
            return
        client = self._client()
        report = await client.application(self.application_id)
        if not report.is_terminal:
            self.log.info("Killing %s because its task was killed", self.application_id)
            await client.kill(self.application_id)


async def _am_progress(tracking_url: str, http: httpx.AsyncClient) -> Progress | None:
    """The AM's progress record through the RM's proxy; None before the AM serves it, or when it does not
    answer (a nicety beside the RM's state, never an error)."""
    url = progress_url(tracking_url)
    if url is None:
        return None
    try:
        resp = await http.get(url)
        return progress_page(resp.json())[0] if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def _unanswered(exc: BaseException) -> bool:
    """No RM answered as the active one: the round's poll, or this trigger's own request."""
    return isinstance(exc, NoActiveResourceManager) or bool(getattr(exc, "unanswered", False))
