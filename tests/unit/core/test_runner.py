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


@pytest.fixture
def sigint_default():
    """As in an interactive shell, whatever started the suite (a background job of a script starts with
    SIGINT ignored)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_a_signal_during_submission_kills_the_submitted_application(sigint_default):
    client = FakeClient("submit")
    outcome = run_to_completion(make_job("worker:1"), on_submitted=lambda _: None, log=io.StringIO(),
                                client_factory=lambda: client)
    assert client.submitted == 1 and client.handle.killed and client.staging_removed == [APP]
    assert outcome.terminated_by == "SIGINT" and outcome.exit_code == 130 and outcome.final_status == "KILLED"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored


def test_a_job_that_ends_by_itself_leaves_no_staging_directory_when_the_command_returns():
    """skein's AM unregisters, then removes the staging directory: a client that sees FINISHED at once
    (the endgame's quick polls) returned before the removal (the fresh-clone run's
    test_staging_directories_do_not_outlive_their_applications). The waiting client removes it too."""
    client = FakeClient("")
    outcome = run_to_completion(make_job("worker:1"), on_submitted=lambda _: None, log=io.StringIO(),
                                client_factory=lambda: client)
    assert outcome.final_status == "SUCCEEDED" and client.staging_removed == [APP]


def test_a_sigint_ignored_at_start_stays_ignored_and_kills_nothing(sigint_default):
    """`ytf-submit … &` in a script, or under nohup: its SIGINT is ignored, as the shell meant (#44 item 11)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    client = FakeClient("submit")
    outcome = run_to_completion(make_job("worker:1"), on_submitted=lambda _: None, log=io.StringIO(),
                                client_factory=lambda: client)
    assert client.submitted == 1 and not client.handle.killed and outcome.terminated_by == ""
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_a_signal_before_submission_submits_nothing():
    client = FakeClient("validate")
    with pytest.raises(SystemExit) as exc:
        run_to_completion(make_job("worker:1"), on_submitted=lambda _: None, log=io.StringIO(),
                          client_factory=lambda: client)
    assert exc.value.code == 143 and client.submitted == 0


class RetriedClient(FakeClient):
    """A scheduler's retry: the RM holds applications an earlier try submitted (tags as YARN keeps them)."""

    def __init__(self, apps: list[ApplicationReport]) -> None:
        super().__init__(signal_during="")
        self.asked: list[tuple] = []
        self.followed: list[str] = []
        self.killed: list[str] = []
        apps_ = apps

        class RM:
            def applications(self_, states=None, tags=None):
                self.asked.append((tuple(states or ()), tuple(tags or ())))
                return [a for a in apps_ if set(tags or ()) & set(a.tags)]

        self.rm = RM()
        del self.handle  # the client's method, not FakeClient's one handle

    def submit(self, job: object, validated: bool = False) -> FakeHandle:
        self.submitted += 1
        return FakeHandle()

    def handle(self, app_id: str) -> FakeHandle:
        self.followed.append(app_id)
        return FakeHandle()

    def kill(self, app_id: str) -> None:
        self.killed.append(app_id)


IDENTITY = ["azkaban_exec_id:41", "azkaban_job_id:Train", "azkaban_project:p"]


def _app(app_id: str, state: str, tags: tuple[str, ...], started: int = 1) -> ApplicationReport:
    return ApplicationReport(app_id, state, "UNDEFINED", tags=tags, started_time=started)


def test_a_retried_scheduler_job_follows_its_running_application_instead_of_submitting_again():
    mine = ("azkaban_exec_id:41", "azkaban_job_id:train", "azkaban_project:p", "tony-airflow")  # YARN: lowercase
    other_job = ("azkaban_exec_id:41", "azkaban_job_id:evaluate", "azkaban_project:p")
    client = RetriedClient([_app("application_1_0003", "RUNNING", mine), _app("application_1_0004", "RUNNING",
                                                                                   other_job, started=2)])
    log = io.StringIO()
    outcome = run_to_completion(make_job("worker:1"), on_submitted=lambda _: None, log=log,
                                client_factory=lambda: client, identity=IDENTITY)
    assert client.submitted == 0 and client.followed == ["application_1_0003"]
    assert outcome.final_status == "SUCCEEDED"
    assert "Following application_1_0003, submitted by an earlier try" in log.getvalue()
    assert client.asked == [(("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING"), ("azkaban_exec_id:41",))]


def test_without_a_running_application_of_an_earlier_try_a_retry_submits():
    client = RetriedClient([_app("application_1_0004", "RUNNING", ("azkaban_exec_id:40", "azkaban_job_id:train"))])
    run_to_completion(make_job("worker:1"), on_submitted=lambda _: None, log=io.StringIO(),
                      client_factory=lambda: client, identity=IDENTITY)
    assert client.submitted == 1 and client.followed == []
    plain = RetriedClient([])
    run_to_completion(make_job("worker:1"), on_submitted=lambda _: None, log=io.StringIO(),
                      client_factory=lambda: plain)
    assert plain.submitted == 1 and plain.asked == []  # no identity (ytf-submit by hand): never looked for


class SlowRM:
    """An RM whose listing fails `failures` times (a timeout under load), then answers with `apps`."""

    def __init__(self, failures: int, apps: list[ApplicationReport], transient: bool = True) -> None:
        self.failures, self.apps, self.transient, self.asked = failures, apps, transient, 0

    def applications(self, states=None, tags=None):
        from tony_airflow.yarn.rest import ResourceManagerError

        self.asked += 1
        if self.asked <= self.failures:
            raise ResourceManagerError("GET /ws/v1/cluster/apps: timed out", transient=self.transient)
        return [a for a in self.apps if set(tags or ()) & set(a.tags)]


OOZIE = ["oozie_workflow_id:0000001-w", "oozie_action_id:0000001-w@train", "oozie-0a1b2c"]


def test_a_retry_whose_look_for_the_live_training_fails_once_follows_it_instead_of_submitting_a_second(
        monkeypatch):
    """Issue #51 item 16: the Oozie launcher's next attempt reported a second training (…_0090) beside the live
    one (…_0089). A look for the earlier try's application that failed (a slow RM under load: one timed-out
    request) was taken for "none", and the retry submitted: two trainings writing one output."""
    import tony_airflow.core.runner as runner

    monkeypatch.setattr(runner, "EARLIER_TRY_PAUSE_S", 0.0)
    live = _app("application_1_0089", "RUNNING", tuple(t.lower() for t in OOZIE) + ("tony-airflow",))
    client = RetriedClient([])
    client.rm = SlowRM(failures=2, apps=[live])
    log = io.StringIO()
    run_to_completion(make_job("worker:1"), on_submitted=lambda _: None, log=log, client_factory=lambda: client,
                      identity=OOZIE)
    assert client.submitted == 0 and client.followed == ["application_1_0089"], log.getvalue()


def test_a_retry_that_cannot_look_for_the_live_training_submits_nothing_and_says_why(monkeypatch):
    import tony_airflow.core.runner as runner
    from tony_airflow.errors import ClusterError

    monkeypatch.setattr(runner, "EARLIER_TRY_PAUSE_S", 0.0)
    client = RetriedClient([])
    client.rm = SlowRM(failures=100, apps=[])
    with pytest.raises(ClusterError, match=r"^could not look for the application of an earlier try of this job "
                                           r"\(tags oozie-0a1b2c, .*\): GET /ws/v1/cluster/apps: timed out; nothing "
                                           r"submitted"):
        run_to_completion(make_job("worker:1"), on_submitted=lambda _: None, log=io.StringIO(),
                          client_factory=lambda: client, identity=OOZIE)
    assert client.submitted == 0 and client.rm.asked == runner.EARLIER_TRY_LOOKS


class RacingClient(RetriedClient):
    """Two tries of one scheduler job at once: both looked before either submitted; `other` is the other try's
    application, already in the RM when this try's own submission returns."""

    def __init__(self, other: ApplicationReport, mine_started: int) -> None:
        self.apps: list[ApplicationReport] = []
        super().__init__(self.apps)
        self.other, self.mine_started = other, mine_started

    def submit(self, job: object, validated: bool = False) -> FakeHandle:
        self.submitted += 1
        handle = FakeHandle()
        handle.app_id = "application_1_0091"
        self.apps += [self.other, _app(handle.app_id, "ACCEPTED", self.other.tags, started=self.mine_started)]
        return handle

    def handle(self, app_id: str) -> FakeHandle:
        followed = super().handle(app_id)
        followed.app_id = app_id
        return followed


def test_two_tries_that_submit_at_once_settle_on_the_older_application_and_the_younger_is_killed():
    """Issue #51 item 16: a look finds nothing, the try submits; another try of the same job (the launcher's
    next attempt, a scheduler's recovery) did the same at the same moment: two trainings for one output.
    After submitting, the older application is the one both follow; the younger try kills its own."""
    tags = tuple(t.lower() for t in OOZIE) + ("tony-airflow",)
    older = _app("application_1_0089", "RUNNING", tags, started=5)
    client = RacingClient(older, mine_started=7)
    log = io.StringIO()
    outcome = run_to_completion(make_job("worker:1"), on_submitted=lambda _: None, log=log,
                                client_factory=lambda: client, identity=OOZIE)
    assert client.submitted == 1 and client.killed == ["application_1_0091"], log.getvalue()
    assert client.followed == ["application_1_0089"] and outcome.application_id == "application_1_0089"
    assert "application_1_0089, submitted at the same time by another try of this job, is older" in log.getvalue()


def test_the_older_of_two_racing_tries_keeps_its_own_application():
    tags = tuple(t.lower() for t in OOZIE) + ("tony-airflow",)
    younger = _app("application_1_0092", "ACCEPTED", tags, started=9)
    client = RacingClient(younger, mine_started=7)
    outcome = run_to_completion(make_job("worker:1"), on_submitted=lambda _: None, log=io.StringIO(),
                                client_factory=lambda: client, identity=OOZIE)
    assert client.killed == [] and client.followed == [] and outcome.application_id == "application_1_0091"
