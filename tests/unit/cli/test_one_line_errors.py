"""Issue #15 item 12: expected failures of every entry point end in one line and a defined exit code."""

from __future__ import annotations

import pytest

from tony_airflow.cli import tony as cli
from tony_airflow.errors import ClusterError


def test_a_maven_failure_is_one_line(tmp_path, monkeypatch, capsys):
    from tony_airflow.local.cluster import jars

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mvn").write_text("#!/bin/sh\necho '[ERROR] Could not resolve dependencies' >&2\nexit 1\n")
    (bin_dir / "mvn").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("TONY_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ClusterError, match="maven: could not resolve the Hadoop jars: .*Could not resolve"):
        jars.ensure_jars(log=lambda *_: None)
    code = cli.run(["cluster", "up", "--state-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert err[-1].startswith("error: maven: could not resolve"), err
    assert not any("Traceback" in line for line in err)


def test_an_unreachable_resource_manager_is_one_line(tmp_path, monkeypatch, capsys):
    from tony_airflow.yarn.hadoop_conf import write_site

    conf = tmp_path / "conf"
    conf.mkdir()
    write_site(conf / "yarn-site.xml", {"yarn.resourcemanager.webapp.address": "127.0.0.1:9"})
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    code = cli.run(["status", "application_1_1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 69 and len(err) == 1 and err[0].startswith("error: "), err  # not a job's failure (1)


@pytest.mark.parametrize("failure, start", [
    (RuntimeError("Permission denied: user=alice, access=WRITE, inode=\"/user\""), "error: webhdfs: staging"),
    (OSError(111, "Connection refused"), "error: webhdfs: staging"),
])
def test_a_staging_failure_is_one_line(tmp_path, monkeypatch, capsys, failure, start):
    from types import SimpleNamespace

    from tony_airflow.cli import submit
    from tony_airflow.core.client import TonyClient
    from tony_airflow.yarn import submission

    class Offline(TonyClient):
        def __init__(self, *a, **k):
            self.environment = {"HADOOP_CONF_DIR": str(tmp_path)}
            self.conf = SimpleNamespace(kerberos=False)
            self.rm = SimpleNamespace(user="alice")
            self.login = None

        def validate(self, job):
            return job

    def refuse(*a, **k):
        raise failure

    monkeypatch.setattr(submit, "TonyClient", Offline)
    monkeypatch.setattr(submission, "submit", refuse)
    monkeypatch.setattr("tony_airflow.core.client.webhdfs", lambda *a, **k: None)
    with pytest.raises(SystemExit) as exc:
        submit.main(["-r", "worker:1", "true"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 1 and err[-1].startswith(start), err
    assert not any("Traceback" in line for line in err)
