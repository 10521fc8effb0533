"""The client: the process environment, reconnected handles, the AM's progress (issue #15, items 8, 9, 10)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest


def test_progress_from_a_newer_am_with_more_fields_is_read():
    from tony_airflow.core.protocol import Progress

    p = Progress.from_dict({"attempt": 1, "max_attempts": 1, "total": 3, "allocated": 3,
                            "registered": 3, "running": 3, "finished": 0, "spec_published": True,
                            "new_field_of_a_later_version": 5})
    assert p is not None and p.total == 3 and p.spec_published
    assert Progress.from_dict("not a record") is None


# ---------------------------------------------------- 8, 9: the client
def test_a_client_does_not_change_the_process_environment(tmp_path, monkeypatch):
    from tony_airflow.core.client import TonyClient
    from tony_airflow.yarn.hadoop_conf import write_site

    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    conf = tmp_path / "conf"
    conf.mkdir()
    write_site(conf / "yarn-site.xml", {"yarn.resourcemanager.webapp.address": "127.0.0.1:1"})
    before = dict(os.environ)
    client = TonyClient(conf_dir=str(conf))
    assert dict(os.environ) == before
    assert client.environment["HADOOP_CONF_DIR"] == str(conf)


def test_a_reconnected_handle_reads_progress_from_the_am_page_and_refuses_local_tasks_in_one_line(monkeypatch):
    import httpx

    from tony_airflow.core.client import JobHandle
    from tony_airflow.errors import UsageError
    from tony_airflow.yarn.rest import ApplicationReport

    tracking = "http://rm:8088/proxy/application_1_1/"
    asked: list[str] = []

    def get(url, **kwargs):
        asked.append(url)
        body = {"progress": {"total": 2, "allocated": 1, "a_later_field": 1}, "address": "10.0.0.5:4321"}
        return httpx.Response(200, json=body, request=httpx.Request("GET", url))

    reports = [ApplicationReport("application_1_1", "ACCEPTED", "UNDEFINED", tracking_url="http://rm/cluster"),
               ApplicationReport("application_1_1", "RUNNING", "UNDEFINED", tracking_url=tracking)]
    handle = JobHandle("application_1_1", rm=SimpleNamespace(fetch=get, application=lambda app_id: reports.pop(0)))
    assert handle.progress() is None and asked == []  # the AM has not registered: nothing to ask
    progress = handle.progress()  # without a report: asks the RM for one first
    assert progress is not None and progress.total == 2 and progress.allocated == 1
    assert asked == [tracking + "pages/tony/progress.json"] and handle._am_address == "10.0.0.5:4321"
    with pytest.raises(UsageError, match="client mode"):
        handle.run_local_tasks()


def test_progress_is_none_when_the_am_page_does_not_answer(monkeypatch):
    import httpx

    from tony_airflow.core.client import JobHandle
    from tony_airflow.yarn.rest import ApplicationReport

    def refuse(url, **kwargs):
        raise httpx.ConnectError("refused")

    rm = SimpleNamespace(fetch=refuse)
    handle = JobHandle("application_1_1", rm=rm)
    running = ApplicationReport("application_1_1", "RUNNING", "UNDEFINED", tracking_url="http://rm/proxy/application_1_1/")
    assert handle.progress(running) is None
    rm.fetch = lambda url, **k: httpx.Response(404, text="<html>no such page</html>", request=httpx.Request("GET", url))
    assert handle.progress(running) is None


def _waited(monkeypatch, running: int, progress: list, poll: float) -> list[float]:
    """The sleeps of `JobHandle.wait` over `running` RUNNING reports, then FINISHED, with `progress` in turn."""
    from tony_airflow.core import client as client_module
    from tony_airflow.core.client import JobHandle
    from tony_airflow.yarn.rest import ApplicationReport

    states = [("RUNNING", "UNDEFINED")] * running + [("FINISHED", "SUCCEEDED")]

    class RM:
        def application(self, app_id):
            state, final = states.pop(0)
            return ApplicationReport(app_id, state, final)

    handle = JobHandle("application_1_0001", RM())  # type: ignore[arg-type]
    monkeypatch.setattr(handle, "progress", lambda report=None: progress.pop(0))
    slept: list[float] = []
    monkeypatch.setattr(client_module.time, "sleep", slept.append)
    assert handle.wait(poll=poll).final_status == "SUCCEEDED"
    return slept


def test_wait_looks_more_often_once_a_task_has_ended(monkeypatch):
    """The client learns the end when it happens: once tasks end, the rest follow within seconds."""
    from tony_airflow.core.client import ENDGAME_POLL_S
    from tony_airflow.core.protocol import Progress

    progress = [Progress(total=3, running=3), Progress(total=3, finished=1), Progress(total=3, finished=3)]
    assert _waited(monkeypatch, 3, progress, poll=5.0) == [5.0, ENDGAME_POLL_S, ENDGAME_POLL_S]


def test_wait_looks_more_often_once_the_am_decided_the_outcome(monkeypatch):
    """A task that was told to stop by the outcome (a ps once the workers ended; every task once one
    failed) may take a heartbeat to go (#41 item 4, the client's wall time over the application's
    life): the AM says so, and the client looks often from then on."""
    from tony_airflow.core.client import ENDGAME_POLL_S
    from tony_airflow.core.protocol import Progress

    progress = [Progress(total=3, running=3), Progress(total=3, running=1, ending=True),
                Progress(total=3, running=1, ending=True)]
    assert _waited(monkeypatch, 3, progress, poll=1.0) == [1.0, ENDGAME_POLL_S, ENDGAME_POLL_S]


def test_the_registry_says_ending_once_the_attempt_is_over():
    from tests.unit.core.support import make_job
    from tony_airflow.core.am.registry import Registry

    reg = Registry(make_job("ps:1,worker:2"), "app_1")
    reg.new_attempt(1)
    assert not reg.progress().ending
    reg.end_attempt()
    assert reg.progress().ending
    reg.new_attempt(2)
    assert not reg.progress().ending


def test_wait_keeps_looking_often_when_the_ending_am_stops_answering(monkeypatch):
    """Found measuring #20: the AM's page goes as the AM ends, so progress turns None before the RM says
    FINISHED; the client must not fall back to the whole interval then."""
    from tony_airflow.core.client import ENDGAME_POLL_S
    from tony_airflow.core.protocol import Progress

    progress = [None, Progress(total=3, finished=3), None, None]
    assert _waited(monkeypatch, 4, progress, poll=1.0) == [1.0, ENDGAME_POLL_S, ENDGAME_POLL_S, ENDGAME_POLL_S]


def test_the_quick_endgame_polls_are_bounded_when_the_am_stays_silent(monkeypatch):
    """An AM whose page stops answering while the application stays RUNNING (its host is unreachable)
    costs the RM at most ENDGAME_POLLS quick polls, then the caller's interval again."""
    from tony_airflow.core.client import ENDGAME_POLL_S, ENDGAME_POLLS
    from tony_airflow.core.protocol import Progress

    polls = ENDGAME_POLLS + 5
    progress = [Progress(total=3, running=3)] + [None] * polls
    assert _waited(monkeypatch, polls + 1, progress, poll=3.0) == [3.0] + [ENDGAME_POLL_S] * ENDGAME_POLLS + [3.0] * 5


# ------------------------------------------------ issue #30 item 1: one RM error does not end the wait
def _flaky_wait(monkeypatch, answers: list, patience: float = 900.0):
    from tony_airflow.core import client as client_module
    from tony_airflow.core.client import JobHandle
    from tony_airflow.yarn.rest import ApplicationReport

    class RM:
        calls = 0

        def application(self, app_id):
            RM.calls += 1
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return ApplicationReport(app_id, *answer)

    clock = [0.0]
    monkeypatch.setattr(client_module.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    monkeypatch.setattr(client_module.time, "monotonic", lambda: clock[0])
    handle = JobHandle("application_1_0001", RM(), rm_patience_s=patience)  # type: ignore[arg-type]
    monkeypatch.setattr(handle, "progress", lambda report=None: None)
    return handle, RM


def test_transient_rm_errors_during_the_wait_are_ridden_out_as_hadoops_clients_do(monkeypatch):
    """A timeout, a 5xx or an RM failover made ytf-submit, tony-azkaban and the Oozie entry point exit 1
    and orphan a running application."""
    from tony_airflow.yarn.rest import ResourceManagerError

    down = ResourceManagerError("no ResourceManager answered: timed out", transient=True)
    busy = ResourceManagerError("GET /ws/v1/cluster/apps/x: HTTP 503: standby", transient=True)
    handle, rm = _flaky_wait(monkeypatch, [("RUNNING", "UNDEFINED"), down, busy, down, ("FINISHED", "SUCCEEDED")])
    assert handle.wait(poll=1.0).final_status == "SUCCEEDED"
    assert rm.calls == 5


def test_the_wait_gives_up_after_the_rms_patience_and_at_once_on_a_refusal(monkeypatch):
    from tony_airflow.yarn.rest import ResourceManagerError

    down = ResourceManagerError("no ResourceManager answered: refused", transient=True)
    handle, rm = _flaky_wait(monkeypatch, [down] * 100, patience=10.0)
    with pytest.raises(ResourceManagerError, match="did not answer for 10s"):
        handle.wait(poll=1.0)
    assert 5 <= rm.calls <= 12
    refused = ResourceManagerError("GET /ws/v1/cluster/apps/x: HTTP 404: not found")
    handle, rm = _flaky_wait(monkeypatch, [refused])
    with pytest.raises(ResourceManagerError, match="404"):
        handle.wait(poll=1.0)


def test_the_rms_patience_is_hadoops_setting():
    import math

    from tony_airflow.core.client import RM_PATIENCE_S, rm_patience

    assert rm_patience(None) == RM_PATIENCE_S == 900.0
    assert rm_patience("60000") == 60.0 and rm_patience("-1") == math.inf and rm_patience("soon") == RM_PATIENCE_S


# ------------------------------------------- issue #51 item 10: a missing input
class _Files:
    """fsspec's WebHDFS as far as the input check uses it: GETFILESTATUS of one path."""

    def __init__(self, present: set[str], error: Exception | None = None):
        self.present, self.error, self.asked = present, error, []

    def info(self, path):
        self.asked.append(path)
        if self.error is not None:
            raise self.error
        if path not in self.present:
            raise FileNotFoundError(f"File does not exist: {path}")
        return {"name": path, "type": "directory", "size": 0}


def _input_client(monkeypatch, files: _Files):
    from tony_airflow.core import client as client_module

    made: list[dict] = []

    def webhdfs(conf=None, user=None, login=None, token=None, uri=None):
        made.append({"user": user, "uri": uri})
        return files

    monkeypatch.setattr(client_module, "webhdfs", webhdfs)
    client = object.__new__(client_module.TonyClient)
    client.conf, client.login, client.rm = None, None, SimpleNamespace(user="alice")
    return client, made


def _with_input(path: str):
    from tony_airflow.core.spec import build_job_spec

    return build_job_spec({"cluster_requirement": "worker:1", "command": "train", "input": path}, check_paths=False)


def test_an_hdfs_input_that_does_not_exist_is_refused_in_one_line_naming_it(monkeypatch):
    from tony_airflow.errors import UsageError

    files = _Files(present={"/data/other"})
    client, made = _input_client(monkeypatch, files)
    with pytest.raises(UsageError) as exc:
        client.check_input(_with_input("hdfs:///data/in"))
    assert str(exc.value) == ("input: hdfs:///data/in does not exist; allowed: an existing path in HDFS "
                              "(an empty directory is allowed)")
    assert files.asked == ["/data/in"] and made == [{"user": "alice", "uri": "hdfs:///data/in"}]


def test_an_existing_input_an_empty_directory_included_and_a_local_one_pass(monkeypatch):
    files = _Files(present={"/data/empty"})
    client, made = _input_client(monkeypatch, files)
    client.check_input(_with_input("hdfs://nn:8020/data/empty"))
    assert files.asked == ["/data/empty"] and made[0]["uri"] == "hdfs://nn:8020/data/empty"
    client.check_input(_with_input("/data/on/every/host"))  # not HDFS: the tasks' own filesystem, not ours
    client.check_input(_with_input(""))
    assert files.asked == ["/data/empty"]


def test_an_input_the_user_may_not_read_is_bad_input_and_an_unreachable_hdfs_a_cluster_error(monkeypatch):
    from tony_airflow.errors import ClusterError, UsageError

    client, _ = _input_client(monkeypatch, _Files(set(), PermissionError("Permission denied: user=alice")))
    with pytest.raises(UsageError, match=r"^input: hdfs:///data/in cannot be read as alice: Permission denied"):
        client.check_input(_with_input("hdfs:///data/in"))
    client, _ = _input_client(monkeypatch, _Files(set(), ConnectionError("refused")))
    with pytest.raises(ClusterError, match=r"^webhdfs: checking the input hdfs:///data/in failed: refused"):
        client.check_input(_with_input("hdfs:///data/in"))


def test_validate_checks_the_input(monkeypatch):
    from tony_airflow.core.client import TonyClient

    checked = []
    monkeypatch.setattr(TonyClient, "check_input", lambda self, job: checked.append(job.input_path))
    client = object.__new__(TonyClient)
    client.conf = {}
    client.max_allocation = lambda queue: None
    client.rm = SimpleNamespace(get=lambda path: {})
    client.validate(_with_input("hdfs:///data/in"))
    assert checked == ["hdfs:///data/in"]
