"""Who a client is on a Kerberos cluster, and how it authenticates over HTTP (no KDC needed here)."""

from __future__ import annotations

import httpx
import pytest

from tony_airflow.errors import UsageError
from tony_airflow.yarn.kerberos import (
    NO_CREDENTIALS,
    KerberosLogin,
    RMDelegationTokenAuth,
    check_credentials,
    rm_http_auth,
)
from tony_airflow.yarn.tokens import HDFS_DELEGATION_KIND, RM_DELEGATION_KIND, HadoopToken, write_token_file


@pytest.fixture
def no_ticket(tmp_path, monkeypatch):
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'empty-cache'}")
    monkeypatch.delenv("HADOOP_TOKEN_FILE_LOCATION", raising=False)


@pytest.mark.parametrize("principal, keytab, message", [
    ("u@R", None, "--keytab: a keytab login needs both"),
    (None, "k.keytab", "--principal: a keytab login needs both"),
    ("u@R", "/nonexistent.keytab", "--keytab: /nonexistent.keytab is not a readable file"),
])
def test_a_keytab_login_is_checked_before_anything_runs(principal, keytab, message):
    with pytest.raises(UsageError, match=message):
        KerberosLogin(principal, keytab)


def test_simple_auth_needs_nothing():
    assert rm_http_auth("simple") is None and rm_http_auth(None) is None
    check_credentials("simple")


def test_no_ticket_and_no_tokens_is_one_line_naming_kinit_and_keytab(no_ticket):
    pytest.importorskip("gssapi")
    with pytest.raises(UsageError) as exc:
        check_credentials("kerberos")
    assert str(exc.value) == NO_CREDENTIALS and "kinit" in NO_CREDENTIALS and "--keytab" in NO_CREDENTIALS
    with pytest.raises(UsageError):
        rm_http_auth("Kerberos")


def test_given_tokens_are_used_for_the_rm_without_any_ticket(no_ticket, tmp_path, monkeypatch):
    rm = HadoopToken("a", b"id", b"pw", RM_DELEGATION_KIND, "127.0.0.1:1")
    path = tmp_path / "job.tokens"
    write_token_file(path, [HadoopToken("h", b"i", b"p", HDFS_DELEGATION_KIND, "x"), rm])
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", str(path))
    check_credentials("kerberos")
    auth = rm_http_auth("kerberos")
    assert isinstance(auth, RMDelegationTokenAuth)
    request = next(auth.auth_flow(httpx.Request("GET", "http://rm/ws/v1/cluster/apps")))
    assert request.headers["X-Hadoop-Delegation-Token"] == rm.url_string()
