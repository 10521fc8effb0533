"""Who may read the AM's pages and what they show (issue #30 item 9)."""

from __future__ import annotations

import json
from unittest import mock

from aiohttp.test_utils import make_mocked_request

from tony_airflow.core.am.server import from_this_host
from tony_airflow.core.spec import MASK, build_job_spec, masked_env


def _request(peer: str, local: str):
    transport = mock.Mock()
    transport.get_extra_info.side_effect = lambda name, default=None: {
        "peername": (peer, 40000), "sockname": (local, 8042)}.get(name, default)
    return make_mocked_request("GET", "/status.json", transport=transport)


def test_a_page_is_served_to_its_own_host_only():
    assert from_this_host(_request("127.0.0.1", "127.0.0.1"))
    assert from_this_host(_request("198.18.0.3", "198.18.0.3"))  # skein's web UI beside the AM, by host address
    assert from_this_host(_request("::1", "::1"))
    assert not from_this_host(_request("198.18.0.4", "198.18.0.3"))  # another host: only through the RM's proxy
    assert not from_this_host(_request("10.1.2.3", "198.18.0.3"))


def test_secret_looking_env_values_are_masked_in_records_only():
    env = {"DB_PASSWORD": "p", "GITHUB_TOKEN": "t", "AWS_SECRET_ACCESS_KEY": "s", "API_KEY": "k",
           "SSH_KEY": "k2", "MY_CREDENTIALS": "c", "BATCH": "64", "KEYBOARD": "us", "MONKEY": "1", "LR": "0.1"}
    masked = masked_env(env)
    assert {k for k, v in masked.items() if v == MASK} == {
        "DB_PASSWORD", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "API_KEY", "SSH_KEY", "MY_CREDENTIALS"}
    job = build_job_spec({"cluster_requirement": "worker:1", "command": "python3 t.py", "env": env})
    assert json.loads(job.to_json())["env"] == env  # what the tasks are given
    assert json.loads(job.to_record_json())["env"] == masked  # what pages and the history show


def _connected_as(uid: int | None):
    """A connection to a listening socket from a process of `uid` (None: this one); the accepted socket."""
    import socket
    import subprocess
    import sys

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    code = (f"import socket,sys,time; s=socket.create_connection(('127.0.0.1',{port})); "
            "sys.stdout.write('ok\\n'); sys.stdout.flush(); sys.stdin.read()")
    python = sys.executable if uid is None else "/usr/bin/python3"  # another user cannot run the venv's
    child = subprocess.Popen([python, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, user=uid)
    conn, _ = server.accept()
    child.stdout.readline()
    return server, conn, child


def test_the_owner_of_a_local_peer_is_read_from_the_kernels_socket_table():
    """#44 item 8: on the AM's host, only processes of the AM's own user (skein's web UI among them)."""
    import os

    import pytest

    from tony_airflow.core.am.peer import socket_owner

    if os.getuid() != 0:
        pytest.skip("a process of another user needs root to start (as in CI)")
    for uid in (os.getuid(), 65534):
        server, conn, child = _connected_as(uid)
        try:
            assert socket_owner(conn.getpeername(), conn.getsockname()) == uid
        finally:
            child.communicate(b"")
            conn.close()
            server.close()
