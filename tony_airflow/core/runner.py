"""Submit, wait, and stop with the caller: what `ytf-submit`, Azkaban's and Oozie's processes do for one job.

The process that submitted a job owns it: when it is asked to stop (Ctrl-C,
Azkaban's SIGTERM then SIGKILL after 30 s, Oozie's launcher being killed), the
YARN application goes first, and the process exits only once YARN says it is
gone (130 after SIGINT, 143 after SIGTERM). A signal that arrives while the job
is being submitted (a JVM start and an RPC: about a second) is held until the
application id is known, then acted on: nothing submitted is left running.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

from tony_airflow import retries
from tony_airflow.core.client import JobHandle, TonyClient
from tony_airflow.core.output_follow import AGGREGATION_WAIT_S, LiveOutput
from tony_airflow.core.presentation import ProgressPrinter, failure_line, tensorboard_url
from tony_airflow.core.spec import JobSpec
from tony_airflow.errors import ClusterError, ClusterUnreachable
from tony_airflow.yarn.rest import ACTIVE_STATES, ApplicationReport, ResourceManagerError

KILL_WAIT_S = 25.0  # inside Azkaban's 30 s between SIGTERM and SIGKILL
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
EXIT_BY_SIGNAL = {signal.SIGTERM.name: 143, signal.SIGINT.name: 130}
# A scheduler's retry looks for the application an earlier try left running: the look is tried this many
# times (pauses of 2, 4, 6… s: 20 s in all) before the retry gives up, submitting nothing.
EARLIER_TRY_LOOKS = 5
EARLIER_TRY_PAUSE_S = 2.0


class Terminated(BaseException):
    """The caller asked this process to stop.

    A BaseException, like KeyboardInterrupt: the signal can land inside any call
    of the wait loop, and the `except Exception` there (an AM not up yet, an RM
    that does not answer) must not swallow it.
    """


@dataclass
class Outcome:
    application_id: str
    final_status: str
    tracking_url: str = ""
    tensorboard_url: str = ""
    diagnostics: str = ""
    terminated_by: str = ""  # the signal's name when the caller stopped us

    @property
    def terminated(self) -> bool:
        return bool(self.terminated_by)

    def outputs(self) -> dict[str, str]:
        """The four values downstream steps read (Azkaban output properties, Oozie action data)."""
        return {"application_id": self.application_id, "tracking_url": self.tracking_url,
                "tensorboard_url": self.tensorboard_url, "final_status": self.final_status}

    @property
    def exit_code(self) -> int:
        if self.terminated:
            return EXIT_BY_SIGNAL.get(self.terminated_by, 143)
        return 0 if self.final_status == "SUCCEEDED" else 1


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signal.Signals(signum).name)


class _HeldSignal:
    """While submitting: remember a stop signal instead of raising it inside skein's RPC."""

    def __init__(self) -> None:
        self.name = ""

    def __call__(self, signum: int, frame: object) -> None:
        self.name = self.name or signal.Signals(signum).name


def run_to_completion(job: JobSpec, on_submitted: Callable[[str], None], log: TextIO = sys.stderr,
                      on_outcome: Callable[[Outcome], None] | None = None, out: TextIO | None = None,
                      client_factory: Callable[[], TonyClient] = TonyClient,
                      while_running: Callable[[JobHandle], None] | None = None,
                      follow: bool = False, tail_lines: int = 40, identity: Sequence[str] = ()) -> Outcome:
    """Submit `job`, report progress to `log` (URLs to `out`, default `log`), and return how it ended
    (also when terminated). `while_running` runs after submission inside the stoppable region
    (client mode runs its chief there). `follow`: the chief's (or worker 0's) output goes to `out` as
    it comes, and on failure the failing task's last `tail_lines` lines. `identity`: tags naming this run of
    a scheduler's job (Azkaban's execution and job, Oozie's workflow and action); a retry of it that finds
    an application with all of them still running follows that one instead of submitting another."""
    held = _HeldSignal()
    # A signal ignored when we started stays ignored: a background job of a script, or nohup, is meant to
    # outlive the terminal's Ctrl-C (Python keeps such a SIGINT ignored too).
    stoppable = [s for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN]
    previous = {s: signal.signal(s, held) for s in stoppable}
    try:
        with client_factory() as client:
            client.validate(job)  # bad input is refused in one line, before anything is said or submitted
            if held.name:  # stopped before anything was submitted: nothing to kill
                raise SystemExit(EXIT_BY_SIGNAL.get(held.name, 143))
            handle = _running_with(client, identity, log, job)
            if handle is None:
                print(f"Submitting {job.name!r} ({sum(t.instances for t in job.tasks.values())} tasks) to YARN",
                      file=log, flush=True)
                handle = client.submit(job, validated=True)
                handle = _settle(client, identity, log, handle)
            outcome = Outcome(handle.app_id, "UNDEFINED")
            live: LiveOutput | None = None
            printer: ProgressPrinter | None = None
            try:
                for s in stoppable:
                    signal.signal(s, _raise_terminated)
                on_submitted(handle.app_id)
                if held.name:
                    raise Terminated(held.name)
                if while_running is not None:
                    while_running(handle)
                printer = ProgressPrinter(handle.app_id, stream=log, out=out or log, tensorboard=job.tensorboard)
                live = _live_output(client, printer, out or log) if follow else None
                report = handle.wait(on_change=printer, on_poll=live)
            except Terminated as why:
                for s in stoppable:
                    signal.signal(s, signal.SIG_IGN)
                if printer is not None:
                    printer.clear()
                print(f"{why}: killing {handle.app_id}", file=log, flush=True)
                report = _kill_and_wait(handle)
                outcome.terminated_by = str(why)
            if report.is_terminal:
                # skein's AM removes it only after unregistering, and only when the job ends by itself:
                # once the RM says it ended, nothing starts from it any more, whoever removes it first.
                client.remove_staging(handle.app_id, wait_s=0)
            outcome.final_status = report.final_status if report.is_terminal else "KILLED"
            outcome.diagnostics = report.diagnostics.strip()
            if live is not None and not outcome.terminated:
                live.finish(handle.app_id, outcome.final_status, outcome.diagnostics, tail_lines)
            outcome.tracking_url = report.tracking_url
            outcome.tensorboard_url = tensorboard_url(report.tracking_url) if job.tensorboard else ""
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if on_outcome is not None:
        on_outcome(outcome)
    say_end(outcome, log, out)
    return outcome


def say_end(outcome: Outcome, log: TextIO, out: TextIO | None = None) -> None:
    """The end, said once, as the last line: after the failing task's last lines."""
    if outcome.final_status != "SUCCEEDED":
        print(failure_line(outcome.application_id, outcome.final_status, outcome.diagnostics), file=log, flush=True)
    elif not outcome.terminated:
        print(f"{outcome.application_id} SUCCEEDED", file=out or log, flush=True)


def follow_job(client: TonyClient, app_id: str, log: TextIO = sys.stderr, out: TextIO = sys.stdout,
               tail_lines: int = 40) -> Outcome:
    """Follow a job submitted earlier (`tony follow APP`, `tony logs -f APP`, after `ytf-submit --detach`):
    its progress line and the chief's output as `ytf-submit` shows them, to its end, said once. An ended job
    gives its chief's whole output from YARN's logs. Ctrl-C stops following only: this process does not own
    the job, so it is not killed."""
    handle = client.handle(app_id)
    printer = ProgressPrinter(app_id, stream=log, out=out)
    live = _live_output(client, printer, out)
    try:
        report = handle.wait(on_change=printer, on_poll=live)
    except KeyboardInterrupt:
        printer.clear()
        print(f"stopped following {app_id}; it runs on (`tony kill {app_id}` stops it)", file=log, flush=True)
        raise
    outcome = Outcome(app_id, report.final_status, report.tracking_url, diagnostics=report.diagnostics.strip())
    cursor = live.follower.cursor
    if not cursor.attempt:  # it ended before the AM said anything: the chief's whole output, from YARN's logs
        chief = _chief_output(app_id, lambda: client.rm.application(app_id))
        if chief is not None:
            cursor.task, cursor.attempt, cursor.finished = chief[0], chief[1], True
            for line in chief[2]:
                printer.above(line, out)
    live.finish(app_id, outcome.final_status, outcome.diagnostics, tail_lines)
    say_end(outcome, log, out)
    return outcome


def _chief_output(app_id: str, report: Callable[[], ApplicationReport]) -> tuple[str, int, list[str]] | None:
    """(task, attempt, labelled lines) of the task the AM follows (chief, else master, else worker 0) in the
    last attempt, from the aggregated logs once every node uploaded them (the chief's node may be the last);
    None when no task output is there."""
    import tempfile
    from pathlib import Path

    from tony_airflow.core.task_logs import OUTPUT_FILES_PATTERN, spool
    from tony_airflow.yarn.logs import log_lines, wait_until_aggregated

    wait_until_aggregated(report)
    with tempfile.TemporaryDirectory(prefix="tony-follow-") as spool_dir:
        deadline = time.monotonic() + AGGREGATION_WAIT_S  # YARN uploads an ended job's logs within seconds
        while not (outputs := spool(log_lines(app_id, None, OUTPUT_FILES_PATTERN, timeout=600), Path(spool_dir))):
            if time.monotonic() >= deadline:
                return None
            time.sleep(2.0)
        last = [o for o in outputs if o.attempt == outputs[-1].attempt]
        chief = next((o for o in last if o.type in ("chief", "master", "worker") and o.index == 0), last[0])
        return chief.task, chief.attempt, list(chief.labelled_lines())


def _running_with(client: TonyClient, identity: Sequence[str], log: TextIO, job: JobSpec) -> JobHandle | None:
    """The application an earlier try of this scheduler job submitted, if it still runs: a retry follows it
    (its output is being written; a second application would write the same output). YARN keeps tags
    lowercase. A client-mode job's chief ran in the process that is gone: that application is killed."""
    if not identity:
        return None
    found = _applications_of(client, identity)
    if not found:
        return None
    earlier = min(found, key=lambda a: (a.started_time, a.id))  # the one every try settles on (_settle)
    if job.local_types():
        print(f"killing {earlier.id}, submitted by an earlier try: its client-mode chief is gone", file=log, flush=True)
        client.kill(earlier.id)
        return None
    print(f"Following {earlier.id}, submitted by an earlier try of this job and still {earlier.state}",
          file=log, flush=True)
    return client.handle(earlier.id)


def _applications_of(client: TonyClient, identity: Sequence[str]) -> list[ApplicationReport]:
    """The active applications carrying every tag of `identity` (YARN keeps tags lowercase). A look that failed
    is not "none": taking it for none submitted a second training beside the live one, both writing one
    output (issue #51). Tried again; then nothing is submitted, and the scheduler's next try looks again."""
    wanted = {t.lower() for t in identity}

    def look() -> list[ApplicationReport]:
        return [a for a in client.rm.applications(states=ACTIVE_STATES, tags=[sorted(wanted)[0]])
                if wanted <= {t.lower() for t in a.tags}]

    again = retries.tries(EARLIER_TRY_LOOKS, EARLIER_TRY_PAUSE_S, lambda exc: isinstance(exc, Exception))
    try:
        return again(look)
    except ResourceManagerError as exc:
        unreached = ClusterUnreachable if isinstance(exc, ClusterUnreachable) else ClusterError
        raise unreached(f"could not look for the application of an earlier try of this job (tags "
                        f"{', '.join(sorted(wanted))}): {' '.join(str(exc).split())[:300]}; nothing submitted "
                        "(a second training beside a live one would write the same output)") from None


def _settle(client: TonyClient, identity: Sequence[str], log: TextIO, mine: JobHandle) -> JobHandle:
    """After submitting, the oldest active application of this scheduler job is the one that runs. Looking and
    then submitting is not one step: two tries of one job (an Oozie launcher's next attempt beside a
    launcher not yet gone, a scheduler's recovery) can both find nothing and both submit (issue #51 item
    16: `…_0090` beside the live `…_0089`). Each applies this rule, so one training is left: the younger
    try kills its own application and follows the older one."""
    if not identity:
        return mine
    try:
        found = _applications_of(client, identity)
    except ClusterError as exc:  # ours is submitted: keep it, as before this look existed
        print(f"could not look for another try's application ({exc}); keeping {mine.app_id}", file=log, flush=True)
        return mine
    age = {a.id: (a.started_time, a.id) for a in found}
    if mine.app_id not in age:  # not listed yet: nothing to compare with
        return mine
    older = sorted((key, app_id) for app_id, key in age.items() if key < age[mine.app_id])
    if not older:
        return mine
    oldest = older[0][1]
    print(f"{oldest}, submitted at the same time by another try of this job, is older: killing {mine.app_id} "
          f"and following {oldest}", file=log, flush=True)
    client.kill(mine.app_id)
    return client.handle(oldest)


def _live_output(client: TonyClient, printer: ProgressPrinter, out: TextIO) -> LiveOutput:
    def emit(line: str) -> None:
        printer.above(line, out)  # above the live progress line, never glued onto it
    return LiveOutput(emit, auth=client.rm.auth, conf_dir=str(client.cluster.conf_dir))


def _kill_and_wait(handle: JobHandle) -> ApplicationReport:
    try:
        handle.kill()
    except Exception as exc:  # already ended, or the RM is away: say so, then look once more
        print(f"could not kill {handle.app_id}: {exc}", file=sys.stderr, flush=True)
    try:
        return handle.wait(poll=0.5, timeout=KILL_WAIT_S)
    except TimeoutError:
        return handle.last_report or handle.status()
