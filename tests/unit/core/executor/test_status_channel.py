"""Issue #52 item 1: the task's status endpoint refuses and counts bad reports (a wrong token, 1 MB, not JSON,
1000 a second), keeps the newest good one, and its relay takes it to the AM; the helper never fails the
program and never blocks it."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tony_airflow import progress
from tony_airflow.core.executor.status_channel import Bucket, Relay, StatusEndpoint, program_env, ship_helper


@pytest.fixture
def endpoint():
    ep = StatusEndpoint().start()
    yield ep
    ep.stop()


def _post(ep: StatusEndpoint, body: bytes, token: str | None = None, headers: dict | None = None) -> int:
    host, port = ep.url.split("//")[1].split("/")[0].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("POST", "/report", body=body, headers={progress.TOKEN_HEADER: ep.token if token is None else token,
                                                             "Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def test_a_good_report_is_kept_as_the_newest(endpoint):
    assert _post(endpoint, json.dumps({"step": 1, "metrics": {"loss": 2.0}}).encode()) == 204
    assert _post(endpoint, json.dumps({"step": 2, "total_steps": 10, "metrics": {"loss": 1.0}}).encode()) == 204
    latest, news = endpoint.take_news()
    assert latest == {"step": 2, "total_steps": 10, "epoch": None, "total_epochs": None, "metrics": {"loss": 1.0}}
    assert news == {} and endpoint.take_news() == (None, {})


def test_a_wrong_token_is_refused_and_counted(endpoint):
    assert _post(endpoint, b'{"step": 1}', token="nope") == 401
    assert _post(endpoint, b'{"step": 1}', token="") == 401
    assert endpoint.refused["bad_token"] == 2 and endpoint.take_news() == (None, {"bad_token": 2})


def test_a_1_mb_report_is_refused_unread(endpoint):
    """The 413 comes from the Content-Length alone: the client is answered before it sends a byte of the body
    (a client that sends the whole 1 MB anyway may see its connection reset mid-send, as CI once did)."""
    host, port = endpoint.url.split("//")[1].split("/")[0].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.putrequest("POST", "/report")
        conn.putheader(progress.TOKEN_HEADER, endpoint.token)
        conn.putheader("Content-Length", str(2**20 + 1))
        conn.endheaders()  # the headers only: the body is never sent
        resp = conn.getresponse()
        assert resp.status == 413 and resp.getheader("Connection") == "close"
    finally:
        conn.close()
    assert endpoint.refused["too_large"] == 1 and endpoint.take_news()[0] is None


def test_a_1_mb_report_sent_whole_is_counted_once_whether_or_not_the_client_reads_the_answer(endpoint):
    try:
        status = _post(endpoint, b'{"metrics": {"a": 1}, "pad": "' + b"x" * 2**20 + b'"}')
    except (BrokenPipeError, ConnectionResetError):
        status = 413  # the server answered and closed while the client was still sending: the kernel's race
    assert status == 413
    assert endpoint.refused["too_large"] == 1 and endpoint.take_news()[0] is None


def test_a_body_that_is_not_json_or_not_a_report_is_refused(endpoint):
    assert _post(endpoint, b"{not json") == 400
    assert _post(endpoint, b"\xff\xfe") == 400
    assert _post(endpoint, b"[1, 2]") == 400
    assert _post(endpoint, b'{"step": -3}') == 400
    assert (endpoint.refused["bad_json"], endpoint.refused["bad_report"]) == (2, 2)


def test_a_flood_is_dropped_and_counted(endpoint):
    statuses = [_post(endpoint, json.dumps({"step": i}).encode()) for i in range(1000)]
    dropped = statuses.count(429)
    assert statuses.count(204) + dropped == 1000
    assert dropped >= 1000 - 10 - 5 * 60  # the burst, and the rate over however long 1000 requests took
    assert endpoint.refused["flood"] == dropped


def test_the_bucket_refills_at_its_rate():
    now = [0.0]
    bucket = Bucket(rate=2.0, burst=3, clock=lambda: now[0])
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    now[0] += 1.0
    assert [bucket.take() for _ in range(3)] == [True, True, False]


def test_the_relay_sends_the_newest_report_and_the_new_refusals_once():
    sent = []
    ep = StatusEndpoint()
    ep.judge("wrong", 1, lambda n: b"{}")
    ep.judge(ep.token, 11, lambda n: b'{"step": 4}')
    relay = Relay(ep, lambda path, body: sent.append((path, body)), {"type": "worker", "index": 0, "attempt": 1})
    relay.relay_once()
    relay.relay_once()  # nothing new: nothing sent
    assert sent == [("/v1/training", {"type": "worker", "index": 0, "attempt": 1, "source": "report",
                                      "report": {"step": 4, "total_steps": None, "epoch": None,
                                                 "total_epochs": None, "metrics": {}},
                                      "refused": {"bad_token": 1}})]


def test_a_relay_that_fails_drops_the_report_keeps_the_counts_and_never_raises():
    ep = StatusEndpoint()
    ep.judge("wrong", 1, lambda n: b"{}")
    calls = []

    def send(path, body):
        calls.append(body)
        raise ConnectionRefusedError("the AM is busy")

    relay = Relay(ep, send, {})
    relay.relay_once()
    relay.relay_once()
    assert [c["refused"] for c in calls] == [{"bad_token": 1}, {"bad_token": 1}]


def test_a_relay_stopped_with_the_am_lost_or_stuck_in_a_send_makes_no_last_send(monkeypatch):
    """A review: the last send after a stop could hold the task's end a call's timeout more when the AM is away."""
    import threading

    from tony_airflow.core.executor import status_channel

    monkeypatch.setattr(status_channel, "RELAY_S", 0.01)
    ep = StatusEndpoint()
    ep.judge(ep.token, 11, lambda n: b'{"step": 4}')
    stuck, sent = threading.Event(), []

    def send(path, body):
        sent.append(body)
        stuck.wait(5)

    relay = Relay(ep, send, {}).start()
    while not sent:
        time.sleep(0.01)
    ep.judge(ep.token, 11, lambda n: b'{"step": 5}')
    began = time.monotonic()
    relay.stop()  # the relay is inside a send that does not end
    assert len(sent) == 1 and time.monotonic() - began < 4
    stuck.set()
    quiet = Relay(ep, lambda path, body: sent.append(body), {})
    quiet.stop(final=False)
    assert len(sent) == 1


def test_the_tensorboard_source_speaks_only_while_the_program_reports_nothing():
    sent = []
    ep = StatusEndpoint()
    relay = Relay(ep, lambda path, body: sent.append(body), {}, source=lambda: {"step": 7, "metrics": {"loss": 1}})
    relay.relay_once()
    ep.judge(ep.token, 11, lambda n: b'{"step": 8}')
    relay.relay_once()
    relay.relay_once()
    assert [(b["source"], b["report"]["step"]) for b in sent] == [("tensorboard", 7), ("report", 8)]


def test_the_helper_in_a_bare_python_reports_through_the_endpoint_and_never_fails(endpoint, tmp_path: Path):
    """As in an image without tony-airflow: `python -I`-like (only the shipped file on PYTHONPATH)."""
    helper = ship_helper(tmp_path)
    env = {"PATH": os.environ["PATH"], **program_env(endpoint, helper, {})}
    program = (
        "import time, tony_progress as p\n"
        "t = time.perf_counter()\n"
        "for i in range(1, 2001):\n"
        "    assert p.report(step=i, total_steps=2000, epoch=1, total_epochs=1, metrics={'loss': 1 / i})\n"
        "per_call = (time.perf_counter() - t) / 2000\n"
        "assert p.report(metrics={'x': object()}) is True\n"          # a value that is no number: left out
        "assert p.report(step=-1) is False\n"                          # breaks the rules: not taken, no raise
        "assert p.report(metrics={'pad' + str(i): 1.0 for i in range(5000)}) is True\n"  # only 32 kept
        "p.report(step=2000, total_steps=2000, metrics={'loss': 0.5})\n"
        "print(per_call)\n")
    out = subprocess.run([sys.executable, "-S", "-c", program], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) < 0.001  # a report costs the program well under a millisecond
    latest, _ = endpoint.take_news()
    assert latest is not None and latest["step"] == 2000 and latest["metrics"] == {"loss": 0.5}
    assert endpoint.taken <= 1 + 2000 * progress.MIN_INTERVAL_S  # dropped in the program, not queued


def test_the_helper_outside_a_task_does_nothing(monkeypatch):
    monkeypatch.delenv(progress.ENV_URL, raising=False)
    assert progress.report(step=1) is False and progress.flush() is True and not progress.enabled()


def test_the_helper_with_an_endpoint_gone_never_raises_nor_blocks(tmp_path: Path):
    env = {"PATH": os.environ["PATH"], progress.ENV_URL: "http://127.0.0.1:9/report", progress.ENV_TOKEN: "t",
           "PYTHONPATH": str(ship_helper(tmp_path))}
    program = ("import time, tony_progress as p\nt = time.perf_counter()\n"
               "[p.report(step=i) for i in range(100)]\nassert time.perf_counter() - t < 1\n")
    out = subprocess.run([sys.executable, "-S", "-c", program], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_the_helper_imports_only_the_standard_library():
    import ast

    tree = ast.parse(Path(progress.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_the_helper_parses_as_python_3_8():
    """Images bring their own Python: the shipped file uses nothing newer than 3.8's syntax (annotations are
    strings under `from __future__ import annotations`; no `X | Y` outside them)."""
    import ast

    source = Path(progress.__file__).read_text()
    ast.parse(source, feature_version=(3, 8))
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "isinstance"]
    assert not [c for c in calls if isinstance(c.args[1], ast.BinOp)], "isinstance(x, A | B) needs Python 3.10"


def test_idle_connections_beyond_the_bound_are_closed_and_counted_and_reports_still_get_through(monkeypatch):
    """A review: every connection held a thread for 5 s, without bound; a half-sent body printed a traceback."""
    import socket

    from tony_airflow.core.executor import status_channel

    ep = StatusEndpoint().start()
    try:
        port = int(ep.url.split(":")[2].split("/")[0])
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(status_channel.MAX_CONNECTIONS + 4)]
        half = idle[0]
        head = f"POST /report HTTP/1.1\r\nContent-Length: 100\r\n{progress.TOKEN_HEADER}: {ep.token}\r\n\r\n{{"
        half.sendall(head.encode())
        deadline = time.monotonic() + 10
        while ep.refused["flood"] < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ep.refused["flood"] >= 4
        for conn in idle:
            conn.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the slots come back as the idle ones end
            if _post(ep, b'{"step": 1}') == 204:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("no report got through after the idle connections ended")
    finally:
        ep.stop()
