"""Bad input to the Kerberos entry points (`tony tokens`, `tony cluster up --secure`): exit 2, one line."""

from __future__ import annotations

import pytest

from tony_airflow.cli import tony as cli
from tony_airflow.yarn.hadoop_conf import write_site


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("argv, expected", [
    (["tokens"], "the following arguments are required: --out"),
    (["tokens", "--out", "t", "--principal", "u@R"], "--keytab: a keytab login needs both"),
    (["cluster", "up", "--secure", "--no-secure"], "not allowed with argument"),
])
def test_refused_in_one_line(argv, expected, capsys, tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    conf.mkdir()
    write_site(conf / "core-site.xml", {"hadoop.security.authentication": "kerberos"})
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    assert cli.run(argv) == 2
    assert expected in _one_line(capsys)


def test_tokens_of_a_simple_auth_cluster_are_refused(capsys, tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    conf.mkdir()
    write_site(conf / "core-site.xml", {"hadoop.security.authentication": "simple"})
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    assert cli.run(["tokens", "--out", str(tmp_path / "t")]) == 2
    assert "uses simple authentication" in _one_line(capsys)
    assert not (tmp_path / "t").exists()
