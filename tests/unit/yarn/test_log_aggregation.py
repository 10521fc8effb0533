"""`tony logs` right after a job ended read the logs of the nodes YARN had aggregated so far: on three hosts the
chief's node was often not among them (test_pytorch_master_addr_is_worker_0s_host saw worker:1's line alone,
twice). The RM says when the NodeManagers are done (its report's `logAggregationStatus`, Hadoop's
LogAggregationStatus); a reader of a finished application waits for that, boundedly, and says when it ran out."""

from __future__ import annotations

from tony_airflow.yarn.logs import aggregation_over, wait_until_aggregated
from tony_airflow.yarn.rest import ApplicationReport

APP = "application_1700000000000_0001"


def _report(state: str, status: str) -> ApplicationReport:
    return ApplicationReport.from_json({"id": APP, "state": state, "finalStatus": "SUCCEEDED",
                                        "logAggregationStatus": status})


def test_the_report_carries_the_rms_log_aggregation_status():
    assert _report("FINISHED", "RUNNING").log_aggregation == "RUNNING"
    assert ApplicationReport.from_json({"id": APP}).log_aggregation == ""


def test_which_statuses_end_the_wait():
    for status in ("SUCCEEDED", "FAILED", "TIME_OUT", "DISABLED", ""):  # "": an RM that does not say
        assert aggregation_over(_report("FINISHED", status))
    for status in ("NOT_START", "RUNNING", "RUNNING_WITH_FAILURE"):
        assert not aggregation_over(_report("FINISHED", status))
    assert aggregation_over(_report("RUNNING", "NOT_START"))  # running: the NodeManagers serve its logs


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_finished_application_is_read_once_its_nodes_are_done():
    answers = iter(["NOT_START", "RUNNING", "RUNNING", "SUCCEEDED"])
    clock = _Clock()
    asked: list[float] = []

    def report() -> ApplicationReport:
        asked.append(clock.now)
        return _report("FINISHED", next(answers))

    assert wait_until_aggregated(report, wait=60, clock=clock, pause=clock.sleep) is None
    assert len(asked) == 4


def test_a_wait_that_runs_out_names_the_status_it_saw_last():
    clock = _Clock()
    left = wait_until_aggregated(lambda: _report("FINISHED", "RUNNING"), wait=30, clock=clock, pause=clock.sleep)
    assert left == "RUNNING" and 30 <= clock.now <= 32


def test_an_rm_that_cannot_be_read_is_not_waited_for():
    def broken() -> ApplicationReport:
        raise OSError("connection refused")

    clock = _Clock()
    assert wait_until_aggregated(broken, wait=60, clock=clock, pause=clock.sleep) is None
    assert clock.now == 0


def test_a_finished_application_no_node_ever_reported_is_not_waited_for_long():
    """A reviewer's point: an application killed before any container ran has no NodeManager to upload
    anything, and the RM says NOT_START; the wait ends after a short grace, not after a minute."""
    from tony_airflow.yarn.logs import NOT_START_GRACE_S

    clock = _Clock()
    left = wait_until_aggregated(lambda: _report("KILLED", "NOT_START"), wait=60, clock=clock, pause=clock.sleep)
    assert left is None and NOT_START_GRACE_S <= clock.now <= NOT_START_GRACE_S + 1
