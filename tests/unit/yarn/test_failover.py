"""Failing over between HA daemons: a standby or dead ResourceManager or NameNode passes the call on,
and a call that was served is never repeated. Real HTTP servers on loopback stand in for the daemons,
answering as Hadoop's do (RMWebAppFilter's standby page, WebHDFS's StandbyException)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tony_airflow.errors import ClusterError
from tony_airflow.yarn import failover
from tony_airflow.yarn.failover import active_namenode_call, nn_is_standby, rm_is_standby
from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.hdfs import webhdfs
from tony_airflow.yarn.rest import ResourceManagerClient, ResourceManagerError

STANDBY_NN = {"RemoteException": {"exception": "StandbyException", "javaClassName":
                                  "org.apache.hadoop.ipc.StandbyException",
                                  "message": "Operation category READ is not supported in state standby. "
                                             "Visit https://s.apache.org/sbnn-error"}}


class Daemon:
    """One HTTP server answering every request with (status, headers, body) from `answer`; it counts calls."""

    def __init__(self, answer):
        self.calls: list[str] = []
        daemon = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self):
                daemon.calls.append(f"{self.command} {self.path}")
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                status, headers, body = answer(self.command, self.path)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = _any

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    made: list[Daemon] = []
    yield made
    for d in made:
        d.close()


def dead_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


APP = {"app": {"id": "application_1_0001", "state": "RUNNING", "finalStatus": "UNDEFINED"}}


def test_standby_answers_are_recognised():
    assert rm_is_standby(307, "This is standby RM. The redirect url is: /ws/v1/cluster/apps")
    assert rm_is_standby(200, "There is no active RM right now.\nHA Zookeeper Connection State: CONNECTED")
    assert not rm_is_standby(200, '{"app": {}}')
    assert nn_is_standby(403, STANDBY_NN)
    assert not nn_is_standby(403, {"RemoteException": {"exception": "AccessControlException", "message": "no"}})
    assert not nn_is_standby(200, STANDBY_NN)


def test_rm_client_passes_over_a_dead_rm_and_a_standby_one_and_remembers_the_active(daemons):
    standby = Daemon(lambda m, p: (200, {"Content-Type": "text/plain"},
                                   b"There is no active RM right now.\nHA Zookeeper Connection State: CONNECTED"))
    active = Daemon(lambda m, p: (200, {"Content-Type": "application/json"}, APP))
    daemons += [standby, active]
    rm = ResourceManagerClient([dead_address(), standby.url, active.url])
    assert rm.application("application_1_0001").state == "RUNNING"
    assert rm.application("application_1_0001").state == "RUNNING"
    assert len(active.calls) == 2 and len(standby.calls) == 1  # the second call went to the active one first
    rm.close()


def test_rm_client_follows_a_standby_redirect_to_the_active_rm(daemons):
    active = Daemon(lambda m, p: (200, {"Content-Type": "application/json"}, APP))
    daemons.append(active)
    standby = Daemon(lambda m, p: (307, {"Location": active.url + p}, b"This is standby RM. The redirect url is: x"))
    daemons.append(standby)
    rm = ResourceManagerClient([standby.url])
    assert rm.application("application_1_0001").id == "application_1_0001"
    assert len(active.calls) == 1
    rm.close()


def test_no_active_rm_is_a_transient_error_naming_each(daemons):
    standby = Daemon(lambda m, p: (200, {}, b"There is no active RM right now."))
    daemons.append(standby)
    dead = dead_address()
    rm = ResourceManagerClient([standby.url, dead])
    rm.failover_wait_s = 0.3
    with pytest.raises(ResourceManagerError, match="no active ResourceManager answered") as err:
        rm.application("application_1_0001")
    assert err.value.transient and err.value.unanswered and standby.url in str(err.value) and dead in str(err.value)
    rm.close()


def test_a_blocking_call_waits_for_the_election_of_an_active_rm(daemons, monkeypatch):
    """The active RM died; the other answers "no active RM" until ZooKeeper lets it take over."""
    monkeypatch.setattr(failover, "FAILOVER_SLEEP_BASE_S", 0.01)
    elected = {"after": 5}

    def answer(method, path):
        elected["after"] -= 1
        if elected["after"] > 0:
            return 200, {"Content-Type": "text/plain"}, b"There is no active RM right now."
        return 200, {"Content-Type": "application/json"}, APP

    survivor = Daemon(answer)
    daemons.append(survivor)
    rm = ResourceManagerClient([dead_address(), survivor.url])
    assert rm.application("application_1_0001").state == "RUNNING"
    assert len(survivor.calls) == 5
    rm.close()


def test_with_one_rm_a_dead_one_is_reported_at_once(daemons):
    rm = ResourceManagerClient([dead_address()])
    with pytest.raises(ResourceManagerError, match="no active ResourceManager answered"):
        rm.application("application_1_0001")
    rm.close()


INVALID_TOKEN = {"RemoteException": {"exception": "SecretManager$InvalidToken",
                                     "message": "org.apache.hadoop.security.token.SecretManager$InvalidToken: "
                                                "Token for real user: , can't be found in cache"}}


def test_a_standby_that_refuses_a_delegation_token_passes_the_call_on(daemons):
    """A standby RM authenticates before it redirects, and it has not loaded the RM's tokens: it refuses
    a token-authenticated call with 403 InvalidToken (seen on the production-shape cluster). The active
    one serves it."""
    standby = Daemon(lambda m, p: (403, {"Content-Type": "application/json"}, INVALID_TOKEN))
    active = Daemon(lambda m, p: (200, {"Content-Type": "application/json"}, APP))
    daemons += [standby, active]
    rm = ResourceManagerClient([standby.url, active.url])
    assert rm.application("application_1_0001").state == "RUNNING"
    assert rm.application("application_1_0001").state == "RUNNING"
    assert len(standby.calls) == 1  # then the active one is asked first
    rm.close()


def test_when_every_rm_refuses_the_refusal_that_is_not_the_standbys_token_is_reported(daemons):
    standby = Daemon(lambda m, p: (403, {"Content-Type": "application/json"}, INVALID_TOKEN))
    active = Daemon(lambda m, p: (403, {"Content-Type": "application/json"},
                                  {"RemoteException": {"message": "User bob cannot perform operation KILL"}}))
    daemons += [standby, active]
    rm = ResourceManagerClient([standby.url, active.url])
    with pytest.raises(ResourceManagerError, match="User bob cannot perform operation KILL") as err:
        rm.kill("application_1_0001")
    assert not err.value.transient
    rm.close()


def test_a_refusal_from_the_active_rm_is_not_retried_elsewhere(daemons):
    refusing = Daemon(lambda m, p: (404, {"Content-Type": "application/json"},
                                    {"RemoteException": {"message": "app not found"}}))
    other = Daemon(lambda m, p: (200, {}, APP))
    daemons += [refusing, other]
    rm = ResourceManagerClient([refusing.url, other.url])
    with pytest.raises(ResourceManagerError, match="app not found") as err:
        rm.application("application_1_0001")
    assert not err.value.transient and other.calls == []
    rm.close()


def test_namenode_call_fails_over_from_standby_and_dead(daemons, monkeypatch):
    monkeypatch.setattr(failover, "FAILOVER_SLEEP_BASE_S", 0.01)
    standby = Daemon(lambda m, p: (403, {"Content-Type": "application/json"}, STANDBY_NN))
    active = Daemon(lambda m, p: (200, {"Content-Type": "application/json"}, {"Token": {"urlString": "abc"}}))
    daemons += [standby, active]
    got = active_namenode_call([dead_address(), standby.url, active.url], "GET", "/webhdfs/v1/",
                               params={"op": "GETDELEGATIONTOKEN"})
    assert got == {"Token": {"urlString": "abc"}}


def test_namenode_call_gives_up_after_its_wait_naming_each(daemons):
    standby = Daemon(lambda m, p: (403, {"Content-Type": "application/json"}, STANDBY_NN))
    daemons.append(standby)
    with pytest.raises(ClusterError, match=r"no active NameNode: .*standby"):
        active_namenode_call([standby.url], "GET", "/webhdfs/v1/", wait_s=0.2)


def ha_conf(*webs: str) -> HadoopConf:
    props = {"fs.defaultFS": "hdfs://ns", "dfs.nameservices": "ns",
             "dfs.ha.namenodes.ns": ",".join(f"nn{i}" for i in range(len(webs))),
             "dfs.client.failover.proxy.provider.ns": "x"}
    for i, web in enumerate(webs):
        props[f"dfs.namenode.http-address.ns.nn{i}"] = web.split("//", 1)[1]
        props[f"dfs.namenode.rpc-address.ns.nn{i}"] = "127.0.0.1:8020"
    return HadoopConf(conf_dir=None, props=props)  # type: ignore[arg-type]


def test_webhdfs_fails_over_to_the_active_namenode(daemons):
    listing = {"FileStatuses": {"FileStatus": [{"pathSuffix": "a", "type": "FILE", "length": 3,
                                                "modificationTime": 1, "permission": "644"}]}}
    standby = Daemon(lambda m, p: (403, {"Content-Type": "application/json"}, STANDBY_NN))
    active = Daemon(lambda m, p: (200, {"Content-Type": "application/json"}, listing))
    daemons += [standby, active]
    fs = webhdfs(ha_conf(dead_address(), standby.url, active.url), user="u")
    assert [e["name"] for e in fs.ls("/x", detail=True)] == ["/x/a"]
    assert len(standby.calls) == 1
    fs.ls("/x")
    assert len(standby.calls) == 1 and len(active.calls) == 2  # the active one is asked first from then on


def test_webhdfs_does_not_repeat_a_call_a_namenode_served(daemons):
    served = Daemon(lambda m, p: (403, {"Content-Type": "application/json"},
                                  {"RemoteException": {"exception": "AccessControlException", "message": "denied"}}))
    other = Daemon(lambda m, p: (200, {}, {"boolean": True}))
    daemons += [served, other]
    fs = webhdfs(ha_conf(served.url, other.url), user="u")
    with pytest.raises(PermissionError, match="denied"):
        fs.rm("/x")
    assert other.calls == []
