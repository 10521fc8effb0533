"""An httpx transport that builds its TLS context only when an https:// URL is first asked for.

httpx builds its SSL context, loading the CA bundle, when a client is made: 0.1 s of every command's
start, before its first request to a ResourceManager that may well speak plain HTTP (a cluster with
`yarn.http.policy=HTTP_ONLY`, Hadoop's default). Made here on first use, with the same `verify`.
"""

from __future__ import annotations

import ssl
import threading

import httpx


class LazyTLSTransport(httpx.BaseTransport):
    """http:// through a transport whose TLS settings are never used; https:// through one made, with
    `verify`, on the first https:// request."""

    def __init__(self, verify: ssl.SSLContext | str | bool = True) -> None:
        self._verify = verify
        self._plain = httpx.HTTPTransport(verify=False)  # no CA bundle; never used for TLS
        self._tls: httpx.HTTPTransport | None = None
        self._lock = threading.Lock()

    def _transport_for(self, url: httpx.URL) -> httpx.HTTPTransport:
        if url.scheme != "https":
            return self._plain
        with self._lock:
            if self._tls is None:
                self._tls = httpx.HTTPTransport(verify=self._verify)
            return self._tls

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self._transport_for(request.url).handle_request(request)

    def close(self) -> None:
        self._plain.close()
        if self._tls is not None:
            self._tls.close()
