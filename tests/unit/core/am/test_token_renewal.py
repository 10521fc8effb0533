"""New HDFS delegation tokens from the job's keytab before the old ones expire (issue #44 item 2): when
the AM asks for the next one, what it does when the NameNode cannot answer, and how a token reaches the
executors (sealed with the job's secret) and every WebHDFS call of a process."""

from __future__ import annotations

import asyncio

import pytest
from fsspec.implementations.webhdfs import WebHDFS

from tests.unit.core.support import SECRET, make_job
from tony_airflow.core import protocol
from tony_airflow.core.am import token_renewal as tr
from tony_airflow.core.am.registry import Registry
from tony_airflow.yarn import hdfs


def _token(expires: float, max_date: float, url: str = "T") -> tr.ObtainedToken:
    return tr.ObtainedToken(url, issued=0.0, expires=expires, max_date=max_date)


def test_the_next_token_comes_at_three_quarters_of_the_time_this_one_has_left():
    assert _token(60, 180).refresh_in(0) == 45  # Spark's renewal ratio of a 60 s renew interval
    assert _token(200, 180).refresh_in(170) == 7.5  # the max lifetime comes first
    assert _token(60, 180).refresh_in(100) == tr.MIN_WAIT_S  # already expired: at once (a floor, no busy loop)


def test_a_step_hands_each_token_over_and_a_failed_one_is_tried_again_soon():
    used: list[str] = []
    answers: list[object] = [_token(60, 180, "first"), OSError("NameNode in failover"), _token(120, 180, "second")]

    def obtain() -> tr.ObtainedToken:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    renewal = tr.TokenRenewal(obtain, lambda t: used.append(t.url_string), clock=lambda: 0.0)
    assert renewal.step() == 45
    assert renewal.step() == tr.RETRY_S
    assert renewal.step() == 90
    assert used == ["first", "second"] and renewal.obtained == 2


def test_the_renewer_is_the_principals_short_name():
    assert tr.short_name("ada@TONY.TEST") == "ada"
    assert tr.short_name("svc/host.example.com@EXAMPLE.COM") == "svc"


def test_a_sealed_token_is_read_only_with_the_jobs_secret():
    sealed = protocol.seal(SECRET, "token-url-string")
    assert "token-url-string" not in sealed
    assert protocol.unseal(SECRET, sealed) == "token-url-string"
    with pytest.raises(ValueError, match="not sealed with this job's secret"):
        protocol.unseal("another job's secret", sealed)
    with pytest.raises(ValueError):
        protocol.unseal(SECRET, sealed[:-4] + "AAAA")


def test_a_heartbeat_answer_carries_the_newest_token_sealed():
    from aiohttp.test_utils import TestClient, TestServer

    from tony_airflow.core.am import server

    async def scenario() -> list[dict]:
        registry = Registry(make_job("worker:1"), "application_1_0001")
        registry.new_attempt(1)
        client = TestClient(TestServer(server.build_app(registry, SECRET)))
        await client.start_server()
        body = b'{"type": "worker", "index": 0, "attempt": 1}'

        async def beat() -> dict:
            resp = await client.post(protocol.HEARTBEAT, data=body,
                                     headers=protocol.sign(SECRET, "POST", protocol.HEARTBEAT, body))
            return await resp.json()

        try:
            before = await beat()
            registry.sealed_hdfs_token = protocol.seal(SECRET, "new")
            return [before, await beat()]
        finally:
            await client.close()

    before, after = asyncio.run(scenario())
    assert "hdfs_token" not in before
    assert protocol.unseal(SECRET, after["hdfs_token"]) == "new"


def test_every_webhdfs_call_of_the_process_carries_the_newest_token(monkeypatch):
    fs = hdfs._webhdfs_class()(host="nn1", port=9870, token="old", use_listings_cache=False,
                               skip_instance_cache=True)
    sent: list[str] = []
    monkeypatch.setattr(WebHDFS, "_call", lambda self, *a, **k: sent.append(self.pars.get("delegation")))
    monkeypatch.setattr(hdfs, "_renewed_token", None)
    fs._call("LISTSTATUS", "get", "/a")
    hdfs.use_hdfs_token("new")
    fs._call("LISTSTATUS", "get", "/a")
    assert sent == ["old", "new"] and hdfs.renewed_hdfs_token() == "new"
    plain = hdfs._webhdfs_class()(host="nn1", port=9870, user="u", use_listings_cache=False, skip_instance_cache=True)
    plain._call("LISTSTATUS", "get", "/a")  # a cluster without Kerberos: no token is added
    assert "delegation" not in plain.pars and sent[-1] is None


def test_a_token_in_a_logged_url_is_redacted():
    import logging

    record = logging.LogRecord("httpx", logging.INFO, __file__, 1, 'HTTP Request: %s %s "%s"',
                               ("PUT", "http://nn:9870/webhdfs/v1/?op=RENEWDELEGATIONTOKEN&token=SECRETVALUE",
                                "HTTP/1.1 200 OK"), None)
    assert tr.RedactTokens().filter(record)
    assert "SECRETVALUE" not in record.getMessage()
    assert "op=RENEWDELEGATIONTOKEN&token=<redacted>" in record.getMessage()


@pytest.mark.parametrize("wait", ["0", "5"])
def test_a_task_registering_after_a_new_token_gets_it_before_it_stages(wait):
    """A task that starts after the job's first token expired (a retry on day 8) stages its input and pulls
    its output with the token in its registration answer, before its first heartbeat; with or without the
    registration's long poll for the gang."""
    from aiohttp.test_utils import TestClient, TestServer

    from tony_airflow.core.am import server

    async def scenario() -> dict:
        registry = Registry(make_job("worker:1"), "application_1_0001")
        registry.new_attempt(1)
        registry.sealed_hdfs_token = protocol.seal(SECRET, "new")
        client = TestClient(TestServer(server.build_app(registry, SECRET)))
        await client.start_server()
        path = f"{protocol.REGISTER}?wait={wait}"
        body = b'{"type": "worker", "index": 0, "attempt": 1, "host": "h", "port": 1}'
        try:
            resp = await client.post(path, data=body, headers=protocol.sign(SECRET, "POST", path, body))
            return await resp.json()
        finally:
            await client.close()

    answer = asyncio.run(scenario())
    assert answer["ok"] is True and protocol.unseal(SECRET, answer["hdfs_token"]) == "new", answer


# ------------------------------------------------------------------ issue 51, item 6: a RENEW that fails after GET
class NameNode:
    """WebHDFS's token operations, as `token_renewal.obtain_with` calls them; RENEW refused (a renewer name the
    NameNode maps differently)."""

    def __init__(self, renew_fails: bool = True) -> None:
        self.renew_fails = renew_fails
        self.calls: list[tuple[str, str]] = []
        self.live: set[str] = set()

    def __call__(self, method: str, params: dict[str, str]) -> dict:
        op = params["op"]
        self.calls.append((method, op))
        if op == "GETDELEGATIONTOKEN":
            url = _url(len(self.calls))
            self.live.add(url)
            return {"Token": {"urlString": url}}
        if op == "RENEWDELEGATIONTOKEN":
            if self.renew_fails:
                raise OSError("403: ada tried to renew a token without a renewer (renewer=ada/host)")
            return {"long": 4_000_000}
        if op == "CANCELDELEGATIONTOKEN":
            self.live.discard(params["token"])
            return {}
        raise AssertionError(op)


def _url(n: int) -> str:
    """A new HDFS delegation token's URL form: owner and renewer ada, issued at n s, max lifetime 9000 s."""
    from tony_airflow.yarn.tokens import HDFS_DELEGATION_KIND, HadoopToken, _text, _vint

    ident = b"\x00" + _text("ada") + _text("ada") + _text("") + _vint(1000 * n) + _vint(9_000_000) + _vint(n)
    return HadoopToken("", ident, b"p" * 20, HDFS_DELEGATION_KIND, "ha-hdfs:nn").url_string()


def test_a_token_whose_renewal_fails_is_cancelled_never_left_behind():
    nn = NameNode()
    with pytest.raises(tr.RenewalFailed, match="RENEWDELEGATIONTOKEN.*renewer ada.*cancelled"):
        tr.obtain_with(nn, "ada")
    assert [op for _, op in nn.calls] == ["GETDELEGATIONTOKEN", "RENEWDELEGATIONTOKEN", "CANCELDELEGATIONTOKEN"]
    assert not nn.live  # nothing obtained is left on the NameNode
    nn.renew_fails = False
    token = tr.obtain_with(nn, "ada")
    assert token.url_string in nn.live and token.expires == 4000 and token.max_date == 9000


def test_failing_renewals_back_off_and_are_said_once(caplog):
    said: list[str] = []

    def obtain() -> tr.ObtainedToken:
        raise tr.RenewalFailed("RENEWDELEGATIONTOKEN refused")

    renewal = tr.TokenRenewal(obtain, lambda t: None, clock=lambda: 0.0, on_failure=said.append)
    with caplog.at_level("INFO", logger=tr.log.name):
        waits = [renewal.step() for _ in range(12)]
    assert waits[0] == tr.RETRY_S and waits[1] == 2 * tr.RETRY_S and waits[-1] == tr.MAX_RETRY_S
    assert waits == sorted(waits)
    assert said == ["RENEWDELEGATIONTOKEN refused"]
    assert sum("could not obtain a new HDFS delegation token" in r.getMessage() for r in caplog.records) == 1
    renewal.obtain = lambda: _token(60, 180)
    assert renewal.step() == 45  # it works again: the next failure is news again, from the short retry
    renewal.obtain = obtain
    assert renewal.step() == tr.RETRY_S and len(said) == 2


def test_the_job_page_says_that_new_tokens_fail():
    from tony_airflow.core.history import events as ev
    from tony_airflow.core.history.model import JobHistory

    events = [{"time": 1.0, "event": ev.JOB_SUBMITTED, "app_id": "application_1_0001", "max_attempts": 1},
              {"time": 2.0, "event": ev.TOKEN_RENEWAL_FAILED, "reason": "RENEWDELEGATIONTOKEN refused"}]
    job = JobHistory.from_events("application_1_0001", events, {}, complete=False)
    assert any("new HDFS tokens from the keytab fail" in line and "RENEWDELEGATIONTOKEN refused" in line
               for line in job.tokens), job.tokens
