"""Submit, wait, and stop with the caller: what a workflow engine's process does for one job.

Workflow engines cancel a job by signalling its process (Azkaban: SIGTERM, then
SIGKILL after 30 s; Oozie's launcher: its container is killed). Neither knows
about the YARN application the process started, so on SIGTERM or SIGINT we
kill the application first and exit only when YARN says it is gone.
"""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass
from typing import Callable, TextIO

from tony_airflow.core.client import TonyClient
from tony_airflow.core.spec import JobSpec
from tony_airflow.submit import ProgressPrinter, failure_line, tensorboard_url

KILL_WAIT_S = 25.0  # inside Azkaban's 30 s between SIGTERM and SIGKILL
EXIT_TERMINATED = 143


class Terminated(BaseException):
    """The engine asked this process to stop.

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
    terminated: bool = False

    def outputs(self) -> dict[str, str]:
        """The four values downstream steps read (Azkaban output properties, Oozie action data)."""
        return {"application_id": self.application_id, "tracking_url": self.tracking_url,
                "tensorboard_url": self.tensorboard_url, "final_status": self.final_status}

    @property
    def exit_code(self) -> int:
        if self.terminated:
            return EXIT_TERMINATED
        return 0 if self.final_status == "SUCCEEDED" else 1


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signal.Signals(signum).name)


def run_to_completion(job: JobSpec, on_submitted: Callable[[str], None], log: TextIO = sys.stderr,
                      on_outcome: Callable[[Outcome], None] | None = None) -> Outcome:
    """Submit `job`, report progress to `log`, and return how it ended (also when terminated)."""
    previous = {s: signal.signal(s, _raise_terminated) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        with TonyClient() as client:
            handle = client.submit(job)
            outcome = Outcome(handle.app_id, "UNDEFINED")
            try:
                on_submitted(handle.app_id)
                report = handle.wait(on_change=ProgressPrinter(handle.app_id, stream=log, out=log,
                                                               tensorboard=job.tensorboard))
            except Terminated as why:
                print(f"{why}: killing {handle.app_id}", file=log, flush=True)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                handle.kill()
                try:
                    report = handle.wait(poll=0.5, timeout=KILL_WAIT_S)
                except TimeoutError:
                    report = handle.last_report or handle.status()
                outcome.terminated = True
            outcome.final_status = report.final_status if report.is_terminal else "KILLED"
            outcome.diagnostics = report.diagnostics.strip()
            outcome.tracking_url = report.tracking_url
            outcome.tensorboard_url = tensorboard_url(report.tracking_url) if job.tensorboard else ""
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if on_outcome is not None:
        on_outcome(outcome)
    if outcome.final_status != "SUCCEEDED":
        print(failure_line(outcome.application_id, outcome.final_status, outcome.diagnostics), file=log, flush=True)
    return outcome
