"""The runner holds a stop signal that lands while the job is submitted, then kills what was submitted
(issue #15, items 5 and 6); a signal before submission submits nothing."""

from __future__ import annotations

import io
import os
import signal

import pytest

from tests.unit.core.support import make_job
from tony_airflow.core.runner import run_to_completion
from tony_airflow.yarn.rest import ApplicationReport

APP = "application_1_7"


class FakeHandle:
    def __init__(self) -> None:
        self.app_id, self.killed, self.last_report = APP, False, None

    def kill(self) -> None:
        self.killed = True

    def wait(self, **_: object) -> ApplicationReport:
        state = ("KILLED", "KILLED") if self.killed else ("FINISHED", "SUCCEEDED")
        return ApplicationReport(APP, *state)


class FakeClient:
    def __init__(self, signal_during: str) -> None:
        self.signal_during, self.submitted, self.handle = signal_during, 0, FakeHandle()
        self.staging_removed: list[str] = []

    def remove_staging(self, app_id: str, wait_s: float = 0) -> bool:
        self.staging_removed.append(app_id)
        return True

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def validate(self, job: object) -> None:
        if self.signal_during == "validate":
            os.kill(os.getpid(), signal.SIGTERM)

    def submit(self, job: object, validated: bool = False) -> FakeHandle:
        if self.signal_during == "submit":
            os.kill(os.getpid(), signal.SIGINT)  # lands inside the submission
        self.submitted += 1
        return self.handle


def test_a_signal_during_submission_kills_the_submitted_application():
    client = FakeClient("submit")
    outcome = run_to_completion(make_job("worker:1"), on_submitted=lambda _: None, log=io.StringIO(),
                                client_factory=lambda: client)
    assert client.submitted == 1 and client.handle.killed and client.staging_removed == [APP]
    assert outcome.terminated_by == "SIGINT" and outcome.exit_code == 130 and outcome.final_status == "KILLED"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored


def test_a_signal_before_submission_submits_nothing():
    client = FakeClient("validate")
    with pytest.raises(SystemExit) as exc:
        run_to_completion(make_job("worker:1"), on_submitted=lambda _: None, log=io.StringIO(),
                          client_factory=lambda: client)
    assert exc.value.code == 143 and client.submitted == 0
