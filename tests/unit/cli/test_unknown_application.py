"""Issue #53 item 7: `tony kill` / `tony status` of an id the ResourceManager does not know is one line naming
the field, exit 2, not the RM's Java exception."""

from __future__ import annotations

import pytest

from tests.unit.fake_rm import FakeApp, FakeResourceManager
from tony_airflow.cli import tony as cli
from tony_airflow.yarn.hadoop_conf import write_site

KNOWN = "application_1_0001"


@pytest.fixture
def rm(tmp_path, monkeypatch):
    rm = FakeResourceManager(apps={KNOWN: FakeApp([("FINISHED", "SUCCEEDED")])}).start()
    conf = tmp_path / "conf"
    conf.mkdir()
    write_site(conf / "yarn-site.xml", {"yarn.resourcemanager.webapp.address": rm.url.removeprefix("http://")})
    write_site(conf / "core-site.xml", {"fs.defaultFS": "hdfs://127.0.0.1:9"})
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    yield rm
    rm.stop()


@pytest.mark.parametrize("command", [["kill"], ["status"], ["follow"], ["logs", "-f"]])
def test_an_unknown_application_is_one_line_and_exit_2(rm, command, capsys):
    code = cli.run([*command, "application_1_9999"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0] == ("error: application_id: application_1_9999 is not known to the ResourceManager; allowed: an "
                      "application of this cluster (`tony history`, `yarn application -list -appStates ALL`)")
    assert "Exception" not in err[0]


def test_a_known_one_is_still_answered(rm, capsys):
    assert cli.run(["kill", KNOWN]) == 0
    assert capsys.readouterr().out.strip() == f"{KNOWN} already ended: FINISHED SUCCEEDED"


def test_the_history_server_does_not_log_each_rm_request(rm, caplog):
    """`tony history serve` logged `HTTP Request: GET …/ws/v1/cluster/apps/…` for every page view."""
    import logging

    from tony_airflow.cli.history import server_logging
    from tony_airflow.yarn.rest import ResourceManagerClient

    server_logging()
    try:
        with caplog.at_level(logging.INFO):
            ResourceManagerClient([rm.url]).application(KNOWN)
        assert not [r for r in caplog.records if "HTTP Request" in r.getMessage()], caplog.records
    finally:
        for name in ("httpx", "httpcore", "urllib3", "requests_kerberos", "fsspec"):
            logging.getLogger(name).setLevel(logging.NOTSET)


def test_detach_names_tensorboard_and_how_to_follow(tmp_path, monkeypatch, capsys):
    """`--detach` with -t: the TensorBoard link, and `tony follow APP` to see the job again."""
    from types import SimpleNamespace

    from tony_airflow.cli import submit

    class Client:
        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def submit(self, job):
            status = SimpleNamespace(tracking_url="http://rm:8088/proxy/application_1_0007/")
            return SimpleNamespace(app_id="application_1_0007", status=lambda: status)

    monkeypatch.setattr(submit, "TonyClient", Client)
    code = cli.run(["submit", "--detach", "-r", "worker:1", "-t", "-o", str(tmp_path), "x"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out == ["Submitted application application_1_0007",
                   "Tracking URL: http://rm:8088/proxy/application_1_0007/",
                   "TensorBoard: http://rm:8088/proxy/application_1_0007/pages/tensorboard/",
                   "Left running (--detach): follow it with `tony follow application_1_0007`, stop it with "
                   "`tony kill application_1_0007`"]
