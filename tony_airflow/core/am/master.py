"""The Application Master's lifecycle, driving skein's Java AM.

Per attempt: ask for one container per task, wait for the gang to register,
publish the cluster spec, watch exits, heartbeats and timeouts, decide the
outcome (core/am/policy.py), stop what is left. Failed attempts are retried as a whole cluster up
to `max_attempts`. At the end the YARN application is finished with the final
status and the first failure's task, exit code and stderr tail.

A lost AM (its host, its process) makes YARN start a new application attempt (`am_attempts`): its
AM reads the job's history from HDFS and goes on with the next training attempt (`_take_over`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import skein

from tony_airflow.core import protocol
from tony_airflow.core.am import elastic, gang, hosts, policy, server, tensorboard_proxy
from tony_airflow.core.am import spares as spare_rules
from tony_airflow.core.am.policy import Outcome
from tony_airflow.core.am.registry import Registry
from tony_airflow.core.am.token_renewal import (
    KEYTAB_ENV,
    PRINCIPAL_ENV,
    ObtainedToken,
    TokenRenewal,
    obtain_hdfs_token,
)
from tony_airflow.core.am.yarn_view import ClusterView, YarnView
from tony_airflow.core.history import events as ev
from tony_airflow.core.history.events import EventLog, HistoryUnreadable
from tony_airflow.core.history.model import JobHistory, TaskRun, when
from tony_airflow.core.history.render import Links, render_job
from tony_airflow.core.history.store import HistoryStore, history_dir
from tony_airflow.core.placement import initial_container_ids, service_name, spread_services
from tony_airflow.core.protocol import (
    AM_ADDRESS_KEY,
    INITIAL_ATTEMPT_KEY,
    SUBMITTED_AT_ENV,
    TENSORBOARD_URL_KEY,
)
from tony_airflow.core.spec import JobSpec
from tony_airflow.yarn.rest import attempt_of_container

log = logging.getLogger("tony.am")
TICK_S = 0.25
SPARE_RETRY_S = 10.0  # after a spare could not be asked for
# Once every task runs, YARN's view of the containers is only a backstop (executors report their own
# exits): asking skein's AM for it 4 times a second took CPU from the training (bench.training_overhead).
STEADY_POLL_S = 2.0
# How long past the NodeManager liveness expiry a retry waits for YARN to declare a lost host lost
VERDICT_MARGIN_S = 30.0


class ApplicationMaster:
    def __init__(self, job: JobSpec, secret: str, app: Any, app_id: str, host: str,
                 history: EventLog | None = None, user: str = "", am_attempt: int = 1,
                 yarn: YarnView | None = None):
        self.job = job
        self.secret = secret
        self.app = app  # skein.ApplicationClient (or a stand-in in unit tests)
        self.app_id = app_id
        self.host = host
        self.user = user
        self.history = history or EventLog(app_id)
        self.registry = Registry(job, app_id, listener=self.history.emit)
        self.started = time.time()
        self.address = ""
        self.free_used = 0  # failed attempts YARN caused that did not count (policy.is_free)
        self.am_attempt = am_attempt  # YARN's application attempt of this AM (1: the job's first AM)
        self.first_attempt = 1        # the training attempt this AM begins with
        self.failures: list[str] = []  # "attempt N/M: reason", one per failed training attempt
        self.exhausted = False        # the attempt a lost AM left was the last one allowed
        self.ended: tuple[str, str] | None = None  # the job had ended before this AM took over: how
        self.end_recorded = False     # ...and the history says so already (JOB_FINISHED)
        self._container_of: dict[str, tuple[str, int]] = {}
        self.yarn = yarn              # the RM's view of the cluster, for the gang's wait-die rule (None: not read)
        self._gang = _GangWait()
        self._lost_hosts: set[str] = set()  # hosts lost under an attempt: a spread task goes elsewhere first
        self._replacements = elastic.Replacements()  # an elastic job's lost workers (core/am/elastic.py)
        self._spares_retry_at = 0.0  # a spare that could not be asked for is asked again after SPARE_RETRY_S

    # ------------------------------------------------------------------- main
    async def run(self) -> tuple[str, str]:
        """Run every attempt, recording the job's history; return (final status, diagnostics).

        SIGTERM (YARN killing the application) ends the job as KILLED with its
        event log closed, if the NodeManager leaves the time for it.
        """
        container = os.environ.get("CONTAINER_ID", "")
        if self.am_attempt > 1:  # the AM before this one was lost: go on with its job
            try:
                previous = await asyncio.to_thread(self.history.resume, self.job.to_record_json())
                marked = await asyncio.to_thread(self.history.marked_attempts)
            except HistoryUnreadable as exc:  # never guess: a guess could run an ended job again
                log.error("%s", exc)
                return "FAILED", f"tony-airflow: AM attempt {self.am_attempt}: {exc}"
            killed = None
            if any(e["event"] == ev.JOB_FINISHED and e.get("stopped_by") for e in previous) and self.yarn is not None:
                killed = await asyncio.to_thread(self.yarn.killed)  # the lost AM's SIGTERM: a kill, or its node?
            self._take_over(previous, container, marked, killed=killed)
            opened = asyncio.create_task(asyncio.sleep(0))
        else:
            submitted = float(os.environ.get(SUBMITTED_AT_ENV) or self.started)
            self.history.emit(ev.JOB_SUBMITTED, at=submitted, app_id=self.app_id, name=self.job.name,
                              user=self.user, queue=self.job.queue, tags=self.job.tags,
                              max_attempts=self.job.max_attempts,
                              tasks={t.name: t.instances for t in self.job.tasks.values()},
                              schema=ev.SCHEMA_VERSION)
            self.history.emit(ev.AM_STARTED, at=self.started, host=self.host, container_id=container, am_attempt=1)
            self._record_token_lifetime()
            # Creating the history directory must not hold up the job: it runs beside it.
            opened = asyncio.create_task(asyncio.to_thread(self.history.start, self.job.to_record_json()))
        flusher = asyncio.create_task(self._flush_history(opened))
        renewal = self._start_token_renewal()
        # SIGTERM cancels the job's work only: once the attempts are over, closing the history and
        # reporting the outcome finish (a late SIGTERM, e.g. from a NodeManager going away, is a no-op).
        attempts = asyncio.ensure_future(self._run_attempts())
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, attempts.cancel)
        try:
            status, diagnostics = await attempts
        except asyncio.CancelledError:
            # Killed through YARN, or the node is going away: YARN's own final status is the truth,
            # and `stopped_by` tells readers of the history to prefer it (history/model.py).
            self.registry.abandon("the AM was stopped (SIGTERM) before this task reported")
            status, diagnostics = "KILLED", "tony-airflow: the AM was stopped (SIGTERM): the application was killed"
        except Exception as exc:  # the AM itself broke: say so in the YARN diagnostics
            log.exception("AM failed")
            status = "FAILED"
            diagnostics = f"tony-airflow AM error: {exc!r}; {traceback.format_exc(limit=3)[-800:]}"
        finally:
            flusher.cancel()
            if renewal is not None:
                renewal.stop()
        stopped_by: dict[str, Any] = {"stopped_by": "SIGTERM"} if status == "KILLED" else {}
        if not self.end_recorded:
            self.registry.training.flush_event()  # the last numbers before the end
            self.history.emit(ev.JOB_FINISHED, status=status, diagnostics=diagnostics, **stopped_by)
        closing = time.monotonic()
        await opened
        await asyncio.to_thread(self.history.close)
        log.info("event log closed in %.2fs", time.monotonic() - closing)
        return status, diagnostics

    async def _flush_history(self, opened: asyncio.Task) -> None:
        # shielded: cancelling the flusher (the job is over) must not cancel the opening that run() awaits
        await asyncio.shield(opened)
        await self.history.flush_forever()

    async def _run_attempts(self) -> tuple[str, str]:
        runner, port = await server.start(server.build_app(self.registry, self.secret, self.live_page, self.history,
                                                             address=lambda: self.address))
        self.address = f"{self.host}:{port}"
        log.info("registry listening on %s", self.address)
        self._publish_ui()
        self._publish_tensorboard()
        failures = self.failures
        try:
            attempt = self.first_attempt
            if self.ended is not None:  # the lost AM had ended the job: unregister with that outcome
                return self.ended
            if self.exhausted:
                return "FAILED", policy.diagnostics(False, attempt - 1, self.job.max_attempts + self.free_used,
                                                    failures)
            while True:
                outcome = await self.run_attempt(attempt, initial=attempt == self.first_attempt)
                allowed = self.job.max_attempts + self.free_used
                if outcome.ok:
                    return "SUCCEEDED", policy.diagnostics(True, attempt, allowed, failures)
                again = policy.retry(outcome, attempt, self.job, self.started, time.time(), self.free_used)
                note = ""
                if policy.is_free(outcome, self.job, self.free_used):
                    self.free_used += 1
                    allowed += 1
                    self.registry.allowed_attempts = allowed
                    note = f" (not counted: {outcome.cause})"
                failures.append(f"attempt {attempt}/{allowed}: {outcome.reason}{note}")
                log.error("attempt %d failed: %s%s", attempt, outcome.reason, note)
                if not again:
                    return "FAILED", policy.diagnostics(False, attempt, allowed, failures)
                attempt += 1
        finally:
            self.registry.answer_held()  # a held heartbeat is answered now, not at its wait's end
            await runner.cleanup()

    def _publish_ui(self) -> None:
        url = f"http://{self.address}/"
        try:
            self.app.ui.add_page("tony", url, link_name="TonY status")
        except Exception as exc:  # the dashboard is a convenience, never fatal
            log.warning("could not add the status page to the web UI: %s", exc)

    def _publish_tensorboard(self) -> None:
        """Make TensorBoard one click from the tracking URL: a page of skein's web UI
        pointing at the AM's TensorBoard pass-through (see am/tensorboard_proxy.py)."""
        if "tensorboard" not in self.job.tasks:
            return
        url = f"http://{self.address}{tensorboard_proxy.PREFIX}"
        try:
            self.app.ui.add_page("tensorboard", url, link_name="TensorBoard")
            self.app.kv[TENSORBOARD_URL_KEY] = url.encode()
        except Exception as exc:
            log.warning("could not add TensorBoard to the web UI: %s", exc)
        log.info("TensorBoard served at %s, linked as pages/tensorboard/ of the tracking URL", url)

    def _take_over(self, previous: list[dict[str, Any]], container: str, marked: list[int] | None = None,
                   killed: bool | None = None) -> None:
        """A new YARN application attempt: the AM before this one was lost (YARN has ended its containers).
        Record that, end the training attempt it was running (not counted: the AM's loss is not the
        job's fault, within max_free_retries) and go on with the next one, from the output's checkpoints.

        A job the lost AM had ended (JOB_FINISHED, or its last attempt ended with no retry to follow: the
        AM was lost between closing its log and telling YARN) is not run again: this AM unregisters with
        that outcome. The attempt number goes above every attempt the lost AM began: the history's, the
        durable marks written before each attempt (`marked`), and attempt 1 (skein's AM starts it with the
        application), so no two attempts ever share a number, nor the output's writer mark.

        A JOB_FINISHED the lost AM wrote because it was stopped by SIGTERM is not an end by itself: its
        NodeManager going away (decommissioned, restarted, the AM expired) sends SIGTERM too, and YARN then
        starts this attempt, which it never does after a user's kill. Unless the RM says the application
        was killed (`killed`: True; None when the RM could not be read, where this attempt's existence is
        the proof), the job goes on as after any lost AM; killed, this AM ends it KILLED without
        unregistering (YARN is ending it). Taking every JOB_FINISHED as final made the new AM exit 143
        without unregistering, until YARN ran out of AM attempts and the job FAILED (issue 51)."""
        ams = [e for e in previous if e["event"] == ev.AM_STARTED]
        last = ams[-1] if ams else {}
        lost, lost_host = int(last.get("am_attempt") or self.am_attempt - 1), str(last.get("host") or "?")
        recorded = [e for e in previous if e["event"] == ev.JOB_FINISHED]
        stopped = bool(recorded) and recorded[-1].get("stopped_by") == "SIGTERM" and killed is not True
        if stopped:  # the lost AM's JOB_FINISHED (and its abandoned tasks) were its node's doing, not a kill
            recorded = []
        resumed: dict[str, Any] = {"resumed": "SIGTERM"} if stopped else {}
        self.history.emit(ev.AM_LOST, am_attempt=lost, host=lost_host, container_id=last.get("container_id", ""),
                          **resumed)
        self.history.emit(ev.AM_STARTED, at=self.started, host=self.host, container_id=container,
                          am_attempt=self.am_attempt)
        if ams:
            self.started = float(ams[0]["time"])  # the application's age counts from its first AM
        if stopped:
            log.warning("AM attempt %d: AM attempt %d was stopped by SIGTERM and recorded the job KILLED, but the "
                        "RM %s: its node went away, the job goes on", self.am_attempt, lost,
                        "could not be read (this new attempt is the proof it was not killed)" if killed is None
                        else "says the application still runs")
        if recorded:
            self.ended = (str(recorded[-1].get("status") or "FAILED"), str(recorded[-1].get("diagnostics") or ""))
            self.end_recorded = True
            log.warning("AM attempt %d: the job had ended (%s) before AM attempt %d was lost: not run again",
                        self.am_attempt, self.ended[0], lost)
            return
        log.warning("AM attempt %d: AM attempt %d was lost on host %s; going on with the job", self.am_attempt,
                    lost, lost_host)
        started = [e for e in previous if e["event"] == ev.ATTEMPT_STARTED]
        ended = {int(e["attempt"]): e for e in previous if e["event"] == ev.ATTEMPT_ENDED}
        for number, e in sorted(ended.items()):
            if e.get("ok"):
                continue
            counted = bool(e.get("counted", True))
            self.free_used += 0 if counted else 1
            note = "" if counted else f" (not counted: {e.get('cause')})"
            self.failures.append(f"attempt {number}/{self.job.max_attempts + self.free_used}: "
                                 f"{e.get('reason', '')}{note}")
        number = max([int(e["attempt"]) for e in started] + list(marked or []) + [1])
        interrupted: dict[str, Any] = next((e for e in reversed(started) if int(e["attempt"]) == number),
                                           {"tasks": []})
        self.first_attempt = number + 1
        allowed = self.job.max_attempts + self.free_used
        self.registry.allowed_attempts = allowed
        if number in ended:
            if ended[number].get("ok"):
                self.ended = ("SUCCEEDED", policy.diagnostics(True, number, allowed, self.failures))
                log.warning("AM attempt %d: attempt %d had SUCCEEDED before the AM was lost: not run again",
                            self.am_attempt, number)
            else:
                self.exhausted = number >= allowed or bool(
                    self.job.timeouts.application and time.time() - self.started > self.job.timeouts.application)
            return
        finished = {e["task"] for e in previous if e["event"] == ev.TASK_FINISHED and e.get("attempt") == number}
        for task in interrupted.get("tasks") or []:
            if task not in finished:
                self.history.emit(ev.TASK_FINISHED, attempt=number, task=task, status="STOPPED", exit_code=None,
                                  reason=f"its AM was lost (AM attempt {lost} on {lost_host})")
        outcome = Outcome(False, f"the AM was lost (AM attempt {lost}, on host {lost_host})", cause="AM lost")
        again = policy.retry(outcome, number, self.job, self.started, time.time(), self.free_used)
        free = policy.is_free(outcome, self.job, self.free_used)
        self.free_used += 1 if free else 0
        self.history.emit(ev.ATTEMPT_ENDED, attempt=number, ok=False, reason=outcome.reason, first_failure="",
                          first_failure_exit=None, cause=outcome.cause, counted=not free)
        note = f" (not counted: {outcome.cause})" if free else ""
        self.failures.append(f"attempt {number}/{self.job.max_attempts + self.free_used}: {outcome.reason}{note}")
        self.exhausted = not again
        self.registry.allowed_attempts = self.job.max_attempts + self.free_used

    # --------------------------------------------------------------- attempts
    async def run_attempt(self, attempt: int, initial: bool | None = None) -> Outcome:
        reg = self.registry
        reg.new_attempt(attempt)
        self._container_of = {}
        self._replacements = elastic.Replacements()
        if attempt > 1:  # durable before the attempt begins: a new AM never reuses its number
            await asyncio.to_thread(self.history.mark_attempt, attempt)
        attempt_start = time.time()
        self._gang = _GangWait(requested_at=attempt_start, next_watch=attempt_start + FIRST_WATCH_S)
        self.history.emit(ev.ATTEMPT_STARTED, attempt=attempt, tasks=[x.id for x in reg.tasks.values()])
        for (type_, index) in reg.tasks:
            if type_ in self.job.local_types():  # runs in the submitting process, registers like the rest
                reg.container_allocated((type_, index), "")
        first = attempt == 1 if initial is None else initial  # the containers skein's AM started itself
        if first:
            # skein's AM asked YARN for these when it started; their executors wait for this address
            # and then read which attempt they run (so the attempt goes first).
            for cid, key in initial_container_ids(self.job).items():
                reg.tasks[key].container_id = cid
                self._container_of[cid] = key
            # in a thread: its retries must not stall the registry's event loop
            await asyncio.to_thread(self._publish_required, INITIAL_ATTEMPT_KEY, str(attempt))
            await asyncio.to_thread(self._publish_required, AM_ADDRESS_KEY, self.address)
            log.info("attempt %d: %d containers were requested at start", attempt, len(self._container_of))
        else:
            await self._request_containers(attempt)

        outcome = None
        next_poll = 0.0
        while outcome is None:
            if time.time() >= next_poll:
                await self._poll_containers()
                settled = all(x.done or x.started_at is not None for x in reg.tasks.values()) and not any(
                    x.done and x.exit_code in policy.KILLED_BY_SIGNAL and not x.yarn_diagnostics
                    for x in reg.tasks.values())  # YARN's reason for a kill is worth a quick look
                # a task whose executor went quiet may be gone: YARN's word on its container, soon (#54)
                settled = settled and not policy.silent(reg.tasks.values(), time.time(), self.job.heartbeat_interval)
                next_poll = time.time() + (STEADY_POLL_S if settled else TICK_S)
            if not reg.spec_published:
                if time.time() >= self._gang.next_watch:
                    await self._watch_gang(attempt)
                elif reg.waiting:
                    self._refresh_waiting(attempt)
            if self.job.elastic_max and reg.spec_published:
                await self._replace_lost_workers(attempt)
            if reg.spares is not None and reg.spec_published and reg.spares.to_ask(time.time()):
                # once the gang formed: a spare never takes the room a worker of a forming gang waits for
                await self._ask_spares(attempt)
            outcome = self._decide(attempt_start)
            if outcome is None:
                reg.changed.clear()
                try:
                    await asyncio.wait_for(reg.changed.wait(), TICK_S)
                except TimeoutError:
                    pass
        reg.end_attempt()
        lost: list[hosts.LostHost] = []
        if not outcome.ok:
            outcome, lost = await self._blame_lost_hosts(attempt, outcome)
        retrying = policy.retry(outcome, attempt, self.job, self.started, time.time(), self.free_used)
        await self._stop_remaining(lost, await_verdict=retrying)
        if not outcome.ok and not outcome.cause:
            outcome = self._blame_preemption(attempt, outcome)  # after the stop: every container's end is known
        failed = outcome.task
        self.history.emit(ev.ATTEMPT_ENDED, attempt=attempt, ok=outcome.ok, reason=outcome.reason,
                          first_failure=failed.id if failed else "",
                          first_failure_exit=failed.exit_code if failed else None, cause=outcome.cause,
                          counted=not policy.is_free(outcome, self.job, self.free_used))
        return outcome

    async def _request_containers(self, attempt: int, keys: list[tuple[str, int]] | None = None) -> None:
        """A retry (or a gang asking again, `keys`): one new container per task, named in its environment."""
        wanted = keys if keys is not None else list(self.registry.tasks)
        log.info("attempt %d/%d: requesting %d containers", attempt, self.job.max_attempts, len(wanted))
        services = self._services_for(wanted)
        for (type_, index) in wanted:
            task = self.registry.tasks[(type_, index)]
            if type_ in self.job.local_types():
                continue
            env = protocol.launch_env(type_, index, attempt, self.address, self.app_id)
            container = await asyncio.to_thread(self.app.add_container, services[(type_, index)], env)
            task.container_id = container.id
            self._container_of[container.id] = (type_, index)

    def _services_for(self, wanted: list[tuple[str, int]]) -> dict[tuple[str, int], str]:
        """The skein service of each task asked for: a spread task's on a host no other task of its type
        holds, the hosts lost in an earlier attempt last."""
        reg, job = self.registry, self.job
        services = {key: service_name(key[0], key[1], job) for key in wanted}
        for type_ in job.spread:
            indices = [i for (t, i) in wanted if t == type_]
            taken = {x.host for k, x in reg.tasks.items() if k[0] == type_ and k not in services and x.host}
            try:
                placed = spread_services(job, type_, indices, taken, self._lost_hosts)
            except KeyError as exc:
                log.warning("spread: %s; asking for the tasks' own hosts", exc)
                continue
            services.update({(type_, i): name for i, name in placed.items()})
        return services

    def _publish_required(self, key: str, value: str) -> None:
        """A key the executors cannot start without (which attempt they run, where the AM is): tried for
        KV_PUBLISH_WAIT_S, then the AM fails saying so. Never swallowed: without the attempt a new AM's
        executors would register as attempt 1 and be refused."""
        from tony_airflow.yarn.failover import within

        def put() -> None:
            self.app.kv[key] = value.encode()

        try:
            within(KV_PUBLISH_WAIT_S, put, lambda exc: log.warning("could not publish %s (will retry): %s", key, exc))
        except Exception as exc:
            raise RuntimeError(f"could not publish {key} to skein's key-value store for "
                               f"{KV_PUBLISH_WAIT_S:.0f}s: {exc}") from None

    def _publish(self, key: str, value: str) -> None:
        try:
            self.app.kv[key] = value.encode()
        except Exception as exc:
            log.warning("could not publish %s: %s", key, exc)

    def _decide(self, attempt_start: float) -> Outcome | None:
        rdzv = self.registry.rendezvous
        overdue = rdzv.handover_overdue(time.monotonic()) if rdzv is not None else ""
        if overdue:  # the new rank 0 never took the writer role: its round cannot run (core/am/rendezvous.py)
            log.error("%s", overdue)
            return Outcome(False, overdue)
        return policy.decide(self.job, self.registry.tasks.values(), attempt_start, self.started, time.time(),
                             requested_at=self._gang.requested_at, waiting=self.registry.waiting,
                             replacing=self._replacements.waiting_since())

    async def _replace_lost_workers(self, attempt: int) -> None:
        """Elastic: one new container for each lost worker; every other container keeps running and its
        torchrun agent re-forms the group with the newcomer (core/am/elastic.py)."""
        reg = self.registry
        started, lost = self._replacements.turn(self.job, reg.tasks, time.time())
        for task_id, line in started:
            log.warning("attempt %d: %s", attempt, line)
            reg.notice = line
            self.history.emit(ev.WORKER_REPLACED, attempt=attempt, task=task_id, line=line)
        for key, line in lost:
            task = reg.tasks[key]
            log.warning("attempt %d: %s: asking YARN for one replacement; the other containers keep running",
                        attempt, line)
            self.history.emit(ev.WORKER_LOST, attempt=attempt, task=task.id, host=task.host,
                              container_id=task.yarn_container_id, exit_code=task.exit_code, line=line)
            self._container_of.pop(task.container_id, None)
            reg.replace(key)
            spare = reg.take_spare(key)
            if spare is None:
                reg.notice = f"{line}: replacing it"
                await self._request_containers(attempt, [key])
                continue
            self._replacements.spare_took(task.id)
            self._container_of[spare.container_id] = key
            log.warning("attempt %d: %s takes the place of %s (on %s, container %s); a new spare is asked for "
                        "in %.0fs", attempt, spare.id, task.id, spare.host or "?", spare.yarn_container_id or "?",
                        spare_rules.AFTER_TAKE_S)
            reg.notice = f"{line}: {spare.id} on {spare.host or '?'} takes its place"
            await self._ask_spares(attempt)

    async def _ask_spares(self, attempt: int) -> None:
        """Elastic with `--spares N`: the missing spares, asked for like a worker (the same service: resources,
        image, environment) and named in their environment as spares (core/am/spares.py)."""
        spares = self.registry.spares
        if spares is None or time.time() < self._spares_retry_at:
            return
        service = "worker"  # a spread worker type has no spares (JobSpec._check_elastic)
        for _ in range(spares.to_ask(time.time())):
            spare_id = spares.ask(time.time())
            env = {**protocol.launch_env("worker", 0, attempt, self.address, self.app_id), protocol.ENV_SPARE: spare_id}
            try:
                container = await asyncio.to_thread(self.app.add_container, service, env)
            except Exception as exc:  # a spare is a help, never a reason to fail the job: asked again later
                spares.not_started(spare_id)
                self._spares_retry_at = time.time() + SPARE_RETRY_S
                log.warning("attempt %d: could not ask for %s (asked again in %.0fs): %s", attempt, spare_id,
                            SPARE_RETRY_S, exc)
                return
            spares.launched(spare_id, container.id)
            log.info("attempt %d: asked YARN for %s (skein container %s)", attempt, spare_id, container.id)
            self.history.emit(ev.SPARE_REQUESTED, attempt=attempt, spare=spare_id, container=container.id)

    # ------------------------------------------------------------------ gang
    def _yarn_keys(self) -> list[tuple[str, int]]:
        """The tasks that run in YARN containers (not the client-mode chief)."""
        local = self.job.local_types()
        return [k for k in self.registry.tasks if k[0] not in local]

    def _wants(self) -> list[gang.Want]:
        wants = []
        for name, spec in self.job.tasks.items():
            if name in self.job.local_types():
                continue
            missing = [i for i in range(spec.instances) if self.registry.tasks[(name, i)].allocated_at is None]
            if missing:
                wants.append(gang.Want(name, len(missing), spec.instances, spec.memory_of(missing[0]),
                                       spec.vcores_of(missing[0]), spec.node_label))
        return wants

    def _holding(self, keys: list[tuple[str, int]]) -> gang.Holding:
        """What these tasks' containers hold in all (held ones: what a release gives back; a released gang's
        all: what it would take again), for the wait-die rule's `could_use`."""
        specs = [(self.job.tasks[t], i) for t, i in keys]
        return gang.Holding(frozenset(spec.node_label for spec, _ in specs),
                            sum(spec.memory_of(i) for spec, i in specs), sum(spec.vcores_of(i) for spec, i in specs),
                            sum(spec.gpus for spec, _ in specs))

    async def _watch_gang(self, attempt: int) -> None:
        """While containers are missing: say why in one line, and apply the wait-die rule (core/am/gang.py)."""
        state, reg = self._gang, self.registry
        now = time.time()
        state.next_watch = now + gang.WATCH_S
        wants = self._wants()
        if not wants and not state.released:
            reg.waiting = ""
            return
        view = await asyncio.to_thread(self.yarn.read) if self.yarn is not None else ClusterView()
        keys = self._yarn_keys()
        held = sum(reg.tasks[k].allocated_at is not None for k in keys)
        last = max([reg.tasks[k].allocated_at or 0.0 for k in keys] + [state.requested_at])
        held_keys = keys if state.released else [k for k in keys if reg.tasks[k].allocated_at is not None]
        action, older = gang.step(view.me, view.gangs, held=held, wanted=len(keys), stalled_s=now - last,
                                  released=state.released, backoff_over=time.time() >= state.retry_at,
                                  holding=self._holding(held_keys))
        if action == gang.RELEASE and older is not None:
            await self._release(attempt, older, held, len(keys))
            wants = self._wants()
        elif action == gang.ASK:
            await self._ask_again(attempt)
            wants = self._wants()
        elif state.released and older is not None:
            state.yielding_to = older
        state.reasons = gang.waiting_reasons(
            wants, queue=gang.queue_named(view.queue, self.job.queue) if view.queue else None, nodes=view.nodes,
            user=self.user, yielding_to=state.yielding_to if state.released else None)
        self._refresh_waiting(attempt)

    def _refresh_waiting(self, attempt: int) -> None:
        """The waiting line with the counts of now and the reasons of the last look at the RM."""
        state, reg = self._gang, self.registry
        line = gang.waiting_line(self._wants(), state.reasons)
        if line == reg.waiting:
            return
        reg.waiting = line
        if line and time.time() - state.said_at >= WAITING_EVENT_EVERY_S:
            state.said_at = time.time()
            log.info("attempt %d: %s", attempt, line)
            self.history.emit(ev.GANG_WAITING, attempt=attempt, reason=line)

    async def _release(self, attempt: int, older: gang.GangView, held: int, wanted: int) -> None:
        """Wait-die: give every container back to YARN and withdraw the requests, for the older gang."""
        state, keys, reg = self._gang, self._yarn_keys(), self.registry
        ids = [cid for cid, key in self._container_of.items() if key in keys]
        # The registry's part first, before any await: a registration during the kills below (YARN may still
        # allocate to the gang meanwhile) must not complete the gang and publish its spec.
        reg.release(keys, {reg.tasks[k].yarn_container_id for k in keys})
        for cid in ids:
            try:
                await asyncio.to_thread(self.app.kill_container, cid)
            except Exception:  # already gone
                pass
        containers = await asyncio.to_thread(self.app.get_containers, None, list(skein.model.ContainerState))
        reg.forget_containers({c.yarn_container_id for c in containers if c.id in ids and c.yarn_container_id})
        for cid in ids:
            self._container_of.pop(cid, None)
        state.released, state.releases, state.yielding_to = True, state.releases + 1, older
        pause = gang.backoff_s(state.releases)
        state.retry_at = time.time() + pause
        log.warning("attempt %d: held %d of %d containers and got no more for %.0fs while the older gang %s waits "
                    "for %d: released them all (wait-die); asking again once no older gang waits, after %.1fs",
                    attempt, held, wanted, gang.PATIENCE_S, older.app_id, older.pending, pause)
        self.history.emit(ev.GANG_RELEASED, attempt=attempt, held=held, wanted=wanted, older=older.app_id,
                          older_waits=older.pending, backoff_s=round(pause, 1))

    async def _ask_again(self, attempt: int) -> None:
        state = self._gang
        keys = self._yarn_keys()
        self.registry.ask_again(keys)
        await self._request_containers(attempt, keys)
        state.released, state.requested_at = False, time.time()
        self.history.emit(ev.GANG_REQUESTED, attempt=attempt, containers=len(keys), releases=state.releases)

    async def _poll_containers(self) -> None:
        containers = await asyncio.to_thread(self.app.get_containers, None, list(skein.model.ContainerState))
        unreported: list[tuple[tuple[str, int], str]] = []
        spares = self.registry.spares
        spare_containers = spares.containers() if spares is not None else {}
        for c in containers:
            key = self._container_of.get(c.id)
            if key is None:
                if c.id in spare_containers and str(c.state) in ("SUCCEEDED", "FAILED", "KILLED"):
                    self._spare_gone(c)
                continue
            state = str(c.state)
            node_http = getattr(c, "yarn_node_http_address", "") or ""
            if state == "RUNNING":
                self.registry.container_allocated(key, c.yarn_container_id, node_http)
            elif state in ("SUCCEEDED", "FAILED", "KILLED"):
                if c.yarn_container_id:
                    self.registry.container_allocated(key, c.yarn_container_id, node_http)
                task = self.registry.tasks[key]
                if task.done and c.exit_message and state != "SUCCEEDED":
                    self.registry.container_message(key, c.exit_message)
                if not task.done:
                    unreported.append((key, f"container {c.yarn_container_id} {state}: {c.exit_message}"))
        quiet = {t.id for t in policy.silent(self.registry.tasks.values(), time.time(), self.job.heartbeat_interval)}
        if any(self.registry.tasks[key].id not in quiet for key, _ in unreported):
            # one moment for the executors' own exit reports to arrive, for all of them (an executor that
            # went quiet before its container ended sends none: it was killed with it)
            await asyncio.sleep(0.5)
        for key, message in unreported:
            self.registry.container_gone(key, message)

    def _spare_gone(self, container: Any) -> None:
        """A spare's container ended while it waited: forgotten, asked for again (within the bound) by the loop."""
        spares = self.registry.spares
        if spares is None or self.registry.ending:  # told to stop at the attempt's end: not lost
            return
        spare = spares.gone(container.id)
        if spare is None:
            return
        line = (f"{spare.id} lost on {spare.host or '?'} (container {container.yarn_container_id or '?'}): "
                f"{container.exit_message or container.state}")
        log.warning("attempt %d: %s", self.registry.attempt, line)
        self.history.emit(ev.SPARE_LOST, attempt=self.registry.attempt, spare=spare.id, host=spare.host,
                          container_id=container.yarn_container_id, line=line)

    async def _blame_lost_hosts(self, attempt: int, outcome: Outcome) -> tuple[Outcome, list[hosts.LostHost]]:
        """A failed attempt whose tasks lost their host: say so first (the survivors' errors follow from it)."""
        lost = await asyncio.to_thread(hosts.find_lost, list(self.registry.tasks.values()))
        if not lost:
            return outcome, []
        for host in lost:
            self._lost_hosts.add(host.host)
            log.error("attempt %d: %s", attempt, host.describe())
            self.history.emit(ev.HOST_LOST, attempt=attempt, host=host.host, node_http=host.node_http,
                              tasks=host.tasks, by_yarn=host.by_yarn)
        reason = "; ".join(h.describe() for h in lost)
        if outcome.reason:
            reason += f"; the attempt ended with: {outcome.reason}"
        return Outcome(False, reason, outcome.task, cause="lost host"), lost

    def _blame_preemption(self, attempt: int, outcome: Outcome) -> Outcome:
        """A failed attempt whose containers YARN preempted: say so first; it is not the job's fault.

        YARN warns an application master before it preempts (a PreemptionMessage in its allocate
        answer), but skein's AM does not pass that on, so tasks learn of it by YARN's SIGTERM."""
        hit = policy.preempted(self.registry.tasks.values())
        if not hit:
            return outcome
        for task in hit:
            self.history.emit(ev.PREEMPTED, attempt=attempt, task=task.id, host=task.host,
                              container_id=task.yarn_container_id)
        reason = "; ".join(f"{t.id} preempted by YARN (container {t.yarn_container_id} on {t.host or '?'})"
                           for t in hit)
        if outcome.reason and outcome.task not in hit:
            reason += f"; the attempt ended with: {outcome.reason}"
        log.error("attempt %d: %s", attempt, reason)
        return Outcome(False, reason, outcome.task, cause="preemption")

    async def _await_verdict(self, lost: list[hosts.LostHost]) -> None:
        """Before a retry: wait until YARN has declared the lost hosts lost (it reports their containers),
        or they answer again, so that the new attempt's containers are not placed on them."""
        reg = self.registry
        on_lost = {h.node_http: [k for k, t in reg.tasks.items() if t.node_http == h.node_http] for h in lost}
        expiry = hosts.liveness_expiry_s()
        deadline = time.time() + expiry + VERDICT_MARGIN_S
        log.info("waiting up to %.0fs for YARN to declare %s lost", deadline - time.time(),
                 ", ".join(h.host for h in lost))
        while time.time() < deadline:
            await self._poll_containers()
            pending = [http for http, keys in on_lost.items() if any(not reg.tasks[k].done for k in keys)]
            if not pending:
                log.info("YARN has released the containers of the lost host(s)")
                return
            back = await asyncio.gather(*(asyncio.to_thread(hosts.answers, http) for http in pending))
            if all(back):
                log.info("the lost host(s) answer again: %s", ", ".join(pending))
                return
            await asyncio.sleep(1.0)
        log.warning("YARN did not declare %s lost within %.0fs", ", ".join(h.host for h in lost),
                    expiry + VERDICT_MARGIN_S)

    async def _stop_remaining(self, lost: list[hosts.LostHost] | None = None, await_verdict: bool = False) -> None:
        """Ask live tasks to stop (via heartbeats), then kill what did not.

        Tasks on lost hosts cannot hear the request; before a retry their containers are left to
        YARN's verdict (killing them would free the host's resources for the next attempt)."""
        reg = self.registry
        reg.request_stop()
        lost = lost or []
        unreachable = {h.node_http for h in lost}
        deadline = time.time() + self.job.stop_grace + 2 * self.job.heartbeat_interval
        while time.time() < deadline:
            reg.changed.clear()  # before the look: a report that comes after it wakes the wait below
            if not any(not x.done and x.registered_at and x.node_http not in unreachable for x in reg.tasks.values()):
                break
            with contextlib.suppress(TimeoutError):  # a task's report ends the wait at once (#54)
                await asyncio.wait_for(reg.changed.wait(), TICK_S)
            await self._poll_containers()
        if lost and await_verdict:
            await self._await_verdict(lost)
        spares = set(reg.spares.containers()) if reg.spares is not None else set()  # told to stop: going
        for cid in list(self._container_of) + sorted(spares):
            try:
                await asyncio.to_thread(self.app.kill_container, cid)
            except Exception:  # already finished: nothing to kill
                pass
        deadline = time.time() + 30
        pauses = gone_check_pauses()
        while time.time() < deadline:
            live = [c for c in await asyncio.to_thread(self.app.get_containers)
                    if c.id in self._container_of or c.id in spares]
            if not live:
                break
            await asyncio.sleep(next(pauses))
        for key, task in reg.tasks.items():
            if not task.done:
                reg.container_gone(key, "stopped by the AM")

    def _start_token_renewal(self) -> TokenRenewal | None:
        """With the job's keytab in this container: new HDFS tokens before the old ones expire, used here
        and handed to the executors (core/am/token_renewal.py)."""
        keytab, principal = os.environ.get(KEYTAB_ENV, ""), os.environ.get(PRINCIPAL_ENV, "")
        if not (keytab and principal and Path(keytab).is_file()):
            return None
        from tony_airflow.yarn.discovery import require_conf_dir
        from tony_airflow.yarn.hadoop_conf import HadoopConf
        from tony_airflow.yarn.kerberos import KerberosLogin

        try:
            conf = HadoopConf.load(require_conf_dir())
            login = KerberosLogin(principal, str(Path(keytab).absolute()))
        except Exception as exc:  # the job goes on with the tokens YARN gave it: say so, never fail for it
            log.warning("no new HDFS tokens from the keytab: %s", exc)
            return None
        loop = asyncio.get_running_loop()
        log.info("new HDFS delegation tokens will come from the keytab of %s", principal)
        return TokenRenewal(lambda: obtain_hdfs_token(conf, login),
                            lambda token: loop.call_soon_threadsafe(self._use_token, token),
                            on_failure=lambda reason: loop.call_soon_threadsafe(self._token_failed, reason)).start()

    def _token_failed(self, reason: str) -> None:
        """New tokens from the keytab fail (said once per run of failures): the job page says it too."""
        self.history.emit(ev.TOKEN_RENEWAL_FAILED, kind="HDFS_DELEGATION_TOKEN", reason=reason)

    def _use_token(self, token: ObtainedToken) -> None:
        from tony_airflow.yarn.hdfs import use_hdfs_token

        use_hdfs_token(token.url_string)
        self.registry.sealed_hdfs_token = protocol.seal(self.secret, token.url_string)
        self.history.emit(ev.TOKEN_OBTAINED, kind="HDFS_DELEGATION_TOKEN", issued=token.issued,
                          expires=token.expires, max_date=token.max_date)

    def _record_token_lifetime(self) -> None:
        """On a Kerberos cluster: until when YARN can renew the job's HDFS delegation token (its max
        lifetime, 7 days by default). The job's page and history say it: past it, HDFS refuses the job."""
        from tony_airflow.yarn.tokens import HDFS_DELEGATION_KIND, TokenFileError, delegation_identifier, find_token

        try:
            token = find_token(HDFS_DELEGATION_KIND)
            if token is None:
                return
            ident = delegation_identifier(token)
        except (OSError, TokenFileError) as exc:
            log.warning("could not read the HDFS delegation token's lifetime: %s", exc)
            return
        log.info("the HDFS delegation token can be renewed until %s UTC (max lifetime)", when(ident.max_ms / 1000))
        self.history.emit(ev.TOKENS, kind=token.kind, issued=ident.issue_ms / 1000,
                          renewable_until=ident.max_ms / 1000, renewer=ident.renewer,
                          keytab=bool(os.environ.get(KEYTAB_ENV)))

    # ------------------------------------------------------------ live page
    def live_page(self) -> str:
        """The AM's status page: the history UI's job page over the events so far."""
        spec = json.loads(self.job.to_record_json())
        job = JobHistory.from_events(self.app_id, list(self.history.events), spec, complete=True)
        user = self.user or "nobody"

        def log_url(run: TaskRun) -> str | None:
            if not (run.node_http and run.container_id):
                return None
            return f"http://{run.node_http}/node/containerlogs/{run.container_id}/{user}"

        tensorboard = f"http://{self.address}{tensorboard_proxy.PREFIX}" if "tensorboard" in self.job.tasks else None
        links = Links(log=log_url, tensorboard=tensorboard, events_json="events.jsonl",
                      training_json=protocol.TRAINING_JSON.lstrip("/"))  # relative: behind YARN's proxy too
        store = self.registry.training  # its points, finer than the TRAINING events (one per 10 s)
        return render_job(job, links, live=job.running, training=store.training, series=store.series)


@dataclasses.dataclass
class _GangWait:
    """The current attempt's gang while it waits for containers (core/am/gang.py)."""

    requested_at: float = 0.0      # when the gang last asked YARN for its containers
    next_watch: float = 0.0        # when the RM is read next
    released: bool = False         # it gave everything back and waits to ask again
    releases: int = 0
    retry_at: float = 0.0          # the end of the back-off
    yielding_to: gang.GangView | None = None
    reasons: list[str] = dataclasses.field(default_factory=list)  # what YARN said is in the way, last look
    said_at: float = 0.0           # the last GANG_WAITING event


FIRST_WATCH_S = 3.0            # a gang that forms at once never reads the RM
WAITING_EVENT_EVERY_S = 30.0   # the history records the waiting line at most this often
KV_PUBLISH_WAIT_S = 60.0  # how long a key the executors need is tried before the AM fails
FAULT_ENV = "TONY_FAULT"  # a fault a test injects at a named point of the AM (the job's --env reaches the AM)
FAULT_LOST_AFTER_HISTORY = "am-lost-after-history"


def gone_check_pauses(first: float = 0.05) -> Iterator[float]:
    """How long to wait between two looks at whether the killed containers are gone: short at first (a kill
    is seen within a few tens of ms, and every short job's end waited a whole TICK_S for it), then TICK_S."""
    pause = first
    while True:
        yield pause
        pause = min(TICK_S, pause * 2)


def am_attempt_of(container_id: str) -> int:
    """YARN's application attempt from the AM's container id (yarn.rest's container-id rule); 1 without one."""
    return max(1, attempt_of_container(container_id))


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    job = JobSpec.from_json(Path(protocol.JOB_FILE).read_text())
    secret = Path(protocol.SECRET_FILE).read_text().strip()
    app = skein.ApplicationClient.from_current()
    app_id = os.environ.get("SKEIN_APPLICATION_ID", "unknown")
    host = os.environ.get("NM_HOST") or os.uname().nodename
    try:
        store: HistoryStore | None = HistoryStore.open(history_dir(job.history_dir))
    except Exception as exc:  # history is a record, never a reason to fail the job
        log.warning("job history disabled: %s", exc)
        store = None
    master = ApplicationMaster(job, secret, app, app_id, host, EventLog(app_id, store), os.environ.get("USER", ""),
                               am_attempt=am_attempt_of(os.environ.get("CONTAINER_ID", "")),
                               yarn=YarnView.from_container(app_id))
    try:
        status, diagnostics = asyncio.run(master.run())
    except BaseException as exc:  # the AM itself broke: say so in the YARN diagnostics
        status = "FAILED"
        diagnostics = f"tony-airflow AM error: {exc!r}; {traceback.format_exc(limit=3)[-800:]}"
        log.exception("AM failed")
    log.info("finishing with %s: %s", status, diagnostics)
    if os.environ.get(FAULT_ENV) == FAULT_LOST_AFTER_HISTORY and master.am_attempt == 1:
        # A test's fault (tests/e2e/test_commit_protocol.py): the AM's container is lost after the history
        # was closed and before YARN was told, as a host dying then would do. Its whole process group goes,
        # skein's Java AM with it, so YARN starts the next AM attempt.
        log.error("%s=%s: this AM container is lost now", FAULT_ENV, FAULT_LOST_AFTER_HISTORY)
        os.killpg(0, signal.SIGKILL)
    if status == "KILLED":
        raise SystemExit(143)  # YARN is already ending the application
    app.shutdown(status, diagnostics)
    raise SystemExit(0 if status == "SUCCEEDED" else 1)
