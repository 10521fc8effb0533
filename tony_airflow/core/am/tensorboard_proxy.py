"""TensorBoard behind the ResourceManager's web proxy.

Hadoop 3.4's WebAppProxyServlet forwards GET (query strings intact), drops the
body of a PUT and answers POST with 405, while TensorBoard's dashboards fetch
their data with POST. The AM therefore serves TensorBoard itself under
`/tensorboard/`: the HTML gets a small same-origin script (TensorBoard's CSP
forbids inline ones) that sends each POST as a GET carrying the form body in
one query parameter (and its Content-Type in another), both base64url: Hadoop's
proxy decodes the query and refuses to rebuild a URI that holds `{` or `"`
(URISyntaxException), which a JSON body always does. This pass-through turns
them back into the same POST: form posts (Time Series) stay forms, JSON
posts (HParams) stay JSON. While TensorBoard is starting, the link answers a
page that says so and reloads itself.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

import aiohttp
from aiohttp import web

PREFIX = "/tensorboard/"
SHIM = "__tony_post_as_get.js"
BODY_PARAM = "__tony_post64"  # base64url of the UTF-8 body
TYPE_PARAM = "__tony_type64"  # base64url of its Content-Type
FORM = "application/x-www-form-urlencoded"
_POST_AS_GET = r"""(function () {
  function typeOf(body, given) {
    if (given) return given;
    if (body instanceof URLSearchParams || body instanceof FormData) return "%(form)s";
    return typeof body === "string" ? "text/plain;charset=UTF-8" : "";
  }
  function headerOf(headers, name) {
    if (!headers) return "";
    if (typeof Headers !== "undefined" && headers instanceof Headers) return headers.get(name) || "";
    var pairs = Array.isArray(headers) ? headers : Object.keys(headers).map(function (k) { return [k, headers[k]]; });
    for (var i = 0; i < pairs.length; i++) if (String(pairs[i][0]).toLowerCase() === name) return pairs[i][1];
    return "";
  }
  function encode(body) {
    if (body == null) return "";
    if (typeof body === "string") return body;
    if (body instanceof URLSearchParams) return body.toString();
    if (body instanceof FormData) {
      var p = new URLSearchParams();
      body.forEach(function (v, k) { p.append(k, typeof v === "string" ? v : ""); });
      return p.toString();
    }
    return String(body);
  }
  function b64url(text) {
    var bytes = new TextEncoder().encode(text), bin = "";
    for (var i = 0; i < bytes.length; i++) bin += String.fromCharCode(bytes[i]);
    return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function asGet(url, body, type) {
    return url + (url.indexOf("?") < 0 ? "?" : "&") + "%(param)s=" + b64url(encode(body)) +
      (type ? "&%(type)s=" + b64url(type) : "");
  }
  var open = XMLHttpRequest.prototype.open, send = XMLHttpRequest.prototype.send,
      setHeader = XMLHttpRequest.prototype.setRequestHeader;
  XMLHttpRequest.prototype.open = function (method, url) {
    this.__tony = {method: String(method).toUpperCase(), url: url, rest: [].slice.call(arguments, 2), headers: []};
    return open.apply(this, arguments);
  };
  XMLHttpRequest.prototype.setRequestHeader = function (k, v) {
    if (this.__tony) this.__tony.headers.push([k, v]);
    return setHeader.apply(this, arguments);
  };
  XMLHttpRequest.prototype.send = function (body) {
    var t = this.__tony;
    if (!t || t.method !== "POST") return send.apply(this, arguments);
    open.apply(this, ["GET", asGet(t.url, body, typeOf(body, headerOf(t.headers, "content-type")))].concat(t.rest));
    for (var i = 0; i < t.headers.length; i++)
      if (t.headers[i][0].toLowerCase() !== "content-type") setHeader.apply(this, t.headers[i]);
    return send.call(this, null);
  };
  var fetch0 = window.fetch;
  window.fetch = function (input, init) {
    if (!init || String(init.method || "").toUpperCase() !== "POST") return fetch0.apply(this, arguments);
    var url = typeof input === "string" ? input : input.url;
    var rest = Object.assign({}, init, {method: "GET"});
    delete rest.body;
    return fetch0.call(this, asGet(url, init.body, typeOf(init.body, headerOf(init.headers, "content-type"))), rest);
  };
})();
""" % {"param": BODY_PARAM, "type": TYPE_PARAM, "form": FORM}
_STARTING = """<!doctype html><html><head><meta http-equiv="refresh" content="5"><title>TensorBoard is starting</title>
</head><body><p>TensorBoard has not started yet; this page reloads itself in a few seconds.</p></body></html>"""
_SCRIPT_TAG = f'<script src="{SHIM}"></script>'.encode()
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-encoding", "content-length",
               "upgrade", "proxy-authenticate", "proxy-authorization", "te", "trailers"}


def add_routes(app: web.Application, target: Callable[[], str | None]) -> None:
    """`target()` is TensorBoard's `host:port`, or None while it has not registered."""

    async def shim(request: web.Request) -> web.Response:
        return web.Response(text=_POST_AS_GET, content_type="application/javascript")

    async def forward(request: web.Request) -> web.StreamResponse:
        address = target()
        if address is None:
            return _starting()
        url = f"http://{address}/{request.match_info['tail']}"
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP | {"host"}}
        params = dict(request.query)
        method, body = request.method, await request.read()
        content_type = _unb64(params.pop(TYPE_PARAM, "")).decode(errors="replace") or FORM
        if BODY_PARAM in params:  # a POST the page sent as a GET: the same POST again, same Content-Type
            method, body = "POST", _unb64(params.pop(BODY_PARAM))
            headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
            headers["Content-Type"] = content_type
        try:
            async with aiohttp.ClientSession(auto_decompress=True) as session:
                async with session.request(method, url, params=params, data=body,
                                           headers=headers, allow_redirects=False) as upstream:
                    body = await upstream.read()
                    out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP}
                    if upstream.content_type == "text/html":
                        body = _inject(body)
                    return web.Response(status=upstream.status, body=body, headers=out_headers)
        except aiohttp.ClientConnectorError:  # registered, but not listening yet
            return _starting()

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound("tensorboard/")

    app.router.add_get(PREFIX + SHIM, shim)
    app.router.add_route("*", PREFIX + "{tail:.*}", forward)
    app.router.add_get(PREFIX.rstrip("/"), redirect)


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)) if text else b""


def _starting() -> web.Response:
    return web.Response(status=503, text=_STARTING, content_type="text/html", headers={"Retry-After": "5"})


def _inject(html: bytes) -> bytes:
    marker = b"<!doctype html>"
    if html[: len(marker)].lower() == marker:
        return html[: len(marker)] + _SCRIPT_TAG + html[len(marker):]
    return _SCRIPT_TAG + html
