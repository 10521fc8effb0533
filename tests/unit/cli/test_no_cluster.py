"""Issue #51 item 11: no cluster reached is not a failed job. With no ResourceManager answering, every command
says in one line which address it asked and where that came from (HADOOP_CONF_DIR or the Airflow
connection), and exits with its own code (69, sysexits' EX_UNAVAILABLE), not 1 (a FAILED or KILLED job);
`tony cluster env` for a cluster that does not exist fails; `tony cluster up --state-dir X` says how to use X."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tony_airflow.cli import submit
from tony_airflow.cli import tony as cli
from tony_airflow.errors import CLUSTER_UNREACHABLE_EXIT


def _silent_port() -> int:
    """A port nothing listens on (bound, then closed: connections to it are refused)."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        return free.getsockname()[1]


@pytest.fixture
def nowhere(tmp_path, monkeypatch) -> tuple[Path, str]:
    """HADOOP_CONF_DIR naming a ResourceManager that does not answer."""
    from tony_airflow.yarn.hadoop_conf import write_site

    conf = tmp_path / "conf"
    conf.mkdir()
    address = f"127.0.0.1:{_silent_port()}"
    write_site(conf / "yarn-site.xml", {"yarn.resourcemanager.webapp.address": address})
    write_site(conf / "core-site.xml", {"fs.defaultFS": f"hdfs://127.0.0.1:{_silent_port()}"})
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    return conf, address


def test_the_exit_code_is_its_own():
    assert CLUSTER_UNREACHABLE_EXIT == 69 and CLUSTER_UNREACHABLE_EXIT not in (0, 1, 2, 130, 143)


def test_ytf_submit_with_no_resource_manager_says_which_and_where_from_in_one_line(nowhere, capsys):
    conf, address = nowhere
    with pytest.raises(SystemExit) as exc:
        submit.main(["-r", "worker:1", "echo never"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == CLUSTER_UNREACHABLE_EXIT, err
    assert len(err) == 1, err
    assert err[0].startswith(f"error: no active ResourceManager answered (addresses from HADOOP_CONF_DIR={conf}): "
                             f"http://{address}: "), err


def test_tony_status_with_no_resource_manager_is_the_same_line_and_code(nowhere, capsys):
    conf, address = nowhere
    code = cli.run(["status", "application_1_1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == CLUSTER_UNREACHABLE_EXIT and len(err) == 1, err
    assert f"(addresses from HADOOP_CONF_DIR={conf}): http://{address}" in err[0]


def test_a_resource_manager_that_answers_with_a_refusal_is_not_an_unreached_cluster():
    from tony_airflow.yarn.rest import ResourceManagerError

    assert ResourceManagerError("GET /x: HTTP 403: no").exit_code == 1


def test_the_airflow_connection_is_named_as_the_origin_of_its_addresses():
    from tony_airflow.providers.yarn.connection import YarnSettings
    from tony_airflow.providers.yarn.hooks.yarn import YarnHook
    from tony_airflow.yarn.rest import NoActiveResourceManager

    hook = YarnHook(yarn_conn_id="my_yarn")
    address = f"http://127.0.0.1:{_silent_port()}"
    hook._settings = YarnSettings(rm_addresses=[address], user="alice")
    with pytest.raises(NoActiveResourceManager) as exc:
        hook.get_conn().application("application_1_1")
    assert str(exc.value).startswith(
        f"no active ResourceManager answered (addresses from the Airflow connection 'my_yarn'): {address}: ")
    assert exc.value.exit_code == CLUSTER_UNREACHABLE_EXIT


def test_the_connections_hadoop_conf_dir_is_named_when_it_gave_the_addresses(nowhere):
    from tony_airflow.providers.yarn.connection import YarnSettings
    from tony_airflow.providers.yarn.hooks.yarn import YarnHook

    conf, address = nowhere
    hook = YarnHook(yarn_conn_id="my_yarn")
    hook._settings = YarnSettings(hadoop_conf_dir=str(conf)).resolved()
    ok, line = hook.test_connection()
    assert not ok and line.startswith(f"no active ResourceManager answered (addresses from HADOOP_CONF_DIR={conf} "
                                      f"of the Airflow connection 'my_yarn'): http://{address}: "), line


def test_cluster_env_of_a_cluster_that_does_not_exist_fails_in_one_line(tmp_path, capsys):
    code = cli.run(["cluster", "env", "--state-dir", str(tmp_path / "none")])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", out
    assert err.strip().splitlines() == [
        f"error: --state-dir: no local cluster at {tmp_path / 'none'}; allowed: the --state-dir of a "
        f"`tony cluster up`"]


def test_cluster_up_says_how_to_use_the_cluster_with_its_own_state_dir(tmp_path):
    from tony_airflow.cli.tony import env_hint

    assert env_hint(None) == 'Use it from a shell with: eval "$(tony cluster env)"'
    there = tmp_path / "my cluster"
    assert env_hint(str(there)) == f"Use it from a shell with: eval \"$(tony cluster env --state-dir '{there}')\""
