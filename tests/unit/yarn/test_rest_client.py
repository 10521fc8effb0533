"""The blocking ResourceManager client keeps one HTTP client: building an httpx.Client loads the CA bundle
into a new SSL context (about 25 ms of CPU), which a client polling every second would pay on every call,
beside the training it waits for."""

from __future__ import annotations

import httpx

from tests.unit.fake_rm import FakeApp, FakeResourceManager
from tony_airflow.yarn.rest import ResourceManagerClient

APP = "application_1700000000000_0001"


def _count_http_clients(monkeypatch) -> list[int]:
    built = [0]
    original = httpx.Client.__init__

    def counting(self, *args, **kwargs):
        built[0] += 1
        original(self, *args, **kwargs)

    monkeypatch.setattr(httpx.Client, "__init__", counting)
    return built


def test_many_calls_build_one_http_client(monkeypatch):
    rm = FakeResourceManager(apps={APP: FakeApp([("RUNNING", "UNDEFINED")])}).start()
    try:
        built = _count_http_clients(monkeypatch)
        client = ResourceManagerClient(rm.url)
        for _ in range(5):
            assert client.application(APP).state == "RUNNING"
        client.applications(states=["RUNNING"])
        client.fetch(f"{rm.url}/proxy/{APP}/pages/tony/progress.json")  # an AM page, as the handle reads it
        assert built[0] == 1
        client.close()
    finally:
        rm.stop()
