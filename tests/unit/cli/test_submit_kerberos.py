"""ytf-submit's Kerberos options: checked in one line; credentials are read by the client, never in the job's spec."""

from __future__ import annotations

import pytest

from tony_airflow.cli import submit
from tony_airflow.core.spec import CREDENTIAL_KEYS


@pytest.mark.parametrize("argv, expected", [
    (["--principal", "u@R", "-r", "worker:1", "x"], "--keytab: a keytab login needs both"),
    (["--keytab", "k", "-r", "worker:1", "x"], "--principal: a keytab login needs both"),
    (["--principal", "u@R", "--keytab", "/nope.keytab", "-r", "worker:1", "x"], "--keytab: /nope.keytab is not"),
])
def test_bad_kerberos_options_are_one_line_and_exit_2(argv, expected, capsys, monkeypatch):
    made = []
    monkeypatch.setattr(submit, "TonyClient", lambda *a, **k: made.append(k))
    with pytest.raises(SystemExit) as exc:
        submit.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and expected in err[0], err
    assert not made


def test_job_file_credentials_reach_the_client_but_not_the_job(tmp_path, monkeypatch):
    keytab = tmp_path / "u.keytab"
    keytab.write_bytes(b"\x05\x02")
    conf = tmp_path / "job.yaml"
    conf.write_text(f"cluster_requirement: worker:1\ncommand: train\nprincipal: u@R\nkeytab: {keytab}\n")
    args = submit.build_parser().parse_args(["--conf", str(conf)])
    login = submit.login_from_args(args)
    assert (login.principal, login.keytab) == ("u@R", str(keytab))
    job = submit.job_from_args(args, check_paths=False)
    assert not CREDENTIAL_KEYS & set(job.to_json().replace('"', " ").split())
    assert str(keytab) not in job.to_json()
    override = submit.build_parser().parse_args(["--conf", str(conf), "--principal", "v@R", "--keytab", str(keytab)])
    assert submit.login_from_args(override).principal == "v@R"
