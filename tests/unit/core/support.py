"""Helpers for the core's unit tests: a job spec, signed bodies, an aiohttp app on a test server."""

from __future__ import annotations

import json

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tony_airflow.core import protocol
from tony_airflow.core.spec import JobSpec, build_job_spec

SECRET = "s" * 64


def make_job(req: str = "ps:1,worker:2", **kw) -> JobSpec:
    return build_job_spec({"cluster_requirement": req, "command": "x", **kw})


def signed(method: str, path: str, payload) -> tuple[bytes, dict[str, str]]:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return body, protocol.sign(SECRET, method, path, body)


async def serve(app: web.Application) -> TestClient:
    client = TestClient(TestServer(app))
    await client.start_server()
    return client


class RecordingRegistry:
    """The executor's RegistryClient as a fake: it records each call (path, payload) and answers ok."""

    address = "127.0.0.1:9"

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict]] = []

    def call(self, method, path, payload=None, retries=5, timeout=None):
        self.sent.append((path, payload))
        return {"ok": True}
