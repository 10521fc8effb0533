"""The client: the process environment, reconnected handles, the AM's progress (issue #15, items 8, 9, 10)."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from tony_airflow.core import protocol


def test_progress_from_a_newer_am_with_more_fields_is_read():
    from tony_airflow.core.protocol import Progress

    p = Progress.from_json(json.dumps({"attempt": 1, "max_attempts": 1, "total": 3, "allocated": 3,
                                       "registered": 3, "running": 3, "finished": 0, "spec_published": True,
                                       "new_field_of_a_later_version": 5}))
    assert p.total == 3 and p.spec_published
    assert Progress.from_json("not json") is None


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


def test_a_reconnected_handle_reads_progress_and_refuses_local_tasks_in_one_line(monkeypatch):
    from tony_airflow.core.client import JobHandle
    from tony_airflow.errors import UsageError

    class FakeKV(dict):
        pass

    class FakeSkein:
        def connect(self, app_id, wait=False):
            return SimpleNamespace(kv=FakeKV({protocol.PROGRESS_KEY: json.dumps({"total": 2, "allocated": 1}).encode()}))

    handle = JobHandle("application_1_1", rm=None, skein_client=lambda: FakeSkein())
    progress = handle.progress()
    assert progress is not None and progress.total == 2
    assert handle.progress() == progress  # the client made once is kept
    with pytest.raises(UsageError, match="client mode"):
        handle.run_local_tasks()


def test_wait_looks_more_often_once_every_task_has_ended(monkeypatch):
    """The client learns the end when it happens: after the last task, only the AMs' shutdown is left."""
    from tony_airflow.core import client as client_module
    from tony_airflow.core.client import ENDGAME_POLL_S, JobHandle
    from tony_airflow.core.protocol import Progress
    from tony_airflow.yarn.rest import ApplicationReport

    states = [("RUNNING", "UNDEFINED")] * 3 + [("FINISHED", "SUCCEEDED")]
    progress = [Progress(total=3, finished=1), Progress(total=3, finished=3), Progress(total=3, finished=3)]

    class RM:
        def application(self, app_id):
            state, final = states.pop(0)
            return ApplicationReport(app_id, state, final)

    handle = JobHandle("application_1_0001", RM())  # type: ignore[arg-type]
    monkeypatch.setattr(handle, "progress", lambda: progress.pop(0))
    slept: list[float] = []
    monkeypatch.setattr(client_module.time, "sleep", slept.append)
    assert handle.wait(poll=5.0).final_status == "SUCCEEDED"
    assert slept == [5.0, ENDGAME_POLL_S, ENDGAME_POLL_S]
