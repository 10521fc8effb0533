"""The TensorBoard pass-through (issue #15, item 11)."""

from __future__ import annotations

import asyncio
import base64
import json
import string

from aiohttp import web

from tests.unit.core.support import serve
from tony_airflow.core.am import tensorboard_proxy


# ---------------------------------------------------- 11: the TensorBoard pass-through
def test_the_tensorboard_link_says_not_started_while_tensorboard_starts():
    async def scenario():
        app = web.Application()
        tensorboard_proxy.add_routes(app, lambda: "127.0.0.1:9")  # registered, not yet listening
        client = await serve(app)
        try:
            resp = await client.get(tensorboard_proxy.PREFIX)
            assert resp.status == 503
            assert "not started yet" in await resp.text()
        finally:
            await client.close()

    asyncio.run(scenario())


def _b64(text: str) -> str:
    """What the page's shim sends (base64url, no padding)."""
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def test_the_tensorboard_pass_through_keeps_a_json_post_json():
    seen: dict = {}

    async def upstream(request: web.Request) -> web.Response:
        seen.update(method=request.method, ctype=request.content_type, body=await request.text())
        return web.json_response({"ok": True})

    async def scenario():
        tb = web.Application()
        tb.router.add_route("*", "/data/plugin/hparams/experiment", upstream)
        tb_client = await serve(tb)
        app = web.Application()
        tensorboard_proxy.add_routes(app, lambda: f"127.0.0.1:{tb_client.port}")
        client = await serve(app)
        try:
            body = json.dumps({"experimentName": ""})
            resp = await client.get(tensorboard_proxy.PREFIX + "data/plugin/hparams/experiment",
                                    params={tensorboard_proxy.BODY_PARAM: _b64(body),
                                            tensorboard_proxy.TYPE_PARAM: _b64("application/json")})
            # what Hadoop's RM proxy needs: nothing in the query but URI-safe characters
            assert set(_b64(body)) <= set(string.ascii_letters + string.digits + "-_")
            assert resp.status == 200
            assert seen == {"method": "POST", "ctype": "application/json", "body": body}
            resp = await client.get(tensorboard_proxy.PREFIX + "data/plugin/hparams/experiment",
                                    params={tensorboard_proxy.BODY_PARAM: _b64("a=1")})
            assert seen["ctype"] == "application/x-www-form-urlencoded"
        finally:
            await client.close()
            await tb_client.close()

    asyncio.run(scenario())
