"""skein's generated protobuf and gRPC code under the protobuf and grpcio this project resolves.

skein 0.8.2 (its last release, 2022) ships `skein_pb2.py`/`skein_pb2_grpc.py` made by a protoc of its day; they
build their classes through `google.protobuf.reflection`, an API protobuf has been retiring. A protobuf that no
longer runs them breaks every submission and every AM at import, on a cluster, far from the change that
resolved it. These tests run every message and call the project makes through skein (docs/ARCHITECTURE.md,
"What we rely on from skein") against the resolved versions: the spec the client stages (`.skein.proto`),
and the AM's and the executors' calls to skein's AM (key-value store, containers, web UI, shutdown) over a
real mutual-TLS gRPC channel to an in-process stand-in for skein's Java AM."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
import skein
from skein.proto import skein_pb2 as pb
from skein.proto import skein_pb2_grpc as pb_grpc

from tony_airflow.core.client import build_application
from tony_airflow.core.spec import build_job_spec


def test_the_staged_spec_survives_skeins_protobuf_round_trip(tmp_path: Path, monkeypatch):
    """The bytes `yarn/submission.py` stages as `.skein.proto`, which skein's Java AM parses."""
    monkeypatch.setenv("HADOOP_CONF_DIR", "/etc/hadoop/conf")
    monkeypatch.setenv("JAVA_HOME", "/usr/lib/jvm/java-17")
    job = build_job_spec({"cluster_requirement": "ps:1,worker:2", "command": "python3 train.py",
                          "task_memory": ["1024", "worker[1]:3072"]})
    staging = tmp_path / "staging"
    staging.mkdir()
    spec = build_application(job, staging, "s" * 64)
    spec.master.security = skein.Security.new_credentials()  # as submission.launch_context sets it
    data = spec.to_protobuf().SerializeToString()
    back = skein.ApplicationSpec.from_protobuf(pb.ApplicationSpec.FromString(data))
    assert back == spec
    assert set(back.services) == set(spec.services) and back.master.resources == spec.master.resources


class _FakeSkeinAM(pb_grpc.AppMasterServicer):
    """The calls of skein's AppMaster service that the project makes, answered from memory."""

    def __init__(self) -> None:
        self.kv: dict[str, bytes] = {}
        self.containers: list[pb.Container] = []
        self.killed: list[tuple[str, int]] = []
        self.proxies: list[tuple[str, str, str]] = []
        self.shutdowns: list[tuple[int, str]] = []
        self._watches: list[tuple[int, str, list[pb.WatchResponse]]] = []
        self._lock = threading.Condition()

    def PutKey(self, request: pb.PutKeyRequest, context) -> pb.PutKeyResponse:
        with self._lock:
            self.kv[request.key] = request.value
            for watch_id, key, out in self._watches:
                if key == request.key:
                    out.append(pb.WatchResponse(type=pb.WatchResponse.PUT, watch_id=watch_id,
                                                event=[pb.KeyValue(key=request.key, value=request.value)]))
            self._lock.notify_all()
        return pb.PutKeyResponse()

    def GetRange(self, request: pb.GetRangeRequest, context) -> pb.GetRangeResponse:
        with self._lock:
            hits = [pb.KeyValue(key=k, value=v) for k, v in sorted(self.kv.items())
                    if request.start <= k < (request.end or "\uffff")]
        return pb.GetRangeResponse(count=len(hits), result_type=request.result_type, result=hits)

    def Watch(self, request_iterator: Iterator[pb.WatchRequest], context) -> Iterator[pb.WatchResponse]:
        request = next(request_iterator)
        out: list[pb.WatchResponse] = []
        with self._lock:
            watch_id = len(self._watches) + 1
            self._watches.append((watch_id, request.create.start, out))
        yield pb.WatchResponse(type=pb.WatchResponse.CREATE, watch_id=watch_id)
        while context.is_active():
            with self._lock:
                self._lock.wait_for(lambda: out, timeout=0.1)
                pending, out[:] = list(out), []
            yield from pending

    def addContainer(self, request: pb.AddContainerRequest, context) -> pb.Container:
        container = pb.Container(service_name=request.service_name, instance=len(self.containers),
                                 state=pb.Container.REQUESTED, yarn_container_id="")
        self.containers.append(container)
        return container

    def getContainers(self, request: pb.ContainersRequest, context) -> pb.ContainersResponse:
        states = set(request.states)
        return pb.ContainersResponse(containers=[c for c in self.containers if not states or c.state in states])

    def killContainer(self, request: pb.ContainerInstance, context) -> pb.Empty:
        self.killed.append((request.service_name, request.instance))
        return pb.Empty()

    def AddProxy(self, request: pb.Proxy, context) -> pb.Empty:
        self.proxies.append((request.route, request.target, request.link_name))
        return pb.Empty()

    def UiInfo(self, request: pb.UIInfoRequest, context) -> pb.UIInfoResponse:
        return pb.UIInfoResponse(ui_address="http://am.test:8088", proxy_prefix="/proxy/application_1_0001")

    def shutdown(self, request: pb.ShutdownRequest, context) -> pb.Empty:
        self.shutdowns.append((request.final_status, request.diagnostics))
        return pb.Empty()


@pytest.fixture
def skein_am():
    """A gRPC server with skein's own service definition and the mutual TLS skein's clients insist on."""
    security = skein.Security.new_credentials()
    cert, key = security._get_bytes("cert"), security._get_bytes("key")
    servicer = _FakeSkeinAM()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_AppMasterServicer_to_server(servicer, server)
    port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=cert, require_client_auth=True))
    server.start()
    client = skein.ApplicationClient(f"127.0.0.1:{port}", "application_1_0001", security=security)
    try:
        yield servicer, client
    finally:
        client.close()
        server.stop(grace=None)


def test_every_call_the_am_and_the_executors_make_to_skeins_am(skein_am):
    servicer, app = skein_am
    # the AM: the key-value store (addresses, the attempt), the web UI's pages, containers, the end
    app.kv["tony.attempt"] = b"1"
    assert app.kv.get("tony.attempt") == b"1" and app.kv.get("absent") is None
    page = app.ui.add_page("tony", "http://127.0.0.1:9/pages/tony", link_name="TonY status")
    assert servicer.proxies == [("tony", "http://127.0.0.1:9/pages/tony", "TonY status")]
    assert page.route == "tony"
    container = app.add_container("worker", {"TONY_TASK_INDEX": "1"})
    assert container.service_name == "worker" and str(container.state) == "REQUESTED"
    listed = app.get_containers(None, list(skein.model.ContainerState))
    assert [c.id for c in listed] == [container.id]
    app.kill_container(container.id)
    assert servicer.killed == [("worker", container.instance)]
    app.shutdown("FAILED", "worker:0 failed")
    assert servicer.shutdowns == [(pb.FinalStatus.FAILED, "worker:0 failed")]


def test_an_executor_waits_on_a_key_the_am_puts_later(skein_am):
    """executor/boot.py: `kv.wait` of the AM's address, a Watch stream before the key exists."""
    _, app = skein_am
    waiter = futures.ThreadPoolExecutor(max_workers=1)
    got = waiter.submit(app.kv.wait, "tony.am.address")
    app.kv["other"] = b"x"
    app.kv["tony.am.address"] = b"127.0.0.1:4242"
    assert got.result(timeout=30) == b"127.0.0.1:4242"
    waiter.shutdown()
