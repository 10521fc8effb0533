"""The registry's HTTP+JSON server (aiohttp), and the read-only status page.

Signed endpoints take executors' messages; `/` and `/status.json` are the
read-only dashboard reached through the YARN tracking URL.
"""

from __future__ import annotations

import html
import logging
import time
from typing import Any

from aiohttp import web

from tony_airflow.core import protocol
from tony_airflow.core.am import tensorboard_proxy
from tony_airflow.core.am.registry import Registry

log = logging.getLogger("tony.am.server")
LONG_POLL_S = 20.0


def build_app(registry: Registry, secret: str) -> web.Application:
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
        action = registry.heartbeat(msg["type"], int(msg["index"]), int(msg["attempt"]))
        return web.json_response({"action": action})

    async def finished(request: web.Request) -> web.Response:
        msg = await request.json()
        registry.finished(msg["type"], int(msg["index"]), int(msg["attempt"]), int(msg["exit_code"]),
                          msg.get("stderr_tail", ""))
        return web.json_response({"ok": True})

    async def status_json(request: web.Request) -> web.Response:
        status = registry.status()
        status["refused_requests"] = len(refused)
        return web.json_response(status)

    async def status_page(request: web.Request) -> web.Response:
        return web.Response(text=render_status(registry.status()), content_type="text/html")

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
    app["refused"] = refused
    return app


def render_status(status: dict[str, Any]) -> str:
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in (
            f"{t['type']}:{t['index']}", t["status"], f"{t['host']}:{t['port']}" if t["host"] else "",
            t["yarn_container_id"], "" if t["exit_code"] is None else t["exit_code"])) + "</tr>"
        for t in status["tasks"])
    counts = status["counts"]
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(status['name'])} — tony-airflow</title>
<meta http-equiv="refresh" content="5"><style>body{{font-family:sans-serif;margin:2em}}
td,th{{border-bottom:1px solid #ddd;padding:4px 10px;text-align:left}}</style></head><body>
<h1>{html.escape(status['name'])}</h1>
<p>{html.escape(status['app_id'])} · attempt {status['attempt']}/{status['max_attempts']} ·
allocated {counts['allocated']}/{counts['total']} · registered {counts['registered']}/{counts['total']} ·
finished {counts['finished']}/{counts['total']}</p>
<table><tr><th>task</th><th>status</th><th>address</th><th>container</th><th>exit code</th></tr>{rows}</table>
<p><a href="status.json">status.json</a></p></body></html>"""


async def start(app: web.Application, host: str = "0.0.0.0", port: int = 0) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=4096, reuse_address=True)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, bound

