"""The registry's HTTP+JSON server (aiohttp), and the read-only status page.

Signed endpoints take executors' messages; `/` and `/status.json` are the
read-only dashboard reached through the YARN tracking URL.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Callable

from aiohttp import web

from tony_airflow.core import protocol
from tony_airflow.core.am import tensorboard_proxy
from tony_airflow.core.am.registry import Registry
from tony_airflow.core.history.events import EventLog

log = logging.getLogger("tony.am.server")
LONG_POLL_S = 20.0


def build_app(registry: Registry, secret: str, page: Callable[[], str] | None = None,
              history: EventLog | None = None) -> web.Application:
    """`page` renders the status page (the AM's live view of the job history)."""
    verifier = protocol.Verifier(secret)
    refused: list[float] = []

    @web.middleware
    async def authenticate(request: web.Request, handler):
        if request.path.startswith("/v1/"):
            body = await request.read()
            reason = verifier.check(request.method, request.path_qs, request.headers, body)
            if reason is not None:
                refused.append(time.time())
                log.warning("refused %s %s from %s: %s", request.method, request.path, request.remote, reason)
                return web.json_response({"error": reason}, status=401)
        return await handler(request)

    async def register(request: web.Request) -> web.Response:
        msg = await request.json()
        reason = registry.register(msg["type"], int(msg["index"]), int(msg["attempt"]), msg["host"],
                                   int(msg["port"]), msg.get("container_id", ""))
        if reason is not None:
            return web.json_response({"error": reason}, status=409)
        return web.json_response({"ok": True, "gpus": registry.gpus_of(msg["type"], int(msg["index"]))})

    async def cluster_spec(request: web.Request) -> web.Response:
        attempt = int(request.query.get("attempt", "0"))
        wait = min(float(request.query.get("wait", LONG_POLL_S)), LONG_POLL_S)
        state, spec = await registry.wait_spec(attempt, wait)
        return web.json_response({"state": state, "spec": spec})

    async def heartbeat(request: web.Request) -> web.Response:
        msg = await request.json()
        action = registry.heartbeat(msg["type"], int(msg["index"]), int(msg["attempt"]), msg.get("usage"))
        return web.json_response({"action": action})

    async def finished(request: web.Request) -> web.Response:
        msg = await request.json()
        registry.finished(msg["type"], int(msg["index"]), int(msg["attempt"]), int(msg["exit_code"]),
                          msg.get("stderr_tail", ""), msg.get("usage"))
        return web.json_response({"ok": True})

    async def status_json(request: web.Request) -> web.Response:
        status = registry.status()
        status["refused_requests"] = len(refused)
        return web.json_response(status)

    async def status_page(request: web.Request) -> web.Response:
        if page is None:
            raise web.HTTPFound(protocol.STATUS_JSON)
        return web.Response(text=page(), content_type="text/html")

    async def events(request: web.Request) -> web.Response:
        lines = [json.dumps(e, sort_keys=True, default=str) for e in (history.events if history else [])]
        return web.Response(text="".join(line + "\n" for line in lines), content_type="application/x-ndjson")

    def tensorboard_address() -> str | None:
        task = registry.tasks.get(("tensorboard", 0))
        return f"{task.host}:{task.port}" if task is not None and task.registered_at else None

    app = web.Application(middlewares=[authenticate], client_max_size=16 * 2**20)
    tensorboard_proxy.add_routes(app, tensorboard_address)
    app.router.add_post(protocol.REGISTER, register)
    app.router.add_get(protocol.CLUSTER_SPEC, cluster_spec)
    app.router.add_post(protocol.HEARTBEAT, heartbeat)
    app.router.add_post(protocol.FINISHED, finished)
    app.router.add_get(protocol.STATUS_JSON, status_json)
    app.router.add_get("/", status_page)
    app.router.add_get("/events.jsonl", events)
    app["refused"] = refused
    return app


async def start(app: web.Application, host: str = "0.0.0.0", port: int = 0) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=4096, reuse_address=True)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, bound

